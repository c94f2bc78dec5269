r"""Elementwise activations as forward/backward pairs: ReLU, LeakyReLU, tanh, GELU (tanh approximation).

Every function maps ``x: (...)`` to an array of the same shape (empty in, empty out); the gradient NamedTuple
has one field ``x``. Inputs are finite float32/float64; a backward's ``dy`` must have exactly ``x``'s shape.

GELU uses the tanh approximation (Hendrycks & Gimpel 2016, Eq. in Sec. 2)::

    gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))

because ``erf`` is not in the array API standard. It equals torch's ``gelu(approximate="tanh")``.

Subgradients at the kinks: ReLU and LeakyReLU use the slope of the left piece at ``x = 0`` (0 and
``negative_slope``), as NumPy-style ``where(x > 0, ...)`` and torch do.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._xp import check_finite, namespace
from ._check import check_dy

__all__ = [
    "ActivationGrads",
    "relu", "relu_fwd", "relu_bwd",
    "leaky_relu", "leaky_relu_fwd", "leaky_relu_bwd", "LeakyReluCache",
    "tanh", "tanh_fwd", "tanh_bwd",
    "gelu", "gelu_fwd", "gelu_bwd",
]

Array = Any

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


class ActivationGrads(NamedTuple):
    x: Array  # same shape as x


class LeakyReluCache(NamedTuple):
    x: Array
    negative_slope: float


def _check(x):
    xp = namespace(x, names=("x",))
    check_finite("x", x, xp=xp)
    return xp


# ---- ReLU --------------------------------------------------------------------------------------------------
def relu_fwd(x):
    """``max(x, 0)``; returns ``(y, cache)`` with the cache ``x``."""
    xp = _check(x)
    return xp.where(x > 0, x, xp.zeros_like(x)), x


def relu_bwd(dy, cache) -> ActivationGrads:
    """``dx = dy * [x > 0]``."""
    x = cache
    xp = check_dy(dy, x)
    return ActivationGrads(x=xp.where(x > 0, dy, xp.zeros_like(dy)))


def relu(x):
    """``max(x, 0)``, elementwise."""
    return relu_fwd(x)[0]


# ---- LeakyReLU ---------------------------------------------------------------------------------------------
def leaky_relu_fwd(x, *, negative_slope=0.01):
    """``x`` for x > 0, ``negative_slope * x`` otherwise (torch's default slope 0.01)."""
    xp = _check(x)
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) \
            or not math.isfinite(negative_slope):
        raise ValueError(f"negative_slope: expected a finite real number; got {negative_slope!r}")
    y = xp.where(x > 0, x, negative_slope * x)
    return y, LeakyReluCache(x=x, negative_slope=float(negative_slope))


def leaky_relu_bwd(dy, cache: LeakyReluCache) -> ActivationGrads:
    """``dx = dy`` for x > 0, ``negative_slope * dy`` otherwise."""
    xp = check_dy(dy, cache.x)
    return ActivationGrads(x=xp.where(cache.x > 0, dy, cache.negative_slope * dy))


def leaky_relu(x, *, negative_slope=0.01):
    """LeakyReLU, elementwise."""
    return leaky_relu_fwd(x, negative_slope=negative_slope)[0]


# ---- tanh --------------------------------------------------------------------------------------------------
def tanh_fwd(x):
    """``tanh(x)``; the cache is the output ``y`` (``dy/dx = 1 - y^2``)."""
    xp = _check(x)
    y = xp.tanh(x)
    return y, y


def tanh_bwd(dy, cache) -> ActivationGrads:
    """``dx = dy (1 - y^2)``."""
    y = cache
    check_dy(dy, y)
    return ActivationGrads(x=dy * (1 - y * y))


def tanh(x):
    """``tanh(x)``, elementwise."""
    return tanh_fwd(x)[0]


# ---- GELU (tanh approximation) -----------------------------------------------------------------------------
def gelu_fwd(x):
    r"""``0.5 x (1 + tanh(c (x + a x^3)))``, ``c = sqrt(2/pi)``, ``a = 0.044715``; cache ``(x, t)`` with t the
    tanh."""
    xp = _check(x)
    t = xp.tanh(_GELU_C * (x + _GELU_A * x * x * x))                                # (...)
    return 0.5 * x * (1 + t), (x, t)


def gelu_bwd(dy, cache) -> ActivationGrads:
    r"""``d gelu/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)``."""
    x, t = cache
    check_dy(dy, x)
    dgelu = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_C * (1 + 3 * _GELU_A * x * x)   # (...)
    return ActivationGrads(x=dy * dgelu)


def gelu(x):
    """GELU, tanh approximation (torch ``gelu(approximate='tanh')``)."""
    return gelu_fwd(x)[0]
