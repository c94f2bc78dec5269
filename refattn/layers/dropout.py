r"""Dropout (Srivastava et al. 2014) with an explicit, pre-drawn mask.

The core never draws: the mask is drawn at the NumPy edge by
``refattn.random.draw_dropout_mask(rng, shape, rate)`` (inverted dropout: entries are 0 with probability
``rate`` and ``1/(1 - rate)`` otherwise, so ``E[y] = x``) and passed in::

    y = x * mask

The same mask object serves the forward and the backward, so they cannot disagree. At evaluation time simply
do not call dropout (or pass a mask of ones).

Axes: ``x: (...)`` any shape; ``mask`` the same shape (or broadcastable to it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._xp import check_finite, namespace, sum_to_shape
from ._check import check_dy

__all__ = ["DropoutCache", "DropoutGrads", "dropout", "dropout_fwd", "dropout_bwd"]

Array = Any


class DropoutCache(NamedTuple):
    x: Array
    mask: Array


class DropoutGrads(NamedTuple):
    x: Array     # same shape as x
    mask: Array  # same shape as mask (dL/dmask = dy * x, summed over broadcast axes; rarely needed)


def dropout_fwd(x, mask):
    """``y = x * mask`` with `mask` from ``refattn.random.draw_dropout_mask``; returns ``(y, cache)``."""
    if mask is None:
        raise ValueError(
            "mask: dropout needs a pre-drawn mask; draw one at the edge with "
            "refattn.random.draw_dropout_mask(rng, x.shape, rate, dtype=...) (a numpy Generator rng), "
            "move it with refattn.random.as_xp(mask, like=x), and pass it as dropout(x, mask)"
        )
    xp = namespace(x, mask, names=("x", "mask"))
    full = tuple(x.shape)
    tail = full[len(full) - mask.ndim:] if mask.ndim <= len(full) else ()
    ok = mask.ndim <= len(full) and all(m in (1, f) for m, f in zip(tuple(mask.shape), tail, strict=True))
    if not ok:
        raise ValueError(f"mask: expected a shape broadcastable to x's {full}; got {tuple(mask.shape)}")
    check_finite("x", x, xp=xp)
    check_finite("mask", mask, xp=xp)
    return x * mask, DropoutCache(x=x, mask=mask)


def dropout_bwd(dy, cache: DropoutCache) -> DropoutGrads:
    """``dx = dy * mask``; ``dmask = dy * x`` (summed to the mask's shape)."""
    xp = check_dy(dy, cache.x)
    return DropoutGrads(x=dy * cache.mask, mask=sum_to_shape(dy * cache.x, tuple(cache.mask.shape), xp=xp))


def dropout(x, mask):
    """``x * mask`` (see :func:`dropout_fwd`)."""
    return dropout_fwd(x, mask)[0]
