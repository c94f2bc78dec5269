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
    """Gradient of an elementwise activation: ``x``, of the input's shape."""

    x: Array  # same shape as x


class LeakyReluCache(NamedTuple):
    """What :func:`leaky_relu_bwd` needs: the input ``x`` and ``negative_slope``."""

    x: Array
    negative_slope: float


def _check(x):
    xp = namespace(x, names=("x",))
    check_finite("x", x, xp=xp)
    return xp


# ---- ReLU --------------------------------------------------------------------------------------------------
def relu_fwd(x):
    """ReLU ``max(x, 0)`` and the cache for :func:`relu_bwd`.

    Parameters
    ----------
    x : (...) array
        Real floating (float32 or float64), finite; any shape.

    Returns
    -------
    y : (...) array
        Same shape, namespace and dtype as `x`.
    cache : array
        `x` itself.

    Raises
    ------
    ValueError
        If `x` is not finite.
    TypeError
        If `x` is not a real floating array.
    """
    xp = _check(x)
    return xp.where(x > 0, x, xp.zeros_like(x)), x


def relu_bwd(dy, cache) -> ActivationGrads:
    """Gradient of :func:`relu`: ``dx = dy * [x > 0]`` (slope 0 at ``x = 0``).

    Parameters
    ----------
    dy : (...) array
        Cotangent of the output: exactly the shape of `x`, same namespace and dtype; finite.
    cache : array
        From :func:`relu_fwd` (the input `x`).

    Returns
    -------
    ActivationGrads
        ``x``: the gradient, shape of `x`.

    Raises
    ------
    ValueError
        If `dy` is not of `x`'s shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    x = cache
    xp = check_dy(dy, x)
    return ActivationGrads(x=xp.where(x > 0, dy, xp.zeros_like(dy)))


def relu(x):
    """ReLU, ``max(x, 0)`` elementwise.

    Parameters
    ----------
    x : (...) array
        Real floating (float32 or float64), finite; any shape.

    Returns
    -------
    y : (...) array
        Same shape, namespace and dtype as `x`.

    Raises
    ------
    ValueError
        If `x` is not finite.
    TypeError
        If `x` is not a real floating array.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import relu
    >>> relu(np.array([-1.0, 0.0, 2.0]))
    array([0., 0., 2.])
    """
    return relu_fwd(x)[0]


# ---- LeakyReLU ---------------------------------------------------------------------------------------------
def leaky_relu_fwd(x, *, negative_slope=0.01):
    """LeakyReLU, ``x`` for x > 0 and ``negative_slope * x`` otherwise, and the cache for the backward.

    Parameters
    ----------
    x : (...) array
        Real floating (float32 or float64), finite; any shape.
    negative_slope : float, default 0.01
        Slope for x <= 0 (torch's default); a finite real number.

    Returns
    -------
    y : (...) array
        Same shape, namespace and dtype as `x`.
    cache : LeakyReluCache
        ``(x, negative_slope)``, for :func:`leaky_relu_bwd`.

    Raises
    ------
    ValueError
        If `x` or `negative_slope` is not finite.
    TypeError
        If `x` is not a real floating array.
    """
    xp = _check(x)
    _check_slope(negative_slope)
    return _leaky_relu_fwd(x, negative_slope, xp=xp)


def _check_slope(negative_slope):
    """The option check of :func:`leaky_relu_fwd`."""
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) \
            or not math.isfinite(negative_slope):
        raise ValueError(f"negative_slope: expected a finite real number; got {negative_slope!r}")


def _leaky_relu_fwd(x, negative_slope, *, xp):
    """Unchecked core of :func:`leaky_relu_fwd`."""
    y = xp.where(x > 0, x, negative_slope * x)
    return y, LeakyReluCache(x=x, negative_slope=float(negative_slope))


def leaky_relu_bwd(dy, cache: LeakyReluCache) -> ActivationGrads:
    """Gradient of :func:`leaky_relu`: ``dx = dy`` for x > 0, ``negative_slope * dy`` otherwise.

    Parameters
    ----------
    dy : (...) array
        Cotangent of the output: exactly the shape of `x`, same namespace and dtype; finite.
    cache : LeakyReluCache
        From :func:`leaky_relu_fwd`.

    Returns
    -------
    ActivationGrads
        ``x``: the gradient, shape of `x`.

    Raises
    ------
    ValueError
        If `dy` is not of `x`'s shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    xp = check_dy(dy, cache.x)
    return _leaky_relu_bwd(dy, cache, xp=xp)


def _leaky_relu_bwd(dy, cache, *, xp):
    """Unchecked core of :func:`leaky_relu_bwd`."""
    return ActivationGrads(x=xp.where(cache.x > 0, dy, cache.negative_slope * dy))


def leaky_relu(x, *, negative_slope=0.01):
    """LeakyReLU, elementwise: ``x`` for x > 0, ``negative_slope * x`` otherwise.

    Parameters
    ----------
    x : (...) array
        Real floating (float32 or float64), finite; any shape.
    negative_slope : float, default 0.01
        Slope for x <= 0; a finite real number.

    Returns
    -------
    y : (...) array
        Same shape, namespace and dtype as `x`.

    Raises
    ------
    ValueError
        If `x` or `negative_slope` is not finite.
    TypeError
        If `x` is not a real floating array.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import leaky_relu
    >>> leaky_relu(np.array([-1.0, 0.0, 2.0]))
    array([-0.01,  0.  ,  2.  ])
    """
    return leaky_relu_fwd(x, negative_slope=negative_slope)[0]


# ---- tanh --------------------------------------------------------------------------------------------------
def tanh_fwd(x):
    """``tanh(x)`` and the cache for :func:`tanh_bwd`.

    Parameters
    ----------
    x : (...) array
        Real floating (float32 or float64), finite; any shape.

    Returns
    -------
    y : (...) array
        Same shape, namespace and dtype as `x`.
    cache : array
        The output `y` (``dy/dx = 1 - y^2``).

    Raises
    ------
    ValueError
        If `x` is not finite.
    TypeError
        If `x` is not a real floating array.
    """
    return _tanh_fwd(x, xp=_check(x))


def _tanh_fwd(x, *, xp):
    """Unchecked core of :func:`tanh_fwd`."""
    y = xp.tanh(x)
    return y, y


def tanh_bwd(dy, cache) -> ActivationGrads:
    """Gradient of :func:`tanh`: ``dx = dy (1 - y^2)``.

    Parameters
    ----------
    dy : (...) array
        Cotangent of the output: exactly the shape of `x`, same namespace and dtype; finite.
    cache : array
        From :func:`tanh_fwd` (the output `y`).

    Returns
    -------
    ActivationGrads
        ``x``: the gradient, shape of `x`.

    Raises
    ------
    ValueError
        If `dy` is not of `x`'s shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    check_dy(dy, cache)
    return _tanh_bwd(dy, cache)


def _tanh_bwd(dy, cache):
    """Unchecked core of :func:`tanh_bwd`."""
    y = cache
    return ActivationGrads(x=dy * (1 - y * y))


def tanh(x):
    """``tanh(x)``, elementwise.

    Parameters
    ----------
    x : (...) array
        Real floating (float32 or float64), finite; any shape.

    Returns
    -------
    y : (...) array
        Same shape, namespace and dtype as `x`.

    Raises
    ------
    ValueError
        If `x` is not finite.
    TypeError
        If `x` is not a real floating array.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import tanh
    >>> tanh(np.array([-1.0, 0.0, 2.0])).round(4)
    array([-0.7616,  0.    ,  0.964 ])
    """
    return tanh_fwd(x)[0]


# ---- GELU (tanh approximation) -----------------------------------------------------------------------------
def gelu_fwd(x):
    r"""GELU (tanh approximation) and the cache for :func:`gelu_bwd`.

    ``0.5 x (1 + tanh(c (x + a x^3)))``, ``c = sqrt(2/pi)``, ``a = 0.044715`` (Hendrycks & Gimpel 2016).

    Parameters
    ----------
    x : (...) array
        Real floating (float32 or float64), finite; any shape.

    Returns
    -------
    y : (...) array
        Same shape, namespace and dtype as `x`.
    cache : tuple of two arrays
        ``(x, t)`` with t the tanh.

    Raises
    ------
    ValueError
        If `x` is not finite.
    TypeError
        If `x` is not a real floating array.
    """
    return _gelu_fwd(x, xp=_check(x))


def _gelu_fwd(x, *, xp):
    """Unchecked core of :func:`gelu_fwd`."""
    t = xp.tanh(_GELU_C * (x + _GELU_A * x * x * x))                                # (...)
    return 0.5 * x * (1 + t), (x, t)


def gelu_bwd(dy, cache) -> ActivationGrads:
    r"""Gradient of :func:`gelu`: ``d gelu/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)``.

    Parameters
    ----------
    dy : (...) array
        Cotangent of the output: exactly the shape of `x`, same namespace and dtype; finite.
    cache : tuple of two arrays
        From :func:`gelu_fwd`: ``(x, t)``.

    Returns
    -------
    ActivationGrads
        ``x``: the gradient, shape of `x`.

    Raises
    ------
    ValueError
        If `dy` is not of `x`'s shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    check_dy(dy, cache[0])
    return _gelu_bwd(dy, cache)


def _gelu_bwd(dy, cache):
    """Unchecked core of :func:`gelu_bwd`."""
    x, t = cache
    dgelu = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_C * (1 + 3 * _GELU_A * x * x)   # (...)
    return ActivationGrads(x=dy * dgelu)


def gelu(x):
    """GELU, tanh approximation (torch ``gelu(approximate='tanh')``).

    ``gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (Hendrycks & Gimpel 2016).

    Parameters
    ----------
    x : (...) array
        Real floating (float32 or float64), finite; any shape.

    Returns
    -------
    y : (...) array
        Same shape, namespace and dtype as `x`.

    Raises
    ------
    ValueError
        If `x` is not finite.
    TypeError
        If `x` is not a real floating array.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import gelu
    >>> gelu(np.array([-1.0, 0.0, 2.0])).round(4)
    array([-0.1588,  0.    ,  1.9546])
    """
    return gelu_fwd(x)[0]
