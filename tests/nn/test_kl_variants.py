"""KL-Transformer variants as model options: FastFood's Appendix D variants (learn S, G and
B; only S; nothing)."""

from __future__ import annotations

import numpy as np
import pytest

import refattn.nn.init as nninit
from refattn.nn.optim import adam_init, adamw_update
from refattn.nn.transformer import loss_and_grads, transformer_loss_bwd, transformer_loss_fwd
from tests.nn.test_transformer import attention_leaves, perturb, tiny_config
from validation import check_vjp

FROZEN = {"SGB": (), "S": ("G", "B"), "fixed": ("S", "G", "B")}


def _setup(variant, features="prf", task="classify"):
    att = {"kind": "fastfood", "features": features, "m": 8, "variant": variant}
    if features == "rks":
        att["on_nonpositive"] = "ignore"
    cfg = tiny_config(att, task)
    rng = np.random.default_rng(0)
    params = perturb(nninit.init_transformer(rng, cfg), rng)
    ids = rng.integers(0, 7, size=(2, 5))
    labels = rng.integers(0, 3, size=(2,)) if task == "classify" else rng.integers(0, 7, size=(2, 5))
    return cfg, params, ids, labels


def _split(params, frozen):
    """(learnable tree with frozen diagonals set to None, function putting them back)."""
    def strip(p):
        blocks = [dict(b, attn=dict(b["attn"], attn={"fastfood": b["attn"]["attn"]["fastfood"]._replace(
            **{f: None for f in frozen})})) for b in p["blocks"]]
        return dict(p, blocks=blocks)

    def restore(learn):
        blocks = [dict(b, attn=dict(b["attn"], attn={"fastfood": b["attn"]["attn"]["fastfood"]._replace(
            **{f: getattr(o["attn"]["attn"]["fastfood"], f) for f in frozen})}))
                  for b, o in zip(learn["blocks"], params["blocks"], strict=True)]
        return dict(learn, blocks=blocks)

    return strip(params), restore


@pytest.mark.parametrize("features", ["prf", "rks"])
@pytest.mark.parametrize("variant", list(FROZEN))
def test_fastfood_variant_grads(variant, features):
    """The variant's learnable diagonals are gradient-checked through the model; frozen ones get None."""
    cfg, params, ids, labels = _setup(variant, features)
    frozen = FROZEN[variant]
    _, grads = loss_and_grads(params, ids, labels, None, config=cfg)
    g = grads["blocks"][0]["attn"]["attn"]["fastfood"]
    assert all(getattr(g, f) is None for f in frozen)
    assert all(getattr(g, f) is not None for f in ("S", "G", "B") if f not in frozen)
    learn, restore = _split(params, frozen)

    def fwd(params, **kw):
        return transformer_loss_fwd(restore(params), **kw)

    check_vjp(fwd, transformer_loss_bwd, {"params": learn},
              kwargs={"inputs": ids, "labels": labels, "features": None, "config": cfg},
              eps=1e-7 if features == "rks" else 1e-6, alone=attention_leaves)


def test_frozen_diagonals_stay_fixed_under_training():
    cfg, params, ids, labels = _setup("S")
    _, grads = loss_and_grads(params, ids, labels, None, config=cfg)
    new, _ = adamw_update(params, grads, adam_init(params), lr=1e-2)
    before = params["blocks"][0]["attn"]["attn"]["fastfood"]
    after = new["blocks"][0]["attn"]["attn"]["fastfood"]
    np.testing.assert_array_equal(after.G, before.G)
    np.testing.assert_array_equal(after.B, before.B)
    assert not np.array_equal(after.S, before.S)                      # S learns (the check can fail)


# ---- Generative: running batch-norm statistics for evaluation ----------------------------------------------
def _gen_setup(bn, seed=0):
    cfg = tiny_config({"kind": "generative", "features": "prf", "m": 8, "bn": bn}, "classify")
    rng = np.random.default_rng(seed)
    return cfg, nninit.init_transformer(rng, cfg), nninit.draw_attention_features(rng, cfg), \
        rng.integers(0, 7, size=(2, 5)), rng.integers(0, 3, size=(2,))


def test_batch_mode_is_the_same_at_training_and_evaluation():
    from refattn.nn.transformer import transformer

    cfg, params, feats, ids, _ = _gen_setup("batch")
    np.testing.assert_array_equal(transformer(params, ids, feats, config=cfg, train=False),
                                  transformer(params, ids, feats, config=cfg, train=True))


def test_running_statistics_are_updated_by_training_and_used_at_evaluation():
    from refattn.features.generator_network import generator_fwd
    from refattn.nn.train import train
    from refattn.nn.transformer import transformer

    cfg, _, _, ids, labels = _gen_setup("running")
    x, y = np.tile(ids, (4, 1)), np.tile(labels, 4)
    before = nninit.init_transformer(np.random.default_rng([0, 0]), cfg)       # train's own initialisation
    res = train(cfg, x, y, seed=0, steps=1, batch_size=4, optimizer="sgd", progress=False)
    noise = nninit.features_for_step(0, 0, cfg)[0]["noise"]
    blk = before["blocks"][0]["attn"]["attn"]
    want = generator_fwd(noise, blk["generator"], blk["bn_state"], train=True)[0].state
    got = res.params["blocks"][0]["attn"]["attn"]["bn_state"]
    for a, b in zip(got.norms, want.norms, strict=True):
        np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12)
        np.testing.assert_allclose(a.var, b.var, rtol=1e-12)
    assert not np.allclose(got.norms[0].mean, blk["bn_state"].norms[0].mean)      # it moved from the initial
    # evaluation reads the running statistics: other statistics, other logits; training forwards do not
    feats = nninit.features_for_step(0, 0, cfg)
    moved = dict(res.params, blocks=[dict(b, attn=dict(b["attn"], attn=dict(b["attn"]["attn"],
                                                                            bn_state=blk["bn_state"])))
                                     for b in res.params["blocks"]])
    assert not np.allclose(transformer(res.params, ids, feats, config=cfg, train=False),
                           transformer(moved, ids, feats, config=cfg, train=False), rtol=1e-8)
    np.testing.assert_array_equal(transformer(res.params, ids, feats, config=cfg, train=True),
                                  transformer(moved, ids, feats, config=cfg, train=True))


@pytest.mark.parametrize("train_mode", [True, False])
def test_running_mode_grads(train_mode):
    """The generator's parameters through the model, in training and in evaluation mode (the running
    statistics are held out: they are not learned and get no gradient)."""
    cfg, params, feats, ids, labels = _gen_setup("running")
    _, grads = loss_and_grads(params, ids, labels, feats, config=cfg)
    assert grads["blocks"][0]["attn"]["attn"]["bn_state"] is None

    def strip(p):
        return dict(p, blocks=[dict(b, attn=dict(b["attn"], attn=dict(b["attn"]["attn"], bn_state=None)))
                               for b in p["blocks"]])

    def restore(learn):
        return dict(learn, blocks=[dict(b, attn=dict(b["attn"], attn=dict(b["attn"]["attn"],
                                                                          bn_state=o["attn"]["attn"]["bn_state"])))
                                   for b, o in zip(learn["blocks"], params["blocks"], strict=True)])

    def fwd(params, **kw):
        return transformer_loss_fwd(restore(params), **kw)

    check_vjp(fwd, transformer_loss_bwd, {"params": strip(params)},
              kwargs={"inputs": ids, "labels": labels, "features": feats, "config": cfg, "train": train_mode},
              alone=attention_leaves)
