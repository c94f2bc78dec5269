"""``same_features``: (attention) queries and keys go through the same random features.

Averaged over omegas, shared features give an output that follows softmax attention across queries (slope
beta ~ 1); features drawn separately for keys estimate the constant kernel (``E phi_1(q) . E phi_2(k) = 1``),
slope ~ 0. Threshold 0.5.
"""

from __future__ import annotations

import math

import numpy as np

from .causes import cause
from .context import Ctx, nonfinite_text
from .favor import ATTENTION_FAMILIES
from .kernel import attention_limit
from .report import CheckResult

__all__ = ["run"]


def run(ctx: Ctx) -> CheckResult:
    Y, R, targets = attention_limit(ctx)
    want = ATTENTION_FAMILIES[ctx.family or "positive"]
    S = targets[want]
    Sc = S - S.mean(-2, keepdims=True)

    def slope(A):
        Ac = A - A.mean(-2, keepdims=True)
        return float(np.sum(Ac * Sc) / np.sum(Sc * Sc))
    bad = nonfinite_text(Y)
    if bad:
        return CheckResult("same_features", False, None, 0.5, bad, cause=cause("not-finite", bad))
    b = np.array([slope(y) for y in Y])
    b_ref = float(np.mean([slope(r) for r in R]))
    beta = float(b.mean())
    se = float(b.std(ddof=1) / math.sqrt(len(b))) if len(b) > 1 else math.nan
    return CheckResult("same_features", beta > 0.5, beta, 0.5,
                       f"slope of the candidate's output on {want} attention across queries (centred), mean "
                       f"of {len(b)} omegas: {beta:.3f} +- {se:.3f} (refattn: {b_ref:.3f}); shared features "
                       "give ~1, keys featurised with a separate draw give ~0 (E phi_1(q).E phi_2(k) = 1: "
                       "uniform attention)",
                       cause=None if beta > 0.5 else cause("separate-qk", f"slope {beta:.3f} (shared "
                                                                          f"features give ~1; refattn "
                                                                          f"{b_ref:.3f})"))
