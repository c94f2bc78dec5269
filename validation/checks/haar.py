"""``haar``: (draw) the row directions of the candidate's draws are sign-symmetric in every coordinate.

Haar-orthogonal (and iid Gaussian) rows have ``E[sqrt(d) u_ij] = 0`` with variance 1 for every coordinate, so
``validation.montecarlo.mean_test`` over n draws gives one z-score per (row, coordinate); QR without the
``sign(diag R)`` correction fixes the sign of ``u_00`` and fails. Block orthogonality and the row-norm law
(chi(d) by a KS test, or constant) are reported.
"""

from __future__ import annotations

import math

import numpy as np

from ..montecarlo import mean_test
from .causes import cause, unmatched
from .context import ALPHA, Ctx, mc_z, zcrit
from .report import CheckResult

__all__ = ["run", "candidate_draws", "degenerate"]


def candidate_draws(ctx: Ctx) -> np.ndarray:
    """``(n, d, d)`` square draws of the candidate, seeds ``seed * 1_000_003 + i`` (cached per run)."""
    if "draws" not in ctx.cache:
        d, n = ctx.s.d, ctx.s.n_draws
        W = np.empty((n, d, d))
        for i in range(n):
            W[i] = np.asarray(ctx.call(ctx.seed * 1_000_003 + i, d, d), dtype=np.float64)
        ctx.cache["draws"] = W
    return ctx.cache["draws"]


def degenerate(W: np.ndarray) -> str:
    """Why draws `W` (n, m, d) cannot be tested, in words (all zeros, zero rows, not finite), or ``""``."""
    n = W.shape[0]
    if not np.all(np.isfinite(W)):
        k = int(np.sum(~np.all(np.isfinite(W), axis=(-1, -2))))
        return f"{k} of {n} draws are not finite (NaN or inf entries)"
    zero_draws = int(np.sum(~np.any(W, axis=(-1, -2))))
    if zero_draws:
        return ("the draw is all zeros" if zero_draws == n else f"{zero_draws} of {n} draws are all zeros")
    zero_rows = int(np.sum(~np.any(W, axis=-1)))
    if zero_rows:
        return f"{zero_rows} rows of the {n} draws are all zeros (a row has no direction)"
    return ""


def run(ctx: Ctx) -> CheckResult:
    W = candidate_draws(ctx)                                                              # (n, d, d)
    n, m, d = W.shape
    bad = degenerate(W)
    if bad:
        return CheckResult("haar", False, None, None, f"not measured: {bad}", cause=cause("zero-draw", bad))
    norms = np.linalg.norm(W, axis=-1)                                                    # (n, m)
    U = W / norms[..., None]
    zc = zcrit(m * d)
    mt = mean_test(math.sqrt(d) * U, 0.0, n_se=zc)                                   # z per (row, coordinate)
    zmax = mc_z(mt)
    z = np.abs(mt.mean) / np.where(mt.se > 0, mt.se, np.inf)
    i, j = np.unravel_index(int(np.argmax(z)), z.shape)
    gram = np.abs(U @ np.swapaxes(U, -1, -2) - np.eye(m))                                 # (n, m, m)
    orth = float(np.max(gram))
    kind = "orthogonal blocks" if orth < 1e-4 else f"rows not orthogonal (max |u_i.u_j| {orth:.2f}; iid?)"
    cv = float(np.std(norms) / np.mean(norms))
    if cv < 1e-6:
        law = f"constant row norm {float(np.mean(norms)):.4g} (sqrt(d) = {math.sqrt(d):.4g})"
    else:
        import scipy.stats  # here, not at the top: see context.zcrit
        p = float(scipy.stats.kstest(norms.ravel(), scipy.stats.chi(d).cdf).pvalue)
        law = f"row norms {'consistent with' if p > ALPHA else 'NOT'} chi({d}) (KS p = {p:.2g})"
    if mt.zero_se_count:
        kind += (f"; {mt.zero_se_count} of {m * d} coordinates take the same value in every draw (zero "
                 "variance: compared exactly with 0)")
    ok = zmax <= zc
    sign_fixed = abs(float(np.mean(U[:, i, j]))) > 0.5
    why = cause("non-haar-qr", f"mean u_{i}{j} = {float(np.mean(U[:, i, j])):+.3f} (Haar: 0), "
                               f"z={zmax:.1f}") if (
        sign_fixed or i % d == j) else unmatched(f"row directions not sign-symmetric: mean u_{i}{j} "
                                                 f"{float(np.mean(U[:, i, j])):+.3f}, z={zmax:.1f}")
    return CheckResult("haar", ok, zmax, zc,
                       f"max |z| of mean(sqrt(d) u_ij) over {m}x{d} coordinates (worst ({i}, {j}), mean u_ij "
                       f"{float(np.mean(U[:, i, j])):+.3f}); {n} draws of ({m}, {d}); {kind}; {law}; false "
                       f"alarm {ALPHA:g}", cause=None if ok else why)
