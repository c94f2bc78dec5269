"""The ``flt`` attention kind at model level: every spectrum family, fixed or learnable
proposals, the truncated local RPE with its computed bias bound, and the learnable feature map phi(x) = W x
(App. B.2) with its ReLU form."""

from __future__ import annotations

import math

import numpy as np
import pytest

import refattn.nn.init as nninit
from refattn.nn.config import check_attention_config
from refattn.nn.kinds.domains import spectrum_values
from refattn.nn.kinds.flt import box_truncation_bias_bound, model_bias_bound
from refattn.nn.mha import mha_fwd
from refattn.nn.optim import adam_init, adamw_update
from refattn.nn.transformer import loss_and_grads, transformer, transformer_loss_bwd, transformer_loss_fwd
from refattn.rpe.spectra import Box
from tests.nn.test_transformer import attention_leaves, perturb, tiny_config
from validation import check_vjp

VARIANTS = {
    "gaussian-mixture": {"spectrum": "gaussian_mixture"},
    "gaussian-kernel": {"spectrum": "gaussian_kernel"},
    "laplace-kernel": {"spectrum": "laplace_kernel"},
    "cauchy-kernel": {"spectrum": "cauchy_kernel"},
    "gaussian-basis": {"spectrum": "gaussian_basis"},
    "bspline": {"spectrum": "bspline"},
    "local-rpe-truncated": {"spectrum": "box", "truncation": 3.0},
    "sin-power-truncated": {"spectrum": "sin_power", "truncation": 3.0},
    "learned-linear": {"spectrum": "gaussian_mixture", "feature_map": "linear", "on_nonpositive": "ignore"},
    "learned-relu": {"spectrum": "gaussian_kernel", "feature_map": "relu"},
    "learned-relu-box": {"spectrum": "box", "truncation": 3.0, "feature_map": "relu"},
}

#: ReLU features are piecewise linear: a finite-difference step that crosses a kink spoils the quotient (as
#: for the ``relu`` kind in test_transformer.py); a smaller step makes crossing unlikely. The linear map's
#: normaliser passes near zero at this seed's point (a pole of the output): a smaller step there too.
FD_EPS = {"learned-relu": 1e-8, "learned-relu-box": 1e-8, "learned-linear": 1e-7}


def _setup(opts, task="classify", seed=0):
    cfg = tiny_config({"kind": "flt", "r": 4, "m": 8, **opts}, task)
    rng = np.random.default_rng(seed)
    params = perturb(nninit.init_transformer(rng, cfg), rng)
    feats = nninit.draw_attention_features(rng, cfg)
    ids = rng.integers(0, 7, size=(2, 6))
    labels = rng.integers(0, 3, size=(2,)) if task == "classify" else rng.integers(0, 7, size=(2, 6))
    return cfg, params, feats, ids, labels


@pytest.mark.parametrize("task", ["classify", "lm"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_model_grad(name, task):
    """Every learnable spectrum, proposal and feature-map parameter, gradient-checked through the model
    (own directions for the attention leaves: tests/nn/test_transformer.py, attention_leaves)."""
    cfg, params, feats, ids, labels = _setup(VARIANTS[name], task)
    check_vjp(transformer_loss_fwd, transformer_loss_bwd, {"params": params},
              kwargs={"inputs": ids, "labels": labels, "features": feats, "config": cfg},
              eps=FD_EPS.get(name, 1e-6), alone=attention_leaves)


def test_model_grad_must_fail():
    """A backward that drops the learnable feature map's gradient is caught."""
    cfg, params, feats, ids, labels = _setup(VARIANTS["learned-relu"])

    def bad(dloss, cache):
        g = transformer_loss_bwd(dloss, cache)
        blocks = []
        for b in g.params["blocks"]:
            inner = dict(b["attn"]["attn"], W=b["attn"]["attn"]["W"] * 1.001)
            blocks.append(dict(b, attn=dict(b["attn"], attn=inner)))
        return g._replace(params=dict(g.params, blocks=blocks))

    with pytest.raises(AssertionError, match="params"):
        check_vjp(transformer_loss_fwd, bad, {"params": params},
                  kwargs={"inputs": ids, "labels": labels, "features": feats, "config": cfg})


def test_fixed_proposal_gets_no_gradient_and_stays():
    cfg, params, feats, ids, labels = _setup({"spectrum": "gaussian_kernel", "learn_proposal": False})
    _, grads = loss_and_grads(params, ids, labels, feats, config=cfg)
    gp = grads["blocks"][0]["attn"]["attn"]["proposal"]
    assert gp.loc is None and gp.scale.log_excess is None
    assert np.any(grads["blocks"][0]["attn"]["attn"]["spectrum"].length.log != 0)  # the spectrum still learns
    new, _ = adamw_update(params, grads, adam_init(params), lr=1e-2)
    after = new["blocks"][0]["attn"]["attn"]["proposal"]
    before = params["blocks"][0]["attn"]["attn"]["proposal"]
    for a, b in ((after.loc, before.loc), (after.scale.log_excess, before.scale.log_excess)):
        np.testing.assert_array_equal(a, b)


def test_noise_is_drawn_from_the_proposal_kind():
    cfg = tiny_config({"kind": "flt", "r": 64, "m": 8, "spectrum": "box", "truncation": 2.0}, "classify")
    eps = nninit.draw_attention_features(np.random.default_rng(0), cfg)[0]["eps"]
    assert eps.min() >= -1 and eps.max() <= 1                                      # uniform on [-1, 1]
    cfg = tiny_config({"kind": "flt", "r": 64, "m": 8, "spectrum": "laplace_kernel"}, "classify")
    p = nninit.init_transformer(np.random.default_rng(0), cfg)["blocks"][0]["attn"]["attn"]["proposal"]
    assert p.kind == "mv_cauchy"                                                   # the kernel's own density


# ---- the truncated local RPE: bias bound -------------------------------------------------------------------
def _truncated_box_1d(v, delta, B, n=400001):
    """int_{-B}^{B} sin(2 pi v xi) / (pi xi) cos(2 pi delta xi) d xi by the trapezoid rule (even
    integrand)."""
    xi = np.linspace(0.0, B, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(xi == 0, 2 * v, np.sin(2 * np.pi * v * xi) / (np.pi * xi))
    y = g * np.cos(2 * np.pi * delta * xi)
    return 2 * np.sum((y[1:] + y[:-1]) * 0.5 * np.diff(xi))


@pytest.mark.parametrize("B", [1.0, 3.0, 8.0])
def test_bias_bound_holds_against_quadrature(B):
    v, w = 2.5, 0.7
    pos = np.arange(7, dtype=np.float64)[:, None]                                  # offsets -6..6
    bound = box_truncation_bias_bound(Box(w=np.array([w]), v=np.array([[v]])), B, pos, xp=np)
    offsets = np.arange(-6, 7)
    exact = np.where(np.abs(offsets) < v, 1.0, 0.0)
    actual = max(abs(w * (_truncated_box_1d(v, d, B) - e)) for d, e in zip(offsets, exact, strict=True))
    assert actual <= bound, (B, actual, bound)
    # the check can fail: a bound ten times smaller is violated
    assert actual > bound / 10, (B, actual, bound)


def test_bias_bound_shrinks_like_one_over_b_and_in_2d():
    spec = Box(w=np.array([1.0]), v=np.array([[2.5, 1.5]]))
    pos = np.stack(np.meshgrid(np.arange(3.0), np.arange(3.0), indexing="ij"), -1).reshape(-1, 2)
    b1, b4 = (box_truncation_bias_bound(spec, B, pos, xp=np) for B in (1.0, 4.0))
    assert b4 == pytest.approx(b1 / 4, rel=0.3), (b1, b4)                         # e_j ~ 1/B (products ~ 1/B)
    assert math.isfinite(b1) and b1 > 0


def test_bias_bound_recorded_in_cache_and_training_log():
    cfg, params, feats, ids, labels = _setup(VARIANTS["local-rpe-truncated"])
    att = check_attention_config(cfg["attention"], d_head=4, n_heads=2)
    blk = params["blocks"][0]["attn"]
    x = np.random.default_rng(1).standard_normal((2, 6, 8))
    _, cache = mha_fwd(x, blk, feats[0], n_heads=2, attention=att)
    def bound(stored):                                       # radii stored as their log (kinds.domains)
        return box_truncation_bias_bound(spectrum_values(stored, xp=np), 3.0, np.arange(6.0)[:, None], xp=np)

    want = bound(blk["attn"]["spectrum"])
    assert cache.attn_cache.bias_bound == want > 0
    assert model_bias_bound(params, dict(cfg, attention=att), None, 6) == pytest.approx(
        max(bound(b["attn"]["attn"]["spectrum"]) for b in params["blocks"]), rel=1e-15)
    from refattn.nn.train import train

    res = train(cfg, np.tile(ids, (4, 1)), np.tile(labels, 4), seed=0, steps=2, batch_size=4, progress=False)
    assert all(e["flt_bias_bound"] > 0 for e in res.history if "loss" in e)


def test_learned_linear_map_nonpositive_normaliser():
    """phi(x) = W x can give a non-positive normaliser: on_nonpositive='raise' stops, naming it; the ReLU
    form's + 1e-3 keeps every normaliser positive."""
    cfg, params, feats, ids, _ = _setup({"spectrum": "gaussian_kernel", "feature_map": "linear",
                                         "on_nonpositive": "raise"})
    zero = [dict(b, attn=dict(b["attn"], attn=dict(b["attn"]["attn"], W=0 * b["attn"]["attn"]["W"])))
            for b in params["blocks"]]
    with pytest.raises(ValueError, match="normaliser"):
        transformer(dict(params, blocks=zero), ids, feats, config=cfg)
    cfg_relu = dict(cfg, attention=dict(cfg["attention"], feature_map="relu", on_nonpositive=None))
    assert np.all(np.isfinite(transformer(dict(params, blocks=zero), ids, feats, config=cfg_relu)))


def test_flt_option_errors():
    with pytest.raises(ValueError, match="set truncation=B"):
        check_attention_config({"kind": "flt", "spectrum": "box"})
    with pytest.raises(ValueError, match="attention.order: the sin\\^k spectrum needs an odd k >= 3"):
        check_attention_config({"kind": "flt", "spectrum": "sin_power", "order": 2, "truncation": 2.0})
    with pytest.raises(ValueError, match="attention.proposal: a truncation uses the uniform proposal"):
        check_attention_config({"kind": "flt", "spectrum": "box", "truncation": 2.0, "proposal": "gaussian"})
    with pytest.raises(ValueError, match="attention.spectrum: expected one of"):
        check_attention_config({"kind": "flt", "spectrum": "sum"})


# ---- spectra per head, shared across layers (the paper's default) ------------------------------------------
SHARED = {
    "mixture-favor": {"spectrum": "gaussian_mixture", "share": "heads"},
    "box-relu": {"spectrum": "box", "truncation": 3.0, "feature_map": "relu", "share": "heads"},
}


@pytest.mark.parametrize("task", ["classify", "lm"])
@pytest.mark.parametrize("name", list(SHARED))
def test_shared_per_head_spectra_grad(name, task):
    """Two layers use the same per-head spectra: their gradient is the sum of both layers' shares (a gradient
    that kept one layer's share only would fail this check)."""
    cfg, params, feats, ids, labels = _setup(SHARED[name], task)
    assert params["shared"]["attn"]["spectrum"].w.shape[0] == 2
    assert "spectrum" not in params["blocks"][0]["attn"]["attn"]
    check_vjp(transformer_loss_fwd, transformer_loss_bwd, {"params": params},
              kwargs={"inputs": ids, "labels": labels, "features": feats, "config": cfg},
              eps=FD_EPS.get("learned-relu") if "relu" in name else 1e-6, alone=attention_leaves)


def _stack2(a):
    return np.stack([a, a])


def test_per_head_equals_per_layer_when_heads_agree_and_heads_matter():
    from refattn.tree import tree_map

    cfg_l, params_l, feats, ids, _ = _setup({"spectrum": "gaussian_mixture"})
    cfg_h = dict(cfg_l, attention=dict(cfg_l["attention"], share="heads"))
    spec = params_l["blocks"][0]["attn"]["attn"]["spectrum"]
    prop = params_l["blocks"][0]["attn"]["attn"]["proposal"]
    same = dict(params_l, blocks=[dict(b, attn=dict(b["attn"], attn={"spectrum": spec, "proposal": prop}))
                                  for b in params_l["blocks"]])
    shared = dict(params_l, blocks=[dict(b, attn=dict(b["attn"], attn={})) for b in params_l["blocks"]],
                  shared={"attn": {"spectrum": tree_map(_stack2, spec), "proposal": tree_map(_stack2, prop)}})
    want = transformer(same, ids, feats, config=cfg_l)
    np.testing.assert_allclose(transformer(shared, ids, feats, config=cfg_h), want, rtol=1e-12, atol=1e-14)
    # different spectra per head change the output (the per-head loop really uses head h's spectrum)
    mu = shared["shared"]["attn"]["spectrum"].mu.copy()
    mu[1] += 0.5
    moved = dict(shared, shared={"attn": dict(shared["shared"]["attn"],
                                              spectrum=shared["shared"]["attn"]["spectrum"]._replace(mu=mu))})
    assert not np.allclose(transformer(moved, ids, feats, config=cfg_h), want, rtol=1e-6)


def test_shared_spectra_checkpoint_roundtrip(tmp_path):
    from refattn.nn.checkpoint import flatten_tree, load, save

    cfg, params, _, _, _ = _setup(SHARED["mixture-favor"])
    save(tmp_path / "m.npz", params, cfg)
    loaded, _ = load(tmp_path / "m.npz", config=cfg)
    a, b = flatten_tree(params), flatten_tree(loaded)
    assert a.keys() == b.keys() and any(k.startswith("params/shared/attn/spectrum") for k in a)
    assert all(np.array_equal(a[k], b[k]) for k in a)
