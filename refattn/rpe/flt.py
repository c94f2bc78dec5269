r"""FourierLearner-Transformers (FLT): RPE masks from their Fourier spectra, in real arithmetic.

Choromanski et al., *Learning a Fourier Transform for Linear Relative Positional Encodings in Transformers*,
Theorem 4.1, Eq. (3) and Algorithm 1. With g the Fourier transform of the RPE function f (convention of
:mod:`refattn.rpe.spectra`), frequencies xi_1..xi_r drawn from a proposal p and ``w_k = g(xi_k)/p(xi_k)``,

    f(r_i - r_j) = E[ g(xi)/p(xi) exp(2 pi i (r_i - r_j) . xi) ]                         (Eq. 5)

The paper's features are complex: phi(z)_k = e^{2 pi i z.xi_k} sqrt(w_k/r), psi(z)_k = e^{-2 pi i z.xi_k}
sqrt(w_k/r), and N_hat = N1 N2^T (bilinear: psi already carries the conjugate). refattn's core stays real
(complex arrays are rejected by the core, :mod:`refattn._xp`; the complex form as printed lives in the tests'
NumPy reference, ``tests/rpe/flt_complex_reference.py``): for a real f (Hermitian g, ``w = w_re + i w_im``)
the real part of Eq. (5) is

    f(r_i - r_j) = E[ cos a_i (w_re cos a_j + w_im sin a_j) + sin a_i (w_re sin a_j - w_im cos a_j) ],
    a_i = 2 pi r_i . xi,

which splits into real features with balanced norms (``|w| = sqrt(w_re^2 + w_im^2)``):

    N1 = [cos a, sin a] * sqrt(|w| / r),
    N2 = [w_re cos a + w_im sin a,  w_re sin a - w_im cos a] / sqrt(|w| r).

For a real, even f (real g, w_im = 0) this is ``N1 = [cos a, sin a] sqrt(|w|/r)``, ``N2 = sign(w) [cos a,
sin a] sqrt(|w|/r)``: sign(g) on one side. ``N1 N2^T`` is exactly the real part of the complex estimator
for every draw (tested against the NumPy complex reference in ``tests/rpe``), so it is unbiased for ``Re f``
whenever g is absolutely integrable, with variance at most the complex one (Var Re <= Var). Row norms:
``|N1_i|^2 = |N2_i|^2 = mean_k |w_k|`` for every position.

**Reparameterisation.** The core takes the *noise* ``eps: (r, D)`` (drawn by
``refattn.random.draw_flt_noise``) and forms ``xi = loc + scale * eps`` from the proposal's learnable location
and scale, so ``p(xi) = p_0(eps) / prod_j scale_j``. Gradients reach the spectrum's parameters (through g) and
the proposal's (through xi in the phases, in g, and through 1/p): the path-wise derivative of the computed
function. Positions and the noise get none.

Algorithm 1, the attention these features feed, is :mod:`refattn.rpe.flt_linear`.

Axes: ``...`` batch and heads, ``L`` positions, ``D`` position dimension (the paper's l), ``r`` frequencies
(2r real feature columns).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, check_shape, namespace, sum_to_shape
from .spectra import (
    Proposal,
    spectrum_arrays,
    check_spectrum,
    check_proposal_shape,
)
from .spectra.core import spectrum_g_bwd_core, spectrum_g_fwd_core
from .spectra.proposals import check_proposal_pair, proposal_log_density_core

__all__ = [
    "flt_frequencies",
    "flt_importance_weights",
    "flt_features",
    "flt_features_fwd",
    "flt_features_bwd",
    "flt_mask_estimate",
    "FLTFeaturesCache",
    "FLTFeaturesGrads",
]

Array = Any
_TWO_PI = 2.0 * math.pi


class FLTFeaturesCache(NamedTuple):
    r"""Cache of :func:`flt_features_fwd` for :func:`flt_features_bwd` (fields commented in the source)."""

    pos: Array          # (..., L, D) positions, in the dtype of the parameters
    eps: Array          # (r, D) noise
    proposal: Proposal
    gcache: Any         # spectra.SpectrumGCache
    inv_p: Array        # (r,) 1 / p(xi)
    w_re: Array         # (r,) Re g / p
    w_im: Array         # (r,) Im g / p, or None for a real g
    absw: Array         # (r,) |w|
    cos_a: Array        # (..., L, r)
    sin_a: Array        # (..., L, r)
    s: Array            # (r,) sqrt(|w| / r)
    u: Array            # (r,) w_re / sqrt(|w| r)
    t: Array            # (r,) w_im / sqrt(|w| r), or None
    weight: Array = None  # (L,) per-token factor on N1 and N2, or None (all ones)


class FLTFeaturesGrads(NamedTuple):
    r"""Gradients from :func:`flt_features_bwd`: spectrum and proposal (``pos``, ``eps``: None)."""

    pos: None           # positions are not differentiated (always None)
    eps: None           # the noise behind xi is not differentiated (always None)
    spectrum: Any       # same container as the spectrum
    proposal: Proposal  # Proposal(kind, dloc (D,), dscale (shape of scale))


def check_flt_inputs(pos, eps, spectrum, proposal, allow_truncation, finite=True):
    """Check the FLT features' inputs; return the namespace (``finite=False``: no finiteness passes, for
    callers that checked the arrays already; shapes, signs and the spectrum/proposal pair still checked)."""
    arrays = spectrum_arrays(spectrum)
    names = ("pos", "eps") + tuple(f"spectrum.{n}" for n, _ in arrays) + ("proposal.loc", "proposal.scale")
    if not isinstance(proposal, Proposal):
        raise TypeError(f"proposal: expected a refattn.rpe.spectra.Proposal; got {type(proposal).__name__}")
    xp = namespace(pos, eps, *[a for _, a in arrays], proposal.loc, proposal.scale, names=names,
                   allow_int=("pos",))
    sizes = check_spectrum(spectrum, finite=finite)
    check_shape("pos", pos, "..., L, D", sizes)
    check_shape("eps", eps, "r, D", sizes)
    if eps.shape[0] < 1:
        raise ValueError(f"eps: expected shape (r, D) with r >= 1 frequencies; got {tuple(eps.shape)}")
    if finite:
        check_finite("eps", eps, xp=xp)
        if xp.isdtype(pos.dtype, "real floating"):
            check_finite("pos", pos, xp=xp)
    check_proposal_pair(spectrum, proposal, sizes, allow_truncation=allow_truncation, finite=finite)
    _check_uniform_noise(eps, proposal, xp=xp)
    return xp


def _check_uniform_noise(eps, proposal, *, xp):
    if proposal.kind == "uniform" and not bool(xp.all(xp.abs(eps) <= 1)):
        raise ValueError("eps: the 'uniform' proposal's noise must lie in [-1, 1]^D (draw_flt_noise(..., "
                         "kind='uniform'))")


def _validate_noise(eps, proposal, spectrum=None):
    """Check `eps: (r, D)` (finite), the proposal (shapes, finite, scale > 0) and, if given, the spectrum,
    with one shared D; returns ``(xp, sizes)``."""
    if not isinstance(proposal, Proposal):
        raise TypeError(f"proposal: expected a refattn.rpe.spectra.Proposal; got {type(proposal).__name__}")
    arrays = [] if spectrum is None else spectrum_arrays(spectrum)
    names = ("eps", "proposal.loc", "proposal.scale") + tuple(f"spectrum.{n}" for n, _ in arrays)
    xp = namespace(eps, proposal.loc, proposal.scale, *[a for _, a in arrays], names=names)
    sizes = {} if spectrum is None else check_spectrum(spectrum)
    check_shape("eps", eps, "r, D", sizes)
    check_finite("eps", eps, xp=xp)
    check_proposal_shape(proposal, sizes)
    _check_uniform_noise(eps, proposal, xp=xp)
    return xp, sizes


# shared docstring blocks (numpydoc entries filled in by fill_doc)

_EPS_PROPOSAL = """
eps : (r, D) array
    Standard noise of the proposal's kind (``refattn.random.draw_flt_noise(rng, r, D, kind)``), real
    floating, finite; its dtype (float64 reference, float32 supported) is the features'.
proposal : Proposal
    Location-scale proposal ``xi = loc + scale * eps``: ``loc: (D,)``, ``scale: ()`` or ``(D,)`` (> 0), same
    dtype and namespace as `eps`.
"""
_FEATURE_ARGS = """
pos : (..., L, D) array
    Positions r_i (the paper's R; integer positions are indices by nature and allowed).
eps : (r, D) array
    Standard noise of the proposal's kind (``refattn.random.draw_flt_noise(rng, r, D, kind)``), r >= 1; its
    dtype (float64 reference, float32 supported) is the features'.
spectrum : spectrum NamedTuple (``refattn.rpe.spectra``)
    The learnable g; its parameters fix the namespace and dtype.
proposal : Proposal
    ``xi = loc + scale * eps``; checked against the spectrum by :func:`~refattn.rpe.spectra.check_proposal`
    (support and finite variance).
allow_truncation : bool
    Accept a truncated ('uniform') proposal (biased; for measurements).
"""
_FEATURE_RAISES = """
ValueError
    Positions of the wrong dimension, eps of the wrong shape, non-positive scales or radii, non-finite input,
    or a spectrum/proposal pair with a silently biased or infinite-variance estimator.
TypeError
    Mixed dtypes or namespaces; an unknown spectrum family.
"""
_N12 = """
(N1, N2) : tuple of two (..., L, 2r) arrays
    Dtype and namespace of the spectrum's parameters.
"""


# ----------------------------------------------------------------------------------------------------------
# frequencies and importance weights


@fill_doc(eps_proposal=_EPS_PROPOSAL)
def flt_frequencies(eps, proposal):
    r"""The FLT frequencies ``xi = loc + scale * eps`` and their log proposal density (reparameterised draw).

    ``log p(xi) = log p_0(eps) - sum_j log scale_j`` (FLT Theorem 4.1 draws iid ``xi_k ~ p``; here p is
    location-scale so that ``loc`` and ``scale`` are learnable).

    Parameters
    ----------
    {eps_proposal}

    Returns
    -------
    xi : (r, D) array
        Frequencies.
    log_p : (r,) array
        ``log p(xi)``.

    Raises
    ------
    ValueError
        Naming `eps` or ``proposal.<field>`` for a wrong shape, non-finite values or a non-positive scale (or
        uniform noise outside [-1, 1]); r = 0 gives empty results.
    TypeError
        `proposal` not a :class:`~refattn.rpe.spectra.Proposal`, or mixed dtypes/namespaces.
    """
    xp, _ = _validate_noise(eps, proposal)
    return flt_frequencies_core(eps, proposal, xp=xp)


def flt_frequencies_core(eps, proposal, *, xp):
    """Unchecked core of :func:`flt_frequencies`."""
    D = eps.shape[-1]
    xi = proposal.loc + proposal.scale * eps                                      # (r, D)
    log_scale_sum = xp.sum(xp.log(proposal.scale)) * (D if proposal.scale.ndim == 0 else 1)
    logp = proposal_log_density_core(proposal.kind, eps, xp=xp) - log_scale_sum   # (r,)
    return xi, logp


@fill_doc(eps_proposal=_EPS_PROPOSAL)
def flt_importance_weights(eps, spectrum, proposal):
    r"""The importance weights ``w = g(xi) / p(xi)`` at ``xi = loc + scale * eps`` (FLT Eq. (5)).

    Validates `eps`, `spectrum` and `proposal` as :func:`flt_frequencies` does, with the spectrum's D.

    Parameters
    ----------
    {eps_proposal}
    spectrum : spectrum NamedTuple
        The learnable g (:mod:`refattn.rpe.spectra`); same dtype and namespace as `eps`.

    Returns
    -------
    (w_re, w_im) : tuple of (r,) arrays
        Real and imaginary parts; ``w_im`` is None for a real g.

    Raises
    ------
    ValueError
        As :func:`flt_frequencies`, plus bad spectrum parameters.
    TypeError
        Unknown spectrum family, or mixed dtypes/namespaces.
    """
    xp, _ = _validate_noise(eps, proposal, spectrum)
    xi, logp = flt_frequencies_core(eps, proposal, xp=xp)
    (g_re, g_im), _ = spectrum_g_fwd_core(spectrum, xi, xp=xp)
    inv_p = xp.exp(-logp)                                                         # (r,) 1/p(xi)
    return g_re * inv_p, (None if g_im is None else g_im * inv_p)


# ----------------------------------------------------------------------------------------------------------
# the features (N1, N2): Theorem 4.1 in real form


@fill_doc(args=_FEATURE_ARGS, n12=_N12, raises=_FEATURE_RAISES)
def flt_features(pos, eps, spectrum, proposal, *, allow_truncation=False):
    r"""The real FLT features ``(N1, N2)`` of FLT Theorem 4.1: ``E[N1 N2^T] = N = [Re f(r_i - r_j)]``.

    ``N1 = [cos a, sin a] sqrt(|w|/r)``, ``N2 = [w_re cos a + w_im sin a, w_re sin a - w_im cos a] /
    sqrt(|w| r)`` with ``a = 2 pi pos xi^T``, ``xi = loc + scale * eps`` and ``w = g(xi)/p(xi)`` (the module
    docstring derives this real form). Gradients (:func:`flt_features_bwd`) go to the spectrum's parameters
    and to the proposal's ``loc`` and ``scale`` (through xi and 1/p); where ``|w_k| = 0`` the features are
    not differentiable (``sqrt(|w|)``) and that column's gradient is set to 0.

    Parameters
    ----------
    {args}

    Returns
    -------
    {n12}

    Raises
    ------
    {raises}
    """
    return flt_features_fwd(pos, eps, spectrum, proposal, allow_truncation=allow_truncation)[0]


@fill_doc(args=_FEATURE_ARGS, n12=_N12, raises=_FEATURE_RAISES)
def flt_features_fwd(pos, eps, spectrum, proposal, *, allow_truncation=False):
    r"""Forward of :func:`flt_features` with the cache for :func:`flt_features_bwd`.

    See :func:`flt_features` for the equations and shapes.

    Parameters
    ----------
    {args}

    Returns
    -------
    {n12}
    cache : FLTFeaturesCache
        For :func:`flt_features_bwd`.

    Raises
    ------
    {raises}
    """
    xp = check_flt_inputs(pos, eps, spectrum, proposal, allow_truncation)
    return flt_features_fwd_core(pos, eps, spectrum, proposal, xp=xp)


def flt_features_bwd(dN, cache: FLTFeaturesCache) -> FLTFeaturesGrads:
    r"""Backward of :func:`flt_features_fwd`: gradients of the spectrum and of the proposal.

    See :func:`flt_features` for the equations and shapes.

    Parameters
    ----------
    dN : tuple
        ``(dN1, dN2)``, cotangents of the two features, each ``(..., L, 2r)`` or None (no gradient from that
        side); finite, dtype and namespace of the forward.
    cache : FLTFeaturesCache
        The cache returned by :func:`flt_features_fwd`.

    Returns
    -------
    FLTFeaturesGrads
        ``spectrum`` (same container type as the spectrum), ``proposal`` (``Proposal(kind, dloc: (D,),
        dscale)`` with ``dscale`` shaped like ``scale``); ``pos`` and ``eps`` are None.

    Raises
    ------
    ValueError
        A cotangent not of the features' shape, or not finite.
    """
    c = cache
    dN1, dN2 = dN
    given = [(n, x) for n, x in (("dN[0]", dN1), ("dN[1]", dN2)) if x is not None]
    xp = namespace(c.eps, *(x for _, x in given), names=("cache.eps",) + tuple(n for n, _ in given))
    n_shape = tuple(c.cos_a.shape[:-1]) + (2 * c.cos_a.shape[-1],)                # (..., L, 2r)
    for n, x in given:
        if tuple(x.shape) != n_shape:
            raise ValueError(f"{n}: expected shape {n_shape} (the features' shape); got {tuple(x.shape)}")
        check_finite(n, x, xp=xp)
    return flt_features_bwd_core(dN1, dN2, c, xp=xp)


# N1 = [cos a, sin a] sqrt(|w|/r),  N2 = [w_re cos a + w_im sin a, w_re sin a - w_im cos a] / sqrt(|w| r)
# a = 2 pi pos xi^T, xi = loc + scale eps, w = g(xi)/p(xi): chain rule through (s, u, t), |w|, g, 1/p and xi
# (rows times the token's weight u_l when given: dN1, dN2 times u_l first in the backward)
def flt_features_fwd_core(pos, eps, spectrum, proposal, *, xp, weight=None):
    """Unchecked core of :func:`flt_features_fwd` (see :func:`flt_features`).

    ``weight: (L,)`` (optional) multiplies each token's rows of ``N1`` and ``N2``: 1 for a token with a
    position, 0 for a token without one (a class token: its rows are zero, so the estimated RPE term
    ``N1_i . N2_j`` vanishes for every pair it is in and its logits are the content logits)."""
    dtype = eps.dtype
    r = eps.shape[0]
    p = xp.astype(pos, dtype)                                                     # (..., L, D)
    xi, logp = flt_frequencies_core(eps, proposal, xp=xp)                                 # (r, D), (r,)
    (g_re, g_im), gcache = spectrum_g_fwd_core(spectrum, xi, xp=xp)                     # (r,)
    inv_p = xp.exp(-logp)                                                         # (r,) 1/p(xi)
    w_re = g_re * inv_p                                                           # (r,) importance weights
    w_im = None if g_im is None else g_im * inv_p
    absw = xp.abs(w_re) if w_im is None else xp.sqrt(w_re * w_re + w_im * w_im)   # (r,)
    a = _TWO_PI * (p @ xp.matrix_transpose(xi))                                  # (..., L, r) 2 pi r_i . xi_k
    cos_a, sin_a = xp.cos(a), xp.sin(a)
    s = xp.sqrt(absw / r)                                                         # (r,) sqrt(|w|/r)
    zero = xp.zeros_like(absw)
    nz = absw > 0
    denom = xp.where(nz, xp.sqrt(absw * r), xp.ones_like(absw))                   # (r,) sqrt(|w| r)
    u = xp.where(nz, w_re / denom, zero)                                    # (r,) sign(w) sqrt(|w|/r) if real
    t = None if w_im is None else xp.where(nz, w_im / denom, zero)
    N1 = xp.concat([cos_a * s, sin_a * s], axis=-1)                               # (..., L, 2r)
    if t is None:
        N2 = xp.concat([cos_a * u, sin_a * u], axis=-1)                           # (..., L, 2r) sign(g) side
    else:
        N2 = xp.concat([cos_a * u + sin_a * t, sin_a * u - cos_a * t], axis=-1)   # (..., L, 2r) Hermitian g
    if weight is not None:
        row = xp.reshape(weight, (weight.shape[0], 1))                            # (L, 1)
        N1, N2 = N1 * row, N2 * row                                               # (..., L, 2r)
    cache = FLTFeaturesCache(p, eps, proposal, gcache, inv_p, w_re, w_im, absw, cos_a, sin_a, s, u, t, weight)
    return (N1, N2), cache


def flt_features_bwd_core(dN1, dN2, c, *, xp):
    """Unchecked core of :func:`flt_features_bwd` (see :func:`flt_features`)."""
    r = c.eps.shape[0]
    if c.weight is not None:
        row = xp.reshape(c.weight, (c.weight.shape[0], 1))                        # (L, 1)
        dN1 = None if dN1 is None else dN1 * row
        dN2 = None if dN2 is None else dN2 * row
    cos_a, sin_a = c.cos_a, c.sin_a
    batch_axes = tuple(range(cos_a.ndim - 1))                                     # sum over ..., L
    zero_r = xp.zeros_like(c.absw)
    da = xp.zeros_like(cos_a)                                                     # (..., L, r)
    ds, du, dt = zero_r, zero_r, zero_r
    if dN1 is not None:
        dC1, dS1 = dN1[..., :r], dN1[..., r:]
        ds = xp.sum(dC1 * cos_a + dS1 * sin_a, axis=batch_axes)                   # (r,)
        da = da + (dS1 * cos_a - dC1 * sin_a) * c.s
    if dN2 is not None:
        dC2, dS2 = dN2[..., :r], dN2[..., r:]
        du = xp.sum(dC2 * cos_a + dS2 * sin_a, axis=batch_axes)                   # (r,)
        da = da + (dS2 * cos_a - dC2 * sin_a) * c.u
        if c.t is not None:
            dt = xp.sum(dC2 * sin_a - dS2 * cos_a, axis=batch_axes)
            da = da + (dC2 * cos_a + dS2 * sin_a) * c.t
    nz = c.absw > 0
    safe = xp.where(nz, c.absw, xp.ones_like(c.absw))
    sqrt_ar = xp.sqrt(safe * r)                                                   # (r,) sqrt(|w| r)
    # s = sqrt(A/r); u = w_re/sqrt(A r); t = w_im/sqrt(A r); A = |w|
    t_val = zero_r if c.t is None else c.t
    dA = ds / (2.0 * sqrt_ar) - (du * c.u + dt * t_val) / (2.0 * safe)            # (r,)
    dw_re = xp.where(nz, du / sqrt_ar + dA * c.w_re / safe, zero_r)
    dw_im = None if c.w_im is None else xp.where(nz, dt / sqrt_ar + dA * c.w_im / safe, zero_r)
    # w = g / p: dg = dw / p, dlogp = -(dw_re w_re + dw_im w_im)
    dg_re = dw_re * c.inv_p
    dg_im = None if dw_im is None else dw_im * c.inv_p
    dlogp = -(dw_re * c.w_re + (zero_r if dw_im is None else dw_im * c.w_im))     # (r,)
    gg = spectrum_g_bwd_core(dg_re, dg_im, c.gcache, xp=xp)                      # dg derived from checked dN
    # phases a = 2 pi pos xi^T
    D = c.eps.shape[-1]
    da2 = xp.reshape(da, (-1, r))                                                 # (N, r)
    p2 = xp.reshape(c.pos, (-1, D))                                               # (N, D)
    dxi = gg.xi + _TWO_PI * (xp.matrix_transpose(da2) @ p2)                       # (r, D)
    # xi = loc + scale * eps; log p = log p0(eps) - sum log scale
    prop = c.proposal
    dloc = xp.sum(dxi, axis=0)                                                    # (D,)
    dscale_full = xp.sum(dxi * c.eps, axis=0)                                     # (D,)
    dscale_full = dscale_full - xp.sum(dlogp) / (prop.scale * xp.ones_like(dloc))
    dscale = sum_to_shape(dscale_full, tuple(prop.scale.shape), xp=xp)
    return FLTFeaturesGrads(pos=None, eps=None, spectrum=gg.spectrum,
                            proposal=Proposal(prop.kind, dloc, dscale))


@fill_doc(args=_FEATURE_ARGS, raises=_FEATURE_RAISES)
def flt_mask_estimate(pos, eps, spectrum, proposal, *, allow_truncation=False):
    r"""The rank-2r estimate ``N_hat = N1 N2^T`` of the RPE mask (FLT Theorem 4.1), O(L^2) memory.

    Parameters
    ----------
    {args}

    Returns
    -------
    N_hat : (..., L, L) array
        Unbiased for the exact mask :func:`~refattn.rpe.spectra.rpe_mask`.

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.random import draw_flt_noise
    >>> from refattn.rpe import GaussianKernel, kernel_proposal, flt_mask_estimate, rpe_mask
    >>> spectrum = GaussianKernel(C=np.asarray(1.0), length=np.asarray(2.0))   # f = exp(-D^2 / 8)
    >>> proposal = kernel_proposal(spectrum, 1)            # the kernel's own spectral density
    >>> pos = np.arange(4.0)[:, None]                      # (L, D)
    >>> eps = draw_flt_noise(np.random.default_rng(0), 20000, 1)
    >>> err = flt_mask_estimate(pos, eps, spectrum, proposal) - rpe_mask(pos, spectrum)
    >>> bool(np.abs(err).max() < 0.05)
    True
    """
    N1, N2 = flt_features(pos, eps, spectrum, proposal, allow_truncation=allow_truncation)
    xp = namespace(N1)
    return N1 @ xp.matrix_transpose(N2)
