"""``unbiased``: the estimate is unbiased along a coordinate axis, the all-ones direction and two random ones.

draw: over many of the candidate's own draws, refattn's positive-feature estimate of ``exp(q.k)`` is unbiased
(non-Haar orthogonal draws bias it, direction-dependently: ``refattn.random.draw_orthogonal``); features: the
candidate's estimate of its kernel is unbiased along those directions under Haar-orthogonal draws. z-scores by
``validation.montecarlo.mean_test`` (standard error from the replicates), Bonferroni critical z.
"""

from __future__ import annotations

import numpy as np

from refattn.features import positive_features
from refattn.random import draw_orthogonal

from ..montecarlo import mean_test
from .causes import cause, unmatched
from .context import ALPHA, Ctx, feature_estimates, kernel_points, mc_z, nonfinite_text, zcrit
from .favor import FEATURE_FAMILIES, KERNELS
from .haar import candidate_draws, degenerate
from .kernel import fit_figure, fit_text
from .report import CheckResult, inconclusive

__all__ = ["run"]


def run(ctx: Ctx) -> CheckResult:
    return _draw(ctx) if ctx.kind == "draw" else _features(ctx)


def _draw(ctx: Ctx) -> CheckResult:
    W = candidate_draws(ctx)
    n, m, d = W.shape
    bad = degenerate(W)
    if bad:
        return CheckResult("unbiased", False, None, None, f"not measured: {bad}",
                           cause=cause("zero-draw", bad))
    r = 0.6
    pts = kernel_points(d, ctx.rng("unbiased-points"), r)
    zc = zcrit(len(pts))
    zs, biases = {}, {}
    target = float(np.exp(r * r))
    for name, x in pts.items():
        phi = positive_features(x[None, :], W.reshape(n * m, d)).reshape(n, m) * np.sqrt(n)  # (n, m) per draw
        est = np.sum(phi * phi, axis=-1)                                                  # (n,) of exp(|x|^2)
        zs[name] = mc_z(mean_test(est, target, n_se=zc))
        biases[name] = float(est.mean()) / target - 1
    worst = max(zs, key=zs.get)
    listing = ", ".join(f"{k} z={zs[k]:.1f} (rel. bias {biases[k]:+.2%})" for k in pts)
    ok = zs[worst] <= zc
    return CheckResult("unbiased", ok, zs[worst], zc,
                       "refattn positive_features on the candidate's draws, estimate of exp(|x|^2) at |x| = "
                       f"{r}: {listing}; {n} draws of ({m}, {d}); false alarm {ALPHA:g}",
                       cause=None if ok else cause("non-haar-bias", f"relative bias {biases[worst]:+.2%} "
                                                                    f"along {worst} (z={zs[worst]:.1f})"))


def _features(ctx: Ctx) -> CheckResult:
    kern = ctx.cache.get("kernel") or (FEATURE_FAMILIES[ctx.family][2] if ctx.family else None)
    if kern is None:
        return inconclusive("unbiased", "no known kernel to test against (the kernel check identified "
                                        "none; name the family with --as)")
    d, r = ctx.s.d, 1.0
    pts = kernel_points(d, ctx.rng("unbiased-points"), r)
    X = np.concatenate([np.stack(list(pts.values())), -0.5 * np.stack(list(pts.values()))])   # (8, d)
    X = X.astype(ctx.dtype).astype(np.float64)
    P = len(pts)
    I = np.concatenate([np.arange(P), np.arange(P)])
    J = np.concatenate([np.arange(P), P + np.arange(P)])                    # pairs q = k and k = -q/2
    dt = ctx.dtype
    est = feature_estimates(ctx, X, lambda rg, m: draw_orthogonal(rg, m, d, dtype=dt), ctx.s.n_kernel,
                            ctx.s.m_kernel)
    K = KERNELS[kern][1](X, X)[I, J]
    zc = zcrit(len(I))
    bad = nonfinite_text(est, "kernel estimates")
    if bad:
        return CheckResult("unbiased", False, None, zc, bad, cause=cause("not-finite", bad))
    eps = float(np.finfo(dt).eps)
    scale = max(1.0, float(np.max(np.abs(K))))
    mt = mean_test(est[:, I, J], K, n_se=zc, atol=100 * eps * scale, se_floor=10 * eps * scale)
    z = np.where(mt.se > 10 * eps * scale, np.abs(mt.mean - K) / np.where(mt.se > 0, mt.se, 1.0), 0.0)
    names = list(pts)
    worst = int(np.argmax(z))
    wname = f"{names[worst % P]} ({'q = k' if worst < P else 'k = -q/2'})"
    detail = (f"estimate of {kern} [{KERNELS[kern][0]}] under Haar-orthogonal draws (refattn "
              f"draw_orthogonal, m = {ctx.s.m_kernel}), |q| = {r} along e1, all-ones, 2 random directions, "
              f"k = q and k = -q/2; worst {wname}; {fit_text(mt)}; {ctx.s.n_kernel} draws; false alarm "
              f"{ALPHA:g}")
    fig = fit_figure(mt)
    if mt.passed:
        return CheckResult("unbiased", True, fig, zc, detail)
    rel = float(mt.mean[worst] / K[worst] - 1)
    return CheckResult("unbiased", False, fig, zc, detail,
                       cause=unmatched(f"relative bias {rel:+.2%} at {wname} under Haar-orthogonal draws "
                                       "(unbiased under iid draws: see kernel)"))
