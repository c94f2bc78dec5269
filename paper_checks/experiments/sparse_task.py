"""Chowdhury et al. Sec. 4.2 and Appendix E at laptop scale: the sparse sum task, GMM-RKS vs GMM-PRF.

Data (E.1, :func:`data.sparse_sum_task`): pairs ``(v_i, a_i)``, label ``sum_i v_i a_i`` in -4..4 (9 classes,
balanced), ``a_i ~ Bernoulli(p)`` for ``p`` in {0.1, 0.5, 0.9} (the paper's dataset labels), 80/20 split.

Model (E.2): the 3-d many-hot input ``(v=1, v=-1, a)`` through a dense embedding (``input="patches"`` with an
``(1, L, 3)`` "image", ``patch=1``) plus learned positions, a 3-layer pre-LN transformer with
``d_model = d_ff = 64`` and 4 heads of width 16, readout at position 0, a 9-way softmax; 64 random samples.
Deviation: E.2 puts a 64-unit hidden layer between the readout and the 9-way layer; refattn's classifier head
is one dense layer on the 64-wide readout, so the "64 neurons of the classifier layer" below are the head's
64 inputs.

Gradient statistics (E.3, Table 14): when a run first reaches 20/40/60/80 % validation accuracy, the first 50
validation points are passed ``repeats`` times (fresh random features each time) and the gradient of the mean
cross-entropy with respect to the classifier layer's 64 inputs is recorded: ``g_r = sum_n dlogits_n W^T``.
Per neuron: mean over repeats of ``|g_r|`` and standard deviation over repeats of ``g_r``; reported as the
average over the 64 neurons.

Paper scale: 200K sequences of length 200, AdamW lr 5e-6, batch 400. Scales used here: :data:`SIZES`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import _harness as harness
from .data import SPARSE_CLASSES, sparse_features, sparse_sum_task

NAME = "sparse_task"
METHODS = ("gmm-rks", "gmm-prf")
THRESHOLDS = (0.2, 0.4, 0.6, 0.8)
T_CONV = 0.4   # steps to this validation accuracy = "convergence time" in the criterion

SIZES = {
    "tiny": dict(L=12, n=270, ps=(0.1, 0.9), d_model=16, n_heads=2, n_layers=1, m=8, steps=4, batch=32,
                 lr=3e-3, eval_every=2, repeats=3, n_grad=20, n_val_eval=54),
    "small": dict(L=40, n=4500, ps=(0.1, 0.5, 0.9), d_model=64, n_heads=4, n_layers=3, m=64, steps=300,
                  batch=64, lr=2e-3, eval_every=25, repeats=20, n_grad=50, n_val_eval=450),
    "full": dict(L=100, n=18000, ps=(0.1, 0.5, 0.9), d_model=64, n_heads=4, n_layers=3, m=64, steps=2000,
                 batch=100, lr=1e-3, eval_every=50, repeats=50, n_grad=50, n_val_eval=1800),
}

CRITERION = ("Two parts, both needed for holds. (A) gradients: over the (p, checkpoint) cells reached by "
             "both models, the ratio std(GMM-PRF)/std(GMM-RKS) of the classifier-layer gradient exceeds 1 in "
             "at least 75% of the cells (Table 14's reading: PRF's gradients vary more). (B) convergence: "
             "with T = steps to 40% validation accuracy (censored at the step budget), "
             "T_PRF(p=0.9)/T_PRF(p=0.1) > T_RKS(p=0.9)/T_RKS(p=0.1) (PRF slows down as sparsity decreases, "
             "RKS much less). fails if either part is contradicted; not-checkable if fewer than 4 cells are "
             "reached by both models.")


def _config(method: str, sz: dict) -> dict:
    return dict(task="classify", input="patches", patch=1, image_shape=(1, sz["L"], 3), d_model=sz["d_model"],
                n_heads=sz["n_heads"], n_layers=sz["n_layers"], d_ff=sz["d_model"], max_len=sz["L"],
                position="learned", readout="first", n_classes=SPARSE_CLASSES,
                attention=harness.attention_config(method, m=sz["m"]), dtype="float64")


def classifier_input_grad(logits: np.ndarray, labels: np.ndarray, W_head: np.ndarray) -> np.ndarray:
    """Gradient of the mean cross-entropy w.r.t. the classifier layer's inputs, summed over the batch:
    ``sum_n (softmax(z_n) - onehot(y_n)) / N @ W^T``. ``logits (N, K)``, ``W_head (D, K)`` -> ``(D,)``."""
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)                                              # (N, K)
    p[np.arange(labels.shape[0]), labels] -= 1.0
    return (p / labels.shape[0]).sum(axis=0) @ W_head.T                             # (D,)


def gradient_stats(grads: np.ndarray) -> dict:
    """Table 14's two numbers from ``grads (repeats, neurons)``: per-neuron mean |g| and std g, averaged."""
    return {"abs_mean": float(np.mean(np.mean(np.abs(grads), axis=0))),
            "std": float(np.mean(np.std(grads, axis=0, ddof=1)))}


def _one_run(method, p, sz, seed, x_tr, y_tr, x_va, y_va):
    cfg = _config(method, sz)
    curve, cells = [], {}
    xg, yg = x_va[:sz["n_grad"]], y_va[:sz["n_grad"]]
    xe, ye = x_va[:sz["n_val_eval"]], y_va[:sz["n_val_eval"]]

    def cb(step, params):
        feats = harness.draw_features(seed, 10**6 + step, cfg)
        acc = harness.accuracy(harness.predict_logits(params, xe, cfg, feats), ye)
        curve.append((step, acc))
        for t in THRESHOLDS:
            if acc >= t and t not in cells:
                W = np.asarray(params["head"].W)
                g = np.stack([classifier_input_grad(
                    harness.predict_logits(params, xg, cfg,
                                       harness.draw_features(seed, 2 * 10**6 + 1000 * step + r, cfg)),
                    yg, W) for r in range(sz["repeats"])])                          # (repeats, D)
                cells[t] = {"step": step, "val_acc": acc, **gradient_stats(g)}
        return False

    harness.train_loop(cfg, x_tr, y_tr, seed=seed, steps=sz["steps"], batch=sz["batch"], lr=sz["lr"],
                 weight_decay=0.1, beta2=0.98, eps=1e-9, callback=cb, callback_every=sz["eval_every"])
    reached = [s for s, a in curve if a >= T_CONV]
    return {"curve": curve, "checkpoints": {f"{int(t * 100)}%": c for t, c in cells.items()},
            "steps_to_40": reached[0] if reached else None}


def run(size: str = "small", seed: int = 0, out_dir: Path | None = None) -> dict:
    sz = SIZES[size]
    harness.require_kinds(*METHODS)
    out_dir = harness.ensure_dir(out_dir, NAME)
    res: dict = {m: {} for m in METHODS}
    for i, p in enumerate(sz["ps"]):
        task = sparse_sum_task(np.random.default_rng([seed, 7, i]), sz["n"], sz["L"], p)
        x = sparse_features(task)[:, None]                                           # (n, 1, L, 3)
        k = int(0.8 * sz["n"])
        for m in METHODS:
            res[m][str(p)] = _one_run(m, p, sz, 1000 * seed + 10 * i, x[:k], task.y[:k], x[k:], task.y[k:])
    # criterion values
    ratios = []
    for p in sz["ps"]:
        for t in THRESHOLDS:
            key = f"{int(t * 100)}%"
            a = res["gmm-rks"][str(p)]["checkpoints"].get(key)
            b = res["gmm-prf"][str(p)]["checkpoints"].get(key)
            if a and b:
                ratios.append({"p": p, "checkpoint": key, "std_prf_over_rks": b["std"] / a["std"],
                               "absmean_prf_over_rks": b["abs_mean"] / a["abs_mean"]})
    T = {m: {str(p): (res[m][str(p)]["steps_to_40"] or sz["steps"] + sz["eval_every"]) for p in sz["ps"]}
         for m in METHODS}
    lo, hi = str(min(sz["ps"])), str(max(sz["ps"]))
    record = {
        "experiment": NAME, "size": size, "seed": seed,
        "scale": dict(sz) | {"paper_scale": "200K sequences, L=200, batch 400, AdamW lr 5e-6"},
        "results": res, "criterion": CRITERION,
        "criterion_values": {"ratios": ratios,
                             "fraction_std_ratio_above_1": (
                                 float(np.mean([r["std_prf_over_rks"] > 1 for r in ratios]))
                                 if ratios else None),
                             "steps_to_40pct (censored = budget + eval_every)": T,
                             "slowdown_prf": T["gmm-prf"][hi] / T["gmm-prf"][lo],
                             "slowdown_rks": T["gmm-rks"][hi] / T["gmm-rks"][lo]},
        "summary": {m: {p: {"final_val_acc": res[m][p]["curve"][-1][1],
                            "steps_to_40": res[m][p]["steps_to_40"]}
                        for p in res[m]} for m in METHODS},
    }
    fig, axes = harness.new_figure(len(sz["ps"]), width=3.6)
    for ax, p in zip(axes, sz["ps"], strict=True):
        for m in METHODS:
            c = np.array(res[m][str(p)]["curve"])
            ax.plot(c[:, 0], c[:, 1], marker=".", label=m)
        ax.set_title(f"p = {p} (L={sz['L']}, size={size})", fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("validation accuracy")
    axes[0].legend(fontsize=8)
    record["figures"] = [str(harness.save_figure(fig, out_dir / f"{NAME}.png"))]
    harness.save_json(out_dir / f"{NAME}.json", record)
    return record


def decide(record: dict) -> tuple[str, str]:
    cv = record["criterion_values"]
    n = len(cv["ratios"])
    txt = (f"{n} cells reached by both; std PRF/RKS > 1 in {cv['fraction_std_ratio_above_1']} of them; "
           f"slowdown T(p=max)/T(p=min): PRF {cv['slowdown_prf']:.2f}, RKS {cv['slowdown_rks']:.2f}")
    if n < 4:
        return "not-checkable", "too few checkpoints reached: " + txt
    ok_a = cv["fraction_std_ratio_above_1"] >= 0.75
    ok_b = cv["slowdown_prf"] > cv["slowdown_rks"]
    return ("holds" if ok_a and ok_b else "fails"), txt
