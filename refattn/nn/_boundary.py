"""Boundary checks of the model API: parameter, feature and mask trees checked once, at the public boundary,
with every leaf named as the user passed it (``params['blocks'][0]['attn']['q'].W``), and errors raised inside
a sub-layer prefixed with the argument that holds it.

Validate once: :func:`check_trees` checks the dtypes and namespaces of every leaf (metadata, no data read),
then their finiteness in one fused pass: one ``all(isfinite)`` flag per leaf, and-ed together on the device,
read with **one** host sync. Only after a failure does it walk the leaves again, in order, naming
each leaf, to report the first faulty one. The errors are those of a leaf-by-leaf walk: the first faulty leaf
(in the trees' order) is the one reported, whatever its fault.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from .._xp import check_finite, dtype_kind, known_namespace, namespace
from ..tree import is_leaf, tree_children

__all__ = ["check_trees", "naming"]


def _leaves(tree: Any, name: str | None):
    """``(name as the user indexes it, leaf)`` for every array leaf: ``name['key']``, ``name[0]``, ``name.W``
    (NamedTuple fields); with `name` None, ``(None, leaf)`` and no names built (the walk of passing trees)."""
    kids = tree_children(tree)
    if kids is None:
        if is_leaf(tree):
            yield name, tree
        return
    if name is None:
        for _, v in kids:
            yield from _leaves(v, None)
        return
    field = isinstance(tree, tuple) and hasattr(tree, "_fields")
    for k, v in kids:
        key = f".{k}" if field else f"[{k!r}]" if isinstance(k, str) else f"[{k}]"
        yield from _leaves(v, name + key)


def _all_finite(floats: list) -> bool:
    """Whether every array of `floats` (``(name, leaf, xp)``) is finite: the leaves' flags and-ed on the
    device, one host sync per namespace (one in practice)."""
    flags: dict = {}
    for _, leaf, xp in floats:
        flag = xp.all(xp.isfinite(leaf))                                                  # () bool, on device
        flags[id(xp)] = flag if id(xp) not in flags else flags[id(xp)] & flag
    return all(bool(f) for f in flags.values())                                            # the one sync


_NAMED_WALK = object()


def _passing_dtype(trees: tuple, dtype: Any) -> Any:
    """The walk of :func:`check_trees` for trees that pass: the floating dtype, or ``_NAMED_WALK`` at the
    first thing that needs the named walk (a fault, or an array type not met before)."""
    floats = []
    for _, tree in trees:
        for _, leaf in _leaves(tree, None):
            xp = known_namespace(leaf)
            if xp is None:
                return _NAMED_WALK
            kind = dtype_kind(xp, leaf.dtype)
            if kind == "integral":
                continue
            if kind != "float" or (dtype is not None and leaf.dtype != dtype):
                return _NAMED_WALK
            dtype = leaf.dtype
            floats.append((None, leaf, xp))
    if floats and not _all_finite(floats):
        return _NAMED_WALK
    return dtype


def check_trees(*trees: tuple[str, Any], dtype: Any = None) -> Any:
    """Check every array leaf of the ``(name, tree)`` pairs once: real floating (integer leaves are index
    parameters: allowed, not checked further), one dtype for all (`dtype` if given; never a silent cast),
    finite values (one fused flag, one host sync). Raises ``TypeError``/``ValueError`` naming the first bad
    leaf as the user indexes it; returns the floating dtype."""
    passed = _passing_dtype(trees, dtype)
    if passed is not _NAMED_WALK:
        return passed
    floats, first = [], None
    for tree_name, tree in trees:
        for n, leaf in _leaves(tree, tree_name):
            try:
                xp = namespace(leaf, names=(n,), allow_int=(n,))
                if xp.isdtype(leaf.dtype, "integral"):
                    continue
                if dtype is None:
                    dtype, first = leaf.dtype, n
                elif leaf.dtype != dtype:
                    raise TypeError(f"{n}: expected dtype {dtype} (that of {first or 'the model'}); got "
                                    f"{leaf.dtype}")
            except TypeError:
                for m, a, axp in floats:                           # an earlier leaf's fault is reported first
                    check_finite(m, a, xp=axp)
                raise
            first = first or n
            floats.append((n, leaf, xp))
    if floats and not _all_finite(floats):
        for m, a, axp in floats:                                   # after a failure only: name the culprit
            check_finite(m, a, xp=axp)
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
