"""Train the KL sparse-task budget ladder into a report's run cache, the cheapest rung first.

``python -m paper_checks.experiments.sparse_ladder --size full --report DIR [--workers N] [--seed S]`` trains
every (rung, model, p, seed) run of :mod:`.sparse_task` at that size (GMM-RKS and GMM-PRF, weight decay 0.1),
rung by rung in :data:`sparse_task.LADDER` order (1/4, 1/2 and 1 of the size's steps), then the eigenvalue
claim's weight-decay-0 ablation at rung 1 (:mod:`.eigenvalues`: reported beside its verdict), and caches each
run under ``DIR/experiments/sparse_task/runs`` as soon as it is done (an interrupted ladder keeps its
finished runs; a rerun trains only the missing ones). One process (``--workers 1``, the default) trains the
runs in order, printing a line per run; more train each rung's runs in parallel.

Rung 1 is the size itself. A run's cache name hashes the size's settings (:meth:`sparse_task.Run.key`), and
``full`` starts the GMM models from the KL authors' code's draw, so the
``paper_checks/records/kl-full/previous-settings`` runs (trained from ``S = 0.25 I``) are the earlier
setting's record and not rung 1: every rung is trained. The ListOps runs the variance claim reads are
unchanged; copy them first::

    mkdir -p DIR/experiments/listops/runs
    cp paper_checks/records/kl-full/previous-settings/experiments/listops/runs/*.json \
        DIR/experiments/listops/runs/
    python -m paper_checks.experiments.sparse_ladder --size full --report DIR --workers 2

Cost at ``full``, estimated from the ``kl-full/previous-settings`` record (``runs_summary.md``; CPU seconds on
this 2-core machine; the authors' start may train faster or slower than ``S = 0.25 I``): its 12 rung-1 runs
trained 1,029 CPU-s (0.069 CPU-s per step for GMM-PRF, 0.085-0.100 for GMM-RKS; every run stopped early at
90 % validation accuracy, after 400-1,750 of its 2,500 steps), the 4 weight-decay-0 runs 472 CPU-s, and the
whole grid (16 runs with their evaluations: gradient statistics, 100 variance passes, eigenvalues) took 1,491
s wall on 2 workers, so evaluation adds at most about 90 s per run ((2 x 1,491 - 1,501) / 16; the machine was
loaded). A lower rung runs at most its steps (625 and 1,250): at most 12 x 625 x 0.085 = 640 CPU-s and 12 x
1,250 x 0.085 = 1,275 CPU-s of training, plus ~90 s of evaluation per run: ~4,100 CPU-s for the two lower
rungs and ~7,000 CPU-s (~2 CPU-hours, ~1 hour wall with 2 workers on an idle machine) for the whole ladder
from an empty cache, which is what the authors' start needs. ``--collect`` writes the estimate to finish from
the runs done.

The claims then find every run in the cache and write the records without training::

    python -m paper_checks --all --only kl.sec4.2-sparsity --only kl.sec4.1-variance-metrics \\
        --only kl.table4-eigenvalues --size full --report DIR --json DIR/results.json

(the same ``--seed`` as the ladder: it enters the runs' seeds; the variance claim also reads the ListOps
runs, which have no ladder: :mod:`.listops` trains them unless they are in the cache).

``--collect DEST`` trains nothing: it copies the finished ladder runs of the report's cache into
``DEST/runs`` and writes ``DEST/runs.md`` (a line per run; per rung what is done, its CPU seconds, its compute
against the paper's and, once complete, each model's accuracy and steps to 40 %; then each of the three
claims on every complete rung as its rule reads it: :func:`claims_so_far`) with ``DEST/runs.json``
(:func:`ladder_status` and the claims' rungs), so a ladder's runs can be committed as they complete.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from refattn.files import write_text_atomic

from ..registry import Context
from ..report import json_safe
from . import eigenvalues, listops, variance_metrics
from . import harness as H  # noqa: N812 (the experiments' shared name)
from . import sparse_task as S  # noqa: N812 (the experiment's short name)
from .eigenvalues import P_EIG

__all__ = ["ladder_tasks", "train_ladder", "ladder_status", "claims_so_far", "collect", "main"]


def ladder_tasks(size: str, seed: int, rungs=S.LADDER) -> list[S.Run]:
    """Every run of the ladder of `size`, root `seed`: the sparse-task grid (weight decay 0.1) at each of
    `rungs` in order, then, with rung 1 among them, the weight-decay-0 ablation of the eigenvalue claim at
    rung 1 (its p, :data:`eigenvalues.P_EIG`, or the smallest p of the size)."""
    out = [r for rung in rungs for r in S.runs_for(size, seed, rungs=(rung,))]
    if "1" in rungs:
        ps = S.SIZES[size]["ps"]
        out += S.runs_for(size, seed, ps=(P_EIG if P_EIG in ps else min(ps),), weight_decay=0.0)
    return out


def train_ladder(ctx, *, workers: int = 1, log=None) -> list[dict]:
    """Every run of :func:`ladder_tasks` of ``ctx.size`` and ``ctx.seed``, trained or taken from the memo or
    cache, rung by rung, the cheapest first; with one worker one run at a time, `log(line)` told of each (its
    key, final validation accuracy, steps to 40 % and training CPU seconds)."""
    H.require_kinds(*S.METHODS)
    out = []
    for rung in S.LADDER:
        tasks = [t for t in ladder_tasks(ctx.size, ctx.seed) if t.rung == rung]
        if workers > 1:
            out += H.run_grid(ctx, S.train_one, tasks, name=S.NAME, workers=workers)
            continue
        for t in tasks:
            t0 = time.perf_counter()
            (r,) = H.run_grid(ctx, S.train_one, [t], name=S.NAME, workers=1)
            out.append(r)
            if log is not None:
                log(f"{t.key()}: val acc {r['final_val_acc']:.4f} after {r['steps_trained']} steps, steps to "
                    f"40% {r['steps_to_40']}, training CPU {r['train_cpu_seconds']:.0f} s "
                    f"({time.perf_counter() - t0:.0f} s wall here)")
    return out


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None


def _cell(sel: list[dict]) -> dict:
    """The seed means of a (model, p) cell's final validation accuracy and steps to 40 % (None when a seed
    never reached it)."""
    t40 = [r["steps_to_40"] for r in sel]
    return {"final_val_acc": _mean([r["final_val_acc"] for r in sel]),
            "steps_to_40": None if None in t40 else _mean(t40)}


def ladder_status(runs: list[dict], size: str, seed: int = 0) -> dict:
    """What of the ladder of `size` (root `seed`) the `runs` (sparse-task run records) hold: per rung of
    :data:`sparse_task.LADDER` (the weight-decay-0.1 grid), the (model, p, seed) runs done and missing, its
    training CPU seconds, its compute against the paper's (:func:`sparse_task.budget`) and, for a complete
    rung, each (model, p)'s mean final validation accuracy and steps to 40 % (None: a seed never reached
    it); the weight-decay-0 ablation's runs done; and an estimate of the CPU seconds the missing runs need
    (each: its model's measured training CPU seconds per step times the rung's steps, an upper bound as runs
    stop early, plus the measured evaluation wall seconds per run where runs record them)."""
    want = {(t.rung, t.method, t.p, t.run_seed, t.weight_decay) for t in ladder_tasks(size, seed)}
    done = {(r.get("rung", "1"), r["method"], r["p"], r["run_seed"], r["weight_decay"]): r for r in runs}
    per_step = {m: _mean([r["cpu_seconds_per_step"] for r in runs if r["method"] == m]) for m in S.METHODS}
    evaluation = _mean([r["seconds"] - r["train_seconds"] for r in runs if "seconds" in r])
    out: dict = {"rungs": {}, "ablation_wd0": {}, "estimate_cpu_seconds_to_finish": 0.0,
                 "estimate_unknown": []}

    def estimate(rung, m, label):
        if per_step[m] is None:
            out["estimate_unknown"].append(label)
            return
        out["estimate_cpu_seconds_to_finish"] += per_step[m] * S.rung_size(size, rung)["steps"] + (
            evaluation or 0.0)

    for rung in S.LADDER:
        mine = sorted(k for k in want if k[0] == rung and k[4] == S.WEIGHT_DECAY)
        have = [done[k] for k in mine if k in done]
        missing = [k for k in mine if k not in done]
        row = {"steps": S.rung_size(size, rung)["steps"], "done": len(have), "of": len(mine),
               "missing": [f"{m} p={p} s{s}" for _, m, p, s, _ in missing],
               "train_cpu_seconds": round(sum(r["train_cpu_seconds"] for r in have), 1),
               "budget_fraction": S.budget(size, rung)["budget_fraction"]}
        if not missing:
            row["results"] = {f"{m} p={p}": _cell(sel) for m in S.METHODS for p in S.SIZES[size]["ps"]
                              for sel in [[r for r in have if r["method"] == m and r["p"] == p]]}
        out["rungs"][rung] = row
        for _, m, p, s, _ in missing:
            estimate(rung, m, f"{m} p={p} s{s} at {rung}")
    abl = sorted(k for k in want if k[4] != S.WEIGHT_DECAY)
    out["ablation_wd0"] = {"done": sum(k in done for k in abl), "of": len(abl),
                           "missing": [f"{k[1]} p={k[2]} s{k[3]}" for k in abl if k not in done]}
    for k in abl:
        if k not in done:
            estimate("1", k[1], f"{k[1]} p={k[2]} s{k[3]} wd 0")
    out["estimate_cpu_seconds_to_finish"] = round(out["estimate_cpu_seconds_to_finish"])
    out["evaluation_seconds_per_run"] = evaluation
    return out


def _listops_runs(listops_cache: Path | None, size: str, seed: int) -> list[dict] | None:
    """The ListOps runs of `size` and root `seed` from the run cache `listops_cache` (None unless all are
    there): the variance claim's other points."""
    if listops_cache is None:
        return None
    paths = [Path(listops_cache) / f"{r.key()}.json" for r in listops.runs_for(size, seed)]
    if not all(p.is_file() for p in paths):
        return None
    return [json.loads(p.read_text()) for p in paths]


def claims_so_far(runs: list[dict], size: str, *, seed: int = 0, listops_cache: Path | None = None) -> dict:
    """Each KL claim the ladder decides (sparsity, eigenvalues, variance metrics) on the complete rungs of
    `runs` (sparse-task run records): its experiment's ``ladder`` (the rows the claim's rule reads from its
    evidence: per rung the effect, signed so that the paper's direction is ``effect > 0``, its SE, the
    weaker part of a two-part claim, the rung's compute against the paper's). The variance claim also needs
    the ListOps runs (from `listops_cache`); without them its entry is None. A rung decides nothing here:
    the claims decide at rung 1 with the whole ladder (``python -m paper_checks``)."""
    lo = _listops_runs(listops_cache, size, seed)
    return {"kl.sec4.2-sparsity": S.ladder(runs, size),
            "kl.table4-eigenvalues": eigenvalues.ladder(runs, size),
            "kl.sec4.1-variance-metrics": (None if lo is None else variance_metrics.ladder(
                runs, lo, listops.majority_rate(size, seed), size))}


def _claims_lines(claims: dict, listops_cache: Path | None) -> list[str]:
    lines = ["## The claims on the complete rungs", "",
             "Each complete rung as the claim's rule reads it (`effect > 0` is the paper's direction; a "
             "two-part claim by its weaker part, in units of that part's SE, so its SE reads 1: "
             "`paper_checks/experiments/sparse_rules.py`). A rung decides nothing here: the claims decide "
             "at rung 1 with the whole ladder (`python -m paper_checks --all --only kl.sec4.2-sparsity "
             "--only kl.sec4.1-variance-metrics --only kl.table4-eigenvalues --size full --report DIR`).", "",
             "| claim | rung | compute / paper's | effect | SE | effect / SE | weaker part | "
             "parts: effect (SE) |",
             "|---|---|---|---|---|---|---|---|"]
    for cid, rows in claims.items():
        if rows is None:
            lines.append(f"| {cid} | -- | -- | -- | -- | -- | -- | not computed: no ListOps runs in "
                         f"{listops_cache} |")
            continue
        if not rows:
            lines.append(f"| {cid} | -- | -- | -- | -- | -- | -- | no complete rung |")
        for r in rows:
            z = r["effect"] / r["se"] if np.isfinite(r["se"]) and r["se"] > 0 else float("nan")
            parts = "; ".join(f"{k} {v['effect']:+.3f} ({v['se']:.3f})" + (" censored" if v.get("censored")
                                                                            else "")
                              for k, v in (r.get("parts") or {}).items()) or "--"
            lines.append(f"| {cid} | {r['rung']} | {r['budget_fraction']:.3g} | {r['effect']:+.3f} | "
                         f"{r['se']:.3f} | {z:+.1f} | {r.get('part') or '--'} | {parts} |")
    return lines + [""]


def collect(cache: Path, dest: Path, size: str, *, seed: int = 0) -> dict:
    """Copy the finished ladder runs of `size` (root `seed`: the runs of :func:`ladder_tasks`, found by their
    cache keys; other runs in the cache are left out) from the run cache `cache` into ``dest/runs`` and
    write ``dest/runs.md`` and ``dest/runs.json``: one line per run (rung, model, p, weight decay, seed,
    steps trained of the rung's, final validation accuracy, steps to 40 %, training CPU seconds) and
    :func:`ladder_status`."""
    runs = list(H.copy_cached_runs(cache, dest, ladder_tasks(size, seed)).values())
    status = ladder_status(runs, size, seed)
    listops_cache = Path(cache).parent.parent / listops.NAME / "runs"        # the same report's ListOps runs
    status["claims"] = claims_so_far(runs, size, seed=seed, listops_cache=listops_cache)
    lines = [f"# KL sparse-task budget ladder, size {size}: runs done", "",
             "| rung | model | p | weight decay | seed | steps trained (of the rung's) | final val acc | "
             "steps to 40% | training CPU s |", "|---|---|---|---|---|---|---|---|---|"]
    order = {r: i for i, r in enumerate(S.LADDER)}
    for r in sorted(runs, key=lambda r: (order[r.get("rung", "1")], -r["weight_decay"], r["method"], r["p"],
                                         r["run_seed"])):
        rung = r.get("rung", "1")
        steps = f"{r['steps_trained']} ({S.rung_size(size, rung)['steps']})"
        lines.append(f"| {rung} | {r['method']} | {r['p']} | {r['weight_decay']} | {r['run_seed']} | "
                     f"{steps} | {r['final_val_acc']:.3f} | {r['steps_to_40']} | "
                     f"{r['train_cpu_seconds']:.0f} |")
    lines += ["", "| rung | steps | compute / paper's | runs done | training CPU s | missing | final val acc "
              "(steps to 40%) |", "|---|---|---|---|---|---|---|"]
    for rung, row in status["rungs"].items():
        res = ", ".join(f"{k} {v['final_val_acc']:.3f} ({v['steps_to_40']})"
                        for k, v in row.get("results", {}).items())
        lines.append(f"| {rung} | {row['steps']} | {row['budget_fraction']:.3g} | {row['done']} / "
                     f"{row['of']} | {row['train_cpu_seconds']:.0f} | "
                     f"{', '.join(row['missing']) or 'none'} | "
                     f"{res or 'rung incomplete'} |")
    ab = status["ablation_wd0"]
    lines += ["", f"Weight-decay-0 ablation (rung 1, the eigenvalue claim's): {ab['done']} / {ab['of']} "
              "runs.",
              "", f"Compute against the paper's: {S.budget(size)['budget']['paper']['source']}; the fraction "
              "is steps x batch x L x layers x width^2 of the rung over the paper's.",
              "", f"Estimated CPU seconds to finish the ladder: {status['estimate_cpu_seconds_to_finish']} "
              "(per missing run: its model's measured training CPU seconds per step times the rung's steps, "
              "an upper bound as runs stop early at 90% validation accuracy"
              + (", plus the measured evaluation wall seconds per run" if status["evaluation_seconds_per_run"]
                 else "; evaluation not included: no run done records it")
              + (f"; no estimate for {', '.join(status['estimate_unknown'])} (no run of the model yet)"
                 if status["estimate_unknown"] else "") + ").", ""]
    lines += _claims_lines(status["claims"], listops_cache)
    write_text_atomic(Path(dest) / "runs.md", "\n".join(lines))
    write_text_atomic(Path(dest) / "runs.json", json.dumps(json_safe(status), indent=1))
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_checks.experiments.sparse_ladder",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(S.SIZES), default="full")
    ap.add_argument("--report", required=True, metavar="DIR", help="the report directory whose cache to fill")
    ap.add_argument("--workers", type=int, default=1, help="training processes (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="root seed (as python -m paper_checks --seed)")
    ap.add_argument("--collect", metavar="DEST",
                    help="train nothing: copy the finished runs of --report's cache to DEST/runs and "
                         "summarise them in DEST/runs.md")
    args = ap.parse_args(argv)
    cache = Path(args.report) / "experiments" / S.NAME / "runs"
    if args.collect is not None:
        status = collect(cache, Path(args.collect), args.size, seed=args.seed)
        print(json.dumps(json_safe(status["rungs"]), indent=1))
        return 0
    if args.workers < 1:
        ap.error(f"--workers: expected a count >= 1; got {args.workers}")
    ctx = Context(seed=args.seed, size=args.size, report_dir=Path(args.report), claim_id="sparse-ladder")

    def log(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S', time.gmtime())} {line}", flush=True)

    log(f"ladder {', '.join(S.LADDER)} of size {args.size}, models {', '.join(S.METHODS)}, "
        f"{args.workers} worker(s), cache {cache}")
    train_ladder(ctx, workers=args.workers, log=log)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
