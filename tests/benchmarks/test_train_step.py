"""The torch port of the image model in ``benchmarks/train_step.py`` computes refattn's model.

The benchmark compares refattn's training step with torch eager on "the same model"; that is only true if the
port's loss, gradients and AdamW step equal refattn's on the same inputs, parameters and projections. These
tests check it (float32 loss to 1e-5 on the benchmark's own sizes, float64 gradients and one AdamW step to
round-off on a smaller batch), and that the match is tight enough to catch a port that differs in one term:
each planted variant of the port's FAVOR+ (a missing ``d^{-1/4}``, a key stabiliser that is not a gauge, a
missing key norm) breaks it. Skipped without torch (the ``crosscheck`` extra).
"""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from refattn.nn.init import features_for_step, init_transformer  # noqa: E402
from refattn.nn.optim import adam_init, adamw_update  # noqa: E402
from refattn.nn.transformer import loss_and_grads  # noqa: E402
from refattn.tree import tree_leaves, tree_map  # noqa: E402

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """The benchmark module (it imports its sibling ``_timing``, so its folder goes on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_train_step", BENCH / "train_step.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod


def _setup(bench, dtype, batch, seed=0):
    cfg = dict(bench.IMAGE_CONFIG, dtype=dtype)
    params = init_transformer(np.random.default_rng([seed, 0]), cfg)
    ids, labels = bench.image_inputs(np.random.default_rng([seed, 1]), batch, cfg["max_len"])
    feats = features_for_step(seed, 3, cfg)
    return cfg, params, ids, labels, feats


def _torch_loss(bench, cfg, params, ids, labels, feats):
    tp = bench.torch_params(torch, params)
    tf = [tree_map(torch.from_numpy, f) for f in feats]
    loss = bench.torch_loss(torch, tp, tf, torch.as_tensor(ids), torch.as_tensor(labels), cfg)
    return loss, tp


def test_config_is_the_image_experiments_full_model(bench):
    images = pytest.importorskip("paper_checks.experiments.images")
    full = images.SIZES["full"]
    assert bench.IMAGE_CONFIG == images.model_config("no-pos", full)
    assert (bench.IMAGE_BATCH, bench.IMAGE_LR) == (full["batch"], full["lr"])


def test_float32_loss_matches_at_the_benchmark_sizes(bench):
    cfg, params, ids, labels, feats = _setup(bench, "float32", bench.IMAGE_BATCH)
    ours = float(loss_and_grads(params, ids, labels, feats, config=cfg)[0])
    theirs, _ = _torch_loss(bench, cfg, params, ids, labels, feats)
    assert abs(ours - float(theirs.detach())) <= 1e-5, (ours, float(theirs.detach()))


def _grad_errors(bench, batch=4):
    """Per parameter leaf, max |refattn - torch| / max |refattn| of the float64 gradients, and the losses."""
    cfg, params, ids, labels, feats = _setup(bench, "float64", batch)
    loss, grads = loss_and_grads(params, ids, labels, feats, config=cfg)
    tl, tp = _torch_loss(bench, cfg, params, ids, labels, feats)
    tl.backward()
    ours, theirs = tree_leaves(grads), [t.grad.numpy() for t in bench.torch_leaves(tp)]
    assert len(ours) == len(theirs) == 37            # embed, 2 x 17 block leaves, ln_f (2)... and the head
    errs = [float(np.max(np.abs(a - b)) / np.max(np.abs(a))) for a, b in zip(ours, theirs, strict=True)]
    return float(loss), float(tl.detach()), errs


def test_float64_gradients_match(bench):
    loss, tloss, errs = _grad_errors(bench)
    assert abs(loss - tloss) <= 1e-12 * abs(loss)
    assert max(errs) <= 1e-9, errs


def test_one_adamw_step_matches(bench):
    cfg, params, ids, labels, feats = _setup(bench, "float64", 4)
    _, grads = loss_and_grads(params, ids, labels, feats, config=cfg)
    new, _ = adamw_update(params, grads, adam_init(params), lr=bench.IMAGE_LR, weight_decay=0.0)
    step = bench.TorchImageStep(torch, params, cfg)
    step.draw = lambda: [tree_map(torch.from_numpy, f) for f in feats]            # the same projections
    step(torch.as_tensor(ids), torch.as_tensor(labels))
    for a, b in zip(tree_leaves(new), bench.torch_leaves(step.tp), strict=True):
        np.testing.assert_allclose(b.detach().numpy(), a, rtol=0, atol=1e-9)
    moved = max(float(np.max(np.abs(a - p))) for a, p in zip(tree_leaves(new), tree_leaves(params),
                                                              strict=True))
    assert moved > 0.5 * bench.IMAGE_LR                                        # the step did something


# ---- planted differences: each variant of the port's FAVOR+ must break the match -------------------------
def _favor_without_scale(torch, q, k, v, omega):
    """No d^{-1/4} on q and k."""
    m = omega.shape[0]
    uq = q @ omega.T - 0.5 * (q * q).sum(-1, keepdim=True)
    uk = k @ omega.T - 0.5 * (k * k).sum(-1, keepdim=True)
    pq = torch.exp(uq - uq.amax(-1, keepdim=True).detach()) / math.sqrt(m)
    pk = torch.exp(uk - uk.amax(dim=(-2, -1), keepdim=True).detach()) / math.sqrt(m)
    return (pq @ (pk.transpose(-1, -2) @ v)) / (pq @ pk.sum(-2).unsqueeze(-1))


def _favor_key_row_shift(torch, q, k, v, omega):
    """Keys shifted by their own row maximum (a per-key factor: it reweights the keys, not a gauge)."""
    d, m = q.shape[-1], omega.shape[0]
    qs, ks = q * d ** -0.25, k * d ** -0.25
    uq = qs @ omega.T - 0.5 * (qs * qs).sum(-1, keepdim=True)
    uk = ks @ omega.T - 0.5 * (ks * ks).sum(-1, keepdim=True)
    pq = torch.exp(uq - uq.amax(-1, keepdim=True).detach()) / math.sqrt(m)
    pk = torch.exp(uk - uk.amax(-1, keepdim=True).detach()) / math.sqrt(m)
    return (pq @ (pk.transpose(-1, -2) @ v)) / (pq @ pk.sum(-2).unsqueeze(-1))


def _favor_without_key_norm(torch, q, k, v, omega):
    """The keys' ``-|k'|^2/2`` left out (the queries' may go: it cancels; the keys' may not)."""
    d, m = q.shape[-1], omega.shape[0]
    qs, ks = q * d ** -0.25, k * d ** -0.25
    uq = qs @ omega.T
    uk = ks @ omega.T
    pq = torch.exp(uq - uq.amax(-1, keepdim=True).detach()) / math.sqrt(m)
    pk = torch.exp(uk - uk.amax(dim=(-2, -1), keepdim=True).detach()) / math.sqrt(m)
    return (pq @ (pk.transpose(-1, -2) @ v)) / (pq @ pk.sum(-2).unsqueeze(-1))


@pytest.mark.parametrize("planted", [_favor_without_scale, _favor_key_row_shift, _favor_without_key_norm],
                         ids=["no-d^-1/4", "key-row-shift", "no-key-norm"])
def test_a_planted_difference_breaks_the_match(bench, planted, monkeypatch):
    cfg, params, ids, labels, feats = _setup(bench, "float32", bench.IMAGE_BATCH)
    ours = float(loss_and_grads(params, ids, labels, feats, config=cfg)[0])
    monkeypatch.setattr(bench, "torch_favor", planted)
    theirs, _ = _torch_loss(bench, cfg, params, ids, labels, feats)
    assert abs(ours - float(theirs.detach())) > 1e-4                              # 10x the tolerance
    loss, tloss, errs = _grad_errors(bench)
    assert max(errs) > 1e-4, errs                                                  # gradients differ too


def test_torch_draw_has_refattn_law(bench):
    """Rows of one d x d block are orthogonal; row norms are chi(d): E|w|^2 = d, Var |w|^2 = 2 d."""
    gen = torch.Generator().manual_seed(0)
    d, m, n = 16, 64, 200
    omegas = torch.stack([bench.torch_draw_omega(torch, gen, m, d) for _ in range(n)]).double()   # (n, m, d)
    blocks = omegas.reshape(n, m // d, d, d)
    gram = blocks @ blocks.transpose(-1, -2)
    off = gram - torch.diag_embed(torch.diagonal(gram, dim1=-2, dim2=-1))
    assert float(off.abs().max()) < 1e-4 * d
    sq = (omegas ** 2).sum(-1).flatten()                                            # n m values of chi^2_d
    N, var = sq.numel(), 2 * d
    mu4 = var ** 2 * (3 + 12 / d)                                                   # excess kurtosis 12/d
    # 5 standard errors each; unit rows (|w|^2 = 1) fail the mean, sqrt(d) norms (|w|^2 = d) the variance
    assert abs(float(sq.mean()) - d) < 5 * math.sqrt(var / N)
    assert abs(float(sq.var()) - var) < 5 * math.sqrt((mu4 - var ** 2) / N)


def test_profile_groups_name_functions_the_step_calls(bench):
    """Every group of the ``--profile`` table names a function that refattn's step calls (a renamed core would
    otherwise show as a group of 0 ms): each group has a member in a cProfile of one step (batch 2)."""
    import cProfile
    import pstats

    cfg = bench.IMAGE_CONFIG
    params = init_transformer(np.random.default_rng([0, 0]), cfg)
    ids, labels = bench.image_inputs(np.random.default_rng(1), 2, cfg["max_len"])
    step = bench.RefattnImageStep(params, cfg)
    prof = cProfile.Profile()
    prof.runcall(step, ids, labels)
    seen = {(path.replace("\\", "/"), name) for path, _, name in pstats.Stats(prof).stats}
    for label, members in bench.REFATTN_GROUPS:
        assert any(p.endswith(f) and n == nm for p, n in seen for f, nm in members), label
