"""Gaussian-mixture spectrum (FLT Sec. 4.3): g = sum_t w_t exp(-|xi - mu_t|^2 / (2 sigma_t^2)).

``Re f(Delta) = sum_t w_t (2 pi sigma_t^2)^(D/2) exp(-2 pi^2 sigma_t^2 |Delta|^2) cos(2 pi mu_t . Delta)``.
Tail: Gaussian, ``|g| <~ exp(-|xi|^2 / (2 tau^2))`` with tau the largest sigma.
Axes: ``r`` frequencies, ``T`` components, ``D`` position dimension.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..._xp import check_shape, namespace
from ._common import TWO_PI, Family, check_positive, sq_norm

__all__ = ["GaussianMixture", "FAMILY"]

Array = Any


class GaussianMixture(NamedTuple):
    r"""Gaussian-mixture spectrum ``g = sum_t w_t exp(-|xi - mu_t|^2 / (2 sigma_t^2))`` (FLT Sec. 4.3).

    f is complex unless the mixture is symmetric under ``xi -> -xi``; refattn's real features estimate
    ``Re f``, which is the f of the symmetrised mixture ``(g(xi) + g(-xi))/2`` (each component paired with its
    mirror at ``-mu_t``, weight ``w_t/2``).
    """

    w: Array      # (T,)
    mu: Array     # (T, D)
    sigma: Array  # (T,)  > 0


def _check(spectrum, sizes, name, *, xp):
    check_shape(f"{name}.w", spectrum.w, "T", sizes)
    check_shape(f"{name}.mu", spectrum.mu, "T, D", sizes)
    check_shape(f"{name}.sigma", spectrum.sigma, "T", sizes)
    check_positive(f"{name}.sigma", spectrum.sigma, xp=xp)


def _dim(spectrum) -> int:
    return int(spectrum.mu.shape[-1])


def _g(spectrum, xi, *, xp):
    diff = xp.expand_dims(xi, axis=1) - xp.expand_dims(spectrum.mu, axis=0)           # (r, T, D)
    d2 = sq_norm(diff, xp=xp)                                                         # (r, T)
    e = xp.exp(-d2 / (2.0 * spectrum.sigma ** 2))                                     # (r, T)
    return e @ spectrum.w, None, (diff, d2, e)                                        # (r,)


def _g_bwd(dg, dg_im, spectrum, xi, parts, g, *, xp):
    diff, d2, e = parts
    s2 = spectrum.sigma ** 2                                                          # (T,)
    dw = xp.matrix_transpose(e) @ dg                                                  # (T,)
    de = xp.expand_dims(dg, axis=1) * spectrum.w * e                                  # (r, T) dg w_t e_kt
    dmu = xp.matrix_transpose(de / s2) @ xi - xp.expand_dims(xp.sum(de / s2, axis=0), axis=1) * spectrum.mu
    dsigma = xp.sum(de * d2, axis=0) / spectrum.sigma ** 3                            # (T,)
    dxi = -xp.sum(xp.expand_dims(de / s2, axis=-1) * diff, axis=1)                    # (r, D)
    return GaussianMixture(w=dw, mu=dmu, sigma=dsigma), dxi


def _f(spectrum, delta, *, xp):
    D = delta.shape[-1]
    n2 = xp.expand_dims(sq_norm(delta, xp=xp), axis=-1)                               # (..., 1)
    s2 = spectrum.sigma ** 2
    amp = spectrum.w * (TWO_PI * s2) ** (D / 2.0)                                     # (T,)
    phase = TWO_PI * (delta @ xp.matrix_transpose(spectrum.mu))                       # (..., T)
    return xp.sum(amp * xp.exp(-2.0 * math.pi ** 2 * s2 * n2) * xp.cos(phase), axis=-1)


def _tail(spectrum, D):
    return ("gauss", float(namespace(spectrum.sigma).max(spectrum.sigma)))


def _tail_param(spectrum, *, xp):
    s = spectrum.sigma                                                                # tau = max_t sigma_t
    first = xp.arange(s.shape[0]) == xp.argmax(s)                                     # (T,) its first argmax
    return xp.max(s), GaussianMixture(w=xp.zeros_like(spectrum.w), mu=xp.zeros_like(spectrum.mu),
                                      sigma=xp.where(first, xp.ones_like(s), xp.zeros_like(s)))


FAMILY = Family(check=_check, dim=_dim, g=_g, g_bwd=_g_bwd, f=_f, tail=_tail, positive=("sigma",),
                tail_param=_tail_param, tail_class="gauss")
