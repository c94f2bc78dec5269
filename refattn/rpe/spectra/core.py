r"""The family-generic functions of the FLT spectra: validation, g and its backward, f, the exact RPE mask.

Every function here looks the spectrum's family up once in :data:`FAMILIES` (``{container type: Family}``,
``Shifted`` built from its base's record) and calls that record's functions; no family is named below the
table. The Fourier convention is FLT's: ``g(xi) = int f(x) exp(-2 pi i x . xi) dx``.
Axes: ``r`` frequencies, ``D`` position dimension, ``L`` positions, ``...`` leading axes.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ... import limits
from ..._docs import fill_doc
from ..._xp import check_finite, check_shape, namespace
from . import bspline, box, cauchy_kernel, gaussian_basis, gaussian_kernel, gaussian_mixture, laplace_kernel
from . import sin_power
from ._common import Family
from .shifted import Shifted, shifted_family

__all__ = [
    "FAMILIES",
    "family_of",
    "spectrum_arrays",
    "spectrum_dim",
    "check_spectrum",
    "SpectrumGCache",
    "SpectrumGGrads",
    "spectrum_g",
    "spectrum_g_fwd",
    "spectrum_g_bwd",
    "spectrum_f",
    "rpe_mask",
]

Array = Any

#: The real-spectrum families: parameter container type -> its protocol record.
FAMILIES: dict[type, Family] = {
    gaussian_mixture.GaussianMixture: gaussian_mixture.FAMILY,
    gaussian_kernel.GaussianKernel: gaussian_kernel.FAMILY,
    laplace_kernel.LaplaceKernel: laplace_kernel.FAMILY,
    cauchy_kernel.CauchyKernel: cauchy_kernel.FAMILY,
    box.Box: box.FAMILY,
    sin_power.SinPower: sin_power.FAMILY,
    bspline.BSpline: bspline.FAMILY,
    gaussian_basis.GaussianBasis: gaussian_basis.FAMILY,
}


def _lookup(spectrum) -> Family | None:
    for cls in type(spectrum).__mro__:                                            # subclasses of a family too
        if cls in FAMILIES:
            return FAMILIES[cls]
    return None


def family_of(spectrum, name: str = "spectrum") -> Family:
    """The protocol record of `spectrum` (``TypeError`` naming `name` for an unknown type)."""
    if isinstance(spectrum, Shifted):
        base = _lookup(spectrum.base)
        if base is None:
            raise TypeError(f"{name}.base: expected a real-spectrum family "
                            f"({', '.join(f.__name__ for f in FAMILIES)}); got "
                            f"{type(spectrum.base).__name__}")
        return shifted_family(base)
    fam = _lookup(spectrum)
    if fam is None:
        raise TypeError(f"{name}: expected a spectrum "
                        f"({', '.join(f.__name__ for f in (*FAMILIES, Shifted))}); "
                        f"got {type(spectrum).__name__}")
    return fam


_SPECTRUM = """
spectrum : spectrum NamedTuple
    Any family of :mod:`refattn.rpe.spectra`.
"""
_UNKNOWN = """
TypeError
    `spectrum` is not a known family.
"""


@fill_doc(unknown=_UNKNOWN)
def spectrum_arrays(spectrum) -> list:
    r"""The ``(name, array)`` pairs of a spectrum's parameter arrays.

    Parameters
    ----------
    spectrum : spectrum NamedTuple
        Any family of :mod:`refattn.rpe.spectra` (``Shifted`` included).

    Returns
    -------
    list of (str, array)
        One pair per parameter array, static integers excluded; ``base.<name>`` nested for
        :class:`~refattn.rpe.spectra.Shifted`.

    Raises
    ------
    {unknown}
    """
    fam = family_of(spectrum)
    if fam.arrays is not None:
        return fam.arrays(spectrum)
    return [(n, getattr(spectrum, n)) for n in spectrum._fields if n not in fam.static]


def family_label(spectrum) -> str:
    """The family's name in messages (``Shifted(Base)`` for a shifted spectrum)."""
    fam = family_of(spectrum)
    return fam.label(spectrum) if fam.label is not None else type(spectrum).__name__


@fill_doc(spectrum=_SPECTRUM, unknown=_UNKNOWN)
def spectrum_dim(spectrum) -> int | None:
    r"""The position dimension D fixed by a spectrum's parameter shapes.

    Parameters
    ----------
    {spectrum}

    Returns
    -------
    int or None
        D, or None for the isotropic families whose parameters fit any D.

    Raises
    ------
    {unknown}
    """
    check_spectrum(spectrum)                                          # a malformed spectrum fixes no D
    return family_of(spectrum).dim(spectrum)


@fill_doc(spectrum=_SPECTRUM)
def check_spectrum(spectrum, sizes: dict | None = None, name: str = "spectrum", *,
                   finite: bool = True) -> dict:
    r"""Validate a spectrum: type, parameter shapes, finiteness and signs.

    Parameters
    ----------
    {spectrum}
    sizes : dict, optional
        Axis sizes already bound (``{"D": 2}``); ``D`` and ``T`` are bound in it (and it is returned).
    name : str
        The argument's name in error messages.
    finite : bool, default True
        ``False`` skips the finiteness pass over the parameters (for a caller that checked them already, e.g.
        a model's parameter tree: validate once); shapes and signs are still checked.

    Returns
    -------
    sizes : dict
        The bound axis sizes (``D``, ``T`` where the family fixes them).

    Raises
    ------
    TypeError
        An unknown family, or mixed namespaces/dtypes.
    ValueError
        Naming the parameter: wrong shape, non-finite value or wrong sign.
    """
    sizes = {} if sizes is None else sizes
    fam = family_of(spectrum, name)
    arrays = spectrum_arrays(spectrum)
    xp = namespace(*[a for _, a in arrays], names=tuple(f"{name}.{n}" for n, _ in arrays))
    for n, a in arrays if finite else ():
        check_finite(f"{name}.{n}", a, xp=xp)
    fam.check(spectrum, sizes, name, xp=xp)
    return sizes


# ----------------------------------------------------------------------------------------------------------
# g and its backward


class SpectrumGCache(NamedTuple):
    """Cache of :func:`spectrum_g_fwd` for :func:`spectrum_g_bwd` (fields commented in the source)."""

    spectrum: Any
    xi: Array       # (r, D)
    parts: tuple    # family-specific intermediates
    g_re: Array     # (r,)


class SpectrumGGrads(NamedTuple):
    """Gradients from :func:`spectrum_g_bwd`: the spectrum's parameters and ``xi``."""

    spectrum: Any   # same structure as the spectrum (arrays; static ints kept)
    xi: Array       # (r, D)


_G_ARGS = """
spectrum : spectrum NamedTuple
    A spectrum of :mod:`refattn.rpe.spectra` (its parameters fix dtype and namespace).
xi : (r, D) array
    Frequencies, real floating, finite, same namespace and dtype as the spectrum's parameters.
"""
_G_RETURNS = """
(g_re, g_im) : tuple of (r,) arrays
    ``g_im`` is None for the real families (only :class:`Shifted` has a complex g).
"""
_G_RAISES = """
ValueError
    Bad spectrum parameters, `xi` not ``(r, D)`` or not finite.
TypeError
    Unknown family, or mixed dtypes/namespaces.
"""


@fill_doc(args=_G_ARGS, returns=_G_RETURNS, raises=_G_RAISES)
def spectrum_g_fwd(spectrum, xi):
    r"""Forward of :func:`spectrum_g` with the cache for :func:`spectrum_g_bwd`.

    See :func:`spectrum_g` for the convention and shapes.

    Parameters
    ----------
    {args}

    Returns
    -------
    {returns}
    cache : SpectrumGCache
        For :func:`spectrum_g_bwd`.

    Raises
    ------
    {raises}
    """
    arrays = spectrum_arrays(spectrum)
    xp = namespace(xi, *[a for _, a in arrays], names=("xi",) + tuple(f"spectrum.{n}" for n, _ in arrays))
    sizes = check_spectrum(spectrum)
    check_shape("xi", xi, "r, D", sizes)
    check_finite("xi", xi, xp=xp)
    return spectrum_g_fwd_core(spectrum, xi, xp=xp)


# g(xi) = int f(x) exp(-2 pi i x . xi) dx, evaluated by the spectrum's family record
# dspectrum, dxi from (dg_re, dg_im) by the family's g_bwd
def spectrum_g_fwd_core(spectrum, xi, *, xp):
    """Unchecked core of :func:`spectrum_g_fwd` (`spectrum` and `xi` validated by the caller)."""
    g_re, g_im, parts = family_of(spectrum).g(spectrum, xi, xp=xp)                   # (r,), (r,) or None
    return (g_re, g_im), SpectrumGCache(spectrum, xi, parts, g_re)


def spectrum_g_bwd_core(dg_re, dg_im, cache, *, xp):
    """Unchecked core of :func:`spectrum_g_bwd` (the cotangent validated by the caller)."""
    dspec, dxi = family_of(cache.spectrum).g_bwd(dg_re, dg_im, cache.spectrum, cache.xi, cache.parts,
                                                 cache.g_re, xp=xp)
    return SpectrumGGrads(dspec, dxi)


def spectrum_g_bwd(dg, cache: SpectrumGCache) -> SpectrumGGrads:
    r"""Backward of :func:`spectrum_g_fwd`: gradients of the spectrum's parameters and of ``xi``.

    See :func:`spectrum_g` for the convention and shapes.

    Parameters
    ----------
    dg : tuple
        ``(dg_re, dg_im)``, each ``(r,)``; ``dg_im`` may be None. Finite, dtype and namespace of the forward.
    cache : SpectrumGCache
        The cache returned by :func:`spectrum_g_fwd`.

    Returns
    -------
    SpectrumGGrads
        ``spectrum``: gradients in the spectrum's container type (static integers kept); ``xi: (r, D)``.

    Raises
    ------
    ValueError
        A cotangent not of shape ``(r,)``, or not finite.
    """
    dg_re, dg_im = dg
    names = ("dg[0]", "cache.xi") + (() if dg_im is None else ("dg[1]",))
    xp = namespace(dg_re, cache.xi, *(() if dg_im is None else (dg_im,)), names=names)
    r = cache.xi.shape[0]
    for name, a in (("dg[0]", dg_re), ("dg[1]", dg_im)):
        if a is not None:
            check_shape(name, a, f"{r}")
            check_finite(name, a, xp=xp)
    return spectrum_g_bwd_core(dg_re, dg_im, cache, xp=xp)


@fill_doc(args=_G_ARGS, returns=_G_RETURNS, raises=_G_RAISES)
def spectrum_g(spectrum, xi):
    r"""The spectrum g at frequencies ``xi`` as ``(g_re, g_im)``.

    The Fourier convention is FLT's, ``g(xi) = int f(x) exp(-2 pi i x . xi) dx`` (Theorem 4.1); each family's
    module gives its closed form and derivative.

    Parameters
    ----------
    {args}

    Returns
    -------
    {returns}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe import GaussianKernel, spectrum_g
    >>> g_re, g_im = spectrum_g(GaussianKernel(C=np.asarray(1.0), length=np.asarray(1.0)), np.zeros((1, 1)))
    >>> np.round(g_re, 4), g_im                       # g(0) = int f = sqrt(2 pi) for f = exp(-x^2 / 2)
    (array([2.5066]), None)
    """
    return spectrum_g_fwd(spectrum, xi)[0]


# ----------------------------------------------------------------------------------------------------------
# f: the RPE function itself (for the exact mask)


def spectrum_f(spectrum, delta):
    r"""The RPE function f itself at offsets ``delta`` (``Re f`` for a non-even real g).

    At the jumps of the box family (``|Delta_j| = v``) the value is the Fourier-inversion midpoint (C/2 for
    one box), not the C of the printed FLT Eq. (4).

    Parameters
    ----------
    spectrum : spectrum NamedTuple
        A spectrum of :mod:`refattn.rpe.spectra`.
    delta : (..., D) array
        Offsets ``r_i - r_j``, real floating, finite, dtype and namespace of the spectrum.

    Returns
    -------
    f : (...) array
        Dtype and namespace of the spectrum.

    Raises
    ------
    ValueError
        Bad spectrum parameters, or `delta`'s last axis not D, or non-finite input.
    TypeError
        Unknown family, or mixed dtypes/namespaces.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe import GaussianKernel, spectrum_f
    >>> np.round(spectrum_f(GaussianKernel(C=np.asarray(1.0), length=np.asarray(2.0)),
    ...                     np.array([[0.0], [1.0], [2.0]])), 4)      # exp(-Delta^2 / 8)
    array([1.    , 0.8825, 0.6065])
    """
    sizes = check_spectrum(spectrum)
    check_shape("delta", delta, "..., D", sizes)
    arrays = spectrum_arrays(spectrum)
    names = ("delta",) + tuple(f"spectrum.{n}" for n, _ in arrays)
    xp = namespace(delta, *[a for _, a in arrays], names=names)
    check_finite("delta", delta, xp=xp)
    return family_of(spectrum).f(spectrum, delta, xp=xp)


def rpe_mask(pos, spectrum):
    r"""The exact RPE mask ``N = [f(r_i - r_j)]_ij`` of FLT Definition 3.1, O(L^2) memory.

    Parameters
    ----------
    pos : (..., L, D) array
        Positions r_i (integer positions are indices by nature and allowed).
    spectrum : spectrum NamedTuple
        A spectrum of :mod:`refattn.rpe.spectra`; its parameters fix dtype and namespace.

    Returns
    -------
    N : (..., L, L) array
        Dtype of the spectrum's parameters.

    Raises
    ------
    ValueError
        `pos`'s last axis not D, or non-finite positions.
    MemoryError
        The mask over :mod:`refattn.limits`' memory bound.
    """
    arrays = spectrum_arrays(spectrum)
    names = ("pos",) + tuple(f"spectrum.{n}" for n, _ in arrays)
    xp = namespace(pos, *[a for _, a in arrays], names=names, allow_int=("pos",))
    sizes = check_spectrum(spectrum)
    check_shape("pos", pos, "..., L, D", sizes)
    if xp.isdtype(pos.dtype, "real floating"):
        check_finite("pos", pos, xp=xp)
    dtype = arrays[0][1].dtype
    L, D = pos.shape[-2], pos.shape[-1]
    limits.check_nbytes(math.prod(pos.shape[:-2]) * L * L * (D + 1) * (xp.finfo(dtype).bits // 8),
                        f"pos (L = {L}): the (L, L) mask")
    p = xp.astype(pos, dtype)
    delta = xp.expand_dims(p, axis=-2) - xp.expand_dims(p, axis=-3)                 # (..., L, L, D) r_i - r_j
    return spectrum_f(spectrum, delta)
