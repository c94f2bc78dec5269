"""KL-Transformer variants as model options (issue 23 item 3): FastFood's Appendix D variants (learn S, G and
B; only S; nothing)."""

from __future__ import annotations

import numpy as np
import pytest

import refattn.nn.init as nninit
from refattn.nn.optim import adam_init, adamw_update
from refattn.nn.transformer import loss_and_grads, transformer_loss_bwd, transformer_loss_fwd
from tests.nn.test_transformer import perturb, tiny_config
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
              eps=1e-7 if features == "rks" else 1e-6)


def test_frozen_diagonals_stay_fixed_under_training():
    cfg, params, ids, labels = _setup("S")
    _, grads = loss_and_grads(params, ids, labels, None, config=cfg)
    new, _ = adamw_update(params, grads, adam_init(params), lr=1e-2)
    before = params["blocks"][0]["attn"]["attn"]["fastfood"]
    after = new["blocks"][0]["attn"]["attn"]["fastfood"]
    np.testing.assert_array_equal(after.G, before.G)
    np.testing.assert_array_equal(after.B, before.B)
    assert not np.array_equal(after.S, before.S)                      # S learns (the check can fail)
