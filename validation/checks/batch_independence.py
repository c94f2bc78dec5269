"""``batch_independence``: (attention) one batch element's output does not depend on another's inputs.

Inputs of shape ``(B, H, L, d) = (3, 2, 12, d)``; the keys of batch element 0 are replaced by keys with the
largest exponents the family allows (aligned with the largest rows of omega), everything else is kept, and the
outputs of batch elements 1 and 2 must not change, bidirectional and causal: figure = max ``|out'[1:] -
out[1:]| / max |out[1:]|``, threshold ``4 sqrt(eps)``. A stabiliser that takes its maximum over the whole
batch (plus an eps, or with an underflow) fails it. A family contract supplies its own pair of calls
(``spec.batch_pair``); an exact one without keys (S2) perturbs batch element 0's queries and values.
"""

from __future__ import annotations

import numpy as np

from .causes import cause
from .context import Ctx, nonfinite_text, tol
from .report import CheckResult, skip

__all__ = ["run"]

B, H, L = 3, 2, 12


def _omega_pair(ctx: Ctx, causal: bool):
    rng, d = ctx.rng("batch"), ctx.s.d
    q, k, v = (0.7 * rng.standard_normal((B, H, L, d)) for _ in range(3))
    om = ctx.omega(rng, 64)
    om64 = om.astype(np.float64)
    rows = np.argsort(-np.linalg.norm(om64, axis=-1))[:L]
    k2 = k.copy()
    k2[0] = d ** 0.25 * om64[rows]                               # exponent |omega_r|^2 / 2 after d^-1/4
    dt = ctx.dtype
    with np.errstate(all="ignore"):
        out = ctx.call(q.astype(dt), k.astype(dt), v.astype(dt), om, causal).astype(np.float64)
        out2 = ctx.call(q.astype(dt), k2.astype(dt), v.astype(dt), om, causal).astype(np.float64)
    return out, out2


def run(ctx: Ctx) -> CheckResult:
    if ctx.spec is not None and not hasattr(ctx.spec, "batch_pair"):
        return skip("batch_independence", f"{ctx.family} has no batch contract")
    t = tol(ctx.dtype)
    modes = (False, True) if ctx.spec is None or ctx.spec.causal else (False,)
    figs, notes, leaks = [], [], []
    for causal in modes:
        tag = "causal" if causal else "bidirectional"
        try:
            out, out2 = ctx.spec.batch_pair(ctx, causal) if ctx.spec is not None else _omega_pair(ctx, causal)
        except Exception as e:  # noqa: BLE001 - a candidate failing in one mode: report the other
            notes.append(f"{tag}: raised {type(e).__name__}: {e}")
            leaks.append(f"{tag} raised")
            continue
        a, b = out[1:], out2[1:]
        fa, fb = np.isfinite(a), np.isfinite(b)
        if np.any(fa != fb):
            n = int(np.sum(fa != fb))
            notes.append(f"{tag}: {n} outputs of the other batch elements turn non-finite (or finite) when "
                         "element 0's keys change")
            leaks.append(f"{tag}: {n} outputs of elements 1, 2 change finiteness")
            continue
        both = fa & fb
        if not np.any(both):
            notes.append(f"{tag}: {nonfinite_text(a)} in both runs")
            continue
        scale = float(np.max(np.abs(a[both])))
        err = float(np.max(np.abs(a[both] - b[both]))) / scale if scale > 0 else 0.0
        figs.append(err)
        notes.append(f"{tag} {err:.2e}")
        if err > t:
            leaks.append(f"{tag}: the outputs of elements 1, 2 change by {err:.2e}")
    fig = max(figs) if figs else None
    keyless = ctx.spec is not None and getattr(ctx.spec, "keyless", False)
    what = ("batch element 0's queries and values" if keyless
            else "batch element 0's keys (set to the largest exponents)")
    shape = f"B = {B}, H = {H}, L = {L}" if ctx.spec is None or not getattr(ctx.spec, "keyless", False) else (
        "the inputs of values")
    detail = f"max |out'[1:] - out[1:]| / max |out[1:]| when {what} change, {shape}: " + "; ".join(notes)
    if not leaks:
        return CheckResult("batch_independence", True, fig, t, detail)
    raised = [x for x in leaks if x.endswith("raised")]
    why = (cause("causal-raises", "; ".join(raised)) if raised and len(raised) == len(leaks)
           else cause("batch-max", "; ".join(x for x in leaks if not x.endswith("raised"))))
    return CheckResult("batch_independence", False, fig, t, detail, cause=why)
