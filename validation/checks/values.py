"""``values``: the candidate equals refattn's computation on the same inputs and the same draws.

features (omega contract): max ``|phi - ref| / (|ref| + sqrt(eps) max|ref|)`` against the claimed family's map
(a map of another width -- features duplicated or of another layout, the contract's ``m'`` being the
candidate's choice -- through the same figure of the kernel estimates ``phi(X) phi(X)^T``; ``gradients``
likewise); attention: max ``|out - ref| / max|ref|`` against the family's FAVOR attention (bidirectional and
causal; the bidirectional figure is reported even when causal mode raises); a family contract (``--as
gmm-rks`` ...) delegates to its spec (``validation.families``). Threshold ``4 sqrt(eps)``; the reference is
computed in float64 on the same (rounded) inputs. A failure names its likely cause
(:mod:`validation.checks.causes`): the map of another family, a missing or extra ``d^{-1/4}``, a constant
factor, a per-row factor, an additive offset, non-finite outputs.
"""

from __future__ import annotations

import math

import numpy as np

from ..base import UsageError
from .causes import cause, unmatched
from .context import Ctx, nonfinite_text, rel_err, tol
from .favor import ATTENTION_FAMILIES, FEATURE_FAMILIES, favor_ref
from .report import CheckResult, skip

__all__ = ["run", "feature_cause"]


def run(ctx: Ctx) -> CheckResult:
    if ctx.spec is not None:
        return ctx.spec.values(ctx)
    if ctx.kind == "features":
        return _features(ctx)
    return _attention(ctx)


def _feature_err(phi, ref, dtype) -> float:
    if phi.shape != ref.shape:
        return math.inf
    if not np.all(np.isfinite(phi)):
        return math.inf
    floor = math.sqrt(np.finfo(dtype).eps) * np.max(np.abs(ref))
    return float(np.max(np.abs(phi - ref) / (np.abs(ref) + floor)))


def feature_cause(family: str, phi: np.ndarray, ref: np.ndarray, x: np.ndarray, om: np.ndarray,
                  t: float) -> str:
    """The likely cause of features `phi` differing from refattn's `family` map `ref` on `x`, `om` "
      "(float64)."""
    bad = nonfinite_text(phi, "features")
    if bad:
        return cause("not-finite", bad)
    for other, (fn, _, _) in FEATURE_FAMILIES.items():
        if other == family:
            continue
        alt = np.asarray(fn(x, om))
        e = _feature_err(phi, alt, np.float64)
        if e <= max(t, 1e-6):
            if {family, other} in ({"positive", "positive-scaled"}, {"hyperbolic", "hyperbolic-scaled"}):
                key = "missing-d-quarter" if family.endswith("-scaled") else "extra-d-quarter"
                return cause(key, f"the features equal refattn's {other} map (error {e:.1e})")
            return cause("other-family", f"the features equal refattn's {other} map (error {e:.1e}), not "
                                         f"{family}")
    if phi.shape != ref.shape:
        return unmatched(f"feature width {phi.shape[-1]}; refattn's {family} map has {ref.shape[-1]} for m = "
                         f"{om.shape[0]}")
    big = np.abs(ref) > 1e-3 * np.max(np.abs(ref))
    ratio = phi[big] / ref[big]
    c = float(np.median(ratio))
    if c != 0 and np.max(np.abs(ratio / c - 1)) <= 1e-6:
        return cause("normalisation", f"phi = {c:.4g} x refattn's {family} features (constant ratio)")
    rows = np.where(big, phi / np.where(big, ref, 1.0), np.nan)                         # (..., L, m')
    with np.errstate(all="ignore"):
        rmed = np.nanmedian(rows, axis=-1, keepdims=True)
        spread = np.nanmax(np.abs(rows / rmed - 1))
    if np.isfinite(spread) and spread <= 1e-6:
        return cause("row-scale", f"phi / ref is constant along each row but varies between rows (from "
                                  f"{float(np.nanmin(rmed)):.3g} to {float(np.nanmax(rmed)):.3g})")
    diff, top = phi - ref, float(np.max(np.abs(ref)))
    for axes, where in ((None, "one offset for all"), ((-1, -2), "one offset per batch element and head"),
                        ((-1,), "one offset per row")):
        b = np.mean(diff, axis=axes, keepdims=True)
        if np.max(np.abs(diff - b)) <= 1e-6 * top and np.max(np.abs(b)) > 0:
            return cause("additive-eps", f"phi - ref is constant ({where}): offsets up to "
                                         f"{float(np.max(np.abs(b))) / top:.2g} of the largest feature")
    return unmatched(f"max relative error {_feature_err(phi, ref, np.float64):.3g} against refattn's "
                     f"{family} map; not another family's map, a constant or per-row factor, or an additive "
                     "offset")


def _features(ctx: Ctx) -> CheckResult:
    t, d, rng = tol(ctx.dtype), ctx.s.d, ctx.rng("values")
    if ctx.family is None:
        return skip("values", f"name the refattn family to compare with (--as, one of "
                              f"{sorted(FEATURE_FAMILIES)})")
    ref_fn = FEATURE_FAMILIES[ctx.family][0]
    x, om = ctx.normal(rng, 2, 2, 8, d, scale=0.5), ctx.omega(rng, 32)
    phi = ctx.call(x, om).astype(np.float64)
    x64, om64 = x.astype(np.float64), om.astype(np.float64)
    ref = np.asarray(ref_fn(x64, om64))
    what = (f"max |phi - ref| / (|ref| + sqrt(eps) max|ref|) against refattn {ctx.family} features, x "
            f"(2, 2, 8, "
            f"{d}), m = 32")
    if phi.shape[:-1] == ref.shape[:-1] and phi.shape[-1] != ref.shape[-1]:
        return _gram_values(ctx, phi, ref, t)
    if phi.shape != ref.shape:
        return CheckResult("values", False, None, t, f"output shape {phi.shape}; refattn's {ctx.family} map "
                                                     f"gives {ref.shape} for m = {om.shape[0]}",
                           cause=feature_cause(ctx.family, phi, ref, x64, om64, t))
    err = _feature_err(phi, ref, ctx.dtype)
    if err <= t:
        return CheckResult("values", True, err, t, what)
    bad = nonfinite_text(phi, "features")
    return CheckResult("values", False, None if bad else err, t, (bad + "; " if bad else "") + what,
                       cause=feature_cause(ctx.family, phi, ref, x64, om64, t))


def _gram_values(ctx: Ctx, phi: np.ndarray, ref: np.ndarray, t: float) -> CheckResult:
    """A map of another width than refattn's (the contract's ``m'`` is the candidate's choice: duplicated or
    reordered features): compared through the kernel estimates ``phi(X) phi(X)^T`` of all pairs of the
    positions, which any two maps of the same estimator share, with the features' figure and threshold."""
    K = phi @ np.swapaxes(phi, -1, -2)
    Kr = ref @ np.swapaxes(ref, -1, -2)
    err = _feature_err(K, Kr, ctx.dtype)
    what = (f"max |K - K_ref| / (|K_ref| + sqrt(eps) max|K_ref|) of the kernel estimates K = phi(X) phi(X)^T "
            f"over the 8 positions of each (batch, head) against refattn {ctx.family} features (the "
            f"candidate's width {phi.shape[-1]} differs from refattn's {ref.shape[-1]} for m = 32)")
    if err <= t:
        return CheckResult("values", True, err, t, what)
    bad = nonfinite_text(phi, "features")
    if bad:
        return CheckResult("values", False, None, t, bad + "; " + what, cause=cause("not-finite", bad))
    big = np.abs(Kr) > 1e-3 * np.max(np.abs(Kr))
    ratio = K[big] / Kr[big]
    c = float(np.median(ratio))
    if c != 0 and np.max(np.abs(ratio / c - 1)) <= 1e-6:
        why = cause("normalisation", f"phi(X) phi(X)^T = {c:.4g} x refattn's {ctx.family} estimate (constant "
                                     "ratio)")
    else:
        why = unmatched(f"kernel estimates off by up to {err:.3g} relative; not a constant multiple")
    return CheckResult("values", False, err, t, what, cause=why)


def _attention_cause(fam, y, q, k, v, om, causal_errs, t) -> str:
    bad = nonfinite_text(y)
    if bad:
        return cause("not-finite", bad)
    d = q.shape[-1]
    s = d ** 0.25
    alts = [(f, "other-family", f"refattn's {f} attention") for f in ATTENTION_FAMILIES if f != fam]
    for f, key, text in [(fam, "missing-d-quarter", "the same map on q, k without d^-1/4")] + alts:
        sc = s if key == "missing-d-quarter" else 1.0
        alt = np.asarray(favor_ref(f)[0](q * sc, k * sc, v, om, False))
        e = rel_err(y, alt)
        if e <= max(t, 1e-6):
            return cause(key, f"the bidirectional output equals {text} (error {e:.1e})")
    eb = causal_errs.get(False)
    ec = causal_errs.get(True)
    if eb is not None and eb <= t and ec is not None and ec > t:
        return unmatched(f"bidirectional correct ({eb:.1e}), causal off by {ec:.2g}: the causal path (prefix "
                         "sums or its stabiliser)")
    e = max(x for x in causal_errs.values() if x is not None)
    if e < 1e-2:
        return cause("additive-eps", f"a small relative deviation ({e:.2g}) from refattn on the same omega, "
                                     "as an additive eps in the features gives")
    return unmatched(f"relative error {e:.3g}; not another family's attention nor a missing d^-1/4")


def _attention(ctx: Ctx) -> CheckResult:
    t, d, rng = tol(ctx.dtype), ctx.s.d, ctx.rng("values")
    fam = ctx.family or "positive"
    if fam not in ATTENTION_FAMILIES:
        raise UsageError(f"--as {fam!r}: attention families are {tuple(ATTENTION_FAMILIES)} (FAVOR-type "
                         f"features)")
    ref_fn = favor_ref(fam)[0]
    q, k, v = (ctx.normal(rng, 2, 2, 16, d, scale=0.7) for _ in range(3))
    om = ctx.omega(rng, 32)
    q64, k64, v64, om64 = (a.astype(np.float64) for a in (q, k, v, om))
    errs, texts, raised, ys = {}, {}, None, {}
    for causal in (False, True):
        tag = "causal" if causal else "bidirectional"
        try:
            y = ctx.call(q, k, v, om, causal).astype(np.float64)
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - a candidate failing in one mode: report the other
            raised = (tag, e)
            errs[causal] = None
            texts[causal] = f"{tag}: raised {type(e).__name__}: {e}"
            continue
        ys[causal] = y
        ref = np.asarray(ref_fn(q64, k64, v64, om64, causal))
        errs[causal] = rel_err(y, ref)
        bad = nonfinite_text(y)
        texts[causal] = f"{tag} " + (bad if bad else f"{errs[causal]:.2e}")
    measured = [e for e in errs.values() if e is not None]
    fig = max(measured) if measured else None
    passed = raised is None and fig is not None and fig <= t
    detail = (f"max |out - ref| / max |ref| against refattn's {fam} attention: "
              f"{', '.join(texts.values())} (L = "
              f"16, d = {d}, m = 32)")
    if passed:
        return CheckResult("values", True, fig, t, detail)
    if raised is not None and (fig is None or fig <= t):
        c = cause("causal-raises", texts[True]) if raised[0] == "causal" else unmatched(texts[False])
    else:
        y = ys.get(False)
        c = (_attention_cause(fam, y, q64, k64, v64, om64, errs, t) if y is not None
             else unmatched(texts[False]))
    shown = fig if fig is not None and math.isfinite(fig) else None
    return CheckResult("values", False, shown, t, detail, cause=c)
