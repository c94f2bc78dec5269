r"""Shifted spectra: f(Delta) = f_base(Delta - s), a real RPE function that is not even.

Its spectrum is Hermitian, g = exp(-2 pi i s . xi) g_base(xi) (complex: the only family with ``g_im``).
``Shifted`` is a combinator, not a family of its own: :func:`shifted_family` builds its protocol record from
the base family's (tail, support and proposal facts are the base's, since |g| = |g_base|).
Axes: ``r`` frequencies, ``D`` position dimension.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

from ..._xp import check_shape
from ._common import TWO_PI, Family

__all__ = ["Shifted", "shifted_family"]

Array = Any


class Shifted(NamedTuple):
    """f(Delta) = f_base(Delta - shift): a real RPE function that is not even, with the Hermitian spectrum
    g = exp(-2 pi i shift . xi) g_base(xi) (complex). ``base`` is any real-spectrum family."""

    base: Any      # a spectrum NamedTuple with a real g
    shift: Array   # (D,)


def _arrays(base: Family, spectrum):
    inner = base.arrays(spectrum.base) if base.arrays is not None else [
        (n, getattr(spectrum.base, n)) for n in spectrum.base._fields if n not in base.static]
    return [("base." + n, a) for n, a in inner] + [("shift", spectrum.shift)]


def _label(spectrum) -> str:
    return f"Shifted({type(spectrum.base).__name__})"


def _check(base: Family, spectrum, sizes, name, *, xp):
    base.check(spectrum.base, sizes, name + ".base", xp=xp)
    check_shape(f"{name}.shift", spectrum.shift, "D", sizes)


def _dim(spectrum) -> int:
    return int(spectrum.shift.shape[-1])


def _g(base: Family, spectrum, xi, *, xp):
    g0, _, parts0 = base.g(spectrum.base, xi, xp=xp)                                  # (r,)
    theta = TWO_PI * (xi @ spectrum.shift)                                            # (r,)
    g_re, g_im = xp.cos(theta) * g0, -xp.sin(theta) * g0                              # Hermitian g
    return g_re, g_im, (g0, parts0, theta)


def _g_bwd(base: Family, dg_re, dg_im, spectrum, xi, parts, g_re, *, xp):
    g0, parts0, theta = parts
    c, s = xp.cos(theta), xp.sin(theta)
    dg_im = xp.zeros_like(dg_re) if dg_im is None else dg_im
    dg0 = dg_re * c - dg_im * s                                                       # (r,)
    dtheta = -(dg_re * s + dg_im * c) * g0                                            # (r,)
    dbase, dxi0 = base.g_bwd(dg0, None, spectrum.base, xi, parts0, g0, xp=xp)
    dshift = TWO_PI * (dtheta @ xi)                                                   # (D,)
    dxi = dxi0 + TWO_PI * xp.expand_dims(dtheta, axis=1) * spectrum.shift             # (r, D)
    return Shifted(base=dbase, shift=dshift), dxi


def _f(base: Family, spectrum, delta, *, xp):
    return base.f(spectrum.base, delta - spectrum.shift, xp=xp)


def _tail(base: Family, spectrum, D):
    return base.tail(spectrum.base, D)


def shifted_family(base: Family) -> Family:
    """The protocol record of ``Shifted(base_spectrum, shift)`` given the base family's record."""
    return Family(check=partial(_check, base), dim=_dim, g=partial(_g, base), g_bwd=partial(_g_bwd, base),
                  f=partial(_f, base), tail=partial(_tail, base), arrays=partial(_arrays, base), label=_label)
