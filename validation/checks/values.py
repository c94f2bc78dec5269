"""``values``: the candidate equals refattn's computation on the same inputs and the same draws.

features (omega contract): max ``|phi - ref| / (|ref| + sqrt(eps) max|ref|)`` against the claimed family's
map; attention: max ``|out - ref| / max|ref|`` against ``favor_attention`` (bidirectional and causal); a
family contract (``--as gmm-rks`` ...) delegates to its spec (``validation.families``). Threshold ``4
sqrt(eps)``; the reference is computed in float64 on the same (rounded) inputs.
"""

from __future__ import annotations

import math

import numpy as np

from ..base import UsageError
from .context import Ctx, tol
from .favor import ATTENTION_FAMILIES, FEATURE_FAMILIES, favor_ref
from .report import CheckResult, skip

__all__ = ["run"]


def run(ctx: Ctx) -> CheckResult:
    if ctx.spec is not None:
        return ctx.spec.values(ctx)
    if ctx.kind == "features":
        return _features(ctx)
    return _attention(ctx)


def _features(ctx: Ctx) -> CheckResult:
    t, d, rng = tol(ctx.dtype), ctx.s.d, ctx.rng("values")
    if ctx.family is None:
        return skip("values", f"name the refattn family to compare with (--as, one of "
                              f"{sorted(FEATURE_FAMILIES)})")
    ref_fn = FEATURE_FAMILIES[ctx.family][0]
    x, om = ctx.normal(rng, 2, 2, 8, d, scale=0.5), ctx.omega(rng, 32)
    phi = ctx.call(x, om).astype(np.float64)
    ref = np.asarray(ref_fn(x.astype(np.float64), om.astype(np.float64)))
    if phi.shape != ref.shape:
        return CheckResult("values", False, None, t, f"feature width {phi.shape[-1]}; refattn's {ctx.family} "
                                                     f"map has {ref.shape[-1]} for m = {om.shape[0]}")
    floor = math.sqrt(np.finfo(ctx.dtype).eps) * np.max(np.abs(ref))
    err = float(np.max(np.abs(phi - ref) / (np.abs(ref) + floor))) if np.all(np.isfinite(phi)) else math.inf
    return CheckResult("values", err <= t, err, t,
                       f"max |phi - ref| / (|ref| + sqrt(eps) max|ref|) against refattn {ctx.family} "
                       f"features, x (2, 2, 8, {d}), m = 32")


def _attention(ctx: Ctx) -> CheckResult:
    t, d, rng = tol(ctx.dtype), ctx.s.d, ctx.rng("values")
    fam = ctx.family or "positive"
    if fam not in ATTENTION_FAMILIES:
        raise UsageError(f"--as {fam!r}: attention families are {ATTENTION_FAMILIES} (favor_attention "
                         f"features)")
    ref_fn = favor_ref(fam)[0]
    q, k, v = (ctx.normal(rng, 2, 2, 16, d, scale=0.7) for _ in range(3))
    om = ctx.omega(rng, 32)
    errs = {}
    for causal in (False, True):
        y = ctx.call(q, k, v, om, causal).astype(np.float64)
        ref = np.asarray(ref_fn(*(a.astype(np.float64) for a in (q, k, v, om)), causal))
        errs[causal] = (
            float(np.max(np.abs(y - ref)) / np.max(np.abs(ref))) if np.all(np.isfinite(y)) else math.inf
        )
    err = max(errs.values())
    return CheckResult("values", err <= t, err, t,
                       f"max |out - ref| / max |ref| against favor_attention(features={fam!r}): "
                       f"bidirectional {errs[False]:.2e}, causal {errs[True]:.2e} (L = 16, d = {d}, m = 32)")
