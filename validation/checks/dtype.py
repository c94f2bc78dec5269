"""``dtype``: float32 in, float32 out; float64 in, float64 out -- no silent cast."""

from __future__ import annotations

import numpy as np

from ..base import dtype_name
from .causes import cause
from .context import Ctx
from .report import CheckResult

__all__ = ["run"]


def run(ctx: Ctx) -> CheckResult:
    rng, d = ctx.rng("dtype"), ctx.s.d
    bad, seen = [], []
    for dt in (np.float32, np.float64):
        if ctx.spec is not None:
            out = ctx.spec.dtype_call(ctx, rng, dt)
        elif ctx.kind == "features":
            out = ctx.call(
                ctx.normal(rng, 1, 2, 4, d, scale=0.5, dtype=dt), ctx.omega(rng, 8, dtype=dt), raw=True
            )
        else:
            q, k, v = (ctx.normal(rng, 1, 2, 4, d, scale=0.5, dtype=dt) for _ in range(3))
            out = ctx.call(q, k, v, ctx.omega(rng, 8, dtype=dt), True, raw=True)
        got = dtype_name(out.dtype)
        seen.append(f"{np.dtype(dt).name} -> {got}")
        if got != np.dtype(dt).name:
            bad.append(f"{np.dtype(dt).name} in, {got} out")
    return CheckResult("dtype", not bad, float(len(bad)), 0.0,
                       ("silent cast: " + "; ".join(bad)) if bad else ", ".join(seen),
                       cause=cause("upcast", "; ".join(bad)) if bad else None)
