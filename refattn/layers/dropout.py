r"""Inverted dropout (Srivastava et al. 2014), ``y = x * mask``, with a mask drawn at the NumPy edge.

The core never draws: ``refattn.random.draw_dropout_mask(rng, shape, rate)`` gives entries 0 with probability
``rate`` and ``1/(1 - rate)`` otherwise (so ``E[y] = x``); the same mask object serves the forward and the
backward, so they cannot disagree. At evaluation time do not call dropout (or pass a mask of ones). Axes:
``x: (...)`` any shape, ``mask`` the same shape or broadcastable to it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, namespace, sum_to_shape
from .checks import check_dy

__all__ = ["DropoutCache", "DropoutGrads", "dropout", "dropout_fwd", "dropout_bwd"]

Array = Any


class DropoutCache(NamedTuple):
    """What :func:`dropout_bwd` needs: the input ``x`` and the ``mask``."""

    x: Array
    mask: Array


class DropoutGrads(NamedTuple):
    """Gradients of :func:`dropout`: ``x`` and ``mask`` (summed to the mask's shape)."""

    x: Array     # same shape as x
    mask: Array  # same shape as mask (dL/dmask = dy * x, summed over broadcast axes; rarely needed)


_PARAMS = """
x : (...) array
    Real floating (float32 or float64), finite; any shape.
mask : array broadcastable to x.shape
    From ``refattn.random.draw_dropout_mask(rng, shape, rate)`` (entries 0 or ``1/(1 - rate)``), moved to
    `x`'s namespace with ``refattn.random.as_xp``; same dtype as `x`, finite. Required.
"""

_RAISES = """
ValueError
    `mask` is ``None`` (the message says how to draw one), not broadcastable to `x`, or not finite; or `x` is
    not finite.
TypeError
    Mixed namespaces or dtypes.
"""


@fill_doc(params=_PARAMS, raises=_RAISES)
def dropout_fwd(x, mask):
    """Forward of :func:`dropout` (see it for the equations), with the cache for :func:`dropout_bwd`.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (...) array
        Shape of `x`; same namespace and dtype.
    cache : DropoutCache
        ``(x, mask)``, for :func:`dropout_bwd`.

    Raises
    ------
    {raises}
    """
    xp = check_dropout(x, mask)
    check_finite("x", x, xp=xp)
    check_finite("mask", mask, xp=xp)
    return dropout_fwd_core(x, mask, xp=xp)


def check_dropout(x, mask, *, name="mask", shape=None):
    """Structural checks of :func:`dropout_fwd` (a mask given, namespaces, dtypes, a broadcastable shape; no
    data read); `name` names the mask in messages, `shape` (default x's) is that of the array it multiplies.
    """
    if mask is None:
        raise ValueError(
            f"{name}: dropout needs a pre-drawn mask; draw one at the edge with "
            "refattn.random.draw_dropout_mask(rng, x.shape, rate, dtype=...) (a numpy Generator rng), "
            "move it with refattn.random.as_xp(mask, like=x), and pass it as dropout(x, mask)"
        )
    xp = namespace(x, mask, names=("x", name))
    full = tuple(x.shape) if shape is None else tuple(shape)
    tail = full[len(full) - mask.ndim:] if mask.ndim <= len(full) else ()
    ok = mask.ndim <= len(full) and all(m in (1, f) for m, f in zip(tuple(mask.shape), tail, strict=True))
    if not ok:
        what = "x's" if shape is None else "the masked array's"
        raise ValueError(f"{name}: expected a shape broadcastable to {what} {full}; got {tuple(mask.shape)}")
    return xp


# y = x * mask
# dx = dy * mask,  dmask = dy * x summed to the mask's shape
def dropout_fwd_core(x, mask, *, xp):
    """Unchecked core of :func:`dropout_fwd` (see :func:`dropout`)."""
    return x * mask, DropoutCache(x=x, mask=mask)


def dropout_bwd(dy, cache: DropoutCache) -> DropoutGrads:
    """Gradients of :func:`dropout` (see it for the equations).

    Parameters
    ----------
    dy : (...) array
        Cotangent of the output: exactly the shape of `x`, same namespace and dtype; finite.
    cache : DropoutCache
        From :func:`dropout_fwd`.

    Returns
    -------
    DropoutGrads
        ``x``: shape of `x`; ``mask``: shape of `mask` (summed over the axes it was broadcast along).

    Raises
    ------
    ValueError
        If `dy` is not of `x`'s shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    return dropout_bwd_core(dy, cache, xp=check_dy(dy, cache.x))


def dropout_bwd_core(dy, cache, *, mask_grad=True, xp):
    """Unchecked core of :func:`dropout_bwd`; ``mask_grad=False`` skips the mask's gradient (``None``)."""
    dmask = sum_to_shape(dy * cache.x, tuple(cache.mask.shape), xp=xp) if mask_grad else None
    return DropoutGrads(x=dy * cache.mask, mask=dmask)


@fill_doc(params=_PARAMS, raises=_RAISES)
def dropout(x, mask):
    """Inverted dropout (Srivastava et al. 2014) with a pre-drawn mask: ``y = x * mask``.

    The gradients are ``dx = dy * mask`` and ``dmask = dy * x`` summed to the mask's shape.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (...) array
        Shape of `x`; same namespace and dtype.

    Raises
    ------
    {raises}

    See Also
    --------
    dropout_fwd, dropout_bwd : the differentiable pair.
    refattn.random.draw_dropout_mask : draws the mask (the core never draws).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import dropout
    >>> from refattn.random import draw_dropout_mask
    >>> mask = draw_dropout_mask(np.random.default_rng(0), (2, 4), 0.5)   # entries 0 or 1/(1 - 0.5) = 2
    >>> bool(np.all((mask == 0) | (mask == 2)))
    True
    >>> x = np.ones((2, 4))
    >>> bool(np.array_equal(dropout(x, mask), x * mask))
    True
    """
    return dropout_fwd(x, mask)[0]
