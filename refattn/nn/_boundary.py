"""Boundary checks of the model API (issue 25): parameter and feature trees checked leaf by leaf and named as
the user passed them (``params['blocks'][0]['attn']['q'][0]``), and errors raised inside a sub-layer prefixed
with the argument that holds it."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from .._xp import check_finite, namespace
from ..tree import tree_paths

__all__ = ["user_path", "check_tree", "naming"]


def user_path(path: str) -> str:
    """``"params/blocks/0/ln1"`` -> ``"params['blocks'][0]['ln1']"`` (how the user indexes the tree)."""
    head, *keys = path.split("/")
    return head + "".join(f"[{k}]" if k.isdigit() else f"[{k!r}]" for k in keys)


def check_tree(name: str, tree: Any, dtype: Any = None) -> Any:
    """Check every array leaf of `tree`: real floating (integer leaves are index parameters: allowed, not
    checked further), one dtype for all (`dtype` if given; never a silent cast), finite values. Raises
    ``TypeError``/``ValueError`` naming the leaf; returns the floating dtype."""
    first = None
    for p, leaf in tree_paths(tree, name):
        n = user_path(p)
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
