r"""The local RPE (FLT Eq. 4, its D-dimensional product form and the sum of indicators of Eq. 20/21): boxes.

``f = sum_t w_t prod_j 1[|Delta_j| <= v_tj]``, ``g = sum_t w_t prod_j sin(2 pi v_tj xi_j) / (pi xi_j)``.

**No Monte Carlo estimator.** The sinc spectrum is not absolutely integrable, so ``E|g/p| = int |g| = inf``
under every proposal p: the estimator of Theorem 4.1 has no mean (tail class ``not_integrable``; the proposal
check rejects it unless a truncated proposal is asked for). Fourier inversion at a jump |Delta_j| = v gives
the midpoint (1/2 of the box's height), not the height printed in Eq. (4): :func:`spectrum_f` returns that
midpoint. Axes: ``r`` frequencies, ``T`` boxes, ``D`` position dimension.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..._xp import check_shape
from ._common import Family, box_indicator, check_positive, prod_except, sinc_factor

__all__ = ["Box", "FAMILY"]

Array = Any


class Box(NamedTuple):
    r"""Local RPE (boxes, FLT Eq. (4), (20)), C outside the product, with learnable weights w and radii v.

    ``f = sum_t w_t prod_j 1[|Delta_j| <= v_tj]`` and
    ``g = sum_t w_t prod_j sin(2 pi v_tj xi_j) / (pi xi_j)``.

    One box (T = 1) of height C is ``Box(w=[C], v=[[v_1, ..., v_D]])``: ``f = C * prod_j 1[|Delta_j| <= v_j]``
    and ``g = C * prod_j sin(2 pi v_j xi_j) / (pi xi_j)``, i.e. **C outside the product** (the Fig. 4
    caption's form; ``tests/rpe/test_spectra.py`` transforms this f by quadrature for D = 1 and 2 and compares
    with this g). The D-dimensional f printed in FLT Sec. 4.3 puts C *inside* the product,
    ``prod_j C 1[|Delta_j| <= v_j]``: that f is ``C^D prod_j 1[...]`` and transforms to
    ``C^D prod_j sin(2 pi v_j xi_j) / (pi xi_j)``, not to the printed ``C prod_j (...)`` (the two agree only
    for D = 1); to encode it, pass ``w = [C**D]``.

    ``int |g| = inf``: no proposal gives a finite mean (module docstring).
    """

    w: Array  # (T,)
    v: Array  # (T, D)  > 0


def _check(spectrum, sizes, name, *, xp):
    check_shape(f"{name}.w", spectrum.w, "T", sizes)
    check_shape(f"{name}.v", spectrum.v, "T, D", sizes)
    check_positive(f"{name}.v", spectrum.v, xp=xp)


def _dim(spectrum) -> int:
    return int(spectrum.v.shape[-1])


def _g(spectrum, xi, *, xp):
    # h, dh_dv, dh_dx: (r, T, D), one sinc factor per frequency, box and axis
    h, dh_dv, dh_dx = sinc_factor(xp.expand_dims(xi, axis=1), xp.expand_dims(spectrum.v, axis=0), xp=xp)
    P = xp.prod(h, axis=-1)                                                           # (r, T)
    return P @ spectrum.w, None, (h, dh_dv, dh_dx, P)                                 # (r,)


def _g_bwd(dg, dg_im, spectrum, xi, parts, g, *, xp):
    D = xi.shape[-1]
    h, dh_dv, dh_dx, P = parts
    dw = xp.matrix_transpose(P) @ dg                                                  # (T,)
    dP = xp.expand_dims(dg, axis=1) * spectrum.w                                      # (r, T)
    dv_cols, dxi_cols = [], []
    for j in range(D):
        dh = dP * prod_except(h, j, xp=xp)                                            # (r, T)
        dv_cols.append(xp.sum(dh * dh_dv[..., j], axis=0))                            # (T,)
        dxi_cols.append(xp.sum(dh * dh_dx[..., j], axis=1))                           # (r,)
    return Box(w=dw, v=xp.stack(dv_cols, axis=-1)), xp.stack(dxi_cols, axis=-1)


def _f(spectrum, delta, *, xp):
    ind = box_indicator(xp.expand_dims(delta, axis=-2), spectrum.v, xp=xp)            # (..., T, D)
    return xp.sum(spectrum.w * xp.prod(ind, axis=-1), axis=-1)


def _tail(spectrum, D):
    return ("not_integrable",)


FAMILY = Family(check=_check, dim=_dim, g=_g, g_bwd=_g_bwd, f=_f, tail=_tail, positive=("v",))
