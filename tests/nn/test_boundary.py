"""The model API's boundary: a bad leaf of the parameter or feature tree is named as the user
indexes it, labels are checked against the inputs, hostile sizes fail before anything is allocated, and an
empty batch gives the empty result."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.nn import (check_config, draw_attention_features, init_transformer, transformer,
                        transformer_loss_fwd)

CFG = check_config(dict(task="lm", vocab_size=5, d_model=4, n_heads=2, n_layers=1, max_len=8,
                        attention={"kind": "favor", "m": 4}))


def _model():
    rng = np.random.default_rng(0)
    return init_transformer(rng, CFG), draw_attention_features(rng, CFG), rng.integers(0, 5, (2, 3))


def test_non_finite_parameter_is_named_by_its_path():
    params, feats, ids = _model()
    W = params["blocks"][0]["attn"]["q"].W.copy()
    W[0, 0] = np.nan
    params["blocks"][0]["attn"]["q"] = params["blocks"][0]["attn"]["q"]._replace(W=W)
    with pytest.raises(ValueError, match=r"^params\['blocks'\]\[0\]\['attn'\]\['q'\]\.W: expected finite"):
        transformer(params, ids, feats, config=CFG)


def test_float32_leaf_in_a_float64_model_is_refused_not_cast():
    params, feats, ids = _model()
    params["head"] = params["head"]._replace(b=params["head"].b.astype(np.float32))
    with pytest.raises(TypeError, match=r"^params\['head'\]\.b: expected dtype float64 .*got float32"):
        transformer(params, ids, feats, config=CFG)


def test_non_finite_feature_is_named_by_its_path():
    params, feats, ids = _model()
    feats[0]["omega"][1, 1] = np.inf
    with pytest.raises(ValueError, match=r"^features\[0\]\['omega'\]: expected finite"):
        transformer(params, ids, feats, config=CFG)


def test_labels_are_checked_against_inputs():
    params, feats, ids = _model()
    with pytest.raises(ValueError, match=r"^labels: expected shape \(2, 3\) \(from inputs"):
        transformer_loss_fwd(params, ids, ids[:, :2], feats, config=CFG)


def test_token_ids_without_a_sequence_axis_are_refused():
    params, feats, _ = _model()
    with pytest.raises(ValueError, match=r"^inputs: expected \(\.\.\., L\) token ids; got shape \(\)"):
        transformer(params, np.asarray(1), feats, config=CFG)


def test_empty_batch_gives_the_empty_result():
    params, feats, ids = _model()
    out = transformer(params, ids[:0], feats, config=CFG)
    assert out.shape == (0, 3, 5)


def test_hostile_layer_count_fails_before_allocating():
    with pytest.raises(MemoryError, match=r"n_layers = 1099511627776"):
        init_transformer(np.random.default_rng(0), {**CFG, "n_layers": 2 ** 40})


def test_the_unnamed_walk_passes_exactly_what_the_named_walk_passes():
    """check_trees first walks the leaves unnamed and falls back to the named walk at anything it does not
    pass; both must agree on every tree: the dtype of a passing tree, and no pass for a faulty one."""
    from refattn.nn._boundary import _NAMED_WALK, _passing_dtype, check_trees
    good = {"a": np.ones(3), "b": [np.zeros((2, 2)), np.arange(3)], "c": None}
    check_trees(("good", good))                                        # the named walk: types now known
    assert _passing_dtype((("good", good),), None) == np.float64 == check_trees(("good", good))
    assert _passing_dtype((("ints", {"i": np.arange(2)}),), None) is None
    faults = {
        "non-finite": {"a": np.array([1.0, np.nan])},
        "mixed float dtypes": {"a": np.ones(2), "b": np.ones(2, np.float32)},
        "complex": {"a": np.ones(2, np.complex128)},
        "float16": {"a": np.ones(2, np.float16)},
        "bool": {"a": np.ones(2, bool)},
    }
    for what, tree in faults.items():
        assert _passing_dtype((("t", tree),), None) is _NAMED_WALK, what
        with pytest.raises((TypeError, ValueError)):
            check_trees(("t", tree))
    assert _passing_dtype((("t", {"a": np.ones(2)}),), np.float32) is _NAMED_WALK      # not the given dtype
