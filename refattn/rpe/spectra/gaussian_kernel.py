"""Gaussian (RBF) kernel f = C exp(-|Delta|^2 / (2 l^2)); g = C (2 pi l^2)^(D/2) exp(-2 pi^2 l^2 |xi|^2).

g is C times the Gaussian density of scale 1/(2 pi l), the kernel's own proposal (``"gaussian"``), for which
the importance weight g/p is the constant C. Tail: Gaussian with tau = 1/(2 pi l).
Axes: ``r`` frequencies, ``D`` position dimension (any D).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ._common import TWO_PI, Family, check_scalar_length, no_dim, sq_norm

__all__ = ["GaussianKernel", "FAMILY"]

Array = Any


class GaussianKernel(NamedTuple):
    r"""Gaussian (RBF) kernel RPE ``f = C exp(-|Delta|^2 / (2 l^2))``; g is C times its spectral density."""

    C: Array       # ()
    length: Array  # ()  > 0


def _g(spectrum, xi, *, xp):
    D = xi.shape[-1]
    l2 = spectrum.length ** 2
    # (r,) g(xi) = C (2 pi l^2)^(D/2) exp(-2 pi^2 l^2 |xi|^2)
    g = spectrum.C * (TWO_PI * l2) ** (D / 2.0) * xp.exp(-2.0 * math.pi ** 2 * l2 * sq_norm(xi, xp=xp))
    return g, None, ()


def _g_bwd(dg, dg_im, spectrum, xi, parts, g, *, xp):
    D = xi.shape[-1]
    ell = spectrum.length
    n2 = sq_norm(xi, xp=xp)                                                           # (r,)
    dgg = dg * g                                                                      # (r,)
    base = (TWO_PI * ell * ell) ** (D / 2.0) * xp.exp(-2.0 * math.pi ** 2 * ell * ell * n2)   # (r,) g / C
    dC = xp.sum(dg * base)
    dl = xp.sum(dgg * (D / ell - 4.0 * math.pi ** 2 * ell * n2))
    dxi = xp.expand_dims(dgg * (-4.0 * math.pi ** 2 * ell * ell), axis=1) * xi            # (r, D)
    return GaussianKernel(C=dC, length=dl), dxi


def _f(spectrum, delta, *, xp):
    return spectrum.C * xp.exp(-sq_norm(delta, xp=xp) / (2.0 * spectrum.length ** 2))


def _tail(spectrum, D):
    return ("gauss", 1.0 / (TWO_PI * float(spectrum.length)))


def _tail_param(spectrum, *, xp):
    ell = spectrum.length                                                             # tau = 1/(2 pi l)
    tau = xp.asarray(1.0 / (TWO_PI * ell))
    return tau, GaussianKernel(C=xp.zeros_like(spectrum.C), length=xp.asarray(-tau / ell))


FAMILY = Family(check=check_scalar_length, dim=no_dim, g=_g, g_bwd=_g_bwd, f=_f, tail=_tail,
                own_proposal="gaussian", positive=("length",), tail_param=_tail_param,
                tail_class="gauss")
