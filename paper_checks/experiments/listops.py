"""Chowdhury et al. Table 2, ListOps column, at laptop scale: each attention trained on generated ListOps.

Data: :func:`data.listops_dataset` (LRA's operators MAX, MIN, MED, SM over digits; lengths in
``[min_len, max_len]``, padded), every label checked by the independent shift-reduce evaluator
:func:`data.listops_evaluate` before training. Model: token embedding + sinusoid positions, pre-LN encoder,
mean-pool readout, 10 classes, float32, AdamW (beta2 0.98, weight decay 0.1 as in Table 6) with a linear
warm-up and cosine decay. Methods: softmax and the KL maps of :data:`SIZES` (GMM-, FastFood-, Generative- x
RKS/PRF, as many as the budget allows). Every (method, seed) run is one task of a grid that goes through
``ctx.map`` (2 local processes by default; per-run cache under ``--report``) and records its learning curve
(train/test accuracy vs step, CPU seconds), its test accuracy (one fixed feature draw), the Sec. 4.1
variance metrics (:mod:`.variance_metrics` reads them) and, for GMM maps, the learnt covariances'
eigenvalues.

Paper scale: L = 2000, 6 layers, width 512, 10K steps (Table 6); here :data:`SIZES` (lengths of tens of
tokens, a few hundred steps): the numbers are not the paper's.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path

import numpy as np

from ..registry import Context
from . import harness, measures
from .data import LISTOPS_VOCAB, listops_dataset, listops_evaluate
from .provenance import Setting, rows

NAME = "listops"
CANDIDATES = ("softmax", "favor+", "gmm-rks", "gmm-prf", "fastfood-rks", "fastfood-prf", "generative-rks",
              "generative-prf")
PAIRS = (("gmm-rks", "gmm-prf"), ("fastfood-rks", "fastfood-prf"), ("generative-rks", "generative-prf"))

#: ``full`` trains softmax and the GMM and Generative RKS/PRF pairs, the costliest first; the FastFood pair is
#: left out at full (measured below: 3.5x the step cost of the others) and trained at small.
FULL_METHODS = ("gmm-rks", "gmm-prf", "generative-rks", "generative-prf", "softmax")

SIZES = {
    "tiny": dict(max_len=24, min_len=8, max_depth=2, max_args=3, n_train=64, n_test=32, d_model=16, n_heads=2,
                 n_layers=1, m=8, steps=3, batch=16, lr=3e-3, eval_every=3, n_eval=32, seeds=1, passes=5,
                 n_vm=16, workers=0, methods=("softmax", "gmm-rks", "gmm-prf")),
    "small": dict(max_len=64, min_len=16, max_depth=3, max_args=4, n_train=4000, n_test=500, d_model=32,
                  n_heads=4, n_layers=2, m=32, steps=400, batch=32, lr=2e-3, eval_every=50, n_eval=300,
                  seeds=1, passes=50, n_vm=100, workers=2, methods=CANDIDATES),
    "full": dict(max_len=128, min_len=64, max_depth=4, max_args=5, n_train=10000, n_test=1000, d_model=64,
                 n_heads=4, n_layers=2, m=64, steps=1200, batch=32, lr=2e-3, eval_every=100, n_eval=400,
                 seeds=1, passes=100, n_vm=200, workers=2, methods=FULL_METHODS),
}
# ``full``: expressions of 64-128 tokens (mean ~95; small 16-64, tiny 8-24; the paper up to 2000), five models
# (the FastFood pair, about 3x the cost per step, is left out of the budget). GMM-RKS stays below the
# majority rate here with ``S = I``; the sparse task's remedy, a wider initial kernel (``s_init`` 0.25,
# :mod:`.sparse_task`), does not change that on ListOps, so ListOps keeps ``S = I``.

CRITERION = ("The paper (Table 2, ListOps): RKS-based maps score ~18.5% while their PRF counterparts score "
             "~37% (softmax 36.4%). holds iff for every available (X-RKS, X-PRF) pair the PRF model's test "
             "accuracy exceeds the RKS model's by more than 0.02 (absolute); fails otherwise; not-checkable "
             "if no pair is available or (learning guard) softmax does not beat the majority-class rate by "
             "0.05 (nothing was learnt at this scale: the evidence gives the steps it would need, "
             "extrapolated from its learning curve). Accuracies are seed means.")


#: Where every setting comes from (:mod:`.provenance`). The KL authors' repository
#: (github cs1160701/OnLearningTheKernel, which holds their ListOps code) was not consulted for this table.
PROVENANCE = (
    Setting("data", "generated ListOps (MAX, MIN, MED, SM over digits), labels checked by an independent "
            "evaluator; " + "; ".join(f"{n}: lengths {SIZES[n]['min_len']}-{SIZES[n]['max_len']}, "
                                      f"{SIZES[n]['n_train']} training expressions"
                                      for n in ("small", "full")),
            "scaled to the budget", paper="Sec. 3.1, App. C.3: LRA ListOps, length 2000",
            note="full: expressions 16x shorter"),
    Setting("model size", "; ".join(f"{n}: {SIZES[n]['n_layers']} layers, width {SIZES[n]['d_model']}, "
                                    f"{SIZES[n]['n_heads']} heads" for n in ("small", "full")),
            "scaled to the budget", paper="App. C.3: 6 layers, 8 heads, embedding 512, feed-forward 2048",
            note="full: 3x fewer layers, 8x narrower"),
    Setting("feature count", "; ".join(f"{n}: m {SIZES[n]['m']}" for n in ("small", "full")),
            "refattn's choice (paper and code silent)"),
    Setting("optimiser", "AdamW, beta2 0.98, weight decay 0.1", "paper",
            paper="App. C.3: Adam with weight decay (0.9, 0.98), weight decay 0.1"),
    Setting("learning rate and schedule", "; ".join(f"{n}: lr {SIZES[n]['lr']}" for n in ("small", "full"))
            + "; linear warm-up, cosine decay", "scaled to the budget",
            paper="App. C.3: lr 5e-3, 1000 warm-up steps, square-root decay",
            note="a rate and schedule for a few hundred to 1200 steps"),
    Setting("steps", "; ".join(f"{n}: {SIZES[n]['steps']} steps, batch {SIZES[n]['batch']}"
                               for n in ("small", "full")), "scaled to the budget",
            paper="App. C.3: 10K steps, batch 32", note="full: 8x fewer steps"),
    Setting("positions and readout", "sinusoid positions, mean-pool readout", "paper",
            paper="App. C.3: sinusoidal positional encoding", note="readout: refattn's choice"),
    Setting("dropout", "none", "refattn's choice", paper="App. C.3: 0.1",
            note="regularisation for long training; the models underfit at this budget"),
)


def config_for(method: str, sz: dict) -> dict:
    return dict(task="classify", input="tokens", vocab_size=len(LISTOPS_VOCAB), d_model=sz["d_model"],
                n_heads=sz["n_heads"], n_layers=sz["n_layers"], d_ff=2 * sz["d_model"], max_len=sz["max_len"],
                position="sinusoid", readout="mean", n_classes=10,
                attention=harness.attention_config(method, m=sz["m"]), dtype="float32")


@functools.lru_cache(maxsize=4)
def dataset(size: str, data_seed: int):
    """``(train, test)`` :class:`data.ListOpsData` of `size` (generator seeds ``[data_seed, 11 / 12]``)."""
    sz = SIZES[size]
    gen = dict(max_len=sz["max_len"], min_len=sz["min_len"], max_depth=sz["max_depth"],
               max_args=sz["max_args"])
    tr = listops_dataset(np.random.default_rng([data_seed, 11]), sz["n_train"], **gen)
    te = listops_dataset(np.random.default_rng([data_seed, 12]), sz["n_test"], **gen)
    return tr, te


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run of the grid: method, run seed, data seed, size."""

    method: str
    run_seed: int
    data_seed: int
    size: str

    def key(self) -> str:
        sz = json.dumps(SIZES[self.size], sort_keys=True)
        h = hashlib.sha1(f"{NAME}|{self}|{sz}".encode()).hexdigest()[:10]
        return f"{self.method}-s{self.run_seed}-{self.size}-{h}"


def train_one(run: Run) -> dict:
    """Train one (method, seed) model: learning curve, test accuracy, variance metrics, GMM eigenvalues."""
    sz = SIZES[run.size]
    cfg = config_for(run.method, sz)
    tr, te = dataset(run.size, run.data_seed)
    seed = run.run_seed
    ev = np.random.default_rng([seed, 7]).permutation(tr.y.size)[:sz["n_eval"]]
    feats = harness.draw_features(seed, 10**6, cfg)                                # one evaluation draw

    def measure(params):
        return {"train_acc": harness.accuracy(harness.predict_logits(params, tr.ids[ev], cfg, feats),
                                              tr.y[ev]),
                "test_acc": harness.accuracy(harness.predict_logits(params, te.ids[:sz["n_eval"]], cfg,
                                                                    feats), te.y[:sz["n_eval"]])}

    curve = harness.Curve(measure)
    stats: dict = {}
    with harness.single_thread():
        params = harness.train_loop(cfg, tr.ids, tr.y, seed=seed, steps=sz["steps"], batch=sz["batch"],
                                    lr=sz["lr"], weight_decay=0.1, beta2=0.98,
                                    schedule=harness.warmup_cosine(sz["steps"], sz["lr"]), callback=curve,
                                    callback_every=sz["eval_every"], stats=stats)
        if "diverged_at" in stats or not curve.data["step"]:
            curve(stats.get("diverged_at", 0), params)
        acc = harness.accuracy(harness.predict_logits(params, te.ids, cfg, feats), te.y)
        vm = eig = None
        if run.method != "softmax":
            vm = measures.passes_metrics(params, cfg, te.ids[:sz["n_vm"]], te.y[:sz["n_vm"]],
                                                 seed=seed, passes=sz["passes"])
        if run.method.startswith("gmm"):
            eig = measures.spectrum(params, cfg, np.random.default_rng([seed, 5]))
    steps = max(curve.data["step"][-1], 1)
    return {"method": run.method, "run_seed": seed, "curve": curve.data, "test_acc": acc, "training": stats,
            "variance": vm, "eigenvalues": eig, "train_cpu_seconds": round(curve.cpu, 1),
            "cpu_seconds_per_step": curve.cpu / steps, "seconds_per_step": curve.wall / steps}


def check_labels(size: str, data_seed: int) -> int:
    """Every label of the data set against the independent shift-reduce evaluator; the number checked."""
    tr, te = dataset(size, data_seed)
    bad = sum(listops_evaluate(t) != int(v) for d in (tr, te) for t, v in zip(d.tokens, d.y, strict=True))
    if bad:
        raise AssertionError(f"listops: {bad} labels disagree with the independent evaluator")
    return len(tr.y) + len(te.y)


def majority_rate(size: str, data_seed: int) -> float:
    _, te = dataset(size, data_seed)
    return float(np.max(np.bincount(te.y, minlength=10)) / te.y.size)


def runs_for(size: str, seed: int) -> list[Run]:
    sz = SIZES[size]
    return [Run(m, 1000 * seed + s, seed, size) for m in harness.available(sz["methods"])
            for s in range(sz["seeds"])]


def grid(ctx, seed: int) -> tuple[list[dict], float]:
    """The (method, seed) runs of ``ctx.size`` (:func:`harness.run_grid`) and the majority-class rate."""
    runs = harness.run_grid(ctx, train_one, runs_for(ctx.size, seed), name=NAME,
                            workers=SIZES[ctx.size]["workers"])
    return runs, majority_rate(ctx.size, seed)


def budget(size: str) -> dict:
    """This size's compute against the paper's ListOps runs (:func:`harness.budget_record`; L = the longest
    expression)."""
    sz = SIZES[size]
    return harness.budget_record({**sz, "L": sz["max_len"]}, "kl-listops")


def run(size: str = "small", seed: int = 0, out_dir: Path | None = None, ctx=None) -> dict:
    sz = SIZES[size]
    harness.require_kinds("softmax")
    ctx = ctx or Context(seed=seed, size=size)
    out_dir = harness.ensure_dir(out_dir, NAME)
    checked = check_labels(size, seed)
    tr, _ = dataset(size, seed)
    results, majority = grid(ctx, seed)
    methods = list(dict.fromkeys(r["method"] for r in results))
    res = {}
    for m in methods:
        rs = [r for r in results if r["method"] == m]
        res[m] = {"test_accuracy": float(np.mean([r["test_acc"] for r in rs])),
                  "per_seed": [r["test_acc"] for r in rs],
                  "cpu_seconds_per_step": float(np.mean([r["cpu_seconds_per_step"] for r in rs])),
                  "seconds_per_step": float(np.mean([r["seconds_per_step"] for r in rs]))}
    gaps = {f"{p}-{r}": res[p]["test_accuracy"] - res[r]["test_accuracy"]
            for r, p in PAIRS if r in res and p in res}
    need = {}
    target = majority + 0.05
    for m in methods:
        if res[m]["test_accuracy"] < target:
            rs = [r for r in results if r["method"] == m]
            n = min(len(r["curve"]["step"]) for r in rs)                     # a diverged run stops early
            steps = rs[0]["curve"]["step"][:n]
            acc = np.mean([r["curve"]["test_acc"][:n] for r in rs], axis=0)
            n = harness.extrapolated_steps(steps, acc, target)
            need[m] = {"steps": n, "note": harness.budget_note(n, res[m]["cpu_seconds_per_step"])}
    record = {
        "experiment": NAME, "size": size, "seed": seed, **budget(size), "provenance": rows(PROVENANCE),
        "scale": {k: v for k, v in sz.items() if k != "workers"} | {
            "mean_length": float(tr.lengths.mean()), "majority_class_rate": majority, "dtype": "float32",
            "lr_schedule": harness.warmup_cosine(sz["steps"], sz["lr"]),
            "paper_scale": "L=2000, 6 layers, width 512, 10K steps"},
        "runs": results, "results": res, "criterion": CRITERION,
        "criterion_values": {"prf_minus_rks": gaps, "softmax_accuracy": res["softmax"]["test_accuracy"],
                             "majority_class_rate": majority, "labels_checked": checked},
        "learning": {"guard": "test accuracy >= majority-class rate + 0.05", "below_guard": need,
                     "train_cpu_seconds_total": round(sum(r["train_cpu_seconds"] for r in results), 1)},
        "summary": res,
    }
    record["figures"] = [str(figure(results, res, majority, sz, size, out_dir / f"{NAME}.png"))]
    harness.save_json(out_dir / f"{NAME}.json", record)
    return record


def figure(results, res, majority, sz, size, path: Path) -> Path:
    """Learning curves (test solid, train dashed) of every method, and final test accuracy per method."""
    fig, axes = harness.new_figure(2, width=4.6)
    names = list(res)
    for i, m in enumerate(names):
        for j, r in enumerate(x for x in results if x["method"] == m):
            c = r["curve"]
            axes[0].plot(c["step"], c["test_acc"], color=f"C{i}", label=m if j == 0 else None)
            axes[0].plot(c["step"], c["train_acc"], color=f"C{i}", ls="--", alpha=0.5)
    axes[0].axhline(majority, color="k", ls=":", lw=0.8)
    axes[0].set_xlabel("training step")
    axes[0].set_ylabel("accuracy (solid: test, dashed: train)")
    axes[0].legend(fontsize=6)
    axes[1].bar(names, [res[n]["test_accuracy"] for n in names])
    axes[1].axhline(majority, color="k", ls="--", lw=0.8, label="majority class")
    axes[1].set_ylabel("test accuracy")
    axes[1].legend(fontsize=7)
    axes[1].tick_params(axis="x", labelrotation=60, labelsize=7)
    fig.suptitle(f"ListOps, length {sz['min_len']}-{sz['max_len']}, {sz['steps']} steps, size={size}",
                 fontsize=9)
    return harness.save_figure(fig, path)


def decide(record: dict) -> tuple[str, str]:
    cv = record["criterion_values"]
    gaps = cv["prf_minus_rks"]
    txt = (f"softmax {cv['softmax_accuracy']:.3f} (majority {cv['majority_class_rate']:.3f}); PRF - RKS: "
           + (", ".join(f"{k} {v:+.3f}" for k, v in gaps.items()) or "no pair available"))
    if not gaps:
        return "not-checkable", ("needs an RKS/PRF pair of attention kinds: " + txt
                                 + harness.guard_note(record))
    if cv["softmax_accuracy"] < cv["majority_class_rate"] + 0.05:
        return "not-checkable", ("softmax learnt nothing at this scale: " + txt
                                 + harness.guard_note(record))
    return ("holds" if all(v > 0.02 for v in gaps.values()) else "fails"), txt
