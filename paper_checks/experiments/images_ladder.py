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
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..registry import Context
from . import harness as H  # noqa: N812 (the experiments' shared name)
from . import images
from .idx import DATA_ENV, INSTALL_HINT
from .images_rules import CLAIM_METHODS

__all__ = ["METHODS", "train_ladder", "main"]

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_checks.experiments.images_ladder",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(images.SIZES), default="full")
    ap.add_argument("--report", required=True, metavar="DIR", help="the report directory whose cache to fill")
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
