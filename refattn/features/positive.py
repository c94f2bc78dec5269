r"""Positive random features (PRF, FAVOR+), their row stabiliser, the KL Eq. (9) map and hyperbolic features.

**PRF for the softmax kernel** (Choromanski et al. Lemma 1; the identity before Chowdhury et al. Eq. (9)).
For ``omega ~ N(0, I_d)``, ``E[exp(omega . s)] = exp(|s|^2/2)``; with ``s = q + k``,

    E[exp(omega.q - |q|^2/2) exp(omega.k - |k|^2/2)] = exp(|q + k|^2/2 - |q|^2/2 - |k|^2/2) = exp(q . k),

so ``positive_features(x, omega) = exp(x omega^T - |x|^2/2) / sqrt(m)`` estimates the **softmax kernel**
:func:`~refattn.features.trig.softmax_kernel` without bias, and every estimate is positive.

**KL Eq. (9)** (Chowdhury et al.): ``PRF(x) = exp(-|x|^2) [exp(omega_1 . x), ...] / sqrt(M)``, offset ``|x|^2``
instead of ``|x|^2/2``. With ``omega ~ N(0, I)`` the same computation gives
``exp(|q + k|^2/2 - |q|^2 - |k|^2) = exp(-|q - k|^2/2)``: exactly (constant 1, unit bandwidth) the **Gaussian
kernel** :func:`~refattn.features.trig.gaussian_kernel`, not the softmax kernel (design.md trap 1):
:func:`gaussian_positive_features`. The two differ by ``exp(-|q|^2/2 - |k|^2/2)``; the query factor cancels in
attention's row normalisation, the key factor does not.

**Hyperbolic** (antithetic ``+-omega``): ``[exp(u), exp(-u)] exp(-|x|^2/2) / sqrt(2m)``, ``u = x omega^T``;
``phi(q) . phi(k) = (1/m) sum_i cosh(omega_i . (q + k)) exp(-|q|^2/2 - |k|^2/2)``, again unbiased for
``exp(q . k)``, with a smaller variance. It is :func:`positive_features` on the stacked projections
``[omega; -omega]`` (width 2m), and is written that way.

**Variances** (iid Gaussian omega, m projections; derived and Monte-Carlo-checked in
``tests/features/test_positive.py``), with ``s = q + k``:

    Var positive           = exp(2 q.k) (exp(|s|^2) - 1) / m
    Var hyperbolic         = exp(-|q|^2 - |k|^2) (exp(|s|^2) - 1)^2 / (2 m)
    Var gaussian_positive  = exp(-|q - k|^2) (exp(|s|^2) - 1) / m.

**Stabiliser** (design.md trap 3). ``exp(x omega^T - |x|^2/2)`` overflows or underflows for large inputs (float32:
exponents beyond about +-88). :func:`positive_features_stable` returns ``(phi, log_scale)`` with

    phi       = exp(u - max_row u)                  in (0, 1], each row's maximum is exactly 1,
    log_scale = max_row u - |x|^2/2 - log(m)/2,     u = x omega^T,

so that ``phi * exp(log_scale)[..., None] == positive_features(x, omega)``: the ``1/sqrt(m)`` and the ``|x|^2/2``
offset are folded into the log-scale (they are constant along a row), which leaves one subtraction and one
``exp`` per feature entry. Keys pass ``log_scale`` to ``linear_attention(..., k_log_scale=...)``; queries drop
it (a per-row factor cancels between numerator and normaliser). This fused map is a dispatchable hot primitive
(``refattn._dispatch.kernel_for("positive_features_stable")``): a registered kernel has the signature and the
outputs of :func:`_positive_features_stable_reference`.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` input width, ``m`` projections (feature width m; 2m for the
hyperbolic map).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import _dispatch
from .._xp import check_shape, device_of, namespace
from ._projection import check_x_omega, project, project_bwd, sq_norm_half

__all__ = [
    "positive_features", "positive_features_fwd", "positive_features_bwd",
    "positive_features_stable", "positive_features_stable_fwd", "positive_features_stable_bwd",
    "gaussian_positive_features", "gaussian_positive_features_fwd", "gaussian_positive_features_bwd",
    "hyperbolic_features", "hyperbolic_features_fwd", "hyperbolic_features_bwd",
    "hyperbolic_features_stable", "hyperbolic_features_stable_fwd", "hyperbolic_features_stable_bwd",
    "PositiveFeaturesCache", "PositiveFeaturesGrads", "HyperbolicFeaturesCache",
]

Array = Any


class PositiveFeaturesCache(NamedTuple):
    x: Array       # (..., L, d)
    omega: Array   # (m, d)
    phi: Array     # (..., L, m) the returned features (stable maps: exp(u - max_row u))
    offset: float  # c in the exponent u - c |x|^2: 1/2 (softmax), 1 (KL Eq. 9); 1/2 for the stable map


class PositiveFeaturesGrads(NamedTuple):
    x: Array       # (..., L, d)
    omega: Array   # (m, d)


class HyperbolicFeaturesCache(NamedTuple):
    inner: PositiveFeaturesCache  # cache of the positive map on [omega; -omega]


# ----------------------------------------------------------------------------------------------------------
# raw positive maps: exp(x omega^T - c |x|^2) / sqrt(m), c = 1/2 (softmax kernel) or 1 (KL Eq. 9, Gaussian)


def _raw_fwd(x, omega, offset):
    xp, m = check_x_omega(x, omega)
    u = project(x, omega, xp=xp)                                                  # (..., L, m) x omega^T
    shift = 2.0 * offset * sq_norm_half(x, xp=xp) + 0.5 * math.log(m)             # (..., L) c|x|^2 + log sqrt(m)
    phi = xp.exp(u - xp.expand_dims(shift, axis=-1))                              # (..., L, m)
    return phi, PositiveFeaturesCache(x, omega, phi, offset)


def _raw_bwd(dphi, cache, omega_grad=True):
    c = cache
    xp = namespace(dphi, c.phi, names=("dphi", "cache.phi"))
    check_shape("dphi", dphi, "..., L, m", check_shape("phi", c.phi, "..., L, m"))
    du = dphi * c.phi                                                             # (..., L, m) d exponent
    dx, domega = project_bwd(du, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    dx = dx - (2.0 * c.offset) * xp.sum(du, axis=-1, keepdims=True) * c.x         # d(-c|x|^2) = -2c x
    return PositiveFeaturesGrads(x=dx, omega=domega)


def positive_features_fwd(x, omega):
    r"""Raw positive random features ``exp(x omega^T - |x|^2/2) / sqrt(m)`` (FAVOR+), and the cache.

    Estimates the softmax kernel: ``E[phi(q) . phi(k)] = softmax_kernel(q, k) = exp(q . k)`` (Choromanski et al.
    Lemma 1; Chowdhury et al., the identity before Eq. (9)). Unstabilised: entries overflow (inf) or underflow
    (0) once ``|x omega_i - |x|^2/2|`` exceeds ~88 (float32) / ~709 (float64); attention should use
    :func:`positive_features_stable`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention).
    omega : (m, d) array
        Projections, same namespace and dtype.

    Returns
    -------
    phi : (..., L, m) array
    cache : PositiveFeaturesCache
    """
    return _raw_fwd(x, omega, 0.5)


def positive_features_bwd(dphi, cache: PositiveFeaturesCache, *, omega_grad=True) -> PositiveFeaturesGrads:
    r"""Gradients of :func:`positive_features`: ``du = dphi * phi``; ``dx = du omega - sum_m(du) x``;
    ``domega = du^T x`` (``None``, not computed, with ``omega_grad=False``)."""
    return _raw_bwd(dphi, cache, omega_grad)


def positive_features(x, omega):
    r"""``exp(x omega^T - |x|^2/2) / sqrt(m)``, ``(..., L, d)`` -> ``(..., L, m)``: unbiased for
    :func:`~refattn.features.trig.softmax_kernel` (Choromanski et al. Lemma 1). Overflows for large inputs."""
    return positive_features_fwd(x, omega)[0]


def gaussian_positive_features_fwd(x, omega):
    r"""Chowdhury et al. Eq. (9): ``exp(x omega^T - |x|^2) / sqrt(m)``, and the cache.

    With ``omega ~ N(0, I_d)`` this estimates the **Gaussian** kernel
    ``gaussian_kernel(q, k) = exp(-|q - k|^2/2)`` exactly in expectation (constant 1:
    ``exp(|q+k|^2/2 - |q|^2 - |k|^2) = exp(-|q-k|^2/2)``), not ``exp(q . k)`` as the sentence before the
    equation might suggest. Raw (unstabilised), like :func:`positive_features`.

    Parameters
    ----------
    x : (..., L, d) array
    omega : (m, d) array

    Returns
    -------
    phi : (..., L, m) array
    cache : PositiveFeaturesCache
    """
    return _raw_fwd(x, omega, 1.0)


def gaussian_positive_features_bwd(dphi, cache: PositiveFeaturesCache) -> PositiveFeaturesGrads:
    r"""Gradients of :func:`gaussian_positive_features` (``d(-|x|^2)/dx = -2x``)."""
    return _raw_bwd(dphi, cache)


def gaussian_positive_features(x, omega):
    r"""Chowdhury et al. Eq. (9), ``exp(x omega^T - |x|^2) / sqrt(m)``: unbiased for
    :func:`~refattn.features.trig.gaussian_kernel` ``exp(-|q-k|^2/2)`` with ``omega ~ N(0, I)``."""
    return gaussian_positive_features_fwd(x, omega)[0]


# ----------------------------------------------------------------------------------------------------------
# stabilised positive map (the fused hot primitive)


def _positive_features_stable_reference(x, omega):
    r"""The fused positive map with its row stabiliser (reference for the ``"positive_features_stable"``
    dispatch point; inputs already validated).

    ``x: (..., L, d)``, ``omega: (m, d)`` -> ``phi: (..., L, m) = exp(u - max_row u)``,
    ``log_scale: (..., L) = max_row u - |x|^2/2 - log(m)/2`` with ``u = x omega^T``. Elementwise work after the
    GEMM: one max pass, one in-place subtraction, one exp.
    """
    xp = namespace(x, omega)
    m = omega.shape[0]
    u = project(x, omega, xp=xp)                                                  # (..., L, m) fresh array
    M = xp.max(u, axis=-1, keepdims=True)                                         # (..., L, 1) row max
    u -= M                                                                        # in place: (..., L, m) <= 0
    phi = xp.exp(u)                                                               # (..., L, m) in (0, 1]
    log_scale = M[..., 0] - sq_norm_half(x, xp=xp) - 0.5 * math.log(m)           # (..., L)
    return phi, log_scale


def positive_features_stable_fwd(x, omega):
    r"""Row-stabilised positive random features ``(phi, log_scale)`` (FAVOR+), and the cache.

    ``phi * exp(log_scale)[..., None] == positive_features(x, omega)``, the unbiased estimator of
    ``softmax_kernel(q, k) = exp(q . k)`` (Choromanski et al. Lemma 1), without ever forming the raw values:

        phi = exp(u - max_row u) in (0, 1],    log_scale = max_row u - |x|^2/2 - log(m)/2,    u = x omega^T.

    (The ``1/sqrt(m)`` lives in ``log_scale``.) When a kernel is registered for the dispatch point
    ``"positive_features_stable"`` (``accel.use(...)``), it computes ``(phi, log_scale)`` instead of
    :func:`_positive_features_stable_reference`, with the same signature and outputs.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled).
    omega : (m, d) array
        Projections, same namespace and dtype.

    Returns
    -------
    (phi, log_scale) : ((..., L, m), (..., L)) arrays
        For keys pass ``log_scale`` as ``linear_attention(..., k_log_scale=...)``; for queries drop it.
    cache : PositiveFeaturesCache
    """
    xp, m = check_x_omega(x, omega)
    impl = _dispatch.kernel_for("positive_features_stable") or _positive_features_stable_reference
    phi, log_scale = impl(x, omega)
    return (phi, log_scale), PositiveFeaturesCache(x, omega, phi, 0.5)


def positive_features_stable_bwd(dout, cache: PositiveFeaturesCache, *,
                                 omega_grad=True) -> PositiveFeaturesGrads:
    r"""Gradients of :func:`positive_features_stable` from the cotangent pair ``(dphi, dlog_scale)``.

    ``dlog_scale`` may be ``None`` (queries: their log-scale is dropped because it cancels). With
    ``g = dphi * phi``, ``a`` the (first) argmax of each row and ``e_a`` its one-hot vector, the exponent's
    cotangent is ``du = g + e_a (dlog_scale - sum_m g)`` (the row maximum moves phi and log_scale in opposite
    directions), then ``dx = du omega - dlog_scale x``, ``domega = du^T x``. The argmax is recomputed from
    ``phi`` (its entry is exactly 1). ``omega_grad=False``: ``domega`` is not computed (``None``).
    """
    dphi, dls = dout
    c = cache
    xp = namespace(dphi, c.phi, dls, names=("dphi", "cache.phi", "dlog_scale"))
    sizes = check_shape("phi", c.phi, "..., L, m")
    check_shape("dphi", dphi, "..., L, m", sizes)
    if dls is not None:
        check_shape("dlog_scale", dls, "..., L", sizes)
    m = c.phi.shape[-1]
    g = dphi * c.phi                                                              # (..., L, m)
    a = xp.argmax(c.phi, axis=-1, keepdims=True)                                  # (..., L, 1) row argmax
    onehot = xp.astype(xp.arange(m, device=device_of(c.phi)) == a, c.phi.dtype)   # (..., L, m)
    corr = -xp.sum(g, axis=-1, keepdims=True)                                     # (..., L, 1)
    if dls is not None:
        corr = corr + xp.expand_dims(dls, axis=-1)
    du = g + onehot * corr                                                        # (..., L, m)
    dx, domega = project_bwd(du, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    if dls is not None:
        dx = dx - xp.expand_dims(dls, axis=-1) * c.x                              # d(-|x|^2/2) = -x
    return PositiveFeaturesGrads(x=dx, omega=domega)


def positive_features_stable(x, omega):
    r"""``(phi, log_scale)``: :func:`positive_features` as ``phi * exp(log_scale)``, never overflowing.
    ``x: (..., L, d)``, ``omega: (m, d)`` -> ``((..., L, m), (..., L))``."""
    return positive_features_stable_fwd(x, omega)[0]


# ----------------------------------------------------------------------------------------------------------
# hyperbolic (antithetic) maps


def _antithetic(omega, *, xp):
    return xp.concat([omega, -omega], axis=0)                                     # (2m, d) [omega; -omega]


def _antithetic_grad(domega2, m):
    if domega2 is None:                                                           # not requested
        return None
    return domega2[:m, :] - domega2[m:, :]                                        # (m, d)


def hyperbolic_features_fwd(x, omega):
    r"""Hyperbolic (antithetic) positive features ``[exp(u), exp(-u)] exp(-|x|^2/2) / sqrt(2m)``, ``u = x omega^T``.

    Estimates ``softmax_kernel(q, k) = exp(q . k)``: ``phi(q) . phi(k) = (1/m) sum_i cosh(omega_i . (q + k))
    exp(-|q|^2/2 - |k|^2/2)`` (Choromanski et al., the hyperbolic variant of Lemma 1). Raw (unstabilised).

    Parameters
    ----------
    x : (..., L, d) array
    omega : (m, d) array

    Returns
    -------
    phi : (..., L, 2m) array
    cache : HyperbolicFeaturesCache
    """
    xp, _ = check_x_omega(x, omega)
    phi, cache = positive_features_fwd(x, _antithetic(omega, xp=xp))              # (..., L, 2m)
    return phi, HyperbolicFeaturesCache(cache)


def hyperbolic_features_bwd(dphi, cache: HyperbolicFeaturesCache) -> PositiveFeaturesGrads:
    r"""Gradients of :func:`hyperbolic_features` (``domega = domega_+ - domega_-``)."""
    g = positive_features_bwd(dphi, cache.inner)
    return PositiveFeaturesGrads(x=g.x, omega=_antithetic_grad(g.omega, g.omega.shape[0] // 2))


def hyperbolic_features(x, omega):
    r"""Hyperbolic positive features, ``(..., L, d)`` -> ``(..., L, 2m)``, unbiased for ``exp(q . k)``."""
    return hyperbolic_features_fwd(x, omega)[0]


def hyperbolic_features_stable_fwd(x, omega):
    r"""Row-stabilised hyperbolic features ``(phi, log_scale)``: :func:`positive_features_stable` on
    ``[omega; -omega]`` (width 2m; ``phi * exp(log_scale)[..., None] == hyperbolic_features(x, omega)``)."""
    xp, _ = check_x_omega(x, omega)
    out, cache = positive_features_stable_fwd(x, _antithetic(omega, xp=xp))
    return out, HyperbolicFeaturesCache(cache)


def hyperbolic_features_stable_bwd(dout, cache: HyperbolicFeaturesCache, *,
                                   omega_grad=True) -> PositiveFeaturesGrads:
    r"""Gradients of :func:`hyperbolic_features_stable` from ``(dphi, dlog_scale)`` (``dlog_scale`` may be
    None; ``omega_grad=False``: ``domega`` not computed, ``None``)."""
    g = positive_features_stable_bwd(dout, cache.inner, omega_grad=omega_grad)
    return PositiveFeaturesGrads(x=g.x, omega=_antithetic_grad(g.omega, cache.inner.omega.shape[0] // 2))


def hyperbolic_features_stable(x, omega):
    r"""``(phi, log_scale)`` of the hyperbolic map, ``((..., L, 2m), (..., L))``."""
    return hyperbolic_features_stable_fwd(x, omega)[0]
