r"""B-spline spectra: g = C prod_j [sin(2 pi v_j xi_j) / (pi xi_j)]^k, f = C prod_j B_k(Delta_j).

``B_k`` is the k-fold self-convolution of 1_[-v_j, v_j]: continuous (k >= 2), even, supported on [-k v_j, k
v_j], piecewise a polynomial of degree k - 1 (the properties FLT Sec. 4.3 claims for its sin^k form, which
hold here). Tail: a product power |g| ~ prod_j |xi_j|^-k (``not_integrable`` for k = 1, the box).
Axes: ``r`` frequencies, ``D`` position dimension.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ._common import Family, box_indicator, product_check, product_dim, product_g, product_g_bwd, sinc_factor

__all__ = ["BSpline", "FAMILY"]

Array = Any


class BSpline(NamedTuple):
    r"""B-spline RPE: ``g = C prod_j [sin(2 pi v_j xi_j) / (pi xi_j)]^k``, ``f = C prod_j B_k(Delta_j)``.

    ``B_k`` is the k-fold self-convolution of ``1_[-v_j, v_j]``: continuous (k >= 2), even, supported on
    ``[-k v_j, k v_j]``, piecewise a polynomial of degree k - 1 (the properties claimed in FLT Sec. 4.3).
    ``int |g| < inf`` for k >= 2.
    """

    C: Array  # ()
    v: Array  # (D,)  > 0
    k: int    # positive integer


def _g(spectrum, xi, *, xp):
    h, dh_dv, dh_dx = sinc_factor(xi, spectrum.v, xp=xp)                              # (r, D)
    k = spectrum.k
    hk1 = h ** (k - 1)
    return product_g(spectrum, (hk1 * h, k * hk1 * dh_dv, k * hk1 * dh_dx), xp=xp)    # (r,)


def _bspline1(x, v, k, *, xp):
    """k-fold self-convolution of 1_[-v, v] at x (truncated-power form; exactly 0 for |x| >= k v)."""
    if k == 1:
        return box_indicator(x, v, xp=xp)
    total = xp.zeros_like(x)
    for i in range(k + 1):
        t = x + (k - 2 * i) * v
        total = total + ((-1) ** i * math.comb(k, i)) * xp.where(t > 0, t, xp.zeros_like(t)) ** (k - 1)
    total = total / math.factorial(k - 1)
    return xp.where(xp.abs(x) < k * v, total, xp.zeros_like(x))


def _f(spectrum, delta, *, xp):
    return spectrum.C * xp.prod(_bspline1(delta, spectrum.v, spectrum.k, xp=xp), axis=-1)


def _tail(spectrum, D):
    return ("not_integrable",) if spectrum.k == 1 else ("prod_power", spectrum.k)


FAMILY = Family(check=product_check, dim=product_dim, g=_g, g_bwd=product_g_bwd, f=_f, tail=_tail,
                static=("k",), positive=("v",))
