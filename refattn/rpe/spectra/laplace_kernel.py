"""Isotropic Laplace (Matern-1/2) kernel f = C exp(-|Delta| / l); g = C (2 pi l)^D c_D (1 + (2 pi l
|xi|)^2)^-(D+1)/2.

``c_D = Gamma((D + 1)/2) / pi^((D + 1)/2)``: g is C times the isotropic multivariate Cauchy density of scale
1/(2 pi l), the kernel's own proposal (``"mv_cauchy"``). Tail: an isotropic power, |g| ~ |xi|^-(D+1).
Axes: ``r`` frequencies, ``D`` position dimension (any D).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ._common import TWO_PI, Family, check_scalar_length, iso_const, no_dim, sq_norm

__all__ = ["LaplaceKernel", "FAMILY"]

Array = Any


class LaplaceKernel(NamedTuple):
    r"""Isotropic Laplace / Matern-1/2 kernel RPE ``f = C exp(-|Delta| / l)``.

    g is C times a multivariate Cauchy density of scale ``1/(2 pi l)``.
    """

    C: Array       # ()
    length: Array  # ()  > 0


def _g(spectrum, xi, *, xp):
    D = xi.shape[-1]
    u2 = (TWO_PI * spectrum.length) ** 2 * sq_norm(xi, xp=xp)                         # (r,)
    base = (TWO_PI * spectrum.length) ** D * iso_const(D) * (1.0 + u2) ** (-(D + 1) / 2.0)  # (r,) g / C
    return spectrum.C * base, None, (u2, base)


def _g_bwd(dg, dg_im, spectrum, xi, parts, g, *, xp):
    D = xi.shape[-1]
    u2, base = parts
    ell = spectrum.length
    dgg = dg * g                                                                      # (r,)
    dC = xp.sum(dg * base)
    dl = xp.sum(dgg * (D / ell - (D + 1) * u2 / (ell * (1.0 + u2))))
    dxi = xp.expand_dims(dgg * (-(D + 1) * (TWO_PI * ell) ** 2 / (1.0 + u2)), axis=1) * xi  # (r, D)
    return LaplaceKernel(C=dC, length=dl), dxi


def _f(spectrum, delta, *, xp):
    return spectrum.C * xp.exp(-xp.sqrt(sq_norm(delta, xp=xp)) / spectrum.length)


def _tail(spectrum, D):
    return ("iso_power", D + 1)


FAMILY = Family(check=check_scalar_length, dim=no_dim, g=_g, g_bwd=_g_bwd, f=_f, tail=_tail,
                own_proposal="mv_cauchy", positive=("length",))
