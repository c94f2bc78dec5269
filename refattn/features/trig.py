r"""Trigonometric random features (random Fourier features, Random Kitchen Sinks), and their kernels.

:func:`trig_features` estimates the Gaussian kernel, :func:`softmax_trig_features` (and its ``_stable`` form)
the softmax kernel; each derivation is in its map's docstring. The estimates can be zero or negative, so the
normaliser of trig linear attention can be too: ``linear_attention`` reports it
(``on_nonpositive``). Axes: ``...`` batch and heads, ``L`` positions, ``d`` input width, ``m`` projections
(feature width 2m), ``Lq``/``Lk`` query/key positions of a kernel matrix.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import limits
from .._docs import fill_doc
from .._xp import check_finite, check_positive_int, check_shape, namespace
from .projection import (BWD_RAISES, OMEGA_GRAD_PARAMETER, X_OMEGA_PARAMETERS, X_OMEGA_RAISES, check_x_omega,
                          project, project_bwd, sq_norm_half)

__all__ = [
    "trig_features", "trig_features_fwd", "trig_features_bwd", "TrigFeaturesCache", "TrigFeaturesGrads",
    "softmax_trig_features", "softmax_trig_features_fwd", "softmax_trig_features_bwd",
    "softmax_trig_features_stable", "softmax_trig_features_stable_fwd", "softmax_trig_features_stable_bwd",
    "SoftmaxTrigFeaturesCache",
    "gaussian_kernel", "softmax_kernel", "trig_mse", "softmax_trig_mse",
]

Array = Any

_QK_DOC = """
Parameters
----------
q : (..., Lq, d) array
    Queries. Real floating (float32 or float64), finite.
k : (..., Lk, d) array
    Keys, with the batch axes and width of `q`; same namespace and dtype.
"""
_QK_RAISES_DOC = """
Raises
------
ValueError
    If the shapes disagree, an input is not finite, or the ``(..., Lq, Lk)`` result exceeds
    ``refattn.limits``.
TypeError
    If `q` and `k` differ in namespace or dtype, or are not real floating.
"""
_DPHI_DOC = """
Parameters
----------
dphi : (..., L, 2m) array
    Cotangent of the features (cosine half first); same namespace and dtype as the cache, finite.
"""


class TrigFeaturesCache(NamedTuple):
    """What :func:`trig_features_bwd` needs from :func:`trig_features_fwd`."""

    x: Array      # (..., L, d)
    omega: Array  # (m, d)
    phi: Array    # (..., L, 2m) [cos u, sin u] / sqrt(m), u = x omega^T (the backward reads cos and sin here)


class TrigFeaturesGrads(NamedTuple):
    """Gradients of the trig maps: ``x`` and ``omega`` (``None`` when not requested)."""

    x: Array      # (..., L, d)
    omega: Array  # (m, d)


class SoftmaxTrigFeaturesCache(NamedTuple):
    """What :func:`softmax_trig_features_bwd` needs from :func:`softmax_trig_features_fwd`."""

    trig: TrigFeaturesCache  # the RKS part
    log_h: Array             # (..., L)  |x|^2 / 2
    phi: Array               # (..., L, 2m) the returned features (exp(log_h) * trig; the raw map only)


# ----------------------------------------------------------------------------------------------------------
# kernels (closed forms)


def check_qk(q, k, extra=1):
    """The closed-form kernels' boundary: q (..., Lq, d), k (..., Lk, d), finite; the (..., Lq, Lk) result
    (times `extra`) within ``refattn.limits``. Empty axes give an empty result; d = 0 all ones."""
    xp = namespace(q, k, names=("q", "k"))
    sizes = check_shape("q", q, "..., Lq, d")
    check_shape("k", k, "..., Lk, d", sizes)
    n = extra * 8 * q.shape[-2] * k.shape[-2]
    for s in q.shape[:-2]:
        n *= s
    limits.check_nbytes(n, "q, k (the (..., Lq, Lk) kernel matrix)")
    check_finite("q", q, xp=xp)
    check_finite("k", k, xp=xp)
    return xp


@fill_doc(qk=_QK_DOC, raises=_QK_RAISES_DOC)
def softmax_kernel(q, k):
    r"""The softmax (exponential) kernel matrix ``K(q, k) = exp(q^T k)`` (closed form).

    Unscaled: softmax attention's ``exp(q . k / sqrt(d))`` (Horn et al. Eq. (1)) is this kernel on
    ``d^{-1/4} q`` and ``d^{-1/4} k``. Estimated without bias by :func:`softmax_trig_features` (Horn et al.
    Sec. 2.1) and the positive and hyperbolic maps (Choromanski et al. 2021, Lemma 1).

    {qk}

    Returns
    -------
    K : (..., Lq, Lk) array
        Same namespace, dtype and device as `q`; inf for ``q . k`` above ~88 (float32) or ~709 (float64).

    {raises}

    See Also
    --------
    gaussian_kernel : what the RKS map estimates instead.
    softmax_trig_features : its example compares the two.
    """
    xp = check_qk(q, k)
    return xp.exp(q @ xp.matrix_transpose(k))                                     # (..., Lq, Lk)


@fill_doc(qk=_QK_DOC, raises=_QK_RAISES_DOC)
def gaussian_kernel(q, k):
    r"""The Gaussian (RBF, unit bandwidth) kernel matrix ``K(q, k) = exp(-|q - k|^2 / 2)`` (closed form).

    The kernel whose spectral density is ``N(0, I_d)`` (Bochner, Chowdhury et al. Eq. (2)); computed as
    ``exp(q . k - |q|^2/2 - |k|^2/2)`` (no (Lq, Lk, d) difference array), clipped at 1. Estimated without
    bias by :func:`trig_features` (Eq. (3)) and :func:`~refattn.features.positive.gaussian_positive_features`.

    {qk}

    Returns
    -------
    K : (..., Lq, Lk) array
        Entries in [0, 1]; same namespace, dtype and device as `q`.

    {raises}

    See Also
    --------
    softmax_kernel : ``exp(q . k)``; differs by the row factors ``exp(|q|^2/2) exp(|k|^2/2)``.
    trig_features : its example compares the two.
    """
    xp = check_qk(q, k)
    e = (q @ xp.matrix_transpose(k)
         - xp.expand_dims(sq_norm_half(q, xp=xp), axis=-1)
         - xp.expand_dims(sq_norm_half(k, xp=xp), axis=-2))                       # (..., Lq, Lk) = -|q-k|^2/2
    return xp.exp(xp.minimum(e, xp.zeros_like(e)))                                # rounding can make e > 0


# ----------------------------------------------------------------------------------------------------------
# closed-form MSEs of the kernel estimates phi(q) . phi(k), iid omega_i ~ N(0, I_d) (shared by the positive
# and hyperbolic maps' modules): Parameters, Returns and Raises of every MSE function

MSE_SECTIONS = """
Parameters
----------
q : (..., Lq, d) array
    Queries (as passed to the map). Real floating (float32 or float64), finite.
k : (..., Lk, d) array
    Keys, with the batch axes and width of `q`; same namespace and dtype.
m : int
    Number of projections: rows of the ``(m, d)`` omega passed to the map, m >= 1.

Returns
-------
mse : (..., Lq, Lk) array
    ``E[(phi(q) . phi(k) - K(q, k))^2]`` for the kernel K the map estimates (in the summary line); inf where
    an exponent overflows; same namespace and dtype as `q`.

Raises
------
ValueError
    If `m` is not a positive integer, the shapes disagree, an input is not finite, or the ``(..., Lq, Lk)``
    result exceeds ``refattn.limits``.
TypeError
    If `q` and `k` differ in namespace or dtype, or are not real floating; or `m` is not an integer.
"""


def mse_terms(q, k, m):
    """The MSE formulas' boundary and shared terms: ``xp``, ``q . k`` ``(..., Lq, Lk)``, ``|q|^2``
    ``(..., Lq, 1)``, ``|k|^2`` ``(..., 1, Lk)`` and m (checked, :func:`check_qk` and a positive int)."""
    m = check_positive_int(m, "m")
    xp = check_qk(q, k, extra=3)
    qk = q @ xp.matrix_transpose(k)                                               # (..., Lq, Lk)
    qq = xp.expand_dims(2.0 * sq_norm_half(q, xp=xp), axis=-1)                     # (..., Lq, 1)  |q|^2
    kk = xp.expand_dims(2.0 * sq_norm_half(k, xp=xp), axis=-2)                     # (..., 1, Lk)  |k|^2
    return xp, qk, qq, kk, m


def nonneg(e, *, xp):
    """``max(e, 0)``: a squared distance formed as ``|a|^2 + |b|^2 +- 2 a.b`` can round below 0."""
    return xp.maximum(e, xp.zeros_like(e))


@fill_doc(sections=MSE_SECTIONS)
def trig_mse(q, k, m):
    r"""MSE of :func:`trig_features`' Gaussian-kernel estimate, ``(1 - exp(-|q - k|^2))^2 / (2m)``.

    Derivation (iid ``omega_i ~ N(0, I_d)``, ``delta = q - k``): ``phi(q) . phi(k) = (1/m) sum_i
    cos(omega_i . delta)``, the mean of m iid terms, unbiased for ``exp(-|delta|^2/2)``. With
    ``E cos(omega . a) = exp(-|a|^2/2)``, ``E cos^2(omega . delta) = (1 + E cos(2 omega . delta)) / 2 =
    (1 + exp(-2|delta|^2)) / 2``, so ``Var cos = (1 + e^{-2|delta|^2}) / 2 - e^{-|delta|^2} =
    (1 - e^{-|delta|^2})^2 / 2`` and the MSE (= variance: unbiased) is that over m, in [0, 1/(2m)]. Zero at
    ``q = k``, where every draw gives exactly 1. Haar-orthogonal blocks (``draw_orthogonal``) give another
    (smaller) MSE.

    {sections}

    See Also
    --------
    softmax_trig_mse : the same estimator scaled to the softmax kernel.
    validation.assert_mse_matches : tests such a formula against Monte Carlo draws.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import trig_mse
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> trig_mse(q, k, 64)
    array([[0.00132223, 0.00120952],
           [0.00209702, 0.00584098]])
    """
    xp, qk, qq, kk, m = mse_terms(q, k, m)
    dd = nonneg(qq + kk - 2.0 * qk, xp=xp)                                        # (..., Lq, Lk) |q - k|^2
    return xp.expm1(-dd) ** 2 / (2.0 * m)


@fill_doc(sections=MSE_SECTIONS)
def softmax_trig_mse(q, k, m):
    r"""MSE of :func:`softmax_trig_features`' softmax-kernel estimate (Horn et al. Sec. 2.1's map).

    ``exp(|q|^2 + |k|^2) (1 - exp(-|q - k|^2))^2 / (2m)``: the estimate is ``h(q) h(k)`` times the RKS
    estimate (:func:`trig_mse`), ``h(x) = exp(|x|^2/2)`` deterministic, so the MSE scales by
    ``h(q)^2 h(k)^2`` (iid ``omega_i ~ N(0, I_d)``). Grows without bound with the norms (the same variance
    at fixed ``q - k``), which is why FAVOR+ uses positive features instead. Zero at ``q = k``; inf where
    ``|q|^2 + |k|^2`` overflows ``exp``.

    {sections}

    See Also
    --------
    trig_mse : the unscaled (Gaussian-kernel) estimator's MSE.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import softmax_trig_mse
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> softmax_trig_mse(q, k, 64)
    array([[0.00248264, 0.00542068],
           [0.00649165, 0.04315931]])
    """
    xp, qk, qq, kk, m = mse_terms(q, k, m)
    dd = nonneg(qq + kk - 2.0 * qk, xp=xp)                                        # (..., Lq, Lk) |q - k|^2
    return xp.exp(qq + kk) * xp.expm1(-dd) ** 2 / (2.0 * m)


# ----------------------------------------------------------------------------------------------------------
# RKS / trig features


def _check_dphi(dphi, phi):
    """A trig map's backward boundary: `dphi` has the features' shape and namespace, finite."""
    xp = namespace(dphi, phi, names=("dphi", "cache.phi"))
    check_finite("dphi", dphi, xp=xp)
    check_shape("dphi", dphi, "..., L, m2", check_shape("phi", phi, "..., L, m2"))
    return xp


# phi = [cos u, sin u] / sqrt(m),  u = x omega^T                                              (Eq. (3))
# du = (cos u dphi_sin - sin u dphi_cos) / sqrt(m);  dx = du omega;  domega = du^T x
def trig_features_fwd_core(x, omega, *, xp):
    """Unchecked core of :func:`trig_features_fwd`."""
    m = omega.shape[0]
    u = project(x, omega, xp=xp)                                                  # (..., L, m)
    c = 1.0 / math.sqrt(m)
    phi = xp.concat([xp.cos(u) * c, xp.sin(u) * c], axis=-1)                      # (..., L, 2m) Eq. (3)
    return phi, TrigFeaturesCache(x, omega, phi)


def trig_features_bwd_core(dphi, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`trig_features_bwd`."""
    c = cache
    m = c.omega.shape[0]
    cos_s, sin_s = c.phi[..., :m], c.phi[..., m:]                     # (..., L, m) cos u/sqrt(m), sin u/...
    du = cos_s * dphi[..., m:] - sin_s * dphi[..., :m]                            # (..., L, m)
    dx, domega = project_bwd(du, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    return TrigFeaturesGrads(x=dx, omega=domega)


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, raises=X_OMEGA_RAISES)
def trig_features(x, omega):
    r"""RKS features ``[cos(x omega^T), sin(x omega^T)] / sqrt(m)`` (Chowdhury et al. Eq. (3)).

    With projections ``omega_i ~ N(0, I_d)`` (iid, or Haar-orthogonal with chi norms), i = 1..m,
    ``phi(q) . phi(k) = (1/m) sum_i cos(omega_i . (q - k))``, whose mean is the characteristic function of
    ``N(0, I)`` at ``q - k``: the Gaussian kernel :func:`gaussian_kernel` ``exp(-|q - k|^2/2)`` (Bochner,
    Chowdhury et al. Eq. (2)); *not* the softmax kernel (use :func:`softmax_trig_features` for that). The
    estimate can be zero or negative; its MSE is derived in :func:`trig_mse`. Backward: ``du = (-sin u
    dphi_cos + cos u dphi_sin) / sqrt(m)``, then ``dx = du omega`` and ``domega = du^T x``.

    {x_omega_parameters}

    Returns
    -------
    phi : (..., L, 2m) array
        Cosines first, then sines; same namespace, dtype and device as `x`.

    {raises}

    See Also
    --------
    trig_features_fwd, trig_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import gaussian_kernel, trig_features as phi
    >>> from refattn.random import draw_gaussian
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])      # (L, d)
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)                          # (m, d)
    >>> bool(np.allclose(phi(q, omega) @ phi(k, omega).T, gaussian_kernel(q, k), atol=0.02))
    True
    """
    return trig_features_fwd(x, omega)[0]


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS)
def trig_features_fwd(x, omega):
    """:func:`trig_features` and the cache for its backward (equations, shapes and errors there).

    {x_omega_parameters}

    Returns
    -------
    (phi, cache) : ((..., L, 2m) array, TrigFeaturesCache)
    """
    xp, _ = check_x_omega(x, omega)
    return trig_features_fwd_core(x, omega, xp=xp)


@fill_doc(dphi=_DPHI_DOC, omega_grad=OMEGA_GRAD_PARAMETER, raises=BWD_RAISES)
def trig_features_bwd(dphi, cache: TrigFeaturesCache, *, omega_grad=True) -> TrigFeaturesGrads:
    """Gradients of :func:`trig_features` (equations there) from the features' cotangent.

    {dphi}
    cache : TrigFeaturesCache
    {omega_grad}

    Returns
    -------
    TrigFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)`` (or ``None``).

    {raises}
    """
    xp = _check_dphi(dphi, cache.phi)
    return trig_features_bwd_core(dphi, cache, omega_grad=omega_grad, xp=xp)


# ----------------------------------------------------------------------------------------------------------
# softmax-trig (Horn et al. Sec. 2.1)


# phi = h t,  h = exp(|x|^2/2),  t = trig_features(x, omega)                          (Horn et al. Sec. 2.1)
# dt = h dphi (through the RKS backward);  dx += x sum_m(dphi * phi)   (dh/dx = h x)
def softmax_trig_features_fwd_core(x, omega, *, xp):
    """Unchecked core of :func:`softmax_trig_features_fwd`."""
    t, tcache = trig_features_fwd_core(x, omega, xp=xp)                           # (..., L, 2m)
    log_h = sq_norm_half(x, xp=xp)                                                # (..., L)
    phi = xp.expand_dims(xp.exp(log_h), axis=-1) * t                              # (..., L, 2m)
    return phi, SoftmaxTrigFeaturesCache(tcache, log_h, phi)


def softmax_trig_features_bwd_core(dphi, cache, *, xp):
    """Unchecked core of :func:`softmax_trig_features_bwd`."""
    c = cache
    h = xp.expand_dims(xp.exp(c.log_h), axis=-1)                                  # (..., L, 1)
    g = trig_features_bwd_core(h * dphi, c.trig, xp=xp)
    dlog_h = xp.sum(dphi * c.phi, axis=-1, keepdims=True)                         # (..., L, 1)
    return TrigFeaturesGrads(x=g.x + dlog_h * c.trig.x, omega=g.omega)


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, raises=X_OMEGA_RAISES)
def softmax_trig_features(x, omega):
    r"""Softmax-trig features ``exp(|x|^2/2) [cos u, sin u] / sqrt(m)``, u = x omega^T (Horn et al. Sec. 2.1).

    FAVOR with ``h(x) = exp(|x|^2/2)``, ``f_1 = sin``, ``f_2 = cos``. Since ``exp(q . k) = exp(|q|^2/2)
    exp(|k|^2/2) exp(-|q - k|^2/2)``, ``exp(|x|^2/2) trig_features(x)`` is unbiased for :func:`softmax_kernel`
    with ``omega ~ N(0, I_d)`` (MSE: :func:`softmax_trig_mse`). Raw: ``h`` overflows float32 for ``|x| >
    ~13.3``, float64 for ``|x| > ~37.7``; attention uses the ``_stable`` form.

    Backward: with ``phi = h t``, ``dt = h dphi`` goes through :func:`trig_features_bwd`, plus
    ``x sum_m(dphi * phi)`` from ``dh/dx = h x``; an overflowing ``h dphi`` raises.

    {x_omega_parameters}

    Returns
    -------
    phi : (..., L, 2m) array
        Cosine half first; same namespace, dtype and device as `x`.

    {raises}

    See Also
    --------
    softmax_trig_features_fwd, softmax_trig_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import softmax_kernel, softmax_trig_features as phi
    >>> from refattn.random import draw_gaussian
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)
    >>> bool(np.allclose(phi(q, omega) @ phi(k, omega).T, softmax_kernel(q, k), atol=0.05))
    True
    """
    return softmax_trig_features_fwd(x, omega)[0]


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS)
def softmax_trig_features_fwd(x, omega):
    """:func:`softmax_trig_features` and the cache for its backward (equations, shapes and errors there).

    {x_omega_parameters}

    Returns
    -------
    (phi, cache) : ((..., L, 2m) array, SoftmaxTrigFeaturesCache)
    """
    xp, _ = check_x_omega(x, omega)
    return softmax_trig_features_fwd_core(x, omega, xp=xp)


@fill_doc(dphi=_DPHI_DOC, raises=BWD_RAISES)
def softmax_trig_features_bwd(dphi, cache: SoftmaxTrigFeaturesCache) -> TrigFeaturesGrads:
    """Gradients of :func:`softmax_trig_features` (equations there) from the features' cotangent.

    {dphi}
    cache : SoftmaxTrigFeaturesCache

    Returns
    -------
    TrigFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)``.

    {raises}
    """
    xp = _check_dphi(dphi, cache.phi)
    # dt = exp(|x|^2/2) dphi can overflow where dphi does not: raise rather than return an infinite gradient
    check_finite("dphi * exp(|x|^2/2)", xp.expand_dims(xp.exp(cache.log_h), axis=-1) * dphi, xp=xp)
    return softmax_trig_features_bwd_core(dphi, cache, xp=xp)


# phi = trig_features(x, omega),  log_scale = |x|^2 / 2                               (Horn et al. Sec. 2.1)
# the RKS backward for dphi;  dx += dlog_scale x   (d(|x|^2/2)/dx = x)
def softmax_trig_features_stable_fwd_core(x, omega, *, xp):
    """Unchecked core of :func:`softmax_trig_features_stable_fwd`."""
    t, tcache = trig_features_fwd_core(x, omega, xp=xp)                           # (..., L, 2m)
    return (t, sq_norm_half(x, xp=xp)), tcache                                    # log_scale (..., L)


def softmax_trig_features_stable_bwd_core(dout, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`softmax_trig_features_stable_bwd` (``dout = (dphi, dlog_scale or None)``)."""
    dphi, dls = dout
    g = trig_features_bwd_core(dphi, cache, omega_grad=omega_grad, xp=xp)
    if dls is None:
        return g
    return TrigFeaturesGrads(x=g.x + xp.expand_dims(dls, axis=-1) * cache.x, omega=g.omega)


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, raises=X_OMEGA_RAISES)
def softmax_trig_features_stable(x, omega):
    r"""Softmax-trig features as ``(trig_features(x, omega), |x|^2/2)``: the row factor as a log-scale.

    ``phi * exp(log_scale)[..., None] == softmax_trig_features(x, omega)`` (Horn et al. Sec. 2.1) without
    the overflow of ``exp(|x|^2/2)`` (a query's log-scale scales a whole row of numerator and denominator
    alike). Backward: ``phi`` goes through :func:`trig_features_bwd`; ``log_scale`` adds ``dlog_scale x``.

    {x_omega_parameters}

    Returns
    -------
    phi : (..., L, 2m) array
        ``trig_features(x, omega)``; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        ``|x|^2 / 2``. Keys: pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it.

    {raises}

    See Also
    --------
    softmax_trig_features_stable_fwd, softmax_trig_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import softmax_trig_features, softmax_trig_features_stable
    >>> x, omega = np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2)
    >>> phi, log_scale = softmax_trig_features_stable(x, omega)
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], softmax_trig_features(x, omega)))
    True
    """
    return softmax_trig_features_stable_fwd(x, omega)[0]


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS)
def softmax_trig_features_stable_fwd(x, omega):
    """:func:`softmax_trig_features_stable` and the cache for its backward (maths and errors there).

    {x_omega_parameters}

    Returns
    -------
    ((phi, log_scale), cache) : (((..., L, 2m), (..., L)) arrays, TrigFeaturesCache)
    """
    xp, _ = check_x_omega(x, omega)
    return softmax_trig_features_stable_fwd_core(x, omega, xp=xp)


@fill_doc(omega_grad=OMEGA_GRAD_PARAMETER, raises=BWD_RAISES)
def softmax_trig_features_stable_bwd(dout, cache: TrigFeaturesCache, *,
                                     omega_grad=True) -> TrigFeaturesGrads:
    """Gradients of :func:`softmax_trig_features_stable` (equations there) from ``(dphi, dlog_scale)``.

    Parameters
    ----------
    dout : tuple of ((..., L, 2m) array, (..., L) array or None)
        ``(dphi, dlog_scale)``, ``dlog_scale`` ``None`` for queries; cache's namespace and dtype, finite.
    cache : TrigFeaturesCache
    {omega_grad}

    Returns
    -------
    TrigFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)`` (or ``None``).

    {raises}
    """
    dphi, dls = dout
    xp = _check_dphi(dphi, cache.phi)
    if dls is not None:
        xp = namespace(dls, cache.x, names=("dlog_scale", "cache.x"))
        check_shape("dlog_scale", dls, "..., L", check_shape("x", cache.x, "..., L, d"))
        check_finite("dlog_scale", dls, xp=xp)
    return softmax_trig_features_stable_bwd_core(dout, cache, omega_grad=omega_grad, xp=xp)
