"""``same_features``: (attention) queries and keys go through the same random features.

Averaged over omegas, shared features give an output that follows softmax attention across queries (slope
beta ~ 1); features drawn separately for keys estimate the constant kernel (``E phi_1(q) . E phi_2(k) = 1``),
slope ~ 0. Threshold 0.5.
"""

from __future__ import annotations

import math

import numpy as np

from .context import Ctx
from .kernel import attention_limit
from .report import CheckResult

__all__ = ["run"]


def run(ctx: Ctx) -> CheckResult:
    Y, R, targets = attention_limit(ctx)
    S = targets["softmax-scaled"]
    Sc = S - S.mean(-2, keepdims=True)

    def slope(A):
        Ac = A - A.mean(-2, keepdims=True)
        return float(np.sum(Ac * Sc) / np.sum(Sc * Sc))
    if not np.all(np.isfinite(Y)):
        return CheckResult("same_features", False, math.inf, 0.5, "non-finite outputs")
    b = np.array([slope(y) for y in Y])
    b_ref = float(np.mean([slope(r) for r in R]))
    beta = float(b.mean())
    se = float(b.std(ddof=1) / math.sqrt(len(b))) if len(b) > 1 else math.nan
    return CheckResult("same_features", beta > 0.5, beta, 0.5,
                       "slope of the candidate's output on softmax attention across queries (centred), mean "
                       f"of {len(b)} omegas: {beta:.3f} +- {se:.3f} (refattn: {b_ref:.3f}); shared features "
                       "give ~1, keys featurised with a separate draw give ~0 (E phi_1(q).E phi_2(k) = 1: "
                       "uniform attention)")
