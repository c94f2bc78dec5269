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

from .._docs import fill_doc
from .._xp import check_finite, namespace
from .checks import check_dy

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


_X = """
x : (...) array
    Real floating (float32 or float64), finite; any shape.
"""

_Y = """
y : (...) array
    Same shape, namespace and dtype as `x`.
"""

_X_RAISES = """
ValueError
    If `x` is not finite.
TypeError
    If `x` is not a real floating array.
"""

_SLOPE = """
negative_slope : float, default 0.01
    Slope for x <= 0 (torch's default); a finite real number.
"""


def _sections(params, returns, raises):
    """A numpydoc Parameters / Returns / Raises block (each argument a block of entries)."""
    return "\n".join(["Parameters", "----------", params.strip("\n"), "", "Returns", "-------",
                      returns.strip("\n"), "", "Raises", "------", raises.strip("\n")])


def _fwd_doc(cache_entry, extra=""):
    """The sections of a ``*_fwd``: `x` (and `extra`), ``(y, cache)``, and `x`'s errors."""
    params = _X.strip("\n") + ("\n" + extra.strip("\n") if extra else "")
    return _sections(params, _Y.strip("\n") + "\n" + cache_entry, _X_RAISES)


def _bwd_doc(cache_entry):
    """The sections of a ``*_bwd``: ``dy`` and its `cache`, the gradient, and ``dy``'s errors."""
    dy = ("dy : (...) array\n"
          "    Cotangent of the output: exactly the shape of `x`, same namespace and dtype; finite.\n")
    grads = "ActivationGrads\n    ``x``: the gradient, shape of `x`.\n"
    raises = ("ValueError\n    If `dy` is not of `x`'s shape or is not finite.\n"
              "TypeError\n    If `dy` differs from the cache in namespace or dtype.\n")
    return _sections(dy + cache_entry, grads, raises)


_FWD = dict(x=_X, y=_Y, raises=_X_RAISES)


# ---- ReLU --------------------------------------------------------------------------------------------------
@fill_doc(**_FWD)
def relu(x):
    """ReLU, ``max(x, 0)`` elementwise; its gradient is ``dy * [x > 0]`` (slope 0 at ``x = 0``).

    Parameters
    ----------
    {x}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import relu
    >>> relu(np.array([-1.0, 0.0, 2.0]))
    array([0., 0., 2.])
    """
    return relu_fwd(x)[0]


@fill_doc(sections=_fwd_doc("cache : array\n    `x` itself.\n"))
def relu_fwd(x):
    """Forward of :func:`relu` (see it for the equations), with the cache for :func:`relu_bwd`.

    {sections}
    """
    xp = _check(x)
    return xp.where(x > 0, x, xp.zeros_like(x)), x


@fill_doc(sections=_bwd_doc("cache : array\n    From :func:`relu_fwd` (the input `x`).\n"))
def relu_bwd(dy, cache) -> ActivationGrads:
    """Gradient of :func:`relu` (see it for the equations).

    {sections}
    """
    x = cache
    xp = check_dy(dy, x)
    return ActivationGrads(x=xp.where(x > 0, dy, xp.zeros_like(dy)))


# ---- LeakyReLU ---------------------------------------------------------------------------------------------
@fill_doc(slope=_SLOPE, **_FWD)
def leaky_relu(x, *, negative_slope=0.01):
    """LeakyReLU, elementwise: ``x`` for x > 0, ``negative_slope * x`` otherwise.

    Its gradient is ``dy`` for x > 0 and ``negative_slope * dy`` otherwise (the left slope at ``x = 0``).

    Parameters
    ----------
    {x}
    {slope}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import leaky_relu
    >>> leaky_relu(np.array([-1.0, 0.0, 2.0]))
    array([-0.01,  0.  ,  2.  ])
    """
    return leaky_relu_fwd(x, negative_slope=negative_slope)[0]


@fill_doc(sections=_fwd_doc("cache : LeakyReluCache\n    ``(x, negative_slope)``.\n", _SLOPE))
def leaky_relu_fwd(x, *, negative_slope=0.01):
    """Forward of :func:`leaky_relu` (see it for the equations), with the cache for :func:`leaky_relu_bwd`.

    {sections}
    """
    xp = _check(x)
    check_slope(negative_slope)
    return leaky_relu_fwd_core(x, negative_slope, xp=xp)


def check_slope(negative_slope):
    """The option check of :func:`leaky_relu_fwd`: a finite real `negative_slope`."""
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) \
            or not math.isfinite(negative_slope):
        raise ValueError(f"negative_slope: expected a finite real number; got {negative_slope!r}")


@fill_doc(sections=_bwd_doc("cache : LeakyReluCache\n    From :func:`leaky_relu_fwd`.\n"))
def leaky_relu_bwd(dy, cache: LeakyReluCache) -> ActivationGrads:
    """Gradient of :func:`leaky_relu` (see it for the equations).

    {sections}
    """
    xp = check_dy(dy, cache.x)
    return leaky_relu_bwd_core(dy, cache, xp=xp)


# y = x (x > 0),  negative_slope x (x <= 0)
# dx = dy (x > 0),  negative_slope dy (x <= 0)
def leaky_relu_fwd_core(x, negative_slope, *, xp):
    """Unchecked core of :func:`leaky_relu_fwd` (see :func:`leaky_relu`)."""
    y = xp.where(x > 0, x, negative_slope * x)
    return y, LeakyReluCache(x=x, negative_slope=float(negative_slope))


def leaky_relu_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`leaky_relu_bwd` (see :func:`leaky_relu`)."""
    return ActivationGrads(x=xp.where(cache.x > 0, dy, cache.negative_slope * dy))


# ---- tanh --------------------------------------------------------------------------------------------------
@fill_doc(**_FWD)
def tanh(x):
    """``tanh(x)``, elementwise; its gradient is ``dy (1 - y^2)``, from the output alone.

    Parameters
    ----------
    {x}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import tanh
    >>> tanh(np.array([-1.0, 0.0, 2.0])).round(4)
    array([-0.7616,  0.    ,  0.964 ])
    """
    return tanh_fwd(x)[0]


@fill_doc(sections=_fwd_doc("cache : array\n    The output `y`.\n"))
def tanh_fwd(x):
    """Forward of :func:`tanh` (see it for the equations), with the cache for :func:`tanh_bwd`.

    {sections}
    """
    return tanh_fwd_core(x, xp=_check(x))


@fill_doc(sections=_bwd_doc("cache : array\n    From :func:`tanh_fwd` (the output `y`).\n"))
def tanh_bwd(dy, cache) -> ActivationGrads:
    """Gradient of :func:`tanh` (see it for the equations).

    {sections}
    """
    return tanh_bwd_core(dy, cache, xp=check_dy(dy, cache))


# y = tanh(x)
# dx = dy (1 - y^2)
def tanh_fwd_core(x, *, xp):
    """Unchecked core of :func:`tanh_fwd` (see :func:`tanh`)."""
    y = xp.tanh(x)
    return y, y


def tanh_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`tanh_bwd` (see :func:`tanh`)."""
    y = cache
    return ActivationGrads(x=dy * (1 - y * y))


# ---- GELU (tanh approximation) -----------------------------------------------------------------------------
@fill_doc(**_FWD)
def gelu(x):
    r"""GELU, tanh approximation (torch ``gelu(approximate='tanh')``; Hendrycks & Gimpel 2016).

    ``gelu(x) = 0.5 x (1 + t)`` with ``t = tanh(c (x + a x^3))``, ``c = sqrt(2/pi)``, ``a = 0.044715``; its
    derivative is ``0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)``.

    Parameters
    ----------
    {x}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import gelu
    >>> gelu(np.array([-1.0, 0.0, 2.0])).round(4)
    array([-0.1588,  0.    ,  1.9546])
    """
    return gelu_fwd(x)[0]


@fill_doc(sections=_fwd_doc("cache : tuple of two arrays\n    ``(x, t)`` with t the tanh.\n"))
def gelu_fwd(x):
    r"""Forward of :func:`gelu` (see it for the equations), with the cache for :func:`gelu_bwd`.

    {sections}
    """
    return gelu_fwd_core(x, xp=_check(x))


@fill_doc(sections=_bwd_doc("cache : tuple of two arrays\n    From :func:`gelu_fwd`: ``(x, t)``.\n"))
def gelu_bwd(dy, cache) -> ActivationGrads:
    r"""Gradient of :func:`gelu` (see it for the equations).

    {sections}
    """
    return gelu_bwd_core(dy, cache, xp=check_dy(dy, cache[0]))


# y = 0.5 x (1 + t),  t = tanh(c (x + a x^3))                                    (Hendrycks & Gimpel 2016)
# dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2))
# (in place on fresh arrays: c (x + a x^3) = x (c + c a x^2), one temporary per line)
def gelu_fwd_core(x, *, xp):
    """Unchecked core of :func:`gelu_fwd` (see :func:`gelu`)."""
    u = x * x                                                                       # (...)
    u *= _GELU_C * _GELU_A
    u += _GELU_C
    u *= x                                                                          # c (x + a x^3)
    t = xp.tanh(u)                                                                  # (...)
    y = t + 1.0
    y *= x
    y *= 0.5                                                                        # 0.5 x (1 + t)
    return y, (x, t)


def gelu_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`gelu_bwd` (see :func:`gelu`)."""
    x, t = cache
    s = t * t
    s -= 1.0                                                                        # t^2 - 1
    g = x * x
    g *= 3 * _GELU_C * _GELU_A
    g += _GELU_C
    g *= x                                                                          # x c (1 + 3 a x^2)
    g *= s
    g -= t
    g -= 1.0
    g *= -0.5                                                                       # dgelu (equation above)
    g *= dy
    return ActivationGrads(x=g)
