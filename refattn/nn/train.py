"""NumPy-only edge: the training loop (batches, feature redraws, optimiser steps, periodic evaluation,
JSON-lines log).

Not imported by ``import refattn`` (it may import tqdm). Everything random is a pure function of ``seed``:

* initial parameters: ``init_transformer(default_rng([seed, 0]), config)``;
* the batch of step t: indices from ``default_rng([seed, 2, t])`` (sampled without replacement); with gradient
  accumulation over k micro-batches, ``k * batch_size`` indices from that generator, split in k consecutive
  micro-batches (so ``accumulate=k`` equals one step on the ``k * batch_size`` batch, up to rounding);
* the attention features of step t: ``features_for_step(seed, t, config)`` (the redraw policy
  ``config["attention"]["redraw_every"]``);
* the dropout masks of micro-batch j of step t (when ``config["attn_dropout"]`` or ``config["resid_dropout"]``
  is positive): ``draw_dropout_masks(default_rng([seed, 3, t, j]), ...)``; evaluation runs without dropout;
* the learning rate of step t: ``learning_rate(t, lr=lr, schedule=schedule)`` (:mod:`refattn.nn.schedules`,
  a pure function of the step, logged as ``"lr"``); a model with the truncated local RPE (``flt`` kind,
  ``spectrum="box"``, ``truncation=B``) also logs each step's bias bound ``"flt_bias_bound"``
  (:func:`refattn.nn.kinds.flt.box_truncation_bias_bound`),

so two runs with the same arguments produce bitwise identical parameters (single-threaded BLAS; a different
BLAS thread count can change the last bits of GEMM sums).

**Resuming.** Since every draw of step t is a pure function of ``(seed, t)``, the state of a run after step t
is its parameters, the optimiser's moments and step counter, t itself (the position in the data order, the
schedule and every random stream) and the current draw of the attention features with the step it was drawn
for (its redraw position). ``train(..., checkpoint=path)`` writes all of it atomically
(:func:`refattn.nn.checkpoint.save` with a :class:`~refattn.nn.checkpoint.TrainState`) after the last step
and every ``checkpoint_every`` steps; ``train(..., resume=path)`` continues from it, so that a run of n steps
resumed to 2n gives bit for bit the parameters, optimiser state and log of one run of 2n steps. The settings
that shape the run (seed, optimiser, rates, schedule, clipping, batch size, accumulation and a SHA-256 of the
data) must match the checkpoint's; a parameters-only checkpoint is refused.

**Logs.** The JSON-lines log is written one line at a time, each flushed; a fresh run truncates it, a resumed
run drops the lines of steps at or after the checkpoint's (and a torn last line from a crash) and appends.
Non-finite numbers are written as the strings ``"nan"``, ``"inf"`` and ``"-inf"``: every line is valid JSON.

**Divergence.** Training stops with a ``FloatingPointError`` naming the step, the learning rate and the first
non-finite quantity: the loss (or a value inside the forward or backward pass), a gradient leaf or a parameter
after the update (``params/blocks/0/ff1/W``); the failing step is logged with an ``"error"`` entry first.

The step itself is ``transformer_loss_fwd``/``transformer_loss_bwd`` (the model's manual backward), optional
global-norm clipping, then an optimiser from :mod:`refattn.nn.optim` (``"sgd"``, ``"adam"`` or ``"adamw"``);
then the non-learnable parameters the forward updated (the generative kind's running batch-norm statistics
with ``bn="running"``, :func:`refattn.nn.transformer.parameter_updates`) are written back. Evaluation runs
``train=False``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, NamedTuple

import numpy as np
from array_api_compat import array_namespace

from .._xp import namespace
from ..files import append_jsonl, read_jsonl, write_text_atomic
from ..layers.losses import softmax_cross_entropy
from ..random import tree_as_xp, tree_to_numpy
from ..tree import tree_paths
from .checkpoint import TrainState, load_train_state, save
from .config import check_config
from .init import draw_dropout_masks, features_for_step, init_transformer
from .kinds.flt import model_bias_bound
from .optim import (AdamState, SGDState, adam_init, adam_update, adamw_update, clip_by_global_norm,
                    global_norm, sgd_init, sgd_update)
from .schedules import check_schedule, learning_rate
from .transformer import parameter_updates, transformer, transformer_loss_bwd, transformer_loss_fwd
from ..tree import tree_map

__all__ = ["TrainResult", "train", "evaluate"]


class TrainResult(NamedTuple):
    r"""Result of :func:`train`: final parameters, optimiser state and the logged history."""

    params: dict       # final parameters (namespace of `like`, NumPy by default)
    opt_state: Any     # final optimiser state
    history: list      # one dict per logged event (also written as JSON lines when log_path is given)


def _accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=-1) == labels))


def evaluate(params, inputs, labels, features, *, config, like=None, positions=None) -> dict:
    r"""Mean cross-entropy and accuracy of the model on a NumPy dataset (evaluation forward, no dropout).

    Parameters
    ----------
    params : dict
        Parameter tree (in `like`'s namespace when `like` is given).
    inputs : numpy.ndarray
        Token ids ``(n, L)`` or images ``(n, H, W, C)``.
    labels : numpy.ndarray
        Integer labels ``(n,)`` (classify) or ``(n, L)`` (lm).
    features : list or None
        One dict of drawn attention arrays per layer.
    config : dict
        Model configuration.
    like : array, optional
        Move the data to `like`'s namespace/device/dtype first.
    positions : (L, D_pos) array, optional
        Token coordinates for positional attention kinds.

    Returns
    -------
    dict
        ``{"loss": mean cross-entropy, "accuracy": fraction of argmax hits}`` (Python floats).
    """
    x = tree_as_xp(inputs, like=like) if like is not None else inputs
    y = tree_as_xp(labels, like=like) if like is not None else labels
    pos = positions
    if positions is not None and like is not None:
        pos = tree_as_xp(np.asarray(positions, dtype=np.float64), like=like)     # cast to like's dtype
    logits = transformer(params, x, features, config=config, positions=pos, train=False)
    loss = float(softmax_cross_entropy(logits, y))
    return {"loss": loss, "accuracy": _accuracy(tree_to_numpy(logits), np.asarray(labels))}


def _apply_updates(params, updates):
    """Write each layer's updated non-learnable parameters (running statistics) into the tree."""
    if not any(updates):
        return params
    blocks = [blk if not up else {**blk, "attn": {**blk["attn"], "attn": {**blk["attn"]["attn"], **up}}}
              for blk, up in zip(params["blocks"], updates, strict=True)]
    return {**params, "blocks": blocks}


def _seq_len(cfg, x):
    """Number of positions L of a batch: token ids ``(B, L)`` or images cut into patches."""
    if cfg["input"] == "tokens":
        return x.shape[-1]
    H, W, _ = cfg["image_shape"]
    return (H // cfg["patch"]) * (W // cfg["patch"])


def _first_nonfinite(tree, prefix):
    """The path of the first floating leaf of `tree` holding a NaN or an infinity, or None (one fused check;
    the leaves are walked again only after a failure)."""
    leaves = [(p, a) for p, a in tree_paths(tree, prefix)
              if array_namespace(a).isdtype(a.dtype, "real floating")]
    if not leaves:
        return None
    xp = array_namespace(leaves[0][1])
    if bool(xp.all(xp.stack([xp.all(xp.isfinite(a)) for _, a in leaves]))):
        return None
    return next(p for p, a in leaves if not bool(xp.all(xp.isfinite(a))))


def _fingerprint(inputs, labels) -> str:
    """SHA-256 of the training data (shapes, dtypes, bytes): a resumed run must see the same examples."""
    h = hashlib.sha256()
    for a in (inputs, labels):
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype.str}".encode())
        h.update(a.reshape(-1).view(np.uint8))
    return h.hexdigest()


def _open_log(log_path, start, eval_every):
    """The log, open for appending: truncated for a fresh run; for a resumed one, the lines an uninterrupted
    run has before `start` kept (a torn last line dropped, and the evaluation the interrupted run made after
    its own last step unless `eval_every` also asks for it there) and rewritten atomically."""
    if log_path is None:
        return None
    if start == 0 or not os.path.exists(log_path):
        return open(log_path, "w", encoding="utf-8")
    entries, _ = read_jsonl(log_path)

    def uninterrupted_has(e):
        if not (isinstance(e, dict) and isinstance(e.get("step"), int) and e["step"] < start):
            return False
        return "eval_loss" not in e or bool(eval_every) and (e["step"] + 1) % eval_every == 0

    kept = [e for e in entries if uninterrupted_has(e)]
    write_text_atomic(log_path, "".join(json.dumps(e, allow_nan=False) + "\n" for e in kept))
    return open(log_path, "a", encoding="utf-8")


def _resume_state(resume, cfg, settings, steps):
    """Parameters, optimiser state and feature draw of a training checkpoint, checked against this run."""
    params, _, st = load_train_state(resume, config=cfg)
    diff = sorted(k for k in set(settings) | set(st.settings) if settings.get(k) != st.settings.get(k))
    if diff:
        detail = ", ".join(f"{k}: checkpoint {st.settings.get(k)!r} vs now {settings.get(k)!r}" for k in diff)
        raise ValueError(f"resume: {resume} was written by a run with other settings ({detail}); resuming "
                         f"continues that run exactly, with its settings and data")
    want = "SGDState" if settings["optimizer"] == "sgd" else "AdamState"
    if type(st.opt_state).__name__ != want:
        raise ValueError(f"resume: {resume} holds a {type(st.opt_state).__name__}; optimizer "
                         f"{settings['optimizer']!r} needs a {want}")
    if steps < st.step:
        raise ValueError(f"steps: the run's total number of steps, at least the checkpoint's {st.step}; got "
                         f"{steps}")
    return params, st


def train(config: dict, inputs, labels, *, seed: int, steps: int, batch_size: int, lr: float = 1e-3,
          optimizer: str = "adamw", weight_decay: float = 0.0, clip_norm: float | None = None,
          eval_data: tuple | None = None, eval_every: int = 0, log_path=None, progress: bool = True,
          like=None, params=None, schedule: dict | None = None, accumulate: int = 1,
          positions=None, resume=None, checkpoint=None, checkpoint_every: int = 0) -> TrainResult:
    """Train the model of `config` on ``(inputs, labels)`` (NumPy arrays, first axis = examples).

    Parameters
    ----------
    config : dict
        Model configuration (``refattn.nn.config.check_config``).
    inputs, labels : numpy arrays
        Token ids ``(n, L)`` or images ``(n, H, W, C)``; labels ``(n,)`` (classify) or ``(n, L)`` (lm).
    seed : int
        The one seed of the run (initialisation, batches, feature redraws).
    steps : int
        The run's total number of steps: a resumed run continues from its checkpoint's step up to `steps`.
    batch_size : int
    lr, optimizer, weight_decay, clip_norm
        Optimiser settings; ``clip_norm=None`` disables clipping. `lr` is the base rate of the schedule.
    schedule : dict, optional
        Learning-rate schedule (:func:`refattn.nn.schedules.check_schedule`: linear warm-up, cosine or
        inverse-sqrt decay); ``None``: constant `lr`.
    accumulate : int
        Gradient accumulation: each optimiser step averages the gradients of `accumulate` micro-batches of
        `batch_size` examples (the loss is a mean, so this equals one batch of ``accumulate * batch_size``).
    positions : (L, D) numpy array, optional
        Per-token coordinates for positional attention kinds (``s1``, ``flt`` with ``pos_dim``), the same for
        every example; passed to the model at every step and evaluation.
    eval_data : (inputs, labels), optional
        Evaluated every `eval_every` steps and after the last step.
    log_path : path, optional
        JSON-lines metrics log (one object per line: ``{"step", "loss", "grad_norm", "lr"}`` for training
        steps, ``{"step", "eval_loss", "eval_accuracy"}`` for evaluations; module docstring: appending,
        resuming, non-finite values).
    progress : bool
        Show a tqdm progress bar when tqdm is installed (silent otherwise).
    like : array, optional
        Run in `like`'s namespace/device/dtype (NumPy otherwise).
    params : dict, optional
        Start from these parameters instead of the seed's initialisation (not with `resume`).
    resume : path, optional
        A training checkpoint written by ``checkpoint=``: continue that run exactly (module docstring).
    checkpoint : path, optional
        Write the whole training state here (atomically) after the last step and every `checkpoint_every`
        steps.
    checkpoint_every : int
        Period of the checkpoints in steps (0: after the last step only).

    Returns
    -------
    TrainResult
        ``params`` (final parameters, in `like`'s namespace, NumPy by default), ``opt_state`` and ``history``
        (one dict per event logged by this call, as written to `log_path`).

    Raises
    ------
    ValueError
        A bad configuration or optimiser setting, mismatched `inputs`/`labels`, a bad `batch_size` /
        `accumulate` / `checkpoint_every`, or a `resume` checkpoint of another run.
    refattn.nn.checkpoint.CheckpointError
        A `resume` file that is not a valid training checkpoint (a parameters-only one included).
    FloatingPointError
        When the loss, a gradient or a parameter stops being finite: naming the step, the learning rate and
        the first non-finite quantity.
    """
    cfg = check_config(config)
    if optimizer not in ("sgd", "adam", "adamw"):
        raise ValueError(f"optimizer: expected one of 'sgd', 'adam', 'adamw'; got {optimizer!r}")
    inputs, labels = np.asarray(inputs), np.asarray(labels)
    n = inputs.shape[0]
    if labels.shape[0] != n:
        raise ValueError(f"labels: expected {n} examples (inputs.shape[0]); got {labels.shape[0]}")
    if not 0 < batch_size <= n:
        raise ValueError(f"batch_size: expected an integer in [1, {n}]; got {batch_size}")
    bad_acc = isinstance(accumulate, bool) or not isinstance(accumulate, int)
    if bad_acc or not 0 < accumulate * batch_size <= n:
        raise ValueError(f"accumulate: expected an integer >= 1 with accumulate * batch_size <= {n} "
                         f"examples; got {accumulate!r}")
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 0:
        raise ValueError(f"checkpoint_every: expected an integer >= 0; got {checkpoint_every!r}")
    if resume is not None and params is not None:
        raise ValueError("params: a resumed run continues from its checkpoint's parameters; pass params or "
                         "resume, not both")
    sched = check_schedule(schedule)
    learning_rate(0, lr=lr, schedule=sched)                                     # validates lr once
    settings = {"seed": int(seed), "optimizer": optimizer, "lr": lr, "weight_decay": weight_decay,
                "clip_norm": clip_norm, "schedule": sched, "batch_size": batch_size, "accumulate": accumulate,
                "data": _fingerprint(inputs, labels)}
    conv = (lambda t: tree_as_xp(t, like=like)) if like is not None else (lambda t: t)
    pos = None if positions is None else conv(np.asarray(positions, dtype=cfg["dtype"]))   # (L, D)
    every = cfg["attention"]["redraw_every"]
    start, feats_np, feats_step = 0, None, -1
    if resume is not None:
        params, st = _resume_state(resume, cfg, settings, steps)
        start, feats_np, feats_step = st.step, st.features, st.features_step
        params = conv(params)
        if isinstance(st.opt_state, SGDState):
            state = SGDState(step=st.opt_state.step, velocity=conv(st.opt_state.velocity))
        else:
            state = AdamState(step=st.opt_state.step, m=conv(st.opt_state.m), v=conv(st.opt_state.v))
    else:
        if params is None:
            params = init_transformer(np.random.default_rng([int(seed), 0]), cfg)
        params = conv(params)
        state = sgd_init(params) if optimizer == "sgd" else adam_init(params)
    feats = None if feats_np is None else conv(feats_np)

    def step_fn(p, g, s, rate):
        if optimizer == "sgd":
            return sgd_update(p, g, s, lr=rate, weight_decay=weight_decay)
        if optimizer == "adam":
            return adam_update(p, g, s, lr=rate, weight_decay=weight_decay)
        return adamw_update(p, g, s, lr=rate, weight_decay=weight_decay)

    def micro_grads(t, idx, feats):
        """Mean loss and gradients over the `accumulate` micro-batches of `idx` (consecutive slices)."""
        total, acc, updates = 0.0, None, None
        for j in range(accumulate):
            sl = idx[j * batch_size:(j + 1) * batch_size]
            x, y = inputs[sl], labels[sl]
            masks = draw_dropout_masks(np.random.default_rng([int(seed), 3, t, j]), cfg, y.shape[:1],
                                       _seq_len(cfg, x))
            drop = None if masks is None else conv(masks)
            loss_j, cache = transformer_loss_fwd(params, conv(x), conv(y), feats, config=cfg, dropout=drop,
                                                 positions=pos)
            one = namespace(loss_j, names=("loss",)).ones_like(loss_j)
            g_j = transformer_loss_bwd(one, cache).params
            updates = parameter_updates(cache)     # running statistics (same noise: every micro-batch agrees)
            total += float(loss_j)
            acc = g_j if acc is None else tree_map(lambda a, b: a + b, acc, g_j)
        if accumulate > 1:
            total, acc = total / accumulate, tree_map(lambda a: a / accumulate, acc)
        return total, acc, updates

    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=max(steps - start, 0), desc="train", leave=False)
        except ImportError:
            bar = None
    history: list = []
    log = _open_log(log_path, start, eval_every)

    def record(entry):
        history.append(entry)
        if log is not None:
            append_jsonl(log, entry)

    def diverged(t, rate, what, entry=None):
        msg = (f"step {t} (learning rate {rate:.6g}): training diverged; the first non-finite quantity is "
               f"{what}")
        record({**(entry or {"step": t, "lr": rate}), "error": msg})
        return FloatingPointError(msg)

    def write_checkpoint(t):
        save(checkpoint, params, cfg, train_state=TrainState(
            step=t + 1, opt_state=state, features=feats_np, features_step=feats_step, redraw_every=every,
            settings=settings))

    try:
        for t in range(start, steps):
            rng_t = np.random.default_rng([int(seed), 2, t])
            idx = rng_t.choice(n, size=accumulate * batch_size, replace=False)
            window = 0 if every is None else t - t % every           # the step this window's draw is for
            if feats_np is None or feats_step != window:
                feats_np, feats_step = features_for_step(seed, t, cfg), window
                feats = conv(feats_np)
            rate = learning_rate(t, lr=lr, schedule=sched)
            try:
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # found below, named
                    loss, grads, updates = micro_grads(t, idx, feats)
            except ValueError as exc:
                if "finite" not in str(exc):
                    raise
                raise diverged(t, rate, f"a value in the forward or backward pass ({exc})") from exc
            if not math.isfinite(loss):
                raise diverged(t, rate, f"the loss ({loss})", {"step": t, "loss": loss, "lr": rate})
            bad = _first_nonfinite(grads, "grads")
            if bad is not None:
                raise diverged(t, rate, f"the gradient {bad!r}", {"step": t, "loss": loss, "lr": rate})
            if clip_norm is not None:
                grads, gnorm = clip_by_global_norm(grads, clip_norm)
            else:
                gnorm = global_norm(grads)
            entry = {"step": t, "loss": loss, "grad_norm": gnorm, "lr": rate}
            bias = model_bias_bound(params, cfg, pos, _seq_len(cfg, inputs[:1]))    # truncated local RPE only
            if bias is not None:
                entry["flt_bias_bound"] = bias                                        # this step's forward
            with np.errstate(over="ignore", invalid="ignore"):
                params, state = step_fn(params, grads, state, rate)
            params = _apply_updates(params, updates)
            bad = _first_nonfinite(params, "params")
            if bad is not None:
                raise diverged(t, rate, f"the parameter {bad!r} after the update", entry)
            record(entry)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}")
            last = t == steps - 1
            if eval_data is not None and ((eval_every and (t + 1) % eval_every == 0) or last):
                ev = evaluate(params, eval_data[0], eval_data[1], feats, config=cfg, like=like,
                              positions=positions)
                record({"step": t, "eval_loss": ev["loss"], "eval_accuracy": ev["accuracy"]})
            if checkpoint is not None and ((checkpoint_every and (t + 1) % checkpoint_every == 0) or last):
                write_checkpoint(t)
    finally:
        if bar is not None:
            bar.close()
        if log is not None:
            log.close()
    return TrainResult(params=params, opt_state=state, history=history)
