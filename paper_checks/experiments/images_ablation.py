"""What each difference between refattn's former image settings and the authors' does: an ablation.

From the baseline (:data:`images.PREVIOUS_SETTINGS`, refattn's own choices) to the authors' settings
(:data:`images.AUTHORS_SETTINGS`: the ladder's :data:`images.SETTINGS` with the authors' class-token readout,
:data:`images.AUTHORS_READOUT`), the differences are grouped into the changes of :data:`CHANGES` (S1
initialisation; query/key scale; redraw schedule with the draw tested on; optimiser betas and gradient
clipping; readout). :func:`configurations` lists the baseline, each change alone on the baseline, and the
changes applied cumulatively in that order (the last is the authors' settings; the one before it,
"cumulative: + optimiser betas and clipping", is the ladder's :data:`images.SETTINGS`). A change whose
settings are the same on both sides would be listed among the skipped ones with the reason (none is); the
learning rate is budget-coupled and scaled to the budget on both sides (:data:`images.SIZES`), so it is not a
change here.

Each configuration trains :data:`METHODS` (No-Pos and S1: the comparison the S1 diagnosis reads) at the whole
size (ladder rung 1), every seed of the size, through the image runs' cache (:func:`harness.run_grid`): a
run whose effective settings equal another's is the same cache entry (No-Pos under "S1 initialisation
alone" is the baseline's No-Pos run; the authors' configuration is the ladder's rung 1).

``python -m paper_checks.experiments.images_ablation --size full --report DIR [--workers N] [--seed S]
[--data DIR]`` trains what is not cached and writes ``DIR/experiments/images/ablation.json`` and
``ablation.md``: per configuration each method's mean test accuracy (seed SD) on the draw the configuration
tests on and on a fresh draw, and S1's gain over No-Pos with its standard error
(:func:`images_rules.gain_se`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from refattn.files import write_text_atomic

from ..registry import Context
from . import harness as H  # noqa: N812 (the experiments' shared name)
from . import images
from .idx import DATA_ENV, INSTALL_HINT
from .images_rules import gain_se

__all__ = ["CHANGES", "METHODS", "configurations", "skipped", "ablation_tasks", "ablation", "table", "main"]

#: the changes, in the order the cumulative configurations apply them: (name, the settings it changes)
CHANGES = (("S1 initialisation", ("s1_init",)),
           ("query/key scale", ("qk_init",)),
           ("redraw schedule", ("redraw_every", "eval_draw")),
           ("optimiser betas and clipping", ("beta1", "beta2", "clip_norm")),
           ("readout", ("readout",)))
METHODS = ("no-pos", "s1")


def _effective(names) -> dict:
    return {k: images.AUTHORS_SETTINGS[k] for n in names for k in dict(CHANGES)[n]}


def skipped() -> dict:
    """``{change: reason}`` for the changes whose settings are the same in the baseline and the authors'."""
    return {name: f"{', '.join(keys)} the same on both sides ({images.AUTHORS_SETTINGS[keys[0]]!r})"
            for name, keys in CHANGES
            if all(images.PREVIOUS_SETTINGS[k] == images.AUTHORS_SETTINGS[k] for k in keys)}


def configurations() -> list[tuple[str, dict]]:
    """``[(name, settings)]``: the baseline, each change alone on it, then the changes cumulatively (each
    configuration once: the first cumulative one is the first change alone; the last is the authors')."""
    live = [n for n, _ in CHANGES if n not in skipped()]
    base = dict(images.PREVIOUS_SETTINGS)
    out = [("baseline", base)]
    out += [(f"alone: {n}", {**base, **_effective([n])}) for n in live]
    out += [(f"cumulative: + {n}", {**base, **_effective(live[:i + 1])}) for i, n in enumerate(live) if i > 0]
    return out


def ablation_tasks(ctx, *, data_dir: str | None) -> list[tuple[str, images.Task]]:
    """``[(configuration, task)]`` for every configuration, method and seed of ``ctx.size`` (rung 1)."""
    seeds = range(images.SIZES[ctx.size]["seeds"])
    return [(name, images.Task(m, 1000 * ctx.seed + s, ctx.size, data_dir, "1", tuple(sorted(st.items()))))
            for name, st in configurations() for m in METHODS for s in seeds]


def ablation(ctx, *, data_dir: str | None, workers: int = 1) -> dict:
    """Train (or read from the cache) every run of :func:`ablation_tasks` and summarise them per
    configuration: settings, each method's test accuracy per seed on the tested draw and on a fresh draw
    (mean, seed SD), S1's gain over No-Pos and its SE; with the skipped changes and the size's budget."""
    H.require_kinds("favor+", "s1")
    pairs = ablation_tasks(ctx, data_dir=data_dir)
    runs = H.run_grid(ctx, images.train_one, [t for _, t in pairs], name=images.NAME, workers=workers)
    rows = []
    for name, st in configurations():
        mine = [r for (n, _), r in zip(pairs, runs, strict=True) if n == name]
        acc = {}
        for m in METHODS:
            tested = [r["test_acc"] for r in mine if r["method"] == m]
            fresh = [r["test_acc_by_draw"]["fresh"] for r in mine if r["method"] == m]
            acc[m] = {"per_seed": tested, "mean": float(np.mean(tested)),
                      "sd": float(np.std(tested, ddof=1)) if len(tested) > 1 else float("nan"),
                      "fresh_mean": float(np.mean(fresh))}
        rows.append({"configuration": name, "settings": st,
                     "changed": sorted(k for k in st if st[k] != images.PREVIOUS_SETTINGS[k]),
                     "accuracy": acc, "gain_s1": acc["s1"]["mean"] - acc["no-pos"]["mean"],
                     "se_gain_s1": gain_se(acc["s1"]["per_seed"], acc["no-pos"]["per_seed"]),
                     "train_cpu_seconds": round(sum(r["train_cpu_seconds"] for r in mine), 1)})
    return {"size": ctx.size, "seeds": images.SIZES[ctx.size]["seeds"], "methods": list(METHODS),
            "baseline": images.PREVIOUS_SETTINGS, "authors": images.AUTHORS_SETTINGS, "skipped": skipped(),
            "configurations": rows, **images.budget(ctx.size)}


def table(result: dict) -> str:
    """``ablation.md``: one line per configuration."""
    lines = [f"# Image ablation, size {result['size']}, {result['seeds']} seed(s), compute "
             f"{result['budget_fraction']:.2g} of the paper's", "",
             "| configuration | settings changed from the baseline | No-Pos acc (SD) | S1 acc (SD) | "
             "S1 - No-Pos (SE) | fresh draw: No-Pos, S1 | training CPU s |", "|---|---|---|---|---|---|---|"]
    for r in result["configurations"]:
        a = r["accuracy"]
        lines.append(f"| {r['configuration']} | {', '.join(r['changed']) or 'none'} | "
                     f"{a['no-pos']['mean']:.4f} ({a['no-pos']['sd']:.4f}) | {a['s1']['mean']:.4f} "
                     f"({a['s1']['sd']:.4f}) | {r['gain_s1']:+.4f} ({r['se_gain_s1']:.4f}) | "
                     f"{a['no-pos']['fresh_mean']:.4f}, {a['s1']['fresh_mean']:.4f} | "
                     f"{r['train_cpu_seconds']:.0f} |")
    lines += [""] + [f"Skipped: {k}: {v}." for k, v in result["skipped"].items()] + [""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_checks.experiments.images_ablation",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(images.SIZES), default="full")
    ap.add_argument("--report", required=True, metavar="DIR", help="the report directory (its run cache)")
    ap.add_argument("--workers", type=int, default=1, help="training processes (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="root seed (as python -m paper_checks --seed)")
    ap.add_argument("--data", metavar="DIR", help="MNIST-format directory (as python -m paper_checks --data)")
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error(f"--workers: expected a count >= 1; got {args.workers}")
    if args.data is not None:
        os.environ[DATA_ENV] = str(Path(args.data).resolve())
    data_dir = images.data_for(args.size)
    if data_dir is None and args.size == "full":
        print(f"images_ablation: size full needs the real data: {INSTALL_HINT}", file=sys.stderr)
        return 2
    ctx = Context(seed=args.seed, size=args.size, report_dir=Path(args.report), claim_id="images-ablation")
    t0 = time.perf_counter()
    result = ablation(ctx, data_dir=data_dir, workers=args.workers)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    out = H.out_dir_for(ctx.report_dir, images.NAME)
    H.save_json(out / "ablation.json", result)
    write_text_atomic(out / "ablation.md", table(result))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
