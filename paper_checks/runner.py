"""Running one claim: its check under a :class:`~paper_checks.registry.Context`, with its rule re-applied.

:func:`run_check` runs a check (or its must-fail companion) and re-derives the verdict from the returned
evidence with the claim's decision rule; :func:`run_one` is what every front end runs per claim (the serial
CLI, ``--workers`` processes and the dask tasks of :mod:`paper_checks.scale`): a slow claim that was not
selected becomes ``skipped``, a check that raises becomes an error text with its traceback. Nothing here
knows which claims exist: :mod:`paper_checks.catalog` loads them.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any

from .registry import Claim, Context, Result

__all__ = ["RuleMismatchError", "run_check", "run_one", "pin_blas"]


class RuleMismatchError(RuntimeError):
    """A check returned a verdict its own decision rule does not give on its evidence."""


def run_check(c: Claim, ctx: Context, *, companion: bool = False) -> Result:
    """Run claim `c`'s check (or its must-fail companion) and re-apply its decision rule to the evidence.

    Raises :class:`RuleMismatchError` when the claim has a rule and the returned verdict differs from
    ``c.decide(result.evidence)``. Claims without a rule run unchanged (``tests/paper_checks`` lists them)."""
    fn = c.must_fail if companion else c.check
    if fn is None:
        raise ValueError(f"claim {c.id!r} has no must-fail companion")
    res = fn(ctx)
    if c.decide is not None and res.verdict != "skipped":
        again = c.decide(res.evidence)
        if again != res.verdict:
            which = f"claim {c.id}{' (companion)' if companion else ''}"
            raise RuleMismatchError(f"{which}: the check returned {res.verdict!r} but its rule gives "
                                    f"{again!r} on its evidence ({c.rule})")
    return res


def run_one(c: Claim, seed: int, size: str, report_dir: Path | None, run_slow: bool, executor: Any = None
            ) -> tuple[Result | None, float, str | None]:
    """Run claim `c`'s check: (result or None, seconds, error text or None).

    A slow claim without `run_slow` is ``skipped`` (its evidence gives the command that runs it); `executor`
    is the context's ``ctx.map`` executor (None: serial)."""
    t0 = time.perf_counter()
    if c.slow and not run_slow:
        res = Result("skipped", evidence={"reason": "slow claim not selected", "command": c.command},
                     summary=f"slow: run with {c.command}")
        return res, time.perf_counter() - t0, None
    ctx = Context(seed=seed, size=size, report_dir=report_dir, executor=executor, claim_id=c.id)
    try:
        return run_check(c, ctx), time.perf_counter() - t0, None
    except Exception as exc:
        return None, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"


def pin_blas() -> None:
    """One BLAS thread in this process.

    Monte Carlo checks call many small LAPACK routines (QR of the orthogonal draws), which a multi-threaded
    BLAS on a loaded machine slows down by orders of magnitude; parallelism comes from processes
    (``--workers``, dask workers) instead."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; without it the env vars apply to child processes
        return
    threadpool_limits(1)
