r"""Trigonometric random features (random Fourier features / Random Kitchen Sinks) and the kernels they
estimate.

**RKS** (Rahimi & Recht; Chowdhury et al. Eq. (3)). With projections ``omega_i ~ N(0, I_d)``, i = 1..m,

    phi(x) = [cos(x . omega_1), ..., cos(x . omega_m), sin(x . omega_1), ..., sin(x . omega_m)] / sqrt(m)

has ``phi(q) . phi(k) = (1/m) sum_i cos(omega_i . (q - k))``, whose mean is the characteristic function of
``N(0, I)`` at ``q - k``: the **Gaussian kernel** ``exp(-|q - k|^2 / 2)`` (:func:`gaussian_kernel`; Bochner,
Chowdhury et al. Eq. (2)). It is *not* the softmax kernel (design.md trap 1).

**Softmax-trig** (Horn et al. Sec. 2.1: FAVOR with ``h(x) = exp(|x|^2/2)``, ``f_1 = sin``, ``f_2 = cos``).
Since ``exp(q . k) = exp(|q|^2/2) exp(|k|^2/2) exp(-|q - k|^2/2)``, the map ``exp(|x|^2/2) phi(x)`` estimates
the
**softmax kernel** ``exp(q . k)`` (:func:`softmax_kernel`) without bias. Its row factor ``exp(|x|^2/2)``
overflows float32 at |x| ~ 13.3; :func:`softmax_trig_features_stable` returns it as a log-scale instead
(``(trig_features(x), |x|^2/2)``), to be handed to ``linear_attention(..., k_log_scale=...)`` for keys and
dropped for queries (it scales a whole row of numerator and denominator alike).

**Variance** (iid Gaussian omega, derived in ``tests/features/test_trig.py`` and checked there by Monte
Carlo):
each ``cos(omega . delta)`` with ``delta = q - k`` has mean ``e^{-|delta|^2/2}`` and
``E cos^2 = (1 + e^{-2|delta|^2}) / 2``, so

    MSE_RKS(q, k)     = (1 - exp(-|q - k|^2))^2 / (2 m)
    MSE_softmax-trig  = exp(|q|^2 + |k|^2) (1 - exp(-|q - k|^2))^2 / (2 m).

The estimate can be zero or negative, so the normaliser of trig linear attention can be too (design.md trap
4):
``linear_attention`` reports it (``on_nonpositive``); nothing here hides it.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` input width, ``m`` projections (feature width 2m),
``Lq``/``Lk`` query/key positions of a kernel matrix.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import limits
from .._xp import check_finite, check_shape, namespace
from ._projection import check_x_omega, project, project_bwd, sq_norm_half

__all__ = [
    "trig_features", "trig_features_fwd", "trig_features_bwd", "TrigFeaturesCache", "TrigFeaturesGrads",
    "softmax_trig_features", "softmax_trig_features_fwd", "softmax_trig_features_bwd",
    "softmax_trig_features_stable", "softmax_trig_features_stable_fwd", "softmax_trig_features_stable_bwd",
    "SoftmaxTrigFeaturesCache",
    "gaussian_kernel", "softmax_kernel",
]

Array = Any


class TrigFeaturesCache(NamedTuple):
    x: Array      # (..., L, d)
    omega: Array  # (m, d)
    # (..., L, 2m)  [cos u, sin u] / sqrt(m), u = x omega^T (the backward reads cos and sin from it)
    phi: Array


class TrigFeaturesGrads(NamedTuple):
    x: Array      # (..., L, d)
    omega: Array  # (m, d)


class SoftmaxTrigFeaturesCache(NamedTuple):
    trig: TrigFeaturesCache  # the RKS part
    log_h: Array             # (..., L)  |x|^2 / 2
    phi: Array               # (..., L, 2m) the returned features (exp(log_h) * trig; the raw map only)


# ----------------------------------------------------------------------------------------------------------
# kernels (closed forms)


def _check_qk(q, k, extra=1):
    """The closed-form kernels' boundary: q: (..., Lq, d), k: (..., Lk, d), same batch, finite; the
    (..., Lq, Lk) result (times `extra`) within ``refattn.limits``. Empty Lq, Lk or batch give an empty
    result; d = 0 gives the kernel at q = k = 0 (all ones)."""
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


def softmax_kernel(q, k):
    r"""The softmax (exponential) kernel ``exp(q . k)``: ``q: (..., Lq, d)``, ``k: (..., Lk, d)`` -> ``(...,
    Lq, Lk)``.

    Unscaled: softmax attention's ``exp(q . k / sqrt(d))`` is this kernel on ``d^{-1/4} q`` and ``d^{-1/4}
    k``.
    Estimated without bias by :func:`softmax_trig_features` (Horn et al. Sec. 2.1) and by the positive and
    hyperbolic maps of :mod:`refattn.features.positive` (Choromanski et al. Lemma 1; the identity before
    Chowdhury et al. Eq. (9)).
    """
    xp = _check_qk(q, k)
    return xp.exp(q @ xp.matrix_transpose(k))                                     # (..., Lq, Lk)


def gaussian_kernel(q, k):
    r"""The Gaussian (RBF, unit bandwidth) kernel ``exp(-|q - k|^2 / 2)``, ``(..., Lq, Lk)``.

    Computed as ``exp(q . k - |q|^2/2 - |k|^2/2)`` (no (Lq, Lk, d) difference array). Estimated without bias
    by
    :func:`trig_features` (RKS, Chowdhury et al. Eq. (3)) and by
    :func:`refattn.features.positive.gaussian_positive_features` (Chowdhury et al. Eq. (9) with
    ``omega ~ N(0, I)``).
    """
    xp = _check_qk(q, k)
    e = (q @ xp.matrix_transpose(k)
         - xp.expand_dims(sq_norm_half(q, xp=xp), axis=-1)
         - xp.expand_dims(sq_norm_half(k, xp=xp), axis=-2))                       # (..., Lq, Lk) = -|q-k|^2/2
    return xp.exp(xp.minimum(e, xp.zeros_like(e)))                                # rounding can make e > 0


# ----------------------------------------------------------------------------------------------------------
# RKS / trig features


def trig_features_fwd(x, omega):
    r"""RKS features ``[cos(x omega^T), sin(x omega^T)] / sqrt(m)`` (Chowdhury et al. Eq. (3)), and the cache.

    Estimates the Gaussian kernel: ``E[phi(q) . phi(k)] = gaussian_kernel(q, k) = exp(-|q - k|^2/2)`` for
    ``omega`` rows ``~ N(0, I_d)`` (iid or Haar-orthogonal with chi norms).

    Parameters
    ----------
    x : (..., L, d) array
        Inputs, real floating.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), same namespace and dtype as `x`.

    Returns
    -------
    phi : (..., L, 2m) array
        Cosines first, then sines.
    cache : TrigFeaturesCache
    """
    xp, m = check_x_omega(x, omega)
    u = project(x, omega, xp=xp)                                                  # (..., L, m)
    c = 1.0 / math.sqrt(m)
    phi = xp.concat([xp.cos(u) * c, xp.sin(u) * c], axis=-1)                      # (..., L, 2m) Eq. (3)
    return phi, TrigFeaturesCache(x, omega, phi)


def trig_features_bwd(dphi, cache: TrigFeaturesCache, *, omega_grad=True) -> TrigFeaturesGrads:
    r"""Gradients of :func:`trig_features`: ``du = (-sin u dphi_cos + cos u dphi_sin) / sqrt(m)``, then
    ``dx = du omega``, ``domega = du^T x`` (``None``, not computed, with ``omega_grad=False``).

    Parameters
    ----------
    dphi : (..., L, 2m) array
    cache : TrigFeaturesCache
    """
    c = cache
    xp = namespace(dphi, c.phi, names=("dphi", "cache.phi"))
    check_finite("dphi", dphi, xp=xp)
    check_shape("dphi", dphi, "..., L, m2", check_shape("phi", c.phi, "..., L, m2"))
    m = c.omega.shape[0]
    cos_s, sin_s = c.phi[..., :m], c.phi[..., m:]  # (..., L, m) cos u/sqrt(m), ...
    du = cos_s * dphi[..., m:] - sin_s * dphi[..., :m]                            # (..., L, m)
    dx, domega = project_bwd(du, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    return TrigFeaturesGrads(x=dx, omega=domega)


def trig_features(x, omega):
    r"""RKS features ``[cos(x omega^T), sin(x omega^T)] / sqrt(m)``, ``(..., L, d)`` -> ``(..., L, 2m)``.

    Estimates :func:`gaussian_kernel` (Chowdhury et al. Eq. (3)); see :func:`trig_features_fwd`.
    """
    return trig_features_fwd(x, omega)[0]


# ----------------------------------------------------------------------------------------------------------
# softmax-trig (Horn et al. Sec. 2.1)


def softmax_trig_features_fwd(x, omega):
    r"""Horn et al.'s FAVOR map ``exp(|x|^2/2) [cos(x omega^T), sin(x omega^T)] / sqrt(m)``, and the cache.

    Estimates the softmax kernel: ``E[phi(q) . phi(k)] = softmax_kernel(q, k) = exp(q . k)`` (Horn et al.
    Sec. 2.1, ``h(x) = exp(|x|^2/2)``). Raw: the factor ``exp(|x|^2/2)`` overflows float32 for |x| > ~13.3 and
    float64 for |x| > ~37.7; use :func:`softmax_trig_features_stable` in attention.

    Parameters
    ----------
    x : (..., L, d) array
    omega : (m, d) array

    Returns
    -------
    phi : (..., L, 2m) array
    cache : SoftmaxTrigFeaturesCache
    """
    t, tcache = trig_features_fwd(x, omega)                                       # (..., L, 2m)
    xp = namespace(x)
    log_h = sq_norm_half(x, xp=xp)                                                # (..., L)
    phi = xp.expand_dims(xp.exp(log_h), axis=-1) * t                              # (..., L, 2m)
    return phi, SoftmaxTrigFeaturesCache(tcache, log_h, phi)


def softmax_trig_features_bwd(dphi, cache: SoftmaxTrigFeaturesCache) -> TrigFeaturesGrads:
    r"""Gradients of :func:`softmax_trig_features`. With ``phi = h t``, ``h = exp(|x|^2/2)``:
    ``dt = h dphi`` through the RKS backward, plus ``x sum(dphi * phi)`` from ``dh/dx = h x``."""
    c = cache
    xp = namespace(dphi, c.phi, names=("dphi", "cache.phi"))
    check_finite("dphi", dphi, xp=xp)
    check_shape("dphi", dphi, "..., L, m2", check_shape("phi", c.phi, "..., L, m2"))
    h = xp.expand_dims(xp.exp(c.log_h), axis=-1)                                  # (..., L, 1)
    g = trig_features_bwd(h * dphi, c.trig)
    dlog_h = xp.sum(dphi * c.phi, axis=-1, keepdims=True)                         # (..., L, 1)
    return TrigFeaturesGrads(x=g.x + dlog_h * c.trig.x, omega=g.omega)


def softmax_trig_features(x, omega):
    r"""``exp(|x|^2/2) trig_features(x, omega)``, estimating :func:`softmax_kernel` (Horn et al. Sec. 2.1).
    ``(..., L, d)`` -> ``(..., L, 2m)``."""
    return softmax_trig_features_fwd(x, omega)[0]


def softmax_trig_features_stable_fwd(x, omega):
    r"""Horn et al.'s softmax-trig map with its row factor returned as a log-scale, and the cache.

    ``phi * exp(log_scale)[..., None]`` equals :func:`softmax_trig_features` ``(x, omega)``; nothing
    overflows.

    Returns
    -------
    (phi, log_scale) : ((..., L, 2m), (..., L)) arrays
        ``phi = trig_features(x, omega)``, ``log_scale = |x|^2 / 2``. For keys pass ``log_scale`` as
        ``linear_attention(..., k_log_scale=...)``; for queries drop it (it cancels per row).
    cache : TrigFeaturesCache
    """
    t, tcache = trig_features_fwd(x, omega)                                       # (..., L, 2m)
    xp = namespace(x)
    return (t, sq_norm_half(x, xp=xp)), tcache                                    # log_scale (..., L)


def softmax_trig_features_stable_bwd(dout, cache: TrigFeaturesCache, *,
                                     omega_grad=True) -> TrigFeaturesGrads:
    r"""Gradients of :func:`softmax_trig_features_stable` from the cotangent pair ``(dphi, dlog_scale)``;
    ``dlog_scale`` may be ``None`` (queries, whose log-scale is dropped). ``d(|x|^2/2)/dx = x``.
    ``omega_grad=False``: ``domega`` is not computed (``None``)."""
    dphi, dls = dout
    g = trig_features_bwd(dphi, cache, omega_grad=omega_grad)
    if dls is None:
        return g
    xp = namespace(dls, cache.x, names=("dlog_scale", "cache.x"))
    check_shape("dlog_scale", dls, "..., L", check_shape("x", cache.x, "..., L, d"))
    check_finite("dlog_scale", dls, xp=xp)
    return TrigFeaturesGrads(x=g.x + xp.expand_dims(dls, axis=-1) * cache.x, omega=g.omega)


def softmax_trig_features_stable(x, omega):
    r"""``(trig_features(x, omega), |x|^2/2)``: the softmax-trig map with its row factor as a log-scale."""
    return softmax_trig_features_stable_fwd(x, omega)[0]
