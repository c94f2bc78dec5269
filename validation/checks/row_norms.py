r"""``row_norms``: (draw) every row of the candidate's draws has the chi(d) norm of an N(0, I_d) vector.

Why: the positive-feature estimate ``E exp(w.x - |x|^2/2) = 1`` holds for every ``x`` iff the row ``w`` is
N(0, I_d) (its moment generating function is then ``exp(|x|^2 / 2)``), so an unbiased draw needs each row
marginally N(0, I_d) and in particular ``|w| ~ chi(d)``. ``haar`` tests only the sign symmetry of the row
directions and ``unbiased`` the estimate along four directions, whose power is limited by the number of
draws (a row law with exactly N(0, 1) coordinates but non-chi norms -- columns of a row-scaled Haar block --
biases the estimate by about -2 % along all-ones, which 2000 draws do not resolve at the Bonferroni level);
the row-norm law is a sharper test of the same necessary condition.

Statistic: draw ``i`` (seed ``seed * 1_000_003 + i``, the draws ``haar`` uses) contributes the norm of its
row ``i mod m``, so the ``n`` norms are independent (distinct draws) and, under the null, each chi(d): rows
of one draw may be dependent (orthogonal blocks, shared norms) without changing this. The one-sample
Kolmogorov-Smirnov test against chi(d) gives ``p``; the figure is its two-sided normal equivalent
``z = Phi^{-1}(1 - p / 2)`` and the threshold ``zcrit(1)``, so the check fails iff ``p < ALPHA``: false
alarm ``ALPHA`` (the KS p-value is uniform under a continuous null, exact for these ``n``). Where ``p``
underflows (below 1e-300: constant norms, say), the Dvoretzky-Kiefer-Wolfowitz bound ``p <= 2 exp(-2 n D^2)``
(``D`` the KS statistic) gives a finite lower bound of ``z`` instead.
"""

from __future__ import annotations

import math

import numpy as np

from .causes import cause, unmatched
from .context import ALPHA, Ctx, zcrit
from .haar import candidate_draws, degenerate
from .report import CheckResult

__all__ = ["run", "row_norm_z"]


def row_norm_z(W: np.ndarray) -> tuple[float, float, np.ndarray]:
    """``(z, p, norms)`` for draws `W` (n, m, d): KS test of row ``i mod m`` of draw ``i`` against chi(d)."""
    import scipy.special    # here, not at the top: see context.zcrit
    import scipy.stats
    n, m, d = W.shape
    norms = np.linalg.norm(W[np.arange(n), np.arange(n) % m], axis=-1)                 # (n,) independent
    ks = scipy.stats.kstest(norms, scipy.stats.chi(d).cdf)
    p = float(ks.pvalue)
    log_p = math.log(p) if p > 1e-300 else math.log(2.0) - 2.0 * n * float(ks.statistic) ** 2     # DKW bound
    return float(-scipy.special.ndtri_exp(log_p - math.log(2.0))), p, norms


def run(ctx: Ctx) -> CheckResult:
    W = candidate_draws(ctx)
    n, m, d = W.shape
    bad = degenerate(W)
    if bad:
        return CheckResult("row_norms", False, None, None, f"not measured: {bad}",
                           cause=cause("zero-draw", bad))
    z, p, norms = row_norm_z(W)
    zc = zcrit(1)
    sq = norms * norms
    bound = " (DKW bound)" if p <= 1e-300 else ""
    detail = (f"KS test of the norm of row i mod {m} of draw i against chi({d}), {n} independent norms: "
              f"p = {p:.2g}{bound} (z = {z:.3g}); mean |w|^2 {float(sq.mean()):.3g} (chi: {d}), var |w|^2 "
              f"{float(sq.var(ddof=1)):.3g} (chi: {2 * d}); false alarm {ALPHA:g}")
    ok = z <= zc
    return CheckResult("row_norms", ok, z, zc, detail,
                       cause=None if ok else unmatched(f"row norms not chi({d}) (KS p = {p:.2g}): rows not "
                                                       "N(0, I), the positive estimate is biased along some "
                                                       "direction"))
