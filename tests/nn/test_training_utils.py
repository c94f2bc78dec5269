"""Training utilities: learning-rate schedules, dropout in the transformer, gradient
accumulation; all deterministic given the seed."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import refattn.nn.init as nninit
from refattn.nn.checkpoint import flatten_tree
from refattn.nn.schedules import learning_rate
from refattn.nn.train import train
from refattn.nn.transformer import transformer, transformer_loss_bwd, transformer_loss_fwd
from tests.nn.test_train import _task
from tests.nn.test_transformer import KINDS, setup, tiny_config
from validation import check_vjp


# ---- schedules ---------------------------------------------------------------------------------------------
def test_linear_warmup_then_constant():
    got = [learning_rate(t, lr=0.4, schedule={"warmup_steps": 4}) for t in range(6)]
    np.testing.assert_allclose(got, [0.1, 0.2, 0.3, 0.4, 0.4, 0.4], rtol=1e-15)
    assert learning_rate(7, lr=0.4) == 0.4                                       # no schedule: constant


def test_cosine_decay_points():
    s = {"warmup_steps": 2, "decay": "cosine", "total_steps": 12, "min_lr": 0.1}
    lr = 1.0
    assert learning_rate(1, lr=lr, schedule=s) == 1.0                            # end of the warm-up
    assert learning_rate(2, lr=lr, schedule=s) == 1.0                            # p = 0
    assert learning_rate(7, lr=lr, schedule=s) == pytest.approx(0.55, rel=1e-14)   # p = 1/2: (lr + min) / 2
    assert learning_rate(12, lr=lr, schedule=s) == pytest.approx(0.1, rel=1e-14)   # p = 1: min_lr
    assert learning_rate(50, lr=lr, schedule=s) == pytest.approx(0.1, rel=1e-14)   # stays there
    want = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 3 / 10))
    assert learning_rate(5, lr=lr, schedule=s) == pytest.approx(want, rel=1e-14)


def test_inverse_sqrt_decay_points():
    s = {"warmup_steps": 4, "decay": "inverse_sqrt"}
    assert learning_rate(3, lr=2.0, schedule=s) == 2.0
    for t in (4, 9, 99):
        assert learning_rate(t, lr=2.0, schedule=s) == pytest.approx(2.0 * math.sqrt(4 / (t + 1)), rel=1e-14)
    # without warm-up: lr / sqrt(t + 1)
    assert learning_rate(15, lr=1.0, schedule={"decay": "inverse_sqrt"}) == pytest.approx(0.25, rel=1e-14)


def test_schedule_errors():
    with pytest.raises(ValueError, match=r"schedule\['total_steps'\]: required for decay='cosine'"):
        learning_rate(0, lr=1.0, schedule={"decay": "cosine"})
    with pytest.raises(ValueError, match=r"schedule\['decay'\]: expected one of"):
        learning_rate(0, lr=1.0, schedule={"decay": "linear"})
    with pytest.raises(ValueError, match=r"schedule: unknown key\(s\) \['warmup'\]"):
        learning_rate(0, lr=1.0, schedule={"warmup": 3})
    with pytest.raises(ValueError, match="expected more than warmup_steps = 5"):
        learning_rate(0, lr=1.0, schedule={"decay": "cosine", "warmup_steps": 5, "total_steps": 5})


# ---- dropout -----------------------------------------------------------------------------------------------
def test_dropout_off_by_default_and_masks_change_the_output():
    cfg, params, feats, ids, _ = setup(KINDS["favor-positive-orth"], "classify")
    assert nninit.draw_dropout_masks(np.random.default_rng(0), cfg, (2,), 5) is None
    cfg_d = dict(cfg, attn_dropout=0.5, resid_dropout=0.5)
    masks = nninit.draw_dropout_masks(np.random.default_rng(0), cfg_d, (2,), 5)
    assert [sorted(m) for m in masks] == [["attn", "resid_attn", "resid_ff"]] * 2
    assert masks[0]["attn"].shape == (2, 2, 5, 4) and masks[0]["resid_ff"].shape == (2, 5, 8)
    assert set(np.unique(masks[0]["attn"])) <= {0.0, 2.0}
    plain = transformer(params, ids, feats, config=cfg_d)
    assert np.array_equal(plain, transformer(params, ids, feats, config=cfg))    # no masks: no dropout
    dropped = transformer(params, ids, feats, config=cfg_d, dropout=masks)
    assert not np.allclose(plain, dropped)
    ones = [{k: np.ones_like(v) for k, v in m.items()} for m in masks]            # all-keep masks: identity
    np.testing.assert_array_equal(transformer(params, ids, feats, config=cfg_d, dropout=ones), plain)


@pytest.mark.parametrize("name", ["softmax", "favor-positive-orth", "s1-softmax"])
@pytest.mark.parametrize("task", ["classify", "lm"])
def test_model_grad_with_dropout(name, task):
    cfg, params, feats, ids, labels = setup(KINDS[name], task, attn_dropout=0.3, resid_dropout=0.2)
    masks = nninit.draw_dropout_masks(np.random.default_rng(4), cfg, (2,), ids.shape[-1])
    check_vjp(transformer_loss_fwd, transformer_loss_bwd, {"params": params},
              kwargs={"inputs": ids, "labels": labels, "features": feats, "config": cfg, "dropout": masks})


def test_model_grad_with_dropout_must_fail(monkeypatch):
    """A backward that forgets the attention-dropout mask is caught."""
    mha_mod = sys.modules["refattn.nn.mha"]        # (refattn.nn.mha is also the name of the function)
    cfg, params, feats, ids, labels = setup(KINDS["softmax"], "classify", attn_dropout=0.5)
    masks = nninit.draw_dropout_masks(np.random.default_rng(4), cfg, (2,), ids.shape[-1])
    orig = mha_mod.dropout_bwd_core                     # the unchecked core the model's backward runs
    def forgetful(dy, cache, **kw):
        return orig(dy, cache._replace(mask=cache.mask * 0 + 1), **kw)

    monkeypatch.setattr(mha_mod, "dropout_bwd_core", forgetful)
    with pytest.raises(AssertionError, match="params"):
        check_vjp(transformer_loss_fwd, transformer_loss_bwd, {"params": params},
                  kwargs={"inputs": ids, "labels": labels, "features": feats, "config": cfg,
                          "dropout": masks})


def test_dropout_config_errors():
    cfg = tiny_config("softmax", "lm", attn_dropout=1.0)
    msg = r"config\['attn_dropout'\]: expected a dropout probability in \[0, 1\)"
    with pytest.raises(ValueError, match=msg):
        nninit.draw_dropout_masks(np.random.default_rng(0), cfg, (1,), 3)


# ---- training: schedule, dropout, accumulation -------------------------------------------------------------
def test_train_logs_the_scheduled_rate_and_is_reproducible_with_dropout():
    cfg = tiny_config(KINDS["favor-positive-iid"], "classify", attn_dropout=0.1, resid_dropout=0.1)
    x, y = _task()
    sched = {"warmup_steps": 2, "decay": "cosine", "total_steps": 5}
    kw = dict(seed=3, steps=5, batch_size=4, lr=1e-2, progress=False, schedule=sched, accumulate=2)
    a, b = train(cfg, x, y, **kw), train(cfg, x, y, **kw)
    assert [e["lr"] for e in a.history] == [learning_rate(t, lr=1e-2, schedule=sched) for t in range(5)]
    fa, fb = flatten_tree(a.params), flatten_tree(b.params)
    assert all(np.array_equal(fa[k], fb[k]) for k in fa) and a.history == b.history
    c = train(cfg, x, y, **dict(kw, accumulate=1))
    assert not all(np.array_equal(fa[k], flatten_tree(c.params)[k]) for k in fa)


def test_accumulation_equals_the_larger_batch():
    """accumulate=2 with batch 4 averages the gradients of the same 8 examples that one batch of 8 uses."""
    cfg = tiny_config(KINDS["favor-positive-orth"], "classify")
    x, y = _task()
    kw = dict(seed=1, steps=3, lr=1e-2, progress=False, optimizer="sgd")
    a = train(cfg, x, y, batch_size=4, accumulate=2, **kw)
    b = train(cfg, x, y, batch_size=8, **kw)
    fa, fb = flatten_tree(a.params), flatten_tree(b.params)
    for k in fa:
        np.testing.assert_allclose(fa[k], fb[k], rtol=1e-12, atol=1e-14, err_msg=k)
    np.testing.assert_allclose([e["loss"] for e in a.history], [e["loss"] for e in b.history], rtol=1e-12)
    # and it is not the same as one batch of 4 (the check can fail)
    c = train(cfg, x, y, batch_size=4, **kw)
    assert not np.allclose(flatten_tree(c.params)["params/head/W"], fb["params/head/W"], rtol=1e-6)


def test_accumulation_errors():
    cfg = tiny_config("softmax", "classify")
    x, y = _task()
    msg = r"accumulate: expected an integer >= 1 with accumulate \* batch_size <= 16"
    with pytest.raises(ValueError, match=msg):
        train(cfg, x, y, seed=0, steps=1, batch_size=8, accumulate=3, progress=False)
