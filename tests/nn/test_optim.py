"""Optimisers (pure functions) against torch.optim and hand-written reference steps; gradient clipping."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from refattn.layers.dense import DenseParams
from refattn.nn.optim import (AdamState, adam_init, adam_update, adamw_update, clip_by_global_norm,
                              global_norm, sgd_init, sgd_update)
from refattn.tree import tree_get, tree_map, tree_paths, tree_replace
from tests.helpers import randn, to_numpy


def _tree(rng, xp):
    return {"a": DenseParams(W=randn(rng, xp, 3, 2), b=randn(rng, xp, 2)), "c": randn(rng, xp, 4),
            "none": None}


def test_sgd_momentum_reference(xp, rng):
    p = _tree(rng, xp)
    g1, g2 = _tree(rng, xp), _tree(rng, xp)
    W_before = to_numpy(p["a"].W).copy()
    st = sgd_init(p)
    p1, st = sgd_update(p, g1, st, lr=0.1, momentum=0.9, weight_decay=0.01)
    p2, st = sgd_update(p1, g2, st, lr=0.1, momentum=0.9, weight_decay=0.01)
    assert st.step == 2 and p2["none"] is None
    W0, G1, G2 = (to_numpy(t["a"].W) for t in (p, g1, g2))
    v1 = G1 + 0.01 * W0
    W1 = W0 - 0.1 * v1
    v2 = 0.9 * v1 + G2 + 0.01 * W1
    np.testing.assert_allclose(to_numpy(p2["a"].W), W1 - 0.1 * v2, rtol=1e-14)
    np.testing.assert_array_equal(to_numpy(p["a"].W), W_before)   # inputs untouched (pure)


@pytest.mark.parametrize("kind", ["adam", "adamw", "sgd"])
def test_matches_torch(rng, kind):
    torch = pytest.importorskip("torch")
    W = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(5)]
    wt = torch.nn.Parameter(torch.from_numpy(W.copy()))
    hyper = dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
    if kind == "adam":
        opt = torch.optim.Adam([wt], **hyper)
    elif kind == "adamw":
        opt = torch.optim.AdamW([wt], **hyper)
    else:
        opt = torch.optim.SGD([wt], lr=0.05, momentum=0.9, weight_decay=0.1)
    p = {"W": W}
    st = sgd_init(p) if kind == "sgd" else adam_init(p)
    for g in grads:
        wt.grad = torch.from_numpy(g.copy())
        opt.step()
        if kind == "adam":
            p, st = adam_update(p, {"W": g}, st, lr=0.05, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.1)
        elif kind == "adamw":
            p, st = adamw_update(p, {"W": g}, st, lr=0.05, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.1)
        else:
            p, st = sgd_update(p, {"W": g}, st, lr=0.05, momentum=0.9, weight_decay=0.1)
    np.testing.assert_allclose(p["W"], wt.detach().numpy(), rtol=1e-13, atol=1e-15)


def test_adam_must_fail(rng):
    """A wrong bias correction (none) is caught by the same comparison's reference value."""
    W, g = rng.standard_normal(3), rng.standard_normal(3)
    p, _ = adam_update({"W": W}, {"W": g}, adam_init({"W": W}), lr=0.1)
    # first Adam step with bias correction moves every coordinate by lr * sign(g) (up to eps)
    np.testing.assert_allclose(p["W"], W - 0.1 * np.sign(g), rtol=1e-6)
    wrong = W - 0.1 * (0.1 * g) / (np.sqrt(0.001 * g * g) + 1e-8)   # no bias correction
    assert not np.allclose(p["W"], wrong, rtol=1e-6)


def test_clip(xp, rng):
    g = _tree(rng, xp)
    n = global_norm(g)
    leaves = [g["a"].W, g["a"].b, g["c"]]
    assert math.isclose(n, math.sqrt(sum(float(np.sum(to_numpy(a) ** 2)) for a in leaves)), rel_tol=1e-14)
    c, before = clip_by_global_norm(g, n / 2)
    assert before == n
    assert math.isclose(global_norm(c), n / 2, rel_tol=1e-12)
    same, _ = clip_by_global_norm(g, 2 * n)
    assert same is g
    with pytest.raises(ValueError, match=r"max_norm: expected a number in \(0.0, inf\]"):
        clip_by_global_norm(g, 0)


def test_optim_errors(rng):
    p = {"W": rng.standard_normal(2)}
    with pytest.raises(ValueError, match=r"beta2: expected a number in \[0.0, 1.0\)"):
        adam_update(p, p, adam_init(p), beta2=1.0)
    with pytest.raises(ValueError, match="lr: expected"):
        sgd_update(p, p, sgd_init(p), lr=-1.0)


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw"])
def test_frozen_and_integer_leaves_unchanged(rng, kind):
    """A ``None`` gradient (frozen by design) and an integer leaf (a FastFood permutation) are left unchanged,
    even under weight decay; the other leaves move."""
    p = {"W": rng.standard_normal(3), "frozen": rng.standard_normal(2), "perm": np.array([2, 0, 1])}
    g = {"W": rng.standard_normal(3), "frozen": None, "perm": None}
    st = sgd_init(p) if kind == "sgd" else adam_init(p)
    for _ in range(2):
        if kind == "sgd":
            p2, st = sgd_update(p, g, st, lr=0.1, momentum=0.5, weight_decay=0.1)
        elif kind == "adam":
            p2, st = adam_update(p, g, st, lr=0.1, weight_decay=0.1)
        else:
            p2, st = adamw_update(p, g, st, lr=0.1, weight_decay=0.1)
    assert p2["frozen"] is p["frozen"] and p2["perm"] is p["perm"]
    assert not np.allclose(p2["W"], p["W"])


def _adam_leafwise(p, g, m, v, t, *, lr, beta1, beta2, eps, l2, decay):
    """One Adam/AdamW step of one leaf, the module docstring's equations written out in NumPy."""
    g = g + l2 * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * (g * g)
    base = p * (1.0 - lr * decay) if decay else p
    return base - lr * (m / (1.0 - beta1 ** t)) / (np.sqrt(v / (1.0 - beta2 ** t)) + eps), m, v


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_adam_equals_its_equations_leaf_by_leaf_bitwise(rng, kind):
    """Three steps on a nested tree (dicts, a NamedTuple, a list; float32 and float64 leaves, a frozen leaf,
    an integer leaf) equal the equations applied leaf by leaf, bit for bit: the one-walk update computes each
    leaf's step with the same operations in the same order."""
    p = {"a": DenseParams(W=rng.standard_normal((3, 2)).astype(np.float32), b=rng.standard_normal(2)),
         "blocks": [{"w": rng.standard_normal(4)}, {"w": rng.standard_normal((2, 2)).astype(np.float32)}],
         "frozen": rng.standard_normal(2), "perm": np.array([1, 0]), "none": None}
    hyper = dict(lr=0.01, beta1=0.8, beta2=0.95, eps=1e-6)
    l2, decay = (0.1, 0.0) if kind == "adam" else (0.0, 0.1)
    update = adam_update if kind == "adam" else adamw_update
    st = adam_init(p)
    ref = {path: (a, a * 0, a * 0) for path, a in tree_paths(p) if a.dtype.kind == "f"}
    for t in (1, 2, 3):
        g = tree_map(lambda a: rng.standard_normal(a.shape).astype(a.dtype) if a.dtype.kind == "f" else None,
                     p)
        g["frozen"] = None
        p, st = update(p, g, st, weight_decay=0.1, **hyper)
        for path, (a, m, v) in list(ref.items()):
            if path != "frozen":
                ref[path] = _adam_leafwise(a, tree_get(g, path), m, v, t, l2=l2, decay=decay, **hyper)
    assert st.step == 3 and p["none"] is None and st.m["perm"] is None
    for path, (a, m, v) in ref.items():
        for got, want in ((tree_get(p, path), a), (tree_get(st.m, path), m), (tree_get(st.v, path), v)):
            assert got.dtype == want.dtype, path
            np.testing.assert_array_equal(got, want, err_msg=path)


@pytest.mark.parametrize("where", ["params", "grads", "state.m", "state.v"])
def test_adam_names_a_nonfinite_leaf(rng, where):
    """A NaN in any of the four trees is refused, naming the tree and the leaf's path (the finiteness check
    runs over all leaves at once, and names the leaf only after it failed)."""
    p = {"a": DenseParams(W=rng.standard_normal((3, 2)), b=rng.standard_normal(2)),
         "c": rng.standard_normal(4)}
    g = tree_map(lambda a: rng.standard_normal(a.shape), p)
    st = adam_init(p)
    st = AdamState(st.step, tree_map(lambda a: a + 0.5, st.m), tree_map(lambda a: a + 0.5, st.v))
    trees = {"params": p, "grads": g, "state.m": st.m, "state.v": st.v}
    bad = tree_replace(trees[where], "a/b", np.array([0.0, np.nan]))
    trees[where] = bad
    with pytest.raises(ValueError, match=re.escape(f"{where}['a/b']: expected finite values")):
        adamw_update(trees["params"], trees["grads"], AdamState(0, trees["state.m"], trees["state.v"]))
