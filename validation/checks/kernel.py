"""``kernel``: which kernel the candidate estimates, and that it is unbiased for it (design.md trap 1).

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
from .context import ALPHA, Ctx, feature_estimates, kernel_points, mc_z, tol, zcrit
from .favor import FEATURE_FAMILIES, KERNELS, favor_ref
from .report import CheckResult

__all__ = ["run", "attention_limit"]


def run(ctx: Ctx) -> CheckResult:
    if ctx.spec is not None:
        return ctx.spec.kernel(ctx)
    return _features(ctx) if ctx.kind == "features" else _attention(ctx)


def _kernel_fit(est, X, pairs, zc):
    """z of every candidate kernel: max over `pairs` of |mean - K| / se (montecarlo.mean_test)."""
    I, J = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    out = {}
    for name, (_, K) in KERNELS.items():
        k = K(X, X)[I, J]
        out[name] = mc_z(mean_test(est[:, I, J], k, n_se=zc, atol=1e-9 * max(1.0, float(np.max(np.abs(k))))))
    return out


def _features(ctx: Ctx) -> CheckResult:
    d = ctx.s.d
    pts = kernel_points(d, ctx.rng("kernel-points"), 0.8)
    X = np.stack(list(pts.values()))                                                        # (P, d)
    X = X.astype(ctx.dtype).astype(np.float64)
    P = X.shape[0]
    pairs = [(i, j) for i in range(P) for j in range(i, P)]
    est = feature_estimates(ctx, X, lambda r, m: ctx.omega(r, m), ctx.s.n_kernel, ctx.s.m_kernel)
    zc = zcrit(len(pairs))
    zs = _kernel_fit(est, X, pairs, zc)
    consistent = [k for k, z in zs.items() if z <= zc]
    want = FEATURE_FAMILIES[ctx.family][2] if ctx.family else None
    ctx.cache["kernel"] = want if want else (min(zs, key=zs.get) if consistent else None)
    listing = ", ".join(f"{k} z={z:.1f}" for k, z in sorted(zs.items(), key=lambda kv: kv[1]))
    if consistent:
        found = " and ".join(f"{k} [{KERNELS[k][0]}]" for k in consistent)
        head = f"unbiased for {found}"
    else:
        head = "unbiased for none of the candidate kernels (biased, or another kernel)"
    if want:
        passed, fig = want in consistent, zs[want]
        head += f"; the family {ctx.family!r} claims {want}"
    else:
        passed, fig = bool(consistent), min(zs.values())
    return CheckResult("kernel", passed, fig, zc,
                       f"{head} ({listing}; {ctx.s.n_kernel} iid Gaussian omegas, m = {ctx.s.m_kernel}, "
                       f"{len(pairs)} pairs of points with |x| = 0.8, d = {d}; false alarm {ALPHA:g})")


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


def _attention(ctx: Ctx) -> CheckResult:
    Y, R, targets = attention_limit(ctx)
    S = targets["softmax-scaled"]
    spread = float(np.sqrt(np.mean((S - S.mean(-2, keepdims=True)) ** 2)))
    Ybar, Rbar = Y.mean(0), R.mean(0)
    errs = {name: _rel_rms(Ybar, T, spread) for name, T in targets.items()}
    e_ref = _rel_rms(Rbar, S, spread)
    best = min(errs, key=errs.get)
    thr = 2 * e_ref + 10 * tol(ctx.dtype)
    passed = best == "softmax-scaled" and errs["softmax-scaled"] <= thr
    listing = ", ".join(f"{k} {e:.3f}" for k, e in sorted(errs.items(), key=lambda kv: kv[1]))
    return CheckResult("kernel", passed, errs["softmax-scaled"], thr,
                       f"the output averaged over {ctx.s.n_attn} omegas (m = {ctx.s.m_attn}, L = "
                       f"{ctx.s.L_attn}) is closest to {best} attention; RMS error / RMS spread of softmax: "
                       f"{listing}; refattn favor_attention on the same omegas: {e_ref:.3f} (threshold 2x "
                       "that)")
