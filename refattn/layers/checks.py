"""Boundary checks shared by the layers: parameter containers and the incoming gradient of a backward.

A backward's ``dy`` must have exactly the shape of the forward's output (kept in the cache): broadcasting a
wrong-shaped ``dy`` would return plausible-looking gradients of the wrong thing. It must be finite and of the
forward's namespace and dtype.
"""

from __future__ import annotations

from .._xp import check_finite, namespace

__all__ = ["check_dy", "check_dy_spec", "check_finite_all", "check_scalar_dloss", "check_index_range"]


def check_dy(dy, like, shape=None, *, name="dy"):
    """Check `dy` (the gradient of the forward's output) against the cached array `like`: same namespace and
    dtype, exactly ``shape`` (default ``like.shape``), finite. Returns the namespace."""
    xp = namespace(dy, like, names=(name, "the forward's cache"))
    want = tuple(like.shape) if shape is None else tuple(shape)
    if tuple(dy.shape) != want:
        raise ValueError(f"{name}: expected the shape of the forward's output {want}; got {tuple(dy.shape)} "
                         "(a backward never broadcasts its incoming gradient)")
    check_finite(name, dy, xp=xp)
    return xp


def check_dy_spec(dy, shape, dtype, *, name="dy"):
    """:func:`check_dy` when the cache keeps a shape and a dtype instead of an array."""
    xp = namespace(dy, names=(name,))
    if dy.dtype != dtype:
        raise TypeError(f"{name}: expected the forward's dtype {dtype}; got dtype {dy.dtype}")
    if tuple(dy.shape) != tuple(shape):
        raise ValueError(f"{name}: expected the shape of the forward's output {tuple(shape)}; got "
                         f"{tuple(dy.shape)} (a backward never broadcasts its incoming gradient)")
    check_finite(name, dy, xp=xp)
    return xp


def check_finite_all(xp, **arrays):
    """``check_finite`` for each named array (parameters: a NaN weight is as bad as a NaN input)."""
    for n, a in arrays.items():
        check_finite(n, a, xp=xp)


def check_scalar_dloss(dloss, like, *, name="dloss"):
    """A loss gradient: a 0-d finite array of `like`'s namespace and dtype."""
    return check_dy(dloss, like, (), name=name)


def check_index_range(name, ids, n, expected, *, xp):
    """Raise ``ValueError`` unless every entry of the integer array `ids` lies in ``[0, n)``: one fused flag
    (one host sync); the observed range is read only after a failure. `expected` completes the message
    ``"<name>: expected <expected>; got values in [lo, hi]"``."""
    if not ids.size:
        return
    if not bool(xp.logical_and(xp.min(ids) >= 0, xp.max(ids) < n)):                 # the one sync
        lo, hi = int(xp.min(ids)), int(xp.max(ids))
        raise ValueError(f"{name}: expected {expected}; got values in [{lo}, {hi}]")
