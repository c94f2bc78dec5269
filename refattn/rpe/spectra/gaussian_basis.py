r"""FLT Sec. 5.3 Gaussian basis: f = sum_t w_t / (sqrt(2 pi) sigma_t)^D exp(-|Delta|^2 / (2 sigma_t^2)).

``g = sum_t w_t exp(-2 pi^2 sigma_t^2 |xi|^2)`` (the paper's D = 3, any D here). Tail: Gaussian with
tau = 1/(2 pi min sigma). Axes: ``r`` frequencies, ``T`` basis functions, ``D`` position dimension (any D).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..._xp import check_shape, namespace
from ._common import TWO_PI, Family, check_positive, no_dim, sq_norm

__all__ = ["GaussianBasis", "FAMILY"]

Array = Any


class GaussianBasis(NamedTuple):
    r"""Gaussian basis RPE of FLT Sec. 5.3 (the paper's D = 3, any D here).

    ``f = sum_t w_t / (sqrt(2 pi) sigma_t)^D exp(-|Delta|^2 / (2 sigma_t^2))``,
    ``g = sum_t w_t exp(-2 pi^2 sigma_t^2 |xi|^2)``.
    """

    w: Array      # (T,)
    sigma: Array  # (T,)  > 0


def _check(spectrum, sizes, name, *, xp):
    check_shape(f"{name}.w", spectrum.w, "T", sizes)
    check_shape(f"{name}.sigma", spectrum.sigma, "T", sizes)
    check_positive(f"{name}.sigma", spectrum.sigma, xp=xp)


def _g(spectrum, xi, *, xp):
    n2 = sq_norm(xi, xp=xp)                                                           # (r,)
    e = xp.exp(-2.0 * math.pi ** 2 * xp.expand_dims(n2, axis=1) * spectrum.sigma ** 2)  # (r, T)
    return e @ spectrum.w, None, (n2, e)                                              # (r,)


def _g_bwd(dg, dg_im, spectrum, xi, parts, g, *, xp):
    n2, e = parts
    s2 = spectrum.sigma ** 2
    dw = xp.matrix_transpose(e) @ dg                                                  # (T,)
    de = xp.expand_dims(dg, axis=1) * spectrum.w * e                                  # (r, T)
    dsigma = -4.0 * math.pi ** 2 * spectrum.sigma * (xp.matrix_transpose(de) @ n2)    # (T,)
    dxi = xp.expand_dims(-4.0 * math.pi ** 2 * (de @ s2), axis=1) * xi                # (r, D)
    return GaussianBasis(w=dw, sigma=dsigma), dxi


def _f(spectrum, delta, *, xp):
    D = delta.shape[-1]
    n2 = xp.expand_dims(sq_norm(delta, xp=xp), axis=-1)                               # (..., 1)
    s = spectrum.sigma
    return xp.sum(spectrum.w / (math.sqrt(TWO_PI) * s) ** D * xp.exp(-n2 / (2.0 * s * s)), axis=-1)


def _tail(spectrum, D):
    return ("gauss", 1.0 / (TWO_PI * float(namespace(spectrum.sigma).min(spectrum.sigma))))


def _tail_param(spectrum, *, xp):
    s = spectrum.sigma                                                      # tau = 1/(2 pi min_t sigma_t)
    first = xp.arange(s.shape[0]) == xp.argmin(s)                           # (T,) its first argmin
    return 1.0 / (TWO_PI * xp.min(s)), GaussianBasis(
        w=xp.zeros_like(spectrum.w), sigma=xp.where(first, -1.0 / (TWO_PI * s * s), xp.zeros_like(s)))


FAMILY = Family(check=_check, dim=no_dim, g=_g, g_bwd=_g_bwd, f=_f, tail=_tail, positive=("sigma",),
                tail_param=_tail_param, tail_class="gauss")
