"""The one timing helper of the benchmark scripts (run as ``python benchmarks/<name>.py``, so this module is
importable as ``_timing``)."""

from __future__ import annotations

import time

import numpy as np

__all__ = ["timeit"]


def timeit(fn, repeat: int = 5) -> float:
    """Median wall time in seconds of `repeat` calls of ``fn()``, after one warm-up call (imports, JIT,
    caches)."""
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))
