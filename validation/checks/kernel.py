"""``kernel``: which kernel the candidate estimates, and that it is unbiased for it.

features: the mean of ``phi(q) . phi(k)`` over iid Gaussian omegas on 10 pairs of points is tested against
each kernel of :data:`validation.checks.favor.KERNELS` (``validation.montecarlo.mean_test``, Bonferroni
critical z at false alarm ``ALPHA``); a family claimed with ``--as`` must be unbiased for its own kernel.
attention: which attention the candidate's output converges to (softmax with the ``d^{-1/2}`` scale, without
it, Gaussian-kernel attention, or uniform averaging), and that its error is at most twice refattn's on the
same omegas. A family contract delegates to its spec (closed-form kernel of the family).
"""

from __future__ import annotations

import math

import numpy as np

from refattn.attention import softmax_attention

from ..montecarlo import mean_test
from .causes import cause, unmatched
from .context import ALPHA, Ctx, feature_estimates, kernel_points, nonfinite_text, tol, zcrit
from .favor import ATTENTION_FAMILIES, FEATURE_FAMILIES, KERNELS, favor_ref
from .report import CheckResult, inconclusive

__all__ = ["run", "attention_limit", "fit_text", "fit_figure"]


def run(ctx: Ctx) -> CheckResult:
    if ctx.spec is not None:
        return ctx.spec.kernel(ctx)
    return _features(ctx) if ctx.kind == "features" else _attention(ctx)


def _kernel_fit(est, X, pairs, zc, eps):
    """Each known kernel's test over `pairs` (montecarlo.mean_test): ``{name: (MeanTest, K values)}``. Entries
    whose replicates are all equal (zero variance, e.g. q = k for trig features) are compared exactly and
    kept out of the z-scores."""
    I, J = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    E = est[:, I, J]
    with np.errstate(all="ignore"):
        floor = 10 * eps * max(1.0, float(np.nanmax(np.abs(E))) if np.any(np.isfinite(E)) else 1.0)
    out = {}
    for name, (_, K) in KERNELS.items():
        k = K(X, X)[I, J]
        atol = 100 * eps * max(1.0, float(np.max(np.abs(k))))
        out[name] = (mean_test(E, k, n_se=zc, atol=atol, se_floor=floor), k)
    return out


def fit_text(mt) -> str:
    """A kernel's fit in words: its z over the positive-variance pairs, and the exact (zero-variance) pairs
    when they are off."""
    if not np.all(np.isfinite(mt.mean)):
        return "not finite"
    z = f"z={mt.z:.1f}" if mt.n_positive_se else "no random pairs"
    if mt.zero_se_count and mt.zero_se_max_dev > 0 and not mt.passed and mt.z <= mt.n_se:
        return f"{z}, {mt.zero_se_count} exact pairs off by up to {mt.zero_se_max_dev:.3g}"
    return z + (f" ({mt.zero_se_count} exact)" if mt.zero_se_count else "")


def fit_figure(mt) -> float | None:
    """The check's figure for a kernel fit: z over the positive-variance pairs (None when an exact pair is
    off, which the detail says in words, or when the estimate is not finite)."""
    if not np.all(np.isfinite(mt.mean)):
        return None
    if not mt.passed and mt.z <= mt.n_se:
        return None
    return min(float(mt.z), float(mt.n_se)) if mt.passed else float(mt.z)


def _proportional(est, X, pairs, zc, eps):
    """``(kernel, c, MeanTest)`` of the known kernel K with ``est ~ c K`` (c fitted), when one fits."""
    I, J = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    E = est[:, I, J]
    mean = E.mean(0)
    best = None
    for name, (_, K) in KERNELS.items():
        k = K(X, X)[I, J]
        c = float(mean @ k / (k @ k))
        if c <= 0:
            continue
        mt = mean_test(E - c * k, 0.0, n_se=zc, atol=100 * eps * max(1.0, float(np.max(np.abs(c * k)))),
                       se_floor=10 * eps * max(1.0, float(np.max(np.abs(mean)))))
        if mt.passed and (best is None or mt.z < best[2].z):
            best = (name, c, mt)
    return best


#: (claimed kernel, the kernel found) -> the catalogue's defect
_SWAPS = {("softmax-scaled", "softmax"): "missing-d-quarter",
          ("gaussian-scaled", "gaussian"): "missing-d-quarter",
          ("softmax", "softmax-scaled"): "extra-d-quarter",
          ("gaussian", "gaussian-scaled"): "extra-d-quarter",
          ("softmax", "gaussian"): "gaussian-for-softmax", ("softmax-scaled", "gaussian-scaled"):
          "gaussian-for-softmax", ("gaussian", "softmax"): "softmax-for-gaussian",
          ("gaussian-scaled", "softmax-scaled"): "softmax-for-gaussian"}


def _claim_cause(family, want, consistent, fits, prop) -> str:
    for found in consistent:
        key = _SWAPS.get((want, found))
        if key == "gaussian-for-softmax" and family.startswith("positive"):
            key = "wrong-offset"
        if key:
            return cause(key, f"unbiased for {found} [{KERNELS[found][0]}] ({fit_text(fits[found][0])}), not "
                              f"the claimed {want} ({fit_text(fits[want][0])})")
    if prop is not None and prop[0] == want:
        return cause("normalisation", f"the estimate is {prop[1]:.4g} x {want} (z={prop[2].z:.1f} after the "
                                      "factor)")
    return unmatched(f"unbiased for none of the known kernels; the claimed {want}: {fit_text(fits[want][0])}")


def _features(ctx: Ctx) -> CheckResult:
    d = ctx.s.d
    pts = kernel_points(d, ctx.rng("kernel-points"), 0.8)
    X = np.stack(list(pts.values()))                                                        # (P, d)
    X = X.astype(ctx.dtype).astype(np.float64)
    P = X.shape[0]
    pairs = [(i, j) for i in range(P) for j in range(i, P)]
    est = feature_estimates(ctx, X, lambda r, m: ctx.omega(r, m), ctx.s.n_kernel, ctx.s.m_kernel)
    zc, eps = zcrit(len(pairs)), float(np.finfo(ctx.dtype).eps)
    setting = (f"{ctx.s.n_kernel} iid Gaussian omegas, m = {ctx.s.m_kernel}, {len(pairs)} pairs of "
               f"points with |x| = 0.8, d = {d}; false alarm {ALPHA:g}")
    want = FEATURE_FAMILIES[ctx.family][2] if ctx.family else None
    ctx.cache["kernel"] = want
    bad = nonfinite_text(est, "kernel estimates")
    if bad:
        return CheckResult("kernel", False, None, zc, f"{bad} ({setting})",
                           cause=cause("not-finite", bad))
    if not np.any(est):
        return CheckResult("kernel", False, None, zc, f"the estimate is 0 for every pair and draw: the "
                                                      f"features are all zeros ({setting})",
                           cause=unmatched("the features are all zeros"))
    fits = _kernel_fit(est, X, pairs, zc, eps)
    consistent = [k for k, (mt, _) in fits.items() if mt.passed]
    order = sorted(fits, key=lambda k: (not fits[k][0].passed, fits[k][0].z))
    listing = ", ".join(f"{k} {fit_text(fits[k][0])}" for k in order)
    if consistent:
        head = "unbiased for " + " and ".join(f"{k} [{KERNELS[k][0]}]" for k in consistent)
    else:
        head = "unbiased for none of the known kernels"
    if want:
        head += f"; the family {ctx.family!r} claims {want}"
        passed = want in consistent
        detail = f"{head} ({listing}; {setting})"
        if passed:
            return CheckResult("kernel", True, fit_figure(fits[want][0]), zc, detail)
        prop = _proportional(est, X, pairs, zc, eps)
        return CheckResult("kernel", False, fit_figure(fits[want][0]), zc, detail,
                           cause=_claim_cause(ctx.family, want, consistent, fits, prop))
    if consistent:
        ctx.cache["kernel"] = min(consistent, key=lambda k: fits[k][0].z)
        return CheckResult("kernel", True, fit_figure(fits[ctx.cache["kernel"]][0]), zc,
                           f"{head} ({listing}; {setting})")
    prop = _proportional(est, X, pairs, zc, eps)
    if prop is not None:
        name, c, mt = prop
        return CheckResult("kernel", False, None, zc,
                           f"{head}, but it is {c:.4g} x {name} ({listing}; {setting})",
                           cause=cause("normalisation", f"the estimate is {c:.4g} x {name} (z={mt.z:.1f} "
                                                        "after the factor)"))
    return inconclusive("kernel", f"the estimated kernel matches none of the known ones (nor a constant "
                                  f"multiple of one): {listing}; {setting}. Name the family the map "
                                  "implements with --as to compare it with refattn's map, or check its "
                                  "kernel by hand",
                        None, zc)


def attention_inputs(ctx: Ctx):
    rng = ctx.rng("attention-limit")
    d, L = ctx.s.d, ctx.s.L_attn
    q, k = (ctx.normal(rng, 1, 2, L, d, scale=0.5) for _ in range(2))          # |q|^2 ~ 4: FAVOR+ is accurate
    v = ctx.normal(rng, 1, 2, L, d)
    return rng, q, k, v


def attention_limit(ctx: Ctx):
    """Candidate and refattn outputs on the same n omegas (bidirectional), and the candidate targets."""
    if "limit" in ctx.cache:
        return ctx.cache["limit"]
    rng, q, k, v = attention_inputs(ctx)
    d = ctx.s.d
    ref_fn = favor_ref(ctx.family or "positive")[0]
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    Y, R = [], []
    for _ in range(ctx.s.n_attn):
        om = ctx.omega(rng, ctx.s.m_attn)
        Y.append(ctx.call(q, k, v, om, False).astype(np.float64))
        R.append(np.asarray(ref_fn(q64, k64, v64, om.astype(np.float64), False)))
    ksq = np.sum(k64 * k64, -1)[..., None, :]                                                # (..., 1, L)
    targets = {
        "softmax-scaled": softmax_attention(q64, k64, v64),
        "softmax-unscaled": softmax_attention(q64, k64, v64, scale=1.0),
        "gaussian-scaled": softmax_attention(q64, k64, v64, mask_add=-0.5 * ksq / math.sqrt(d)),
        "uniform": np.broadcast_to(v64.mean(-2, keepdims=True), v64.shape),
    }
    ctx.cache["limit"] = (np.stack(Y), np.stack(R), targets)
    return ctx.cache["limit"]


def _rel_rms(a, t, spread):
    return float(np.sqrt(np.mean((a - t) ** 2)) / spread) if np.all(np.isfinite(a)) else math.inf


#: (the family's limit, the attention found closest) -> the catalogue's defect
_ATTENTION_CAUSES = {"softmax-unscaled": "missing-d-quarter", "uniform": "separate-qk"}


def _attention(ctx: Ctx) -> CheckResult:
    Y, R, targets = attention_limit(ctx)
    want = ATTENTION_FAMILIES[ctx.family or "positive"]
    S = targets[want]
    spread = float(np.sqrt(np.mean((S - S.mean(-2, keepdims=True)) ** 2)))
    bad = nonfinite_text(Y)
    setting = f"the output averaged over {ctx.s.n_attn} omegas (m = {ctx.s.m_attn}, L = {ctx.s.L_attn})"
    if bad:
        return CheckResult("kernel", False, None, None, f"{setting}: {bad}", cause=cause("not-finite", bad))
    Ybar, Rbar = Y.mean(0), R.mean(0)
    errs = {name: _rel_rms(Ybar, T, spread) for name, T in targets.items()}
    e_ref = _rel_rms(Rbar, S, spread)
    best = min(errs, key=errs.get)
    thr = 2 * e_ref + 10 * tol(ctx.dtype)
    passed = best == want and errs[want] <= thr
    listing = ", ".join(f"{k} {e:.3f}" for k, e in sorted(errs.items(), key=lambda kv: kv[1]))
    detail = (f"{setting} is closest to {best} attention (the {ctx.family or 'positive'} family's limit: "
              f"{want}); RMS error / RMS spread of {want}: {listing}; refattn on the same omegas: "
              f"{e_ref:.3f} (threshold 2x that)")
    if passed:
        return CheckResult("kernel", True, errs[want], thr, detail)
    key = _ATTENTION_CAUSES.get(best) or _SWAPS.get((want, best))
    fig = f"closest to {best} ({errs[best]:.3f}), {want} {errs[want]:.3f} (refattn {e_ref:.3f})"
    return CheckResult("kernel", False, errs[want], thr, detail,
                       cause=cause(key, fig) if key else unmatched(fig))
