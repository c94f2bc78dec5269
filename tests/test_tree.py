"""refattn.tree: the one walker of parameter trees."""

from typing import NamedTuple

import numpy as np
import pytest

from refattn.tree import (tree_get, tree_leaves, tree_map, tree_map_with_path, tree_paths, tree_replace,
                          tree_structure_equal)


class P(NamedTuple):
    W: object
    kind: str


def _tree():
    return {"a": P(W=np.ones((2, 3)), kind="gaussian"), "b": [np.zeros(2), None, (np.arange(3),)], "c": 1.5}


def test_paths_and_leaves_in_walk_order():
    t = _tree()
    paths = [p for p, _ in tree_paths(t)]
    assert paths == ["a/W", "b/0", "b/2/0"], paths
    assert [leaf.shape for leaf in tree_leaves(t)] == [(2, 3), (2,), (3,)]
    assert [p for p, _ in tree_paths(t, "params")][0] == "params/a/W"


def test_map_keeps_static_entries_and_types():
    t = _tree()
    out = tree_map(lambda x, y: x + 2 * y, t, t)
    assert isinstance(out["a"], P) and out["a"].kind == "gaussian" and out["c"] == 1.5 and out["b"][1] is None
    assert isinstance(out["b"][2], tuple)
    np.testing.assert_array_equal(out["a"].W, 3 * np.ones((2, 3)))
    np.testing.assert_array_equal(out["b"][2][0], 3 * np.arange(3))


def test_map_passes_none_of_rest_trees():
    seen = []
    tree_map(lambda x, g: seen.append(g), {"w": np.ones(2)}, {"w": None})
    assert seen == [None]


def test_map_with_path_get_replace_roundtrip():
    t = _tree()
    named = tree_map_with_path(lambda p, x: p, t)
    assert named["b"][2][0] == "b/2/0" and named["a"].W == "a/W"
    new = tree_replace(t, "b/2/0", np.full(3, 7.0))
    np.testing.assert_array_equal(tree_get(new, "b/2/0"), np.full(3, 7.0))
    np.testing.assert_array_equal(tree_get(t, "b/2/0"), np.arange(3))          # the original is untouched
    assert tree_get(new, "a/kind") == "gaussian"
    assert tree_structure_equal(t, new) and not tree_structure_equal(t, tree_replace(t, "b/0", np.zeros(3)))


def test_slash_in_key_is_rejected():
    with pytest.raises(ValueError, match="contains '/'"):
        tree_paths({"a/b": np.ones(1)})
