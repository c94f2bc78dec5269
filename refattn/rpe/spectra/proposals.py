r"""Proposal densities for the FLT frequencies and the check that a spectrum/proposal pair has an estimator.

A :class:`Proposal` is location-scale, ``xi = loc + scale * eps`` with ``eps`` from a standard density, so
``p(xi) = p_0(eps) / prod_j scale_j``. :func:`check_proposal` decides support and finite variance from the
family's *tail class* (``Family.tail``, in each family's module) and the proposal's kind:

==================  =========================================  ===========================================
tail class          |g| decays like                            finite int |g|^2 / p under
==================  =========================================  ===========================================
('gauss', tau)      exp(-|xi|^2 / (2 tau^2))                   gaussian (scale > tau/sqrt 2), laplace, cauchy,
                                                               mv_cauchy
('exp', b)          exp(-b |xi_j|)                             laplace (scale > 1/(2b)), cauchy, mv_cauchy
('iso_power', beta) |xi|^-beta                                 mv_cauchy; cauchy for D = 1
('prod_power', k)   prod_j |xi_j|^-k                           cauchy; mv_cauchy if 2k > D + 2
('not_integrable',) 1/|xi_j| (int |g| = inf)                   none (no mean under any proposal)
==================  =========================================  ===========================================

The bounded ``"uniform"`` proposal truncates every family here (g != 0 on an unbounded set) and is accepted
only with ``allow_truncation=True``. Axes: ``r`` draws, ``D`` position dimension.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ... import limits
from ..._docs import fill_doc
from ..._xp import check_choice, check_finite, check_positive_int, check_shape, device_of, namespace
from ._common import TWO_PI, check_positive, iso_const, sq_norm
from .core import check_spectrum, family_label, family_of, spectrum_arrays

__all__ = [
    "Proposal",
    "PROPOSAL_KINDS",
    "proposal_log_density",
    "check_proposal_shape",
    "check_proposal",
    "kernel_proposal",
    "scale_floor",
]

Array = Any


class Proposal(NamedTuple):
    r"""A location-scale proposal density for the FLT frequencies, ``xi = loc + scale * eps``.

    ``eps`` is drawn from the standard density of `kind` (``PROPOSAL_KINDS``, described in
    ``refattn.random.draw_flt_noise``; ``"uniform"`` is a *truncated* proposal). ``loc: (D,)`` and ``scale:
    ()`` or ``(D,)`` are learnable (App. A.4, B.3: "Gaussian with learnable means and variances").
    """

    kind: str
    loc: Array    # (D,)
    scale: Array  # () or (D,)  > 0


#: The standard densities a :class:`refattn.rpe.Proposal` is built on (its ``kind``).
PROPOSAL_KINDS = ("gaussian", "laplace", "cauchy", "mv_cauchy", "uniform")

_KIND = """
kind : {"gaussian", "laplace", "cauchy", "mv_cauchy", "uniform"}
    The standard density (``PROPOSAL_KINDS``).
"""
_SPECTRUM = """
spectrum : spectrum NamedTuple
    A spectrum of :mod:`refattn.rpe.spectra`.
"""
_D = """
D : int
    Position dimension, D >= 1.
"""


@fill_doc(kind=_KIND)
def proposal_log_density(kind: str, eps, *, xp=None):
    r"""The log density ``log p_0(eps)`` of the standard density of `kind`.

    Parameters
    ----------
    {kind}
    eps : (..., D) array
        Points, real floating, finite.
    xp : namespace, optional
        Accepted for compatibility and ignored: the namespace is `eps`'s.

    Returns
    -------
    log_p0 : (...) array
        Dtype and namespace of `eps`.

    Raises
    ------
    ValueError
        An unknown `kind` or non-finite `eps`.
    TypeError
        A non-floating `eps`.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe import proposal_log_density
    >>> np.round(proposal_log_density("gaussian", np.zeros((2, 1))), 4)   # -log(2 pi) / 2
    array([-0.9189, -0.9189])
    """
    check_choice(kind, "kind", PROPOSAL_KINDS)
    xp = namespace(eps, names=("eps",))
    check_shape("eps", eps, "..., D")
    check_finite("eps", eps, xp=xp)
    return proposal_log_density_core(kind, eps, xp=xp)


# log p_0(eps): gaussian -|eps|^2/2 - D log(2 pi)/2;  laplace -sum |eps_j| - D log 2;  uniform -D log 2
# cauchy -sum log(1 + eps_j^2) - D log pi;  mv_cauchy log c_D - (D + 1)/2 log(1 + |eps|^2)
def proposal_log_density_core(kind: str, eps, *, xp):
    """Unchecked core of :func:`proposal_log_density` (`kind` and `eps` validated by the caller)."""
    D = eps.shape[-1]
    if kind == "gaussian":
        return -0.5 * sq_norm(eps, xp=xp) - 0.5 * D * math.log(TWO_PI)
    if kind == "laplace":
        return -xp.sum(xp.abs(eps), axis=-1) - D * math.log(2.0)
    if kind == "cauchy":
        return -xp.sum(xp.log(1.0 + eps * eps), axis=-1) - D * math.log(math.pi)
    if kind == "mv_cauchy":
        return math.log(iso_const(D)) - 0.5 * (D + 1) * xp.log(1.0 + sq_norm(eps, xp=xp))
    if kind == "uniform":
        return xp.zeros_like(eps[..., 0]) - D * math.log(2.0)
    raise ValueError(f"proposal.kind: expected one of {', '.join(repr(k) for k in PROPOSAL_KINDS)}; got "
                     f"{kind!r}")


def check_proposal_shape(proposal, sizes: dict, name: str = "proposal", *, finite: bool = True) -> Any:
    r"""Validate a proposal's type, kind, shapes, finiteness and the sign of its scale.

    Parameters
    ----------
    proposal : Proposal
        ``loc: (D,)``, ``scale: ()`` or ``(D,)``, scale > 0.
    sizes : dict
        Axis sizes already bound (``{"D": 2}``, e.g. from :func:`check_spectrum`); ``D`` is bound in it.
    name : str
        The argument's name in error messages.
    finite : bool, default True
        ``False`` skips the finiteness passes (arrays checked by the caller); the sign of the scale is
        still checked.

    Returns
    -------
    xp : namespace
        The array namespace of the proposal's arrays.

    Raises
    ------
    TypeError
        Not a :class:`Proposal`, or mixed namespaces/dtypes.
    ValueError
        Unknown kind, wrong shape, non-finite values or a non-positive scale, naming the field.
    """
    if not isinstance(proposal, Proposal):
        raise TypeError(f"{name}: expected a refattn.rpe.spectra.Proposal; got {type(proposal).__name__}")
    if proposal.kind not in PROPOSAL_KINDS:
        raise ValueError(f"{name}.kind: expected one of {', '.join(repr(k) for k in PROPOSAL_KINDS)}; "
                         f"got {proposal.kind!r}")
    xp = namespace(proposal.loc, proposal.scale, names=(f"{name}.loc", f"{name}.scale"))
    check_shape(f"{name}.loc", proposal.loc, "D", sizes)
    if proposal.scale.ndim != 0:
        check_shape(f"{name}.scale", proposal.scale, "D", sizes)
    if finite:
        check_finite(f"{name}.loc", proposal.loc, xp=xp)
        check_finite(f"{name}.scale", proposal.scale, xp=xp)
    check_positive(f"{name}.scale", proposal.scale, xp=xp)
    return xp


def _floor(tail, kind):
    """The scale every proposal scale must exceed for ``int |g|^2 / p < inf`` (0.0: no such bound)."""
    if tail[0] == "gauss" and kind == "gaussian":
        return tail[1] / math.sqrt(2.0)                                  # tau / sqrt(2)
    if tail[0] == "exp" and kind == "laplace":
        return 1.0 / (2.0 * tail[1])                                     # 1 / (2 b)
    return 0.0


@fill_doc(spectrum=_SPECTRUM, kind=_KIND, D=_D)
def scale_floor(spectrum, kind: str, D: int):
    r"""The floor ``s_*`` every scale of a `kind` proposal must exceed for finite variance of the importance
    weights of `spectrum` (:func:`check_proposal`), and its gradient in the spectrum's parameters.

    The floors are the module docstring's table: ``tau / sqrt(2)`` for a Gaussian tail under the Gaussian
    proposal (``tau = 1 / (2 pi l)`` for the Gaussian kernel, ``max_t sigma_t`` for a mixture,
    ``1 / (2 pi min_t sigma_t)`` for a basis), ``1 / (2 b)`` for an exponential tail under the Laplace
    proposal (``b = 2 pi l`` for the Cauchy kernel), 0 for every other pair. A model that learns the scale
    as ``s_* + exp(raw)`` keeps it valid (``refattn.nn.kinds.domains``).

    Parameters
    ----------
    {spectrum}
    {kind}
    {D}

    Returns
    -------
    s_star : 0-d array or float
        The floor, a 0-d array of the spectrum's dtype and namespace (computed without a host sync), or the
        float 0.0 when the pair sets none.
    ds_star : spectrum NamedTuple or None
        ``d s_* / d parameters`` in the spectrum's container type (the extreme width's entry only, for the
        mixtures: ``max``/``min`` are differentiable away from ties); None when ``s_* = 0``.

    Raises
    ------
    ValueError
        Bad spectrum parameters, an unknown `kind` or D not a positive integer.
    TypeError
        Unknown spectrum family.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe.spectra import GaussianKernel, scale_floor
    >>> s, ds = scale_floor(GaussianKernel(C=np.asarray(1.0), length=np.asarray(2.0)), "gaussian", 1)
    >>> round(float(s), 5), round(float(ds.length), 5)  # 1 / (2 sqrt(2) pi l) and its derivative -s / l
    (0.05627, -0.02813)
    """
    check_choice(kind, "kind", PROPOSAL_KINDS)
    D = check_positive_int(D, "D")
    check_spectrum(spectrum)
    xp = namespace(*[a for _, a in spectrum_arrays(spectrum)])
    return scale_floor_core(spectrum, kind, D, xp=xp)


# s_* = tau / sqrt(2) (Gaussian tail, Gaussian proposal), 1 / (2 b) (exp. tail, Laplace proposal), else 0
# ds_* = dtau / sqrt(2), or -db / (2 b^2), with tau or b and its gradient from the family's tail_param
def scale_floor_core(spectrum, kind: str, D: int, *, xp):
    """Unchecked core of :func:`scale_floor`."""
    fam = family_of(spectrum)
    if fam.tail_param is None or _floor((fam.tail_class, 1.0), kind) == 0.0:
        return 0.0, None
    p, dp = fam.tail_param(spectrum, xp=xp)                                   # 0-d array: no host sync
    s_star = _floor((fam.tail_class, p), kind)
    c = 1.0 / math.sqrt(2.0) if fam.tail_class == "gauss" else -1.0 / (2.0 * p * p)
    return s_star, _scaled(dp, c, xp=xp)


def _scaled(spectrum, c, *, xp):
    """The spectrum container with every array field times c (static fields kept)."""
    return type(spectrum)(*[xp.asarray(a * c) if hasattr(a, "shape") else a for a in spectrum])


def _variance_problem(tail, kind, s_min, D):
    """Why int |g|^2 / p = inf for this tail class and proposal kind, or None when it is finite."""
    if tail[0] == "gauss":
        tau = tail[1]
        if kind == "gaussian" and not s_min > _floor(tail, kind):
            return (f"|g|^2 ~ exp(-|xi|^2/tau^2) with tau = {tau:.6g} and 1/p ~ exp(|xi|^2/(2 s^2)): "
                    f"int |g|^2/p < inf needs every scale s > tau/sqrt(2) = {tau / math.sqrt(2.0):.6g}; "
                    f"got min scale {s_min:.6g}")
    elif tail[0] == "exp":
        b = tail[1]
        if kind == "gaussian":
            return (f"|g| decays like exp(-{b:.6g}|xi_j|) but 1/p grows like exp(|xi|^2/(2 s^2)) for the "
                    "Gaussian proposal: use 'laplace' (scale > 1/(2 b)), 'cauchy' or 'mv_cauchy'")
        if kind == "laplace" and not s_min > _floor(tail, kind):
            return (f"|g|^2 ~ exp(-2 b |xi_j|) with b = {b:.6g} and 1/p ~ exp(|xi_j|/s): needs every scale "
                    f"s > 1/(2 b) = {1.0 / (2.0 * b):.6g}; got min scale {s_min:.6g}")
    elif tail[0] == "iso_power":
        if kind in ("gaussian", "laplace"):
            return (f"|g| decays like |xi|^-{tail[1]} (a power) but 1/p grows exponentially for the '{kind}' "
                    "proposal: use 'mv_cauchy' (its own spectral density)")
        if kind == "cauchy" and D >= 2:
            return (f"|g|^2/p ~ |xi|^-{2 * tail[1]} prod_j (1 + xi_j^2) ~ |xi|^-2 along the diagonal, not "
                    f"integrable in D = {D} >= 2: use 'mv_cauchy'")
    elif tail[0] == "prod_power":
        k = tail[1]
        if kind in ("gaussian", "laplace"):
            return (f"|g| decays like |xi_j|^-{k} (a power) but 1/p grows exponentially for the '{kind}' "
                    "proposal: use 'cauchy' (finite variance for k >= 2)")
        if kind == "mv_cauchy" and not 2 * k > D + 2:
            return (f"along an axis |g|^2/p ~ |xi_1|^(D + 1 - 2k) = |xi_1|^{D + 1 - 2 * k}: not integrable "
                    f"unless 2k > D + 2 (k = {k}, D = {D}): use 'cauchy' (product)")
    return None


@fill_doc(spectrum=_SPECTRUM)
def check_proposal(spectrum, proposal, *, allow_truncation: bool = False, finite: bool = True) -> None:
    r"""Reject a spectrum/proposal pair whose estimator is silently biased or has infinite variance.

    Two conditions (FLT Theorem 4.1 needs the first, Lemma A.2 / Theorem A.3 the second): **support**, p > 0
    wherever g != 0 (the bounded ``"uniform"`` proposal truncates the Fourier integral, so the estimator
    converges to the truncated integral, not to f: accepted only with ``allow_truncation=True``, to measure
    that bias); **finite variance**, ``int |g|^2 / p < inf``, decided from the tails of g and p (the module
    docstring's table; the message explains each case): boxes fail it under every proposal on R^D.

    Parameters
    ----------
    {spectrum}
    proposal : Proposal
        The proposal to check against it.
    allow_truncation : bool
        Accept the bounded ``"uniform"`` proposal (biased).
    finite : bool, default True
        ``False`` skips the finiteness passes over both (checked by the caller: validate once).

    Returns
    -------
    None
        The pair is accepted.

    Raises
    ------
    ValueError
        Saying which condition fails and why (and any shape or value problem of either argument).
    TypeError
        Unknown spectrum family or not a :class:`Proposal`.
    """
    sizes = check_spectrum(spectrum, finite=finite)
    check_proposal_pair(spectrum, proposal, sizes, allow_truncation=allow_truncation, finite=finite)


def check_proposal_pair(spectrum, proposal, sizes: dict, *, allow_truncation: bool = False,
                        finite: bool = True) -> None:
    """:func:`check_proposal` for a spectrum its caller has checked already (`sizes` from
    :func:`check_spectrum`): the proposal's own checks, then support and finite variance."""
    check_proposal_shape(proposal, sizes, finite=finite)
    D = int(proposal.loc.shape[-1])
    kind = proposal.kind
    s_min = float(namespace(proposal.scale).min(proposal.scale))              # one sync
    fam = family_label(spectrum)
    tail = family_of(spectrum).tail(spectrum, D)
    if kind == "uniform":
        if not allow_truncation:
            raise ValueError(
                f"proposal: the 'uniform' proposal has bounded support (loc +- scale) but g of {fam} is "
                "nonzero outside it: p must be positive wherever g != 0, otherwise the estimator is silently "
                "biased (it estimates the truncated Fourier integral, not f). Pass allow_truncation=True to "
                "measure that bias")
        return
    if tail[0] == "not_integrable":
        raise ValueError(
            f"proposal: {fam} has int |g| = inf (its g decays like 1/|xi|), so the importance weight g/p has "
            f"E|g/p| = int |g| = inf under every proposal ('{kind}' included): the estimator of Theorem 4.1 "
            "has no mean, and by Cauchy-Schwarz (int |g|)^2 <= int |g|^2/p its variance is infinite too. "
            "Use a truncated proposal (kind='uniform', allow_truncation=True: biased, finite variance) or "
            "BSpline with k >= 2")
    bad = _variance_problem(tail, kind, s_min, D)
    if bad is not None:
        raise ValueError(f"proposal: the importance weights of {fam} under the '{kind}' proposal have "
                         f"infinite variance (int |g|^2/p = inf): {bad}")


@fill_doc(D=_D)
def kernel_proposal(spectrum, D: int) -> Proposal:
    r"""The optimal proposal ``p = |g| / int |g|`` of a shift-invariant kernel in D dimensions (FLT App. A.4).

    The kernel's own spectral density: Gaussian of scale ``1/(2 pi l)`` for GaussianKernel, isotropic
    multivariate Cauchy of scale ``1/(2 pi l)`` for LaplaceKernel, product Laplace of scale ``1/(2 pi l)`` for
    CauchyKernel. The importance weight g/p is then the constant C, and ``c = sup |g|/p = C = int |g|`` is the
    smallest possible (Theorem 4.2's c).

    The scale is computed from the current length; when the length is learned, rebuild the proposal each step
    and chain its gradient: ``dlength += dscale * (-scale / length)``.

    Parameters
    ----------
    spectrum : GaussianKernel, LaplaceKernel or CauchyKernel
        The kernel.
    {D}

    Returns
    -------
    Proposal
        ``loc = zeros(D)`` and ``scale = 1 / (2 pi length)``, dtype and namespace of ``spectrum.length``.

    Raises
    ------
    TypeError
        Another spectrum family.
    ValueError
        D not a positive integer, or bad spectrum parameters.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe import GaussianKernel, kernel_proposal
    >>> p = kernel_proposal(GaussianKernel(C=np.asarray(1.0), length=np.asarray(2.0)), 1)
    >>> p.kind, p.loc, round(float(p.scale), 5)
    ('gaussian', array([0.]), 0.07958)
    """
    fam = family_of(spectrum)
    if fam.own_proposal is None:
        raise TypeError(f"spectrum: kernel_proposal needs GaussianKernel, LaplaceKernel or CauchyKernel; "
                        f"got {type(spectrum).__name__}")
    D = check_positive_int(D, "D")
    limits.check_nbytes(D * 8, f"D (kernel_proposal: a ({D},) location)")
    check_spectrum(spectrum)
    xp = namespace(spectrum.length)
    loc = xp.zeros((D,), dtype=spectrum.length.dtype, device=device_of(spectrum.length))
    return Proposal(fam.own_proposal, loc, 1.0 / (TWO_PI * spectrum.length))
