"""``haar``: (draw) the row directions of the candidate's draws are sign-symmetric in every coordinate.

Haar-orthogonal (and iid Gaussian) rows have ``E[sqrt(d) u_ij] = 0`` with variance 1 for every coordinate, so
``validation.montecarlo.mean_test`` over n draws gives one z-score per (row, coordinate); QR without the
``sign(diag R)`` correction fixes the sign of ``u_00`` and fails. Block orthogonality and the row-norm law
(chi(d) by a KS test, or constant) are reported.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.stats

from ..montecarlo import mean_test
from .context import ALPHA, Ctx, mc_z, zcrit
from .report import CheckResult

__all__ = ["run", "candidate_draws"]


def candidate_draws(ctx: Ctx) -> np.ndarray:
    """``(n, d, d)`` square draws of the candidate, seeds ``seed * 1_000_003 + i`` (cached per run)."""
    if "draws" not in ctx.cache:
        d, n = ctx.s.d, ctx.s.n_draws
        W = np.empty((n, d, d))
        for i in range(n):
            W[i] = np.asarray(ctx.call(ctx.seed * 1_000_003 + i, d, d), dtype=np.float64)
        ctx.cache["draws"] = W
    return ctx.cache["draws"]


def run(ctx: Ctx) -> CheckResult:
    W = candidate_draws(ctx)                                                              # (n, d, d)
    n, m, d = W.shape
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
        p = float(scipy.stats.kstest(norms.ravel(), scipy.stats.chi(d).cdf).pvalue)
        law = f"row norms {'consistent with' if p > ALPHA else 'NOT'} chi({d}) (KS p = {p:.2g})"
    return CheckResult("haar", zmax <= zc, zmax, zc,
                       f"max |z| of mean(sqrt(d) u_ij) over {m}x{d} coordinates (worst ({i}, {j}), mean u_ij "
                       f"{float(np.mean(U[:, i, j])):+.3f}); {n} draws of ({m}, {d}); {kind}; {law}; false "
                       f"alarm {ALPHA:g}")
