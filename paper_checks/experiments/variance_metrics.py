"""Chowdhury et al. Sec. 4.1 (Fig. 5, Figs. 9-10) at laptop scale: output variance of random-feature models.

The trained models are those of two other experiments (the same runs, from their grids): the GMM-RKS and
GMM-PRF models of the sparse task (:mod:`.sparse_task`, every p and seed) and the random-feature models of
ListOps (:mod:`.listops`: GMM-, FastFood-, Generative- x RKS/PRF and FAVOR+; softmax has no random features
and is left out). Each trained model is run ``passes`` times (100, as in the paper) on validation examples
with fresh random features, and measured by RSD, PI and AGV (defined in :mod:`.measures`, the paper's metrics
generalised to ``K`` classes).

Correlations between the metrics are taken over the (model, seed) points of models above their learning
guard (Spearman and R^2 of Pearson). Paper scale: LRA Text (4K tokens) and Retrieval.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..registry import Context
from . import harness, listops, sparse_task
from .sparse_rules import ladder_text, variance_rung
from . import provenance

NAME = "variance_metrics"
REQUIRED = ("gmm-rks", "gmm-prf")

CRITERION = ("Over the (model, seed) points of the sparse-task and ListOps models above their learning "
             "guard (sparse task: validation accuracy >= 0.4, chance 1/9; ListOps: test accuracy >= the "
             "majority-class rate + 0.05): holds iff the Spearman correlation of every pair of (mean RSD, "
             "mean PI, AGV) is >= 0.5 (the paper: R^2 0.95 RSD-AGV, 0.98 RSD-PI, 0.89 AGV-PI) AND GMM-RKS "
             "has a lower mean PI than GMM-PRF (the paper: RKS models have lower variance); fails otherwise; "
             "not-checkable with fewer than 4 such points or without a GMM-RKS and a GMM-PRF point "
             "among them.")


def _spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def collect_points(sparse_runs: list[dict], listops_runs: list[dict], majority: float) -> list[dict]:
    """One point per trained random-feature model: its task, method, cell, seed, metrics and whether it is
    above its learning guard."""
    pts = []
    for r in sparse_runs:
        pts.append({"task": "sparse", "method": r["method"], "cell": f"p={r['p']}", "seed": r["run_seed"],
                    **r["variance"], "learned": bool(r["final_val_acc"] >= sparse_task.T_CONV)})
    for r in listops_runs:
        if r["method"] == "softmax":
            continue
        pts.append({"task": "listops", "method": r["method"], "cell": "listops", "seed": r["run_seed"],
                    **r["variance"], "learned": bool(r["test_acc"] >= majority + 0.05)})
    return pts


def budget(size: str) -> dict:
    """The larger compute fraction of the two grids it reads (sparse task, ListOps): the fraction nearest
    the paper's, so a fails is kept whenever either grid reached the paper's compute."""
    return max(sparse_task.budget(size), listops.budget(size), key=lambda b: b["budget_fraction"])


def avg(sel: list[dict], key: str) -> float | None:
    """The mean of `key` over the points `sel` (None for none)."""
    vals = [p[key] for p in sel]
    return float(np.mean(vals)) if vals else None


def correlations(good: list[dict]) -> dict:
    """Spearman's rho and Pearson's R^2 of each pair of (mean RSD, mean PI, AGV) over the points `good`
    (empty below 3 points)."""
    if len(good) < 3:
        return {}
    rsd, pi, agv = (np.array([p[k] for p in good]) for k in ("rsd_mean", "pi_mean", "agv"))
    return {name: {"spearman": _spearman(a, b), "pearson_r2": float(np.corrcoef(a, b)[0, 1] ** 2)}
            for name, a, b in (("rsd-agv", rsd, agv), ("rsd-pi", rsd, pi), ("agv-pi", agv, pi))}


def ladder(sparse_runs: list[dict], listops_runs: list[dict], majority: float, size: str) -> list[dict]:
    """The claim's budget ladder: for each rung of :data:`sparse_task.LADDER` whose sparse-task runs are
    complete, the points of that rung's sparse-task models with the ListOps models (which have no ladder:
    the same points on every rung), its rung (:func:`sparse_rules.variance_rung`: the weaker of the
    correlations and the PI ordering, in units of its SE), the rung's steps and the sparse-task compute
    against the paper's."""
    sz = sparse_task.SIZES[size]
    want = len(sz["ps"]) * len(sparse_task.METHODS) * sz["seeds"]
    out = []
    for r in sparse_task.LADDER:
        mine = [x for x in sparse_task.at_rung(sparse_runs, r)
                if x["weight_decay"] == sparse_task.WEIGHT_DECAY]
        if len(mine) != want:
            continue
        good = [p for p in collect_points(mine, listops_runs, majority) if p["learned"]]
        corr = correlations(good)
        out.append({**variance_rung({k: v["spearman"] for k, v in corr.items()}, len(good),
                                    [p["pi_mean"] for p in good if p["method"] == "gmm-rks"],
                                    [p["pi_mean"] for p in good if p["method"] == "gmm-prf"]),
                    **sparse_task.budget(size, r), "rung": r,
                    "steps": sparse_task.rung_size(size, r)["steps"], "n_points": len(good)})
    return out


def run(size: str = "small", seed: int = 0, out_dir: Path | None = None, ctx=None) -> dict:
    harness.require_kinds(*REQUIRED)
    ctx = ctx or Context(seed=seed, size=size)
    out_dir = harness.ensure_dir(out_dir, NAME)
    every = sparse_task.grid(ctx, sparse_task.runs_for(size, seed, rungs=sparse_task.LADDER))
    sp_runs = sparse_task.at_rung(every, "1")
    lo_runs, majority = listops.grid(ctx, seed)
    points = collect_points(sp_runs, lo_runs, majority)
    good = [p for p in points if p["learned"]]
    corr = correlations(good)

    # does GMM-RKS < GMM-PRF in PI survive the cells and seeds? one comparison per (task, cell, seed index)
    pairs = []
    for task, cell in dict.fromkeys((p["task"], p["cell"]) for p in points):
        r = [p for p in points if (p["task"], p["cell"], p["method"]) == (task, cell, "gmm-rks")]
        f = [p for p in points if (p["task"], p["cell"], p["method"]) == (task, cell, "gmm-prf")]
        for a, b in zip(r, f, strict=False):
            pairs.append({"task": task, "cell": cell, "seed_rks": a["seed"], "pi_rks": a["pi_mean"],
                          "pi_prf": b["pi_mean"], "both_learned": a["learned"] and b["learned"],
                          "rks_lower": a["pi_mean"] < b["pi_mean"]})
    methods = list(dict.fromkeys(p["method"] for p in points))
    record = {
        "experiment": NAME, "size": size, "seed": seed, **budget(size),
        "provenance": provenance.rows(sparse_task.PROVENANCE),
        "scale": {"passes": sparse_task.SIZES[size]["passes"],
                  "listops_passes": listops.SIZES[size]["passes"],
                  "models": "the trained sparse-task (every p, seed) and ListOps models (same runs)",
                  "sparse_task": {k: sparse_task.SIZES[size][k] for k in ("L", "steps", "seeds", "n_vm")},
                  "listops": {k: listops.SIZES[size][k] for k in ("min_len", "max_len", "steps", "seeds",
                                                                  "n_vm")},
                  "paper_scale": "LRA Text/Retrieval, 4K tokens, 100 passes"},
        "points": points, "correlations": corr, "criterion": CRITERION,
        "criterion_values": {"n_points": len(good), "n_points_all": len(points), "correlations": corr,
                             "pi_gmm_rks": avg([p for p in good if p["method"] == "gmm-rks"], "pi_mean"),
                             "pi_gmm_prf": avg([p for p in good if p["method"] == "gmm-prf"], "pi_mean"),
                             "ladder": ladder(every, lo_runs, majority, size)},
        "learning": {"below_guard": [f"{p['task']} {p['method']} {p['cell']} seed {p['seed']}"
                                     for p in points if not p["learned"]],
                     "listops_majority_rate": majority},
        "pi_pairs": pairs,
        "summary": {f"{t}/{m}": {k: avg([p for p in points if p["task"] == t and p["method"] == m], k)
                                 for k in ("rsd_mean", "pi_mean", "accuracy", "voting_accuracy", "agv")}
                    for t in ("sparse", "listops") for m in methods
                    if any(p["task"] == t and p["method"] == m for p in points)},
    }
    fig, axes = harness.new_figure(3, width=3.4)
    allp = {k: np.array([p[k] for p in points]) for k in ("rsd_mean", "pi_mean", "agv")}
    for ax, xk, yk in zip(axes, ("agv", "agv", "rsd_mean"), ("rsd_mean", "pi_mean", "pi_mean"), strict=True):
        for i, m in enumerate(methods):
            for task, mk in (("sparse", "o"), ("listops", "s")):
                sel = [j for j, p in enumerate(points) if p["method"] == m and p["task"] == task]
                if sel:
                    face = [f"C{i}" if points[j]["learned"] else "none" for j in sel]
                    ax.scatter(allp[xk][sel], allp[yk][sel], marker=mk, s=22, facecolors=face,
                               edgecolors=f"C{i}", label=f"{m} ({task})")
        ax.set_xlabel(xk)
        ax.set_ylabel(yk)
    axes[0].legend(fontsize=5)
    fig.suptitle(f"variance metrics, size={size} (filled: above the learning guard; o sparse task, "
                 "s ListOps)", fontsize=8)
    record["figures"] = [str(harness.save_figure(fig, out_dir / f"{NAME}.png"))]
    harness.save_json(out_dir / f"{NAME}.json", record)
    return record


def decide(record: dict) -> tuple[str, str]:
    cv = record["criterion_values"]
    if cv["n_points"] < 4 or not cv["correlations"]:
        return "not-checkable", (f"only {cv['n_points']} (model, seed) points above their learning guard"
                                 + harness.guard_note(record))
    if cv["pi_gmm_rks"] is None or cv["pi_gmm_prf"] is None:
        return "not-checkable", ("no GMM-RKS or no GMM-PRF model above its learning guard"
                                 + harness.guard_note(record))
    sp = {k: v["spearman"] for k, v in cv["correlations"].items()}
    txt = (", ".join(f"{k} rho={v:.2f}" for k, v in sp.items())
           + f"; mean PI GMM-RKS {cv['pi_gmm_rks']:.2f} vs GMM-PRF {cv['pi_gmm_prf']:.2f} "
             f"(of {record['scale']['passes']})") + ladder_text(cv.get("ladder"))
    ok = all(np.isfinite(v) and v >= 0.5 for v in sp.values()) and cv["pi_gmm_rks"] < cv["pi_gmm_prf"]
    return ("holds" if ok else "fails"), txt
