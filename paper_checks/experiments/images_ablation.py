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
(:func:`images_rules.gain_se`). ``--collect DEST`` trains nothing: it copies the finished runs of the report's
cache into ``DEST/runs`` and writes the same two files in ``DEST`` (a configuration still missing runs lists
them), so the ablation's runs can be committed as they complete.
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

__all__ = ["CHANGES", "METHODS", "configurations", "skipped", "ablation_tasks", "summarise", "ablation",
           "collect", "table", "main"]

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


def summarise(pairs: list[tuple[str, images.Task]], runs: dict[str, dict]) -> list[dict]:
    """One row per configuration from the finished runs `runs` (``{task key: result}``, any subset of
    `pairs`' tasks): its settings, the runs done and missing, their training CPU seconds, and, once none is
    missing, each method's test accuracy per seed on the tested draw and on a fresh draw (mean, seed SD),
    S1's gain over No-Pos and its SE."""
    rows = []
    for name, st in configurations():
        tasks = [t for n, t in pairs if n == name]
        mine = [runs[t.key()] for t in tasks if t.key() in runs]
        row = {"configuration": name, "settings": st,
               "changed": sorted(k for k in st if st[k] != images.PREVIOUS_SETTINGS[k]),
               "done": len(mine), "of": len(tasks),
               "missing": [f"{t.method} s{t.run_seed}" for t in tasks if t.key() not in runs],
               "train_cpu_seconds": round(sum(r["train_cpu_seconds"] for r in mine), 1)}
        if not row["missing"]:
            acc = {}
            for m in METHODS:
                tested = [r["test_acc"] for r in mine if r["method"] == m]
                fresh = [r["test_acc_by_draw"]["fresh"] for r in mine if r["method"] == m]
                acc[m] = {"per_seed": tested, "mean": float(np.mean(tested)),
                          "sd": float(np.std(tested, ddof=1)) if len(tested) > 1 else float("nan"),
                          "fresh_mean": float(np.mean(fresh))}
            row.update(accuracy=acc, gain_s1=acc["s1"]["mean"] - acc["no-pos"]["mean"],
                       se_gain_s1=gain_se(acc["s1"]["per_seed"], acc["no-pos"]["per_seed"]))
        rows.append(row)
    return rows


def _result(size: str, pairs, runs: dict[str, dict]) -> dict:
    """The ablation's record: :func:`summarise` with the two ends' settings, the skipped changes, the
    size's budget, and the estimated CPU seconds its missing runs need (each distinct missing run: the mean
    training CPU seconds of its method's finished runs, all at rung 1; None while a method has none)."""
    missing = {t.key(): t for _, t in pairs if t.key() not in runs}
    per_method = {m: [r["train_cpu_seconds"] for r in runs.values() if r["method"] == m] for m in METHODS}
    need = [per_method[t.method] for t in missing.values()]
    estimate = None if any(not x for x in need) else round(sum(float(np.mean(x)) for x in need))
    return {"size": size, "seeds": images.SIZES[size]["seeds"], "methods": list(METHODS),
            "baseline": images.PREVIOUS_SETTINGS, "authors": images.AUTHORS_SETTINGS, "skipped": skipped(),
            "configurations": summarise(pairs, runs), "runs_done": len({t.key() for _, t in pairs}) -
            len(missing), "runs_distinct": len({t.key() for _, t in pairs}),
            "estimate_cpu_seconds_to_finish": estimate, **images.budget(size)}


def ablation(ctx, *, data_dir: str | None, workers: int = 1) -> dict:
    """Train (or read from the cache) every run of :func:`ablation_tasks` and summarise them per
    configuration (:func:`summarise`), with the skipped changes and the size's budget."""
    H.require_kinds("favor+", "s1")
    pairs = ablation_tasks(ctx, data_dir=data_dir)
    runs = H.run_grid(ctx, images.train_one, [t for _, t in pairs], name=images.NAME, workers=workers)
    return _result(ctx.size, pairs, {t.key(): r for (_, t), r in zip(pairs, runs, strict=True)})


def collect(cache: Path, dest: Path, size: str, *, seed: int = 0, data_dir: str | None = None) -> dict:
    """Train nothing: copy the finished runs of the ablation of `size` (root `seed`, data `data_dir`: the
    tasks of :func:`ablation_tasks`, found by their cache keys) from the run cache `cache` into
    ``dest/runs`` and write ``dest/ablation.json`` and ``dest/ablation.md`` (:func:`table`: complete
    configurations with their accuracies, the others with their missing runs)."""
    pairs = ablation_tasks(Context(seed=seed, size=size), data_dir=data_dir)
    result = _result(size, pairs, H.copy_cached_runs(cache, dest, [t for _, t in pairs]))
    H.save_json(Path(dest) / "ablation.json", result)
    write_text_atomic(Path(dest) / "ablation.md", table(result))
    return result


def table(result: dict) -> str:
    """``ablation.md``: one line per configuration (its missing runs while any is)."""
    lines = [f"# Image ablation, size {result['size']}, {result['seeds']} seed(s), compute "
             f"{result['budget_fraction']:.2g} of the paper's", "",
             "| configuration | settings changed from the baseline | No-Pos acc (SD) | S1 acc (SD) | "
             "S1 - No-Pos (SE) | fresh draw: No-Pos, S1 | training CPU s |", "|---|---|---|---|---|---|---|"]
    for r in result["configurations"]:
        head = f"| {r['configuration']} | {', '.join(r['changed']) or 'none'} | "
        if r["missing"]:
            lines.append(head + f"{r['done']} of {r['of']} runs; missing: {', '.join(r['missing'])} | | | | "
                                f"{r['train_cpu_seconds']:.0f} |")
            continue
        a = r["accuracy"]
        lines.append(head + f"{a['no-pos']['mean']:.4f} ({a['no-pos']['sd']:.4f}) | {a['s1']['mean']:.4f} "
                            f"({a['s1']['sd']:.4f}) | {r['gain_s1']:+.4f} ({r['se_gain_s1']:.4f}) | "
                            f"{a['no-pos']['fresh_mean']:.4f}, {a['s1']['fresh_mean']:.4f} | "
                            f"{r['train_cpu_seconds']:.0f} |")
    lines += [""] + [f"Skipped: {k}: {v}." for k, v in result["skipped"].items()]
    if result["runs_done"] < result["runs_distinct"]:
        est = result["estimate_cpu_seconds_to_finish"]
        lines += ["", f"Distinct runs done: {result['runs_done']} of {result['runs_distinct']} (a run "
                      "shared by configurations counts once); estimated training CPU seconds to finish: "
                      + ("unknown (a method has no finished run)" if est is None else f"{est} (per missing "
                         "run, the mean of its method's finished runs)") + "."]
    return "\n".join(lines + [""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_checks.experiments.images_ablation",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(images.SIZES), default="full")
    ap.add_argument("--report", required=True, metavar="DIR", help="the report directory (its run cache)")
    ap.add_argument("--workers", type=int, default=1, help="training processes (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="root seed (as python -m paper_checks --seed)")
    ap.add_argument("--data", metavar="DIR", help="MNIST-format directory (as python -m paper_checks --data)")
    ap.add_argument("--collect", metavar="DEST",
                    help="train nothing: copy the finished runs of --report's cache to DEST/runs and "
                         "summarise them in DEST/ablation.md and DEST/ablation.json")
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error(f"--workers: expected a count >= 1; got {args.workers}")
    if args.data is not None:
        os.environ[DATA_ENV] = str(Path(args.data).resolve())
    data_dir = images.data_for(args.size)
    if data_dir is None and args.size == "full":
        print(f"images_ablation: size full needs the real data: {INSTALL_HINT}", file=sys.stderr)
        return 2
    if args.collect is not None:
        cache = Path(args.report) / "experiments" / images.NAME / "runs"
        print(table(collect(cache, Path(args.collect), args.size, seed=args.seed, data_dir=data_dir)))
        return 0
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
