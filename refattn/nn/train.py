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

The step itself is ``transformer_loss_fwd``/``transformer_loss_bwd`` (the model's manual backward), optional
global-norm clipping, then an optimiser from :mod:`refattn.nn.optim` (``"sgd"``, ``"adam"`` or ``"adamw"``);
then the non-learnable parameters the forward updated (the generative kind's running batch-norm statistics
with ``bn="running"``, :func:`refattn.nn.transformer.parameter_updates`) are written back. Evaluation runs
``train=False``.
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

import numpy as np

from .._xp import namespace
from ..layers.losses import softmax_cross_entropy
from ..random import tree_as_xp, tree_to_numpy
from .config import check_config
from .init import draw_dropout_masks, features_for_step, init_transformer
from .kinds.flt import model_bias_bound
from .optim import (adam_init, adam_update, adamw_update, clip_by_global_norm, global_norm, sgd_init,
                    sgd_update)
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


def train(config: dict, inputs, labels, *, seed: int, steps: int, batch_size: int, lr: float = 1e-3,
          optimizer: str = "adamw", weight_decay: float = 0.0, clip_norm: float | None = None,
          eval_data: tuple | None = None, eval_every: int = 0, log_path=None, progress: bool = True,
          like=None, params=None, schedule: dict | None = None, accumulate: int = 1,
          positions=None) -> TrainResult:
    """Train the model of `config` on ``(inputs, labels)`` (NumPy arrays, first axis = examples).

    Parameters
    ----------
    config : dict
        Model configuration (``refattn.nn.config.check_config``).
    inputs, labels : numpy arrays
        Token ids ``(n, L)`` or images ``(n, H, W, C)``; labels ``(n,)`` (classify) or ``(n, L)`` (lm).
    seed : int
        The one seed of the run (initialisation, batches, feature redraws).
    steps, batch_size : int
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
        JSON-lines metrics log (one object per line: ``{"step", "loss", "grad_norm"}`` for training steps,
        ``{"step", "eval_loss", "eval_accuracy"}`` for evaluations).
    progress : bool
        Show a tqdm progress bar when tqdm is installed (silent otherwise).
    like : array, optional
        Run in `like`'s namespace/device/dtype (NumPy otherwise).
    params : dict, optional
        Start from these parameters instead of the seed's initialisation.

    Returns
    -------
    TrainResult
        ``params`` (final parameters, in `like`'s namespace, NumPy by default), ``opt_state`` and ``history``
        (one dict per logged event, as written to `log_path`).

    Raises
    ------
    ValueError
        A bad configuration or optimiser setting, mismatched `inputs`/`labels`, or a bad `batch_size` /
        `accumulate`.
    FloatingPointError
        When the training loss stops being finite.
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
    sched = check_schedule(schedule)
    learning_rate(0, lr=lr, schedule=sched)                                     # validates lr once
    conv = (lambda t: tree_as_xp(t, like=like)) if like is not None else (lambda t: t)
    pos = None if positions is None else conv(np.asarray(positions, dtype=cfg["dtype"]))   # (L, D)
    if params is None:
        params = init_transformer(np.random.default_rng([int(seed), 0]), cfg)
    params = conv(params)
    state = sgd_init(params) if optimizer == "sgd" else adam_init(params)

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

            bar = tqdm(total=steps, desc="train", leave=False)
        except ImportError:
            bar = None
    history: list = []
    log = open(log_path, "w") if log_path is not None else None

    def record(entry):
        history.append(entry)
        if log is not None:
            log.write(json.dumps(entry) + "\n")
            log.flush()

    try:
        for t in range(steps):
            rng_t = np.random.default_rng([int(seed), 2, t])
            idx = rng_t.choice(n, size=accumulate * batch_size, replace=False)
            feats = conv(features_for_step(seed, t, cfg))
            loss, grads, updates = micro_grads(t, idx, feats)
            rate = learning_rate(t, lr=lr, schedule=sched)
            if not math.isfinite(loss):
                raise FloatingPointError(f"step {t}: the training loss is not finite ({loss})")
            if clip_norm is not None:
                grads, gnorm = clip_by_global_norm(grads, clip_norm)
            else:
                gnorm = global_norm(grads)
            entry = {"step": t, "loss": loss, "grad_norm": gnorm, "lr": rate}
            bias = model_bias_bound(params, cfg, pos, _seq_len(cfg, inputs[:1]))    # truncated local RPE only
            if bias is not None:
                entry["flt_bias_bound"] = bias                                        # this step's forward
            params, state = step_fn(params, grads, state, rate)
            params = _apply_updates(params, updates)
            record(entry)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}")
            last = t == steps - 1
            if eval_data is not None and ((eval_every and (t + 1) % eval_every == 0) or last):
                ev = evaluate(params, eval_data[0], eval_data[1], conv(features_for_step(seed, t, cfg)),
                              config=cfg, like=like, positions=positions)
                record({"step": t, "eval_loss": ev["loss"], "eval_accuracy": ev["accuracy"]})
    finally:
        if bar is not None:
            bar.close()
        if log is not None:
            log.close()
    return TrainResult(params=params, opt_state=state, history=history)
