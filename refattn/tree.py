"""The one walker of parameter trees: nested dicts, NamedTuples, tuples and lists with array leaves.

A *leaf* is an array of any array-API library (``array_api_compat.is_array_api_obj``); any other non-container
is *static* (``None``, strings, numbers) and handed back unchanged. Containers are walked in order (dict
insertion, NamedTuple fields, indices). A path joins a leaf's keys with ``"/"``, e.g. ``"blocks/0/attn/q/W"``
(the checkpoint format; a dict key containing ``"/"`` is rejected).

Examples
--------
>>> import numpy as np
>>> from refattn.layers import DenseParams
>>> from refattn.tree import tree_map, tree_paths
>>> params = {"dense": DenseParams(W=np.ones((2, 3)), b=np.zeros(3)), "kind": "favor"}
>>> tree_map(lambda a: a.shape, params)                              # static entries kept as they are
{'dense': DenseParams(W=(2, 3), b=(3,)), 'kind': 'favor'}
>>> [(path, leaf.shape) for path, leaf in tree_paths(params)]
[('dense/W', (2, 3)), ('dense/b', (3,))]
"""

from __future__ import annotations

from typing import Any, Callable

import array_api_compat

from ._docs import fill_doc

__all__ = ["is_leaf", "tree_children", "tree_leaves", "tree_paths", "tree_map", "tree_map_with_path",
           "tree_get", "tree_replace", "tree_structure_equal"]

_PREFIX = """
prefix : str, default ""
    Prepended to every path (``prefix/key/...``).
"""
_SLASH = """
ValueError
    If a dict key contains ``"/"`` (the path separator).
"""
_TREE_PATH = """
tree : object
    A tree (not modified).
path : str
    Keys joined by ``"/"`` as in :func:`tree_paths` (``""``: the whole tree).
"""
_PATH_RAISES = """
KeyError, IndexError, AttributeError, ValueError
    If `path` names a key, index or field that `tree` does not have (a non-integer list index: ValueError).
"""


def is_leaf(x: Any) -> bool:
    """Whether `x` is an array leaf (an array of any array-API library).

    Parameters
    ----------
    x : object

    Returns
    -------
    bool
    """
    return array_api_compat.is_array_api_obj(x)


def _is_namedtuple(t: Any) -> bool:
    return isinstance(t, tuple) and hasattr(t, "_fields")


def tree_children(tree: Any) -> list | None:
    """The ``(key, child)`` pairs of a container, or ``None`` for anything that is not one.

    Parameters
    ----------
    tree : object

    Returns
    -------
    list of (key, child) or None
        Dict keys, NamedTuple field names, or indices, in walk order; ``None`` for a leaf or a static entry.
    """
    if isinstance(tree, dict):
        return list(tree.items())
    if _is_namedtuple(tree):
        return [(f, getattr(tree, f)) for f in tree._fields]
    if isinstance(tree, (tuple, list)):
        return list(enumerate(tree))
    return None


def _rebuild(tree: Any, values: list) -> Any:
    # a container of `tree`'s type holding `values` (one per child, in tree_children order)
    if isinstance(tree, dict):
        return dict(zip(tree.keys(), values, strict=True))
    if _is_namedtuple(tree):
        return type(tree)(*values)
    return type(tree)(values) if isinstance(tree, tuple) else list(values)


def _child(tree: Any, key: Any) -> Any:
    if tree is None:
        return None
    if isinstance(tree, dict):
        return tree[key]
    if _is_namedtuple(tree) and isinstance(key, str):
        return getattr(tree, key)
    return tree[key]


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn(leaf, *rest_leaves)`` to every array leaf of `tree`, keeping its structure.

    Parameters
    ----------
    fn : callable
        ``fn(leaf, *rest_leaves) -> new leaf``; static entries are kept and not passed to `fn`.
    tree : object
    *rest : object
        Trees like `tree`; their entries at a leaf's place are passed as they are, ``None`` included (one
        lacking a key, index or field of `tree` raises ``KeyError``, ``IndexError`` or ``AttributeError``).

    Returns
    -------
    object
    """
    kids = tree_children(tree)
    if kids is None:
        return fn(tree, *rest) if is_leaf(tree) else tree
    return _rebuild(tree, [tree_map(fn, v, *(_child(r, k) for r in rest)) for k, v in kids])


def _join(prefix: str, key: Any) -> str:
    if isinstance(key, str) and "/" in key:
        raise ValueError(f"tree: key {key!r} contains '/', which paths reserve as the separator")
    return f"{prefix}/{key}" if prefix else str(key)


@fill_doc(prefix=_PREFIX, slash=_SLASH)
def tree_map_with_path(fn: Callable[[str, Any], Any], tree: Any, prefix: str = "") -> Any:
    """Apply ``fn(path, leaf)`` to every array leaf of `tree`, keeping its structure.

    Parameters
    ----------
    fn : callable
        ``fn(path, leaf) -> new leaf``, with `path` as in :func:`tree_paths`.
    tree : object
    {prefix}

    Returns
    -------
    object

    Raises
    ------
    {slash}
    """
    kids = tree_children(tree)
    if kids is None:
        return fn(prefix, tree) if is_leaf(tree) else tree
    return _rebuild(tree, [tree_map_with_path(fn, v, _join(prefix, k)) for k, v in kids])


@fill_doc(prefix=_PREFIX, slash=_SLASH)
def tree_paths(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """The ``(path, leaf)`` pairs of every array leaf, in walk order.

    Parameters
    ----------
    tree : object
    {prefix}

    Returns
    -------
    list of (str, array)

    Raises
    ------
    {slash}
    """
    kids = tree_children(tree)
    if kids is None:
        return [(prefix, tree)] if is_leaf(tree) else []
    return [pl for k, v in kids for pl in tree_paths(v, _join(prefix, k))]


def tree_leaves(tree: Any) -> list:
    """The array leaves of `tree` in walk order (dict insertion order, NamedTuple field order).

    Parameters
    ----------
    tree : object

    Returns
    -------
    list of array
    """
    return [leaf for _, leaf in tree_paths(tree)]


def _keys(tree: Any, path: str) -> list:
    keys, node = [], tree
    for part in (path.split("/") if path else []):
        key = int(part) if (isinstance(node, (tuple, list)) and not _is_namedtuple(node)) else part
        keys.append(key)
        node = _child(node, key)
    return keys


@fill_doc(tree_path=_TREE_PATH, path_raises=_PATH_RAISES)
def tree_get(tree: Any, path: str) -> Any:
    """The entry of `tree` at `path`.

    Parameters
    ----------
    {tree_path}

    Returns
    -------
    object
        The entry (a leaf, a sub-tree or a static entry); ``None`` when a container on the way is ``None``.

    Raises
    ------
    {path_raises}
    """
    for key in _keys(tree, path):
        tree = _child(tree, key)
    return tree


@fill_doc(tree_path=_TREE_PATH, path_raises=_PATH_RAISES)
def tree_replace(tree: Any, path: str, value: Any) -> Any:
    """A copy of `tree` with the entry at `path` replaced by `value`.

    Parameters
    ----------
    {tree_path}
    value : object

    Returns
    -------
    object
        A new tree: the containers on the path are rebuilt, every other entry is shared with `tree`.

    Raises
    ------
    {path_raises}
    """
    keys = _keys(tree, path)
    if not keys:
        return value
    head, tail = keys[0], "/".join(str(k) for k in keys[1:])
    kids = tree_children(tree)
    return _rebuild(tree, [tree_replace(v, tail, value) if k == head else v for k, v in kids])


def tree_structure_equal(a: Any, b: Any) -> bool:
    """Whether two trees have the same containers, keys, static entries (``==``) and leaf shapes (not dtypes).

    Parameters
    ----------
    a, b : object

    Returns
    -------
    bool
    """
    ka, kb = tree_children(a), tree_children(b)
    if ka is not None or kb is not None:
        if ka is None or kb is None or type(a) is not type(b) or [k for k, _ in ka] != [k for k, _ in kb]:
            return False
        return all(tree_structure_equal(x, y) for (_, x), (_, y) in zip(ka, kb, strict=True))
    if is_leaf(a) or is_leaf(b):
        return is_leaf(a) and is_leaf(b) and tuple(a.shape) == tuple(b.shape)
    return a == b
