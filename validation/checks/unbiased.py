"""``unbiased``: the estimate is unbiased along a coordinate axis, the all-ones direction and two random ones.

draw: over many of the candidate's own draws, refattn's positive-feature estimate of ``exp(q.k)`` is unbiased
(design.md trap 2: non-Haar orthogonal draws bias it, direction-dependently); features: the candidate's
estimate of its kernel is unbiased along those directions under Haar-orthogonal draws. z-scores by
``validation.montecarlo.mean_test`` (standard error from the replicates), Bonferroni critical z.
"""

from __future__ import annotations

import numpy as np

from refattn.features import positive_features
from refattn.random import draw_orthogonal

from ..montecarlo import mean_test
from .context import ALPHA, Ctx, feature_estimates, kernel_points, mc_z, zcrit
from .favor import FEATURE_FAMILIES, KERNELS
from .haar import candidate_draws
from .report import CheckResult

__all__ = ["run"]


def run(ctx: Ctx) -> CheckResult:
    return _draw(ctx) if ctx.kind == "draw" else _features(ctx)


def _draw(ctx: Ctx) -> CheckResult:
    W = candidate_draws(ctx)
    n, m, d = W.shape
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
    return CheckResult("unbiased", zs[worst] <= zc, zs[worst], zc,
                       "refattn positive_features on the candidate's draws, estimate of exp(|x|^2) at |x| = "
                       f"{r}: {listing}; {n} draws of ({m}, {d}); false alarm {ALPHA:g}")


def _features(ctx: Ctx) -> CheckResult:
    kern = ctx.cache.get("kernel") or (FEATURE_FAMILIES[ctx.family][2] if ctx.family else None)
    if kern is None:
        return CheckResult("unbiased", False, float("inf"), None, "no kernel identified by the kernel check")
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
    mt = mean_test(est[:, I, J], K, n_se=zc, atol=100 * float(np.finfo(dt).eps) * float(np.max(np.abs(K))))
    z = np.abs(mt.mean - K) / np.where(mt.se > 0, mt.se, np.inf)
    names = list(pts)
    worst = int(np.argmax(z))
    wname = f"{names[worst % P]} ({'q = k' if worst < P else 'k = -q/2'})"
    fig = mc_z(mt)
    return CheckResult("unbiased", fig <= zc, fig, zc,
                       f"estimate of {kern} [{KERNELS[kern][0]}] under Haar-orthogonal draws (refattn "
                       f"draw_orthogonal, m = {ctx.s.m_kernel}), |q| = {r} along e1, all-ones, 2 random "
                       f"directions, k = q and k = -q/2; worst {wname}; {ctx.s.n_kernel} draws; false alarm "
                       f"{ALPHA:g}")
