r"""Deterministic feature maps for generalized (linear) attention.

* ``elu_features(x) = elu(x) + 1`` (Katharopoulos et al.), positive everywhere, estimating nothing: it
  *defines* the kernel ``K(q, k) = phi(q) . phi(k)`` (:func:`elu_kernel`);
* ``relu_features(x) = relu(x) + eps`` (Choromanski et al. "Performer-ReLU" style; the small constant
  ``eps = 1e-3`` by default keeps every normaliser positive, since relu alone gives all-zero rows for inputs
  with no positive coordinate).

Axes: ``...`` batch and heads, ``L`` positions, ``d`` width (the feature width m equals d).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._xp import check_finite, check_shape, namespace
from .trig import _check_qk

__all__ = [
    "elu_features", "elu_features_fwd", "elu_features_bwd", "elu_kernel", "EluFeaturesGrads",
    "relu_features", "relu_features_fwd", "relu_features_bwd", "relu_kernel", "ReluFeaturesGrads",
]

Array = Any

#: Default additive constant of the ReLU map.
RELU_EPS = 1e-3


class EluFeaturesGrads(NamedTuple):
    x: Array  # (..., L, d)


class ReluFeaturesGrads(NamedTuple):
    x: Array  # (..., L, d)


def _check_x(x):
    xp = namespace(x, names=("x",))
    check_shape("x", x, "..., L, d")
    check_finite("x", x, xp=xp)
    return xp


def elu_features_fwd(x):
    r"""``phi(x) = elu(x) + 1``: ``x + 1`` for x > 0, ``exp(x)`` otherwise.

    ``x: (..., L, d)`` -> ``(..., L, d)``. Returns ``(phi, cache)``; the cache is ``x``.
    """
    xp = _check_x(x)
    phi = xp.where(x > 0, x + 1, xp.exp(xp.minimum(x, xp.zeros_like(x))))       # (..., L, d) > 0
    return phi, x


def elu_features_bwd(dphi, cache) -> EluFeaturesGrads:
    """Gradient of :func:`elu_features`: 1 for x > 0, exp(x) otherwise."""
    x = cache
    xp = namespace(dphi, x, names=("dphi", "cache"))
    if tuple(dphi.shape) != tuple(x.shape):
        raise ValueError(f"dphi: expected the features' shape {tuple(x.shape)}; got {tuple(dphi.shape)}")
    check_finite("dphi", dphi, xp=xp)
    dphi_dx = xp.where(x > 0, xp.ones_like(x), xp.exp(xp.minimum(x, xp.zeros_like(x))))
    return EluFeaturesGrads(x=dphi * dphi_dx)


def elu_features(x):
    """``elu(x) + 1`` (Katharopoulos et al. Eq. (7)). ``x: (..., L, d)`` -> ``(..., L, d)``."""
    return elu_features_fwd(x)[0]


def elu_kernel(q, k):
    """The kernel the elu+1 map defines: ``(elu(q) + 1) . (elu(k) + 1)``, ``(..., Lq, Lk)``."""
    xp = _check_qk(q, k)
    return elu_features(q) @ xp.matrix_transpose(elu_features(k))


def relu_features_fwd(x, *, eps=RELU_EPS):
    r"""``phi(x) = relu(x) + eps``. ``x: (..., L, d)`` -> ``(..., L, d)``; returns ``(phi, cache)``."""
    xp = _check_x(x)
    if not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"eps: expected a non-negative number; got {eps!r}")
    return xp.maximum(x, xp.zeros_like(x)) + eps, x


def relu_features_bwd(dphi, cache) -> ReluFeaturesGrads:
    """Gradient of :func:`relu_features` (0 at x = 0, the subgradient numpy and torch use)."""
    x = cache
    xp = namespace(dphi, x, names=("dphi", "cache"))
    if tuple(dphi.shape) != tuple(x.shape):
        raise ValueError(f"dphi: expected the features' shape {tuple(x.shape)}; got {tuple(dphi.shape)}")
    check_finite("dphi", dphi, xp=xp)
    return ReluFeaturesGrads(x=xp.where(x > 0, dphi, xp.zeros_like(dphi)))


def relu_features(x, *, eps=RELU_EPS):
    """``relu(x) + eps``. ``x: (..., L, d)`` -> ``(..., L, d)``."""
    return relu_features_fwd(x, eps=eps)[0]


def relu_kernel(q, k, *, eps=RELU_EPS):
    """The kernel the ReLU map defines, ``(..., Lq, Lk)``."""
    xp = _check_qk(q, k)
    return relu_features(q, eps=eps) @ xp.matrix_transpose(relu_features(k, eps=eps))
