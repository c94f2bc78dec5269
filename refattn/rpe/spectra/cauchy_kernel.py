"""Product Cauchy kernel f = C prod_j 1 / (1 + Delta_j^2 / l^2); g = C prod_j pi l exp(-2 pi l |xi_j|).

g is C times the product Laplace density of scale 1/(2 pi l), the kernel's own proposal (``"laplace"``).
Tail: exponential, |g| ~ exp(-2 pi l |xi_j|) per axis.
Axes: ``r`` frequencies, ``D`` position dimension (any D).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ._common import TWO_PI, Family, check_scalar_length, no_dim

__all__ = ["CauchyKernel", "FAMILY"]

Array = Any


class CauchyKernel(NamedTuple):
    """f = C prod_j 1 / (1 + Delta_j^2 / l^2) (product Cauchy kernel); g = C times a product Laplace density
    of scale 1/(2 pi l)."""

    C: Array       # ()
    length: Array  # ()  > 0


def _g(spectrum, xi, *, xp):
    D = xi.shape[-1]
    l1 = xp.sum(xp.abs(xi), axis=-1)                                                  # (r,)
    base = (math.pi * spectrum.length) ** D * xp.exp(-TWO_PI * spectrum.length * l1)  # (r,) g / C
    return spectrum.C * base, None, (l1, base)


def _g_bwd(dg, dg_im, spectrum, xi, parts, g, *, xp):
    D = xi.shape[-1]
    l1, base = parts
    ell = spectrum.length
    dgg = dg * g                                                                      # (r,)
    dC = xp.sum(dg * base)
    dl = xp.sum(dgg * (D / ell - TWO_PI * l1))
    dxi = xp.expand_dims(dgg * (-TWO_PI * ell), axis=1) * xp.sign(xi)                   # (r, D)
    return CauchyKernel(C=dC, length=dl), dxi


def _f(spectrum, delta, *, xp):
    return spectrum.C * xp.prod(1.0 / (1.0 + (delta / spectrum.length) ** 2), axis=-1)


def _tail(spectrum, D):
    return ("exp", TWO_PI * float(spectrum.length))


def _tail_param(spectrum, *, xp):
    db = xp.asarray(xp.zeros_like(spectrum.length) + TWO_PI)                         # b = 2 pi l
    return xp.asarray(TWO_PI * spectrum.length), CauchyKernel(C=xp.zeros_like(spectrum.C), length=db)


FAMILY = Family(check=check_scalar_length, dim=no_dim, g=_g, g_bwd=_g_bwd, f=_f, tail=_tail,
                own_proposal="laplace", positive=("length",), tail_param=_tail_param,
                tail_class="exp")
