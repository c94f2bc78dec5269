"""The family protocol of :mod:`refattn.rpe.spectra` and the small helpers the family modules share.

A spectrum family is a parameter NamedTuple (its type names the family) plus one :class:`Family` record of
plain functions: shape/sign checks, g and its backward, f, and the tail fact the proposal check decides from.
The table that maps each parameter type to its record is :data:`refattn.rpe.spectra.core.FAMILIES`; nothing
else branches on the family.

Axes: ``r`` frequencies, ``D`` position dimension, ``T`` mixture components, ``...`` offsets' leading axes.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

from ..._xp import check_shape

Array = Any
TWO_PI = 2.0 * math.pi


class Family(NamedTuple):
    """One spectrum family's functions (every field is a plain function, no state).

    * ``check(spectrum, sizes, name, *, xp) -> None``: parameter shapes (binding ``D``/``T`` in `sizes`) and
      signs; finiteness is checked once for all families by ``check_spectrum``.
    * ``dim(spectrum) -> int | None``: the position dimension D its shapes fix (None when any D fits).
    * ``g(spectrum, xi, *, xp) -> (g_re, g_im, parts)``: g at ``xi: (r, D)``; ``g_im`` is None for a real g;
      ``parts`` are the intermediates the backward needs.
    * ``g_bwd(dg_re, dg_im, spectrum, xi, parts, g_re, *, xp) -> (dspectrum, dxi)``: the backward of ``g``
      (``dg_im`` is ignored by the real families); ``dspectrum`` has the spectrum's own container type.
    * ``f(spectrum, delta, *, xp) -> (...)``: the RPE function (``Re f`` for a non-even real f) at
      ``delta: (..., D)``.
    * ``tail(spectrum, D) -> tuple``: how fast |g| decays (see ``refattn.rpe.spectra.proposals``).
    * ``own_proposal``: the standard proposal kind that is the family's own spectral density (shift-invariant
      kernels), or None.
    * ``static``: field names that are Python integers, not parameter arrays.
    * ``arrays(spectrum) -> [(name, array)]``: the parameter arrays (default: every field not in ``static``;
      the ``Shifted`` combinator nests its base's).
    * ``label(spectrum) -> str``: the family's name in messages (default: the container's type name).
    * ``positive``: the names of the parameter arrays that must be positive (widths, lengths, radii): a model
      learns them through their logarithm (``refattn.nn.kinds.domains``).
    * ``tail_param(spectrum, *, xp) -> (p, dp)``: the tail's parameter (tau of a ``"gauss"`` tail, b of an
      ``"exp"`` tail; the class is ``tail_class``) as a 0-d array, computed without a host sync, and its
      gradient with respect to the parameters in the spectrum's own container type; None for the families
      whose tail has no parameter (``refattn.rpe.spectra.proposals.scale_floor``).
    """

    check: Callable
    dim: Callable
    g: Callable
    g_bwd: Callable
    f: Callable
    tail: Callable
    own_proposal: str | None = None
    static: tuple = ()
    arrays: Callable | None = None
    label: Callable | None = None
    positive: tuple = ()
    tail_param: Callable | None = None
    tail_class: str | None = None


def no_dim(spectrum) -> None:
    """``Family.dim`` of the isotropic families: any D fits."""
    return None


def sq_norm(x, *, xp):
    return xp.sum(x * x, axis=-1)


def iso_const(D: int) -> float:
    """c_D = Gamma((D + 1)/2) / pi^((D + 1)/2): the standard multivariate Cauchy density at 0."""
    return math.exp(math.lgamma((D + 1) / 2.0) - (D + 1) / 2.0 * math.log(math.pi))


def check_positive(name, x, *, xp):
    if not bool(xp.all(x > 0)):
        raise ValueError(f"{name}: expected positive values; got minimum {float(xp.min(x)):.6g}")


def prod_except(factors, j, *, xp):
    """prod over the last axis of `factors` leaving out index j (no division: factors may be zero)."""
    D = factors.shape[-1]
    out = None
    for i in range(D):
        if i == j:
            continue
        out = factors[..., i] if out is None else out * factors[..., i]
    return out if out is not None else xp.ones_like(factors[..., 0])


def check_scalar_length(spectrum, sizes, name, *, xp):
    """``Family.check`` of the shift-invariant kernels: scalar C, scalar length > 0."""
    check_shape(f"{name}.C", spectrum.C, "", sizes)
    check_shape(f"{name}.length", spectrum.length, "", sizes)
    check_positive(f"{name}.length", spectrum.length, xp=xp)


# ----------------------------------------------------------------------------------------------------------
# one-dimensional sinc factors of the box family, with derivatives (safe at xi = 0), and their f


def sinc_factor(x, v, *, xp):
    """h(x) = sin(2 pi v x) / (pi x) (value 2 v at x = 0), dh/dv = 2 cos(2 pi v x), dh/dx.

    `x` and `v` broadcast together. Near x = 0 the quotient's derivative cancels catastrophically, so for
    |2 pi v x| < 1e-3 the series h' = -(2 pi v)^3 x / (3 pi) (+ O(x^3)) is used.
    """
    a = TWO_PI * v
    ax = a * x
    small = xp.abs(ax) < 1e-3
    one = xp.ones_like(ax)
    x_safe = xp.where(small, one, x * one)
    h = xp.where(small, (a / math.pi) * (1.0 - ax * ax / 6.0), xp.sin(ax) / (math.pi * x_safe))
    dh_dv = 2.0 * xp.cos(ax)
    dh_dx = xp.where(small, -(a * a * a) * x / (3.0 * math.pi),
                     (a * xp.cos(ax) - xp.sin(ax) / x_safe) / (math.pi * x_safe))
    return h, dh_dv, dh_dx


def _step(x, *, xp):
    """Heaviside with the Fourier-inversion midpoint: 1 for x > 0, 1/2 at 0, 0 below."""
    return xp.where(x > 0, xp.ones_like(x), xp.where(x == 0, 0.5 * xp.ones_like(x), xp.zeros_like(x)))


def box_indicator(delta, v, *, xp):
    """1[|delta| < v] with 1/2 at |delta| = v (what the inverse transform of sin(2 pi v xi)/(pi xi) gives)."""
    return _step(v - xp.abs(delta), xp=xp)


# ----------------------------------------------------------------------------------------------------------
# the product families C prod_j s(xi_j) with one radius v_j per axis (SinPower, BSpline)


def product_check(spectrum, sizes, name, *, xp):
    """Shapes and signs shared by the product families: scalar C, ``v: (D,)`` > 0, integer ``k >= 1``."""
    check_shape(f"{name}.C", spectrum.C, "", sizes)
    check_shape(f"{name}.v", spectrum.v, "D", sizes)
    check_positive(f"{name}.v", spectrum.v, xp=xp)
    k = spectrum.k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{name}.k: expected a positive integer; got {k!r}")


def product_dim(spectrum) -> int:
    return int(spectrum.v.shape[-1])


def product_g(spectrum, factors, *, xp):
    """g = C prod_j s_j from the per-axis factors ``(s, ds_dv, ds_dx)``, each ``(r, D)``: ``(g, None,
    parts)``."""
    s, ds_dv, ds_dx = factors
    P = xp.prod(s, axis=-1)                                                       # (r,)
    return spectrum.C * P, None, (s, ds_dv, ds_dx, P)


def product_g_bwd(dg, dg_im, spectrum, xi, parts, g, *, xp):
    """Backward of :func:`product_g`: ``(dspectrum, dxi)`` with ``dspectrum`` of the spectrum's own type."""
    s, ds_dv, ds_dx, P = parts
    D = xi.shape[-1]
    dC = xp.sum(dg * P)
    dP = dg * spectrum.C                                                          # (r,)
    dv_cols, dxi_cols = [], []
    for j in range(D):
        ds = dP * prod_except(s, j, xp=xp)                                        # (r,)
        dv_cols.append(xp.sum(ds * ds_dv[..., j]))
        dxi_cols.append(ds * ds_dx[..., j])
    dv = xp.stack(dv_cols)                                                        # (D,)
    return type(spectrum)(C=dC, v=dv, k=spectrum.k), xp.stack(dxi_cols, axis=-1)
