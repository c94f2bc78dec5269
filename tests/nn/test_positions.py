"""Token positions in the model: Horn S1 with 2-D positions (this project's extension:
the paper writes S1 for scalar positions), and per-token coordinates of any dimension D through the
transformer's ``positions`` input (S1 and FLT)."""

from __future__ import annotations

import numpy as np
import pytest

import refattn.nn.init as nninit
from refattn.nn.config import check_attention_config
from refattn.nn.mha import mha, split_heads
from refattn.nn.transformer import transformer, transformer_loss_bwd, transformer_loss_fwd
from tests.nn.test_transformer import attention_leaves, perturb, tiny_config
from validation import check_vjp

GRID = (2, 3)


def _rowmajor(H, W):
    i = np.arange(H * W)
    return np.stack([i // W, i % W], axis=-1).astype(np.float64)                  # (L, 2)


def _s1_dense(x, p, pos, n_heads=2):
    """S1 attention written from Horn Eq. (3)/Lemma 1 in plain NumPy: logits (q k^T + N0) / sqrt(d + P) with
    N0_ij = sum_(a, s) alpha_as cos(omega_as D_a) + beta_as sin(omega_as D_a), D = z_i - z_j."""
    q, k, v = (split_heads(x @ p[n].W + p[n].b, n_heads, xp=np) for n in "qkv")  # (B, H, L, d)
    s1 = p["attn"]["s1"]
    delta = pos[:, None, :] - pos[None, :, :]                                     # (L, L, A)
    theta = delta[..., None] * s1.freqs                                           # (L, L, A, S)
    n0 = np.sum(s1.alpha * np.cos(theta) + s1.beta * np.sin(theta), axis=(-2, -1))   # (L, L)
    d, P = q.shape[-1], 2 * s1.freqs.size
    logits = (q @ np.swapaxes(k, -1, -2) + n0) / np.sqrt(d + P)                   # (B, H, L, L)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    o = (w / w.sum(-1, keepdims=True)) @ v                                        # (B, H, L, d)
    B, H, L, _ = o.shape
    return np.swapaxes(o, 1, 2).reshape(B, L, H * d) @ p["o"].W + p["o"].b


def _s1_layer(seed=0, **opts):
    att = check_attention_config({"kind": "s1", "lengthscales": 2, **opts}, d_head=4, n_heads=2)
    rng = np.random.default_rng(seed)
    p = perturb(nninit.init_mha(rng, 8, 2, att), rng)
    x = rng.standard_normal((2, GRID[0] * GRID[1], 8))
    return att, p, x


def test_s1_grid_equals_the_dense_2d_formula():
    att, p, x = _s1_layer(grid=list(GRID))
    assert p["attn"]["s1"].freqs.shape == (2, 2)                                  # A = 2 axes, S = 2
    got = mha(x, p, None, n_heads=2, attention=att)
    np.testing.assert_allclose(got, _s1_dense(x, p, _rowmajor(*GRID)), rtol=1e-12, atol=1e-13)
    # the check can fail: 2-D coordinates are not the 1-D raster index the model used before (both axes of
    # the parameters applied to the raster index)
    raster = np.repeat(np.arange(6.0)[:, None], 2, axis=1)
    assert not np.allclose(got, _s1_dense(x, p, raster), rtol=1e-6)


def test_s1_explicit_positions_any_dimension_and_shift_invariance():
    att, p, x = _s1_layer(pos_dim=3)
    pos = np.random.default_rng(1).standard_normal((6, 3)) * 3                   # arbitrary 3-D coordinates
    got = mha(x, p, None, n_heads=2, attention=att, positions=pos)
    np.testing.assert_allclose(got, _s1_dense(x, p, pos), rtol=1e-12, atol=1e-13)
    shifted = mha(x, p, None, n_heads=2, attention=att, positions=pos + np.array([5.0, -3.0, 0.5]))
    np.testing.assert_allclose(shifted, got, rtol=1e-9, atol=1e-12)       # relative: shifts change nothing
    scaled = mha(x, p, None, n_heads=2, attention=att, positions=2 * pos)
    assert not np.allclose(scaled, got, rtol=1e-6)                                # but a rescaling does


def test_grid_default_equals_explicit_rowmajor_positions():
    att, p, x = _s1_layer(grid=list(GRID))
    np.testing.assert_array_equal(mha(x, p, None, n_heads=2, attention=att),
                                  mha(x, p, None, n_heads=2, attention=att, positions=_rowmajor(*GRID)))


POSITIONAL = {
    "s1-grid-exact": ({"kind": "s1", "lengthscales": 2, "grid": list(GRID)}, None),
    "s1-grid-favor": ({"kind": "s1", "lengthscales": 2, "grid": list(GRID), "features": "positive", "m": 8},
                      None),
    "s1-3d-positions": ({"kind": "s1", "lengthscales": 2, "pos_dim": 3}, 3),
    "flt-3d-positions": ({"kind": "flt", "r": 4, "m": 8, "pos_dim": 3}, 3),
}


@pytest.mark.parametrize("name", list(POSITIONAL))
def test_model_grad_with_positions(name):
    """Every learnable parameter (S1 frequencies/alpha/beta, FLT spectrum/proposal) through the model."""
    att, D = POSITIONAL[name]
    cfg = tiny_config(att, "classify")
    rng = np.random.default_rng(2)
    params = perturb(nninit.init_transformer(rng, cfg), rng)
    feats = nninit.draw_attention_features(rng, cfg)
    ids = rng.integers(0, 7, size=(2, 6))
    labels = rng.integers(0, 3, size=(2,))
    pos = None if D is None else rng.standard_normal((6, D))
    check_vjp(transformer_loss_fwd, transformer_loss_bwd, {"params": params},
              kwargs={"inputs": ids, "labels": labels, "features": feats, "config": cfg, "positions": pos},
              alone=attention_leaves)


def test_positions_errors():
    cfg = tiny_config({"kind": "flt", "r": 4, "m": 8, "pos_dim": 3}, "classify")
    rng = np.random.default_rng(0)
    params, feats = nninit.init_transformer(rng, cfg), nninit.draw_attention_features(rng, cfg)
    ids = rng.integers(0, 7, size=(2, 6))
    with pytest.raises(ValueError, match=r"'flt': pos_dim = 3 needs per-token coordinates"):
        transformer(params, ids, feats, config=cfg)
    with pytest.raises(ValueError, match=r"positions: expected shape \(L, D\) = \(6, 3\) .* got \(6, 2\)"):
        transformer(params, ids, feats, config=cfg, positions=np.zeros((6, 2)))
    with pytest.raises(ValueError, match="attention.pos_dim: a grid gives 2-D positions; got pos_dim = 3"):
        check_attention_config({"kind": "s1", "grid": [2, 3], "pos_dim": 3})


def test_train_with_positions_is_reproducible():
    from refattn.nn.checkpoint import flatten_tree
    from refattn.nn.train import train

    cfg = tiny_config({"kind": "s1", "lengthscales": 2, "pos_dim": 3}, "classify")
    rng = np.random.default_rng(3)
    x, y, pos = rng.integers(0, 7, size=(8, 6)), rng.integers(0, 3, size=(8,)), rng.standard_normal((6, 3))
    kw = dict(seed=0, steps=3, batch_size=4, lr=1e-2, progress=False, positions=pos, eval_data=(x, y))
    a, b = train(cfg, x, y, **kw), train(cfg, x, y, **kw)
    fa, fb = flatten_tree(a.params), flatten_tree(b.params)
    assert all(np.array_equal(fa[k], fb[k]) for k in fa)
    c = train(cfg, x, y, **dict(kw, positions=2 * pos))                          # the positions are used
    assert not np.allclose(flatten_tree(c.params)["params/head/W"], fa["params/head/W"], rtol=1e-9)


# ---- Horn et al.'s own S1 initialisation (init="authors") and torch's query/key scale ----------------------
def _s1_dense_per_head(x, p, pos, n_heads=2):
    """As :func:`_s1_dense` with S1 parameters per head, ``(H, A, S)``: N0[h] from head h's alpha, beta."""
    q, k, v = (split_heads(x @ p[n].W + p[n].b, n_heads, xp=np) for n in "qkv")  # (B, H, L, d)
    s1 = p["attn"]["s1"]
    delta = pos[:, None, :] - pos[None, :, :]                                     # (L, L, A)
    theta = delta[None, ..., None] * s1.freqs[:, None, None]                      # (H, L, L, A, S)
    n0 = np.sum(s1.alpha[:, None, None] * np.cos(theta) + s1.beta[:, None, None] * np.sin(theta),
                axis=(-2, -1))                                                    # (H, L, L)
    d, P = q.shape[-1], 2 * s1.freqs[0].size
    logits = (q @ np.swapaxes(k, -1, -2) + n0) / np.sqrt(d + P)                   # (B, H, L, L)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    o = (w / w.sum(-1, keepdims=True)) @ v
    B, H, L, _ = o.shape
    return np.swapaxes(o, 1, 2).reshape(B, L, H * d) @ p["o"].W + p["o"].b


def test_s1_authors_init_draws_per_head_parameters_from_the_grid_base():
    att, p, x = _s1_layer(grid=list(GRID), init="authors")
    s1 = nninit.init_mha(np.random.default_rng(0), 8, 2, att)["attn"]["s1"]
    assert s1.freqs.shape == s1.alpha.shape == s1.beta.shape == (2, 2, 2)         # (H, A, S)
    base = 2 * max(GRID)                                                          # Horn: max_pos * 2
    np.testing.assert_array_equal(s1.freqs, np.broadcast_to(base ** (-np.arange(2) / 2), (2, 2, 2)))
    assert not np.allclose(s1.alpha[0], s1.alpha[1])                              # a draw per head
    got = mha(x, p, None, n_heads=2, attention=att)
    np.testing.assert_allclose(got, _s1_dense_per_head(x, p, _rowmajor(*GRID)), rtol=1e-12, atol=1e-13)
    # the check can fail: head 1's parameters applied to both heads
    shared = dict(p, attn={"s1": type(p["attn"]["s1"])(*(np.stack([a[1], a[1]]) for a in p["attn"]["s1"]))})
    assert not np.allclose(got, _s1_dense_per_head(x, shared, _rowmajor(*GRID)), rtol=1e-6)
    with pytest.raises(ValueError, match="attention.init"):
        check_attention_config({"kind": "s1", "init": "authors"}, d_head=4, n_heads=2)


def test_s1_authors_init_alpha_beta_are_standard_normal():
    """alpha, beta ~ N(0, 1): over 64 heads x 2 axes x 4 scales = 512 draws each, the sample variance has
    relative SE sqrt(2 / 511) = 0.063; within 5 SE of 1 (the sinusoid init: alpha = 1 exactly, beta variance
    0.01, both far outside)."""
    att = check_attention_config({"kind": "s1", "lengthscales": 4, "grid": [4, 4], "init": "authors"},
                                 d_head=1, n_heads=64)
    s1 = nninit.init_mha(np.random.default_rng(5), 64, 64, att)["attn"]["s1"]
    for a in (s1.alpha, s1.beta):
        assert abs(a.var(ddof=1) - 1.0) < 5 * np.sqrt(2 / (a.size - 1))
        assert abs(a.mean()) < 5 / np.sqrt(a.size)


@pytest.mark.parametrize("features", [None, "positive"], ids=["exact", "favor"])
def test_s1_authors_init_gradients(features):
    """Per-head S1 parameters (the authors' initialisation) through the whole model: central differences."""
    att = {"kind": "s1", "lengthscales": 2, "grid": [1, 5], "init": "authors"}
    if features:
        att.update(features="positive", m=8)
    cfg = tiny_config(att, "classify")
    rng = np.random.default_rng(4)
    params = perturb(nninit.init_transformer(rng, cfg), rng)
    assert params["blocks"][0]["attn"]["attn"]["s1"].alpha.shape == (2, 2, 2)
    feats = nninit.draw_attention_features(rng, cfg)
    ids = rng.integers(0, cfg["vocab_size"], size=(2, 5))
    labels = rng.integers(0, cfg["n_classes"], size=2)
    check_vjp(transformer_loss_fwd, transformer_loss_bwd, {"params": params},
              kwargs={"inputs": ids, "labels": labels, "features": feats, "config": cfg},
              alone=attention_leaves)


def test_qk_init_torch_scale():
    """torch.nn.Linear's default law U(-1/sqrt(D), 1/sqrt(D)): D * Var(W) = 1/3 (query entries of SD 0.58
    for unit inputs), Glorot's 1. The estimate D * mean(W^2) over D^2 = 4096 entries has relative SE
    sqrt(Var(W^2)) / (E[W^2] sqrt(n)) = sqrt(4/5 - 4/9) * 3/2 / 64 = 0.014 for a uniform law; 5 SE = 7 %."""
    D = 64
    for law, want in (("torch", 1 / 3), ("glorot", 1.0)):
        p = nninit.init_mha(np.random.default_rng(0), D, 4, "favor", qk_init=law)
        for name in "qk":
            got = D * np.mean(p[name].W ** 2)
            assert abs(got / want - 1) < 5 * 0.014, (law, name, got)
        bound = 1 / np.sqrt(D) if law == "torch" else np.sqrt(6 / (2 * D))
        assert np.all(np.abs(p["q"].W) <= bound) and np.max(np.abs(p["q"].W)) > 0.95 * bound
    torch_p = nninit.init_mha(np.random.default_rng(0), D, 4, "favor", qk_init="torch")
    assert np.any(torch_p["q"].b != 0) and np.all(torch_p["v"].b == 0)          # torch's bias law; v Glorot
    with pytest.raises(ValueError, match="qk_init"):
        nninit.init_mha(np.random.default_rng(0), D, 4, "favor", qk_init="he")
