"""``prefix_invariance`` and ``stability``: (attention, causal) the future does not leak, and outputs are
finite.

Two probes, each 24 prefix tokens + 8 appended ones, run causally on the full sequence and on the prefix
alone:

* *aligned later keys*: the appended keys are aligned with the largest rows of omega, so their exponent is
  above every earlier key's (a global key maximum leaks through an additive epsilon);
* *underflow gap*: after large-norm prefix keys, an exponent gap beyond the dtype's underflow range (the leak
  without epsilon: a later key's larger exponent pushes the earlier keys' features to zero).

``prefix_invariance`` compares the two runs where both are finite: figure = max ``|out_prefix(full) -
out(prefix alone)| / max |out|``, and a position that is finite in one run but not in the other is a leak
(figure inf). Non-finite outputs that are the *same* in both runs do not depend on the future: they are
reported by ``stability`` (figure = the fraction of non-finite outputs over both probes, threshold 0), not as
a leak.
"""

from __future__ import annotations

import math

import numpy as np

from .causes import cause
from .context import Ctx, tol
from .report import CheckResult, skip

__all__ = ["run", "run_stability", "prefix_probe"]

PROBES = (("aligned later keys", False), ("underflow gap", True))


def prefix_probe(ctx: Ctx, rng, om, underflow: bool):
    """``(out_full[:L0], out_prefix_alone, top exponent, gap)`` of one probe (float64 NumPy outputs)."""
    d, L0, L1 = ctx.s.d, 24, 8
    s4 = d ** 0.25
    q = ctx.normal(rng, 1, 1, L0 + L1, d, scale=0.7, dtype=np.float64)
    v = ctx.normal(rng, 1, 1, L0 + L1, d, dtype=np.float64)
    k = rng.standard_normal((1, 1, L0 + L1, d)) * 0.7
    om64 = om.astype(np.float64)
    norms = np.linalg.norm(om64, axis=-1)
    rows = np.argsort(-norms)[:L1]
    k[0, 0, L0:] = s4 * om64[rows]                           # k' = d^-1/4 k = omega_r: exponent |omega_r|^2/2
    top = float(np.max(0.5 * norms[rows] ** 2))
    gap = None
    if underflow:
        # exponents this far below
        target = -(-math.log(float(np.finfo(ctx.dtype).smallest_subnormal)) + 20.0)
        u = rng.standard_normal((L0, d))
        u /= np.linalg.norm(u, axis=-1, keepdims=True)
        a = np.max(u @ om64.T, axis=-1)                                                # (L0,) max_r omega_r.u
        # exponent of a prefix key k' = R u is R a - R^2/2: the larger root of R^2/2 - R a + c = 0
        c = top - (-target)                                                              # wanted max exponent
        R = a + np.sqrt(np.maximum(a * a - 2 * c, 0.0))
        k[0, 0, :L0] = s4 * R[:, None] * u
        e_pre = float(np.max(R * a - R * R / 2))
        gap = top - e_pre
    dt = ctx.dtype
    with np.errstate(all="ignore"):
        full = ctx.call(q.astype(dt), k.astype(dt), v.astype(dt), om, True).astype(np.float64)[0, 0, :L0]
        pre = ctx.call(q[..., :L0, :].astype(dt), k[..., :L0, :].astype(dt), v[..., :L0, :].astype(dt), om,
                       True).astype(np.float64)[0, 0]
    return full, pre, top, gap


def _probes(ctx: Ctx):
    """Both probes, run once per context (shared by prefix_invariance and stability); an exception is kept."""
    if "prefix" not in ctx.cache and ctx.spec is not None:
        ctx.cache["prefix"] = ctx.spec.prefix_probes(ctx)
    if "prefix" not in ctx.cache:
        rng = ctx.rng("prefix")
        om = ctx.omega(rng, 64)
        out = []
        for label, uf in PROBES:
            try:
                out.append((label, prefix_probe(ctx, rng, om, uf), None))
            except Exception as e:  # noqa: BLE001 - the candidate failing in causal mode
                out.append((label, None, e))
        ctx.cache["prefix"] = out
    return ctx.cache["prefix"]


def run(ctx: Ctx) -> CheckResult:
    if ctx.spec is not None and not ctx.spec.causal:
        return skip("prefix_invariance", f"{ctx.family} has no causal mode")
    t = tol(ctx.dtype)
    res, notes, leaks = [], [], {}
    for label, probe, exc in _probes(ctx):
        if exc is not None:
            text = f"{label}: the candidate raised {type(exc).__name__} in causal mode: {exc}"
            return CheckResult("prefix_invariance", False, None, t, text, cause=cause("causal-raises", text))
        full, pre, top, gap = probe
        fin_f, fin_p = np.isfinite(full), np.isfinite(pre)
        where = "" if top is None else (f"(exponent {top:.1f}" + (f", {gap:.0f} above the prefix keys'" if gap
                                                                    else "") + ")")
        if np.any(fin_f != fin_p):
            n = int(np.sum(fin_f != fin_p))
            leaks[label] = f"{n} prefix outputs finite in one run and not in the other"
            notes.append(f"{label}{' ' + where if where else ''}: {n} prefix outputs finite in one run "
                         "and not in the other (the appended tokens change them: a leak, not bounded by any "
                         "figure)")
            continue
        both = fin_f & fin_p
        if not np.any(both):
            notes.append(f"{label}: every prefix output is non-finite in both runs (no leak; see stability)")
            continue
        scale = float(np.max(np.abs(pre[both])))
        err = float(np.max(np.abs(full[both] - pre[both])) / scale) if scale > 0 else 0.0
        res.append(err)
        if err > t:
            leaks[label] = f"the appended tokens change the prefix outputs by {err:.2e}"
        extra = (
            "" if np.all(both) else f", {int(np.sum(~both))} entries non-finite in both runs (see stability)"
        )
        notes.append(f"{label}{' ' + where if where else ''}: {err:.2e}{extra}")
    if not res and not leaks:
        return skip("prefix_invariance", "; ".join(notes))
    fig = max(res) if res else None
    what = (
        ctx.spec.prefix_text
        if ctx.spec is not None
        else "appended keys aligned with the largest rows of omega"
    )
    detail = (f"max |out_prefix(full) - out(prefix alone)| / max |out| for 24 prefix tokens + 8 "
              f"appended; {what}; "
              + "; ".join(notes))
    if not leaks:
        return CheckResult("prefix_invariance", True, fig, t, detail)
    first = PROBES[0][0]
    if first in leaks and "finite" not in leaks[first]:
        why = cause("global-max-eps", f"{first}: {leaks[first]}")
    else:
        label = next(iter(leaks))
        why = cause("global-max-underflow", f"{label}: {leaks[label]}")
    return CheckResult("prefix_invariance", False, fig, t, detail, cause=why)


def run_stability(ctx: Ctx) -> CheckResult:
    if ctx.spec is not None and not ctx.spec.causal:
        return skip("stability", f"{ctx.family} has no causal mode")
    bad, total, notes = 0, 0, []
    for label, probe, exc in _probes(ctx):
        if exc is not None:
            text = f"{label}: the candidate raised {type(exc).__name__} in causal mode: {exc}"
            return CheckResult("stability", False, None, 0.0, text, cause=cause("causal-raises", text))
        full, pre, _, _ = probe
        n = int(np.sum(~np.isfinite(full)) + np.sum(~np.isfinite(pre)))
        bad, total = bad + n, total + full.size + pre.size
        notes.append(f"{label}: {n} non-finite of {full.size + pre.size}")
    frac = bad / max(total, 1)
    return CheckResult("stability", bad == 0, frac, 0.0,
                       "fraction of non-finite causal outputs on the prefix probes (large exponents, an "
                       "underflow gap): " + "; ".join(notes),
                       cause=None if bad == 0 else cause("no-stabiliser", f"{bad} of {total} causal "
                                                                          "outputs are not finite"))
