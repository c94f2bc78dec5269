r"""The printed Sec. 4.3 generalisation of the local RPE: g = C prod_j sin^k(2 pi v_j xi_j) / (pi xi_j).

For even k this g is odd in each xi_j, so its f is purely imaginary and odd (not an RPE mask: rejected by the
check). For odd k its f is piecewise *constant* and discontinuous: sin^k expands into sines of multiples of
the angle, i.e. a signed sum of boxes. The claims (a)-(d) of Sec. 4.3 hold for :class:`BSpline` instead.
Tail: ``not_integrable`` (|g| ~ 1/|xi_j|), like the box. Axes: ``r`` frequencies, ``D`` position dimension.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ._common import (
    TWO_PI,
    Family,
    box_indicator,
    product_check,
    product_dim,
    product_g,
    product_g_bwd,
    sinc_factor,
)

__all__ = ["SinPower", "FAMILY"]

Array = Any


class SinPower(NamedTuple):
    """The printed Sec. 4.3 generalisation g = C prod_j sin^k(2 pi v_j xi_j) / (pi xi_j) (k = 1: a box)."""

    C: Array  # ()
    v: Array  # (D,)  > 0
    k: int    # odd positive integer (even k gives an imaginary, odd f)


def _check(spectrum, sizes, name, *, xp):
    product_check(spectrum, sizes, name, xp=xp)
    k = spectrum.k
    if k % 2 == 0:
        raise ValueError(
            f"{name}.k: the printed form sin^k(2 pi v xi)/(pi xi) with even k = {k} is odd in xi, so its f "
            "is purely imaginary and odd: not a real RPE mask (use BSpline for the properties of Sec. 4.3)")


def _sinpow(x, v, k, *, xp):
    """s(x) = sin^k(2 pi v x) / (pi x), ds/dv, ds/dx (series for |2 pi v x| < 1e-3)."""
    if k == 1:
        return sinc_factor(x, v, xp=xp)
    a = TWO_PI * v
    ax = a * x
    small = xp.abs(ax) < 1e-3
    one = xp.ones_like(ax)
    x_safe = xp.where(small, one, x * one)
    S, Cc = xp.sin(ax), xp.cos(ax)
    Skm1 = S ** (k - 1)
    s_big = Skm1 * S / (math.pi * x_safe)
    # series: sin^k(ax)/(pi x) = a^k x^(k-1) / pi * (1 - k (ax)^2 / 6 + ...)
    s_small = (a ** k) * (x ** (k - 1)) / math.pi * (1.0 - k * ax * ax / 6.0)
    s = xp.where(small, s_small, s_big)
    ds_dv = 2.0 * k * Skm1 * Cc                                               # d/dv of sin^k(2 pi v x)/(pi x)
    ds_dx_big = (k * Skm1 * Cc * a - Skm1 * S / x_safe) / (math.pi * x_safe)
    ds_dx_small = (a ** k) / math.pi * ((k - 1) * x ** (k - 2) - k * (k + 1) * a * a * x ** k / 6.0)
    ds_dx = xp.where(small, ds_dx_small, ds_dx_big)
    return s, ds_dv, ds_dx


def _g(spectrum, xi, *, xp):
    return product_g(spectrum, _sinpow(xi, spectrum.v, spectrum.k, xp=xp), xp=xp)    # (r,)


def _sinpow1_f(x, v, k, *, xp):
    """Inverse transform of sin^k(2 pi v xi)/(pi xi) for odd k: sin^k(a) = 2^(1-k) sum_i (-1)^((k-1)/2 - i)
    C(k, i) sin((k - 2i) a), and sin(2 pi n v xi)/(pi xi) <-> 1[|x| < n v]."""
    total = xp.zeros_like(x)
    for i in range((k - 1) // 2 + 1):
        coef = 2.0 ** (1 - k) * (-1) ** ((k - 1) // 2 - i) * math.comb(k, i)
        total = total + coef * box_indicator(x, (k - 2 * i) * v, xp=xp)
    return total


def _f(spectrum, delta, *, xp):
    return spectrum.C * xp.prod(_sinpow1_f(delta, spectrum.v, spectrum.k, xp=xp), axis=-1)


def _tail(spectrum, D):
    return ("not_integrable",)


FAMILY = Family(check=_check, dim=product_dim, g=_g, g_bwd=product_g_bwd, f=_f, tail=_tail, static=("k",),
                positive=("v",))
