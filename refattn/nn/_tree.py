"""Parameter-tree helpers: nested dicts / NamedTuples / tuples / lists with array leaves (``None`` leaves kept).

Used by the optimisers and the transformer; pure functions, no NumPy.
"""

from __future__ import annotations

from typing import Any, Callable

import array_api_compat

__all__ = ["tree_map", "tree_leaves", "tree_structure_equal"]


def _is_namedtuple(t: Any) -> bool:
    return isinstance(t, tuple) and hasattr(t, "_fields")


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``f`` leafwise to `tree` and trees of the same structure `rest`; ``None`` leaves stay ``None`` and
    static non-array leaves (strings, ints such as a proposal's ``kind``) are returned unchanged."""
    if tree is None:
        return None
    if isinstance(tree, (str, int, float, bool)):
        return tree
    if isinstance(tree, dict):
        return {k: tree_map(f, v, *(r[k] for r in rest)) for k, v in tree.items()}
    if _is_namedtuple(tree):
        return type(tree)(*(tree_map(f, v, *(getattr(r, n) for r in rest)) for n, v in zip(tree._fields, tree)))
    if isinstance(tree, (tuple, list)):
        out = [tree_map(f, v, *(r[i] for r in rest)) for i, v in enumerate(tree)]
        return type(tree)(out) if isinstance(tree, tuple) else out
    return f(tree, *rest)


def tree_leaves(tree: Any) -> list:
    """Array leaves of `tree` in a fixed order (dict insertion order, NamedTuple field order)."""
    if tree is None:
        return []
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in tree_leaves(v)]
    if isinstance(tree, (tuple, list)):
        return [x for v in tree for x in tree_leaves(v)]
    return [tree] if array_api_compat.is_array_api_obj(tree) else []


def tree_structure_equal(a: Any, b: Any) -> bool:
    """Whether two trees have the same containers, keys and leaf shapes."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(tree_structure_equal(a[k], b[k]) for k in a))
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b) and all(tree_structure_equal(x, y) for x, y in zip(a, b)))
    if a is None or b is None:
        return a is None and b is None
    return tuple(a.shape) == tuple(b.shape)
