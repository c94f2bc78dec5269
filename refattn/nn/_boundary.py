"""Boundary checks of the model API (issue 25): parameter and feature trees checked leaf by leaf and named as
the user passed them (``params['blocks'][0]['attn']['q'].W``), and errors raised inside a sub-layer prefixed
with the argument that holds it."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from .._xp import check_finite, namespace
from ..tree import is_leaf, tree_children

__all__ = ["check_tree", "naming"]


def _leaves(tree: Any, name: str):
    """``(name as the user indexes it, leaf)`` for every array leaf: ``name['key']``, ``name[0]``, ``name.W``
    (NamedTuple fields)."""
    kids = tree_children(tree)
    if kids is None:
        if is_leaf(tree):
            yield name, tree
        return
    field = isinstance(tree, tuple) and hasattr(tree, "_fields")
    for k, v in kids:
        key = f".{k}" if field else f"[{k!r}]" if isinstance(k, str) else f"[{k}]"
        yield from _leaves(v, name + key)


def check_tree(name: str, tree: Any, dtype: Any = None) -> Any:
    """Check every array leaf of `tree`: real floating (integer leaves are index parameters: allowed, not
    checked further), one dtype for all (`dtype` if given; never a silent cast), finite values. Raises
    ``TypeError``/``ValueError`` naming the leaf; returns the floating dtype."""
    first = None
    for n, leaf in _leaves(tree, name):
        xp = namespace(leaf, names=(n,), allow_int=(n,))
        if xp.isdtype(leaf.dtype, "integral"):
            continue
        if dtype is None:
            dtype, first = leaf.dtype, n
        elif leaf.dtype != dtype:
            raise TypeError(f"{n}: expected dtype {dtype} (that of {first or 'the model'}); got {leaf.dtype}")
        first = first or n
        check_finite(n, leaf, xp=xp)
    return dtype


@contextmanager
def naming(label: str):
    """Prefix a ``ValueError``/``TypeError`` raised inside with `label` (the argument that holds the
    sub-layer's input), keeping the exception's type."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        exc.args = (f"{label}: {exc.args[0] if exc.args else exc}", *exc.args[1:])
        raise
