"""Train the image experiments' budget ladder into a report's run cache, the cheapest rung first.

``python -m paper_checks.experiments.images_ladder --size full --report DIR [--workers N] [--seed S]
[--data DIR]`` trains every (rung, method, seed) run of :mod:`.images` at that size for every image method
(:data:`METHODS`: the three image claims' methods), rung by rung in :data:`images.LADDER` order, and caches
each run under ``DIR/experiments/images/runs`` as soon as it is done (an interrupted ladder keeps its finished
runs; a rerun trains only the missing ones). One process (``--workers 1``, the default) trains the runs in
order, printing a line per run; more train each rung's runs in parallel.

The claims then find every run in the cache and write the record without training::

    python -m paper_checks --all --only 'horn.table1-ordering' --only 'horn.shift-robustness' \\
        --only 'flt.image-classification' --size full --report DIR --json DIR/results.json

(the same ``--seed`` and ``--data`` as the ladder: both enter the runs' cache keys).

``--collect DEST`` trains nothing: it copies the finished runs of the report's cache into ``DEST/runs`` and
writes ``DEST/runs.md`` (a line per run, and per rung what is done, its CPU seconds and, once complete, each
method's accuracy) with ``DEST/runs.json`` (:func:`ladder_status`), so a ladder's runs can be committed as
they complete.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from refattn.files import write_text_atomic

from ..registry import Context
from ..report import json_safe
from . import harness as H  # noqa: N812 (the experiments' shared name)
from . import images
from .idx import DATA_ENV, INSTALL_HINT
from .images_rules import CLAIM_METHODS

__all__ = ["METHODS", "train_ladder", "ladder_status", "collect", "main"]

#: every method of the image claims, each once, in the claims' order
METHODS = tuple(dict.fromkeys(m for ms in CLAIM_METHODS.values() for m in ms))


def train_ladder(ctx, *, data_dir: str | None, workers: int = 1, methods=METHODS, log=None) -> list[dict]:
    """Every run of the ladder of ``ctx.size`` for `methods` (:func:`images.ladder_tasks`), trained or taken
    from the memo or cache, rung by rung, the cheapest first; with one worker one run at a time, `log(line)`
    told of each (its key, test accuracy and training CPU seconds)."""
    H.require_kinds(*["favor+" if m in ("no-pos", "absolute") else m for m in methods])
    out = []
    for rung in images.LADDER:
        tasks = images.ladder_tasks(ctx, methods, data_dir=data_dir, rungs=(rung,))
        if workers > 1:
            out += H.run_grid(ctx, images.train_one, tasks, name=images.NAME, workers=workers)
            continue
        for t in tasks:
            t0 = time.perf_counter()
            (r,) = H.run_grid(ctx, images.train_one, [t], name=images.NAME, workers=1)
            out.append(r)
            if log is not None:
                log(f"{t.key()}: test acc {r['test_acc']:.4f}, training CPU {r['train_cpu_seconds']:.0f} s "
                    f"({time.perf_counter() - t0:.0f} s wall here)")
    return out


def ladder_status(runs: list[dict], size: str, methods=METHODS) -> dict:
    """What of the ladder of `size` the `runs` (each with ``method``, ``run_seed``, ``rung``) hold: per rung
    of :data:`images.LADDER`, the (method, seed) runs done and missing, its training CPU seconds, and, for a
    complete rung, each method's mean test accuracy and seed SD; an estimate of the CPU seconds the missing
    runs need (each missing run: its method's measured CPU seconds per training step times its steps, plus
    that method's measured evaluation time per run, wall seconds: an upper bound on their CPU seconds)."""
    seeds = range(images.SIZES[size]["seeds"])
    done = {(r.get("rung", "1"), r["method"], r["run_seed"] % 1000): r for r in runs}
    out: dict = {"rungs": {}, "estimate_cpu_seconds_to_finish": 0.0, "estimate_unknown": []}
    for rung in images.LADDER:
        want = [(m, s) for m in methods for s in seeds]
        have = [done[(rung, m, s)] for m, s in want if (rung, m, s) in done]
        missing = [f"{m} s{s}" for m, s in want if (rung, m, s) not in done]
        row = {"steps": images.rung_size(size, rung)["steps"],
               "budget_fraction": images.budget(size, rung)["budget_fraction"], "done": len(have),
               "of": len(want),
               "missing": missing, "train_cpu_seconds": round(sum(r["train_cpu_seconds"] for r in have), 1)}
        if not missing:
            row["accuracy"] = {m: {"mean": float(np.mean(a)), "sd": float(np.std(a, ddof=1)) if len(a) > 1
                                   else float("nan")}
                               for m in methods for a in [[r["test_acc"] for r in have if r["method"] == m]]}
        out["rungs"][rung] = row
        for m, s in ((m, s) for m, s in want if (rung, m, s) not in done):
            mine = [r for r in runs if r["method"] == m]
            if not mine:
                out["estimate_unknown"].append(f"{m} s{s} at {rung}")
                continue
            per_step = float(np.mean([r["cpu_seconds_per_step"] for r in mine]))
            evaluation = float(np.mean([r["seconds"] - r["train_seconds"] for r in mine]))
            out["estimate_cpu_seconds_to_finish"] += per_step * row["steps"] + evaluation
    out["estimate_cpu_seconds_to_finish"] = round(out["estimate_cpu_seconds_to_finish"])
    return out


def collect(cache: Path, dest: Path, size: str, *, seed: int = 0, data_dir: str | None = None) -> dict:
    """Copy the finished ladder runs of `size` (root `seed`, data `data_dir`: the tasks of
    :func:`images.ladder_tasks` for :data:`METHODS`, found by their cache keys; other runs in the cache, such
    as the ablation's, are left out) from the run cache `cache` into ``dest/runs`` and write ``dest/runs.md``
    and ``dest/runs.json``: one line per run (rung, method, seed, steps, test accuracy on the training draw
    and on a fresh draw, training CPU and wall seconds) and :func:`ladder_status`."""
    tasks = images.ladder_tasks(Context(seed=seed, size=size), METHODS, data_dir=data_dir)
    runs = list(H.copy_cached_runs(cache, dest, tasks).values())
    status = ladder_status(runs, size)
    lines = [f"# Image budget ladder, size {size}: runs done", "",
             "| rung | method | seed | steps | test acc (training draw) | test acc (fresh draw) | training "
             "CPU s | training wall s | run wall s (with evaluation) |",
             "|---|---|---|---|---|---|---|---|---|"]
    order = {r: i for i, r in enumerate(images.LADDER)}
    for r in sorted(runs, key=lambda r: (order[r["rung"]], METHODS.index(r["method"]), r["run_seed"])):
        d = r["test_acc_by_draw"]
        lines.append(f"| {r['rung']} | {r['method']} | {r['run_seed']} | {r['steps']} | "
                     f"{d['training']:.4f} | {d['fresh']:.4f} | {r['train_cpu_seconds']:.0f} | "
                     f"{r['train_seconds']:.0f} | {r['seconds']:.0f} |")
    lines += ["", "| rung | steps | compute / paper's | runs done | training CPU s | missing | mean test acc "
              "(seed SD) |", "|---|---|---|---|---|---|---|"]
    for rung, row in status["rungs"].items():
        acc = ", ".join(f"{m} {a['mean']:.4f} ({a['sd']:.4f})" for m, a in row.get("accuracy", {}).items())
        missing, frac = ", ".join(row["missing"]) or "none", row["budget_fraction"]
        lines.append(f"| {rung} | {row['steps']} | {frac:.2g} | {row['done']} / {row['of']} | "
                     f"{row['train_cpu_seconds']:.0f} | {missing} | {acc or 'rung incomplete'} |")
    lines += ["", f"Compute against the paper's: {images.budget(size)['budget']['paper']['source']}; the "
              "fraction is steps x batch x L x layers x width^2 of the rung over the paper's (an upper "
              "bound: the paper's step count is a lower bound).",
              "", f"Estimated CPU seconds to finish the ladder: {status['estimate_cpu_seconds_to_finish']} "
              "(per missing run: its method's measured training CPU seconds per step times the rung's steps, "
              "plus its measured evaluation wall seconds per run)"
              + (f"; no estimate for {', '.join(status['estimate_unknown'])} (no run of the method yet)"
                 if status["estimate_unknown"] else "") + ".", ""]
    write_text_atomic(Path(dest) / "runs.md", "\n".join(lines))
    write_text_atomic(Path(dest) / "runs.json", json.dumps(json_safe(status), indent=1))
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_checks.experiments.images_ladder",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(images.SIZES), default="full")
    ap.add_argument("--report", required=True, metavar="DIR", help="the report directory whose cache to fill")
    ap.add_argument("--workers", type=int, default=1, help="training processes (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="root seed (as python -m paper_checks --seed)")
    ap.add_argument("--data", metavar="DIR", help="MNIST-format directory (as python -m paper_checks --data)")
    ap.add_argument("--collect", metavar="DEST",
                    help="train nothing: copy the finished runs of --report's cache to DEST/runs and "
                         "summarise them in DEST/runs.md")
    args = ap.parse_args(argv)
    if args.data is not None:
        os.environ[DATA_ENV] = str(Path(args.data).resolve())
    if args.collect is not None:
        status = collect(Path(args.report) / "experiments" / images.NAME / "runs", Path(args.collect),
                         args.size, seed=args.seed, data_dir=images.data_for(args.size))
        print(json.dumps(json_safe(status["rungs"]), indent=1))
        return 0
    if args.workers < 1:
        ap.error(f"--workers: expected a count >= 1; got {args.workers}")
    data_dir = images.data_for(args.size)
    if data_dir is None and args.size == "full":
        print(f"images_ladder: size full needs the real data: {INSTALL_HINT}", file=sys.stderr)
        return 2
    ctx = Context(seed=args.seed, size=args.size, report_dir=Path(args.report), claim_id="images-ladder")

    def log(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S', time.gmtime())} {line}", flush=True)

    cache = Path(args.report) / "experiments" / images.NAME / "runs"
    log(f"ladder {', '.join(images.LADDER)} of size {args.size}, methods {', '.join(METHODS)}, data "
        f"{data_dir or 'stand-in'}, {args.workers} worker(s), cache {cache}")
    train_ladder(ctx, data_dir=data_dir, workers=args.workers, log=log)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
