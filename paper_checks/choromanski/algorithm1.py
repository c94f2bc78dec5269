"""FLT (Choromanski et al.) Sec. 4.1: Eq. (3) and Algorithm 1 (RPE-enhanced linear attention through refattn's
public ``flt_attention``), and the complexity statement after Eq. (3)."""

from __future__ import annotations

import math
import sys

import numpy as np

from refattn import softmax_attention
from refattn.random import draw_flt_noise, draw_orthogonal
from refattn.rpe import GaussianMixture, Proposal, flt_attention, flt_features, rpe_mask
from refattn.rpe import flt_linear as flt_module
from validation.montecarlo import mean_test, mean_z2_test, scalar_z

from ..figures import new_figure, save_figure
from ..mutations import mutation, scaled, wrapped
from ..registry import CHOROMANSKI, Context, Result, claim, must_fail, stat_evidence
from ..rules import value, with_rule
from ..rounding import gamma, mean_of_equal_replicates
from ._common import N_SE, SE_FLOOR, A

LADDER = ((2, 16), (8, 64), (32, 256), (128, 1024))   # (r, m): r = m / 8
BATCH = 16                                            # replicates per Monte Carlo task (fixed by the claim)
CHUNK = 8              # causal chunk of flt_attention: L = 28 is 3 full chunks and a partial one (the prefix
L_SEQ = 28             # state must be carried across chunk boundaries, including into a ragged last chunk)
ORTHO_Z = "orthogonal features at the smallest m: unnormalised exp(Q_hat K_hat^T), max |z|"
_HERE = sys.modules[__name__]    # mutations wrap the refattn functions this module looks up


def _alg1_task(task):
    """One batch of Algorithm 1 outputs at one (r, m), bidirectional and causal with the same draws:
    (BATCH, 2, ..., L, d_v). Module-level (picklable); calls ``flt_attention`` through this module's namespace
    (a power mutation wraps it here)."""
    seq, r, m, q, k, v, pos, spec, prop = task
    g = np.random.default_rng(seq)
    d = q.shape[-1]
    out = []
    for _ in range(BATCH):
        eps, omega = draw_flt_noise(g, r, 1), draw_orthogonal(g, m, 2 * r + d)
        out.append([np.asarray(flt_attention(q, k, v, pos, eps, spec, prop, omega, causal=c,
                                             chunk_size=CHUNK)) for c in (False, True)])
    return np.asarray(out)


def _alg1(ctx: Context, mask_sign: float = 1.0):
    """Eq. (3) identity on one draw (exact), then Algorithm 1's output against the RPE-masked softmax
    attention (mask ``mask_sign * N``: -1 for the companion) along LADDER in both modes: the mean error over
    replicates at the top rung (z per entry with positive SE; zero-SE entries such as causal position 0
    compared exactly) and the MSE per rung."""
    rng = ctx.rng()
    L, d = L_SEQ, 8
    q, k, v = (rng.standard_normal((2, L, d)) * 0.3 for _ in range(3))
    pos = np.arange(L, dtype=np.float64)[:, None]
    spec = GaussianMixture(A([4.0]), A([[0.0]]), A([0.05]))          # N up to 0.5: FAVOR+ near its 1/m regime
    prop = Proposal("gaussian", A([0.0]), A(0.06))
    N = mask_sign * np.asarray(rpe_mask(pos, spec))
    N1, N2 = (np.asarray(x) for x in flt_features(pos, draw_flt_noise(ctx.rng(1), 16, 1), spec, prop))
    Qh = np.concatenate([N1, q[0] * d ** -0.25], -1)                               # (L, 2r + d)
    Kh = np.concatenate([N2, k[0] * d ** -0.25], -1)
    ident = float(np.max(np.abs(Qh @ Kh.T - (N1 @ N2.T + q[0] @ k[0].T / math.sqrt(d)))))
    # both sides are inner products of length K = 2r + d of the same exact terms: each is off by at most
    # gamma_K sum_c |Qh_ic Kh_jc| (sequential sum), the scalings d^{-1/4} twice against 1/sqrt(d) once and the
    # final addition add 4 roundings, so |difference| <= 2 gamma_{K + 4} max_ij sum_c |Qh_ic| |Kh_jc|
    ident_bound = 2 * gamma(Qh.shape[-1] + 4) * float(np.max(np.abs(Qh) @ np.abs(Kh).T))
    n = ctx.pick(64, 64, 256)              # tiny keeps the power against mask x 0.9
    r0, m0 = LADDER[0]                     # the smallest rung: 2 r0 + d = 12 < m0 = 16
    N1s, N2s = (np.asarray(x) for x in flt_features(pos, draw_flt_noise(ctx.rng(3), r0, 1), spec, prop))
    ortho = _orthogonal_unbiased(ctx, np.concatenate([N1s, q[0] * d ** -0.25], -1),
                                 np.concatenate([N2s, k[0] * d ** -0.25], -1), m0,
                                 ctx.pick(2000, 4000, 16000))
    ev = {"identity_max_err": ident, "identity_rounding_bound": ident_bound,
          "ladder (r, m)": [list(x) for x in LADDER],
          ORTHO_Z: ortho.z,
          "orthogonal features at the smallest m: draws, detectable": [ortho.n, ortho.detectable]}
    ys = []
    for i, (r, m) in enumerate(LADDER):
        seqs = ctx.seed_sequences(n // BATCH, i)
        ys.append(np.concatenate(ctx.map(_alg1_task, [(s, r, m, q, k, v, pos, spec, prop) for s in seqs])))
    z2, zero_dev, steps_min, total, curves, det = [], [], [], [], {}, []
    # zero-SE entries (causal position 0, one key): FAVOR's y_0 = (sum_f a_f v_0) / (sum_f a_f) with the same
    # positive products a_f in both sums, so each replicate is v_0 (1 + d), |d| <= gamma_{2m + 4} (two sums
    # of m positive terms, the products with v, the division); softmax over one key is v_0 exactly
    zero_bound = mean_of_equal_replicates(n, 2 * LADDER[-1][1] + 4, float(np.max(np.abs(v))))
    for c, causal in enumerate((False, True)):
        mode = "causal" if causal else "bidirectional"
        target = softmax_attention(q, k, v, mask_add=N, causal=causal)
        mse, se = [], []
        for y in ys:
            err = y[:, c] - target                                                 # (n, 2, L, d_v)
            mu, s, _ = scalar_z(np.mean(err.reshape(n, -1) ** 2, axis=1), 0.0)    # per-replicate MSE
            mse.append(mu)
            se.append(s)
        t = mean_z2_test(err, 0.0, n_sd=N_SE, atol=zero_bound, se_floor=SE_FLOOR)  # top rung, every entry
        steps = [(a - b) / math.hypot(sa, sb) for a, b, sa, sb in zip(mse, mse[1:], se, se[1:], strict=False)]
        z2.append((t.mean_z2 - t.null_mean) / t.null_sd)
        zero_dev.append(t.zero_se_max_dev)
        steps_min.append(min(steps))
        total.append((mse[0] - mse[-1]) / math.hypot(se[0], se[-1]))
        det.append(math.sqrt(t.threshold - t.null_mean) * float(np.sqrt(np.mean(err.var(0, ddof=1) / n))))
        ev[f"{mode}: top rung mean z^2"] = round(t.mean_z2, 3)
        ev[f"{mode}: positive-SE entries"] = t.n_positive_se
        ev[f"{mode}: its null mean, null sd (entry correlations), threshold"] = [
            round(t.null_mean, 3), round(t.null_sd, 3), round(t.threshold, 3)]
        ev[f"{mode}: zero-SE entries (compared exactly)"] = [t.zero_se_count, t.zero_se_max_dev]
        ev[f"{mode}: MSE per rung"] = mse
        ev[f"{mode}: SE per rung"] = se
        ev[f"{mode}: step decrease / combined SE"] = [round(z, 1) for z in steps]
        ev[f"{mode}: m * MSE"] = [round(m * e, 4) for (_, m), e in zip(LADDER, mse, strict=True)]
        curves[mode] = (mse, se)
    # detectable: a bias common to every output entry of sqrt(threshold - null mean) rms-SE lifts mean z^2 to
    # the threshold (a bias of b SE adds b^2)
    ev.update(stat_evidence(n=n, seed=ctx.seed, detectable=max(det), n_se=N_SE),
              top_mean_z2_excess_null_sd=max(z2), zero_se_max_dev=max(zero_dev),
              zero_se_rounding_bound=zero_bound, min_step_z=min(steps_min), min_total_decrease_z=min(total))
    return ev, curves


def _orthogonal_unbiased(ctx: Context, Qh, Kh, m, n):
    """Two-sided mean test of the unnormalised positive-feature estimate phi(Q_hat) phi(K_hat)^T over `n`
    draws of refattn's orthogonal frequencies at `m` features (m = 16 > 2r + d = 12: one full orthogonal
    block and a partial one, where the coupling between rows is strongest), against exp(Q_hat K_hat^T). The
    map phi(x) = exp(omega x - |x|^2/2)/sqrt(m) is written here; each row of omega is marginally N(0, I)
    only with chi-distributed norms, so the estimate is unbiased at every m -- and a wrong norm law is biased
    most where one block holds all the features."""
    g = ctx.rng(2)
    # rows scaled to unit norm: the estimate stays unbiased, its lognormal tail stays light enough for a z
    # test, and a wrong norm law (bias ~ |x|^4 E|w|^4) is many SE wide (z ~ 15 at n = 2000)
    Qh = Qh[:8] / np.linalg.norm(Qh[:8], axis=-1, keepdims=True)
    Kh = Kh[:8] / np.linalg.norm(Kh[:8], axis=-1, keepdims=True)
    hq, hk = 0.5 * np.sum(Qh ** 2, -1), 0.5 * np.sum(Kh ** 2, -1)
    est = []
    for _ in range(n):
        W = np.asarray(draw_orthogonal(g, m, Qh.shape[-1]))                          # (m, 2r + d)
        pq, pk = np.exp(Qh @ W.T - hq[:, None]), np.exp(Kh @ W.T - hk[:, None])     # (L, m)
        est.append(pq @ pk.T / m)                                                    # (8, 8)
    return mean_test(np.asarray(est), np.exp(Qh @ Kh.T), n_se=N_SE)


def _decide_alg1(ev: dict) -> str:
    ok = (value(ev, "identity_max_err") <= value(ev, "identity_rounding_bound")
          and value(ev, ORTHO_Z) < N_SE
          and value(ev, "top_mean_z2_excess_null_sd") <= N_SE
          and value(ev, "zero_se_max_dev") <= value(ev, "zero_se_rounding_bound")
          and value(ev, "min_step_z") > 0
          and value(ev, "min_total_decrease_z") > N_SE)
    return "holds" if ok else "fails"


@claim("flt.alg1-favor", paper=CHOROMANSKI, section="Eq. (3), Algorithm 1",
       statement="exp(N_hat + QK^T/sqrt d) = exp(Q_hat K_hat^T) with Q_hat = [N1, Q d^{-1/4}], K_hat = [N2, "
                 "K d^{-1/4}]; Performerising it gives RPE-enhanced linear attention.",
       expected="holds",
       derivation="The concatenated inner product is N1_i.N2_j + q_i.k_j/sqrt d (exact). FAVOR+ on it is "
                  "unbiased for exp(N_hat + ...) but exp(N_hat) is biased for exp(N) at finite r, and the "
                  "normalised output is a ratio estimator, so the attention estimate is consistent: the bias "
                  "is O(1/m) with r = m/8, below the replicate SE at the top rung (r, m) = (128, 1024), and "
                  "the MSE falls like 1/m. A wrong target (mask x 0.9, x 0.5, positions x 0.5) leaves a bias "
                  "many SE wide there.",
       decide=with_rule(_decide_alg1,
                        "holds iff the Eq. (3) identity is exact up to its rounding bound "
                        "(2 gamma_{2r + d + 4} max_ij sum_c |Qh_ic Kh_jc|, paper_checks.rounding); the "
                        "unnormalised estimate with refattn's orthogonal frequencies at the smallest m (16) "
                        f"is unbiased for exp(Q_hat K_hat^T) (two-sided, max |z| < {N_SE:g}); at the top "
                        "rung (128, 1024) in both modes the mean z^2 of the per-entry mean error "
                        f"(positive-SE entries) exceeds its null mean by <= {N_SE:g} null SD (from the "
                        "entries' correlations) and zero-SE entries equal the target within their rounding "
                        "bound (gamma_{n + 2m + 4} max|v|); and the MSE falls along the ladder (every step "
                        f"lowers it, first to last by > {N_SE:g} combined SE); fails otherwise."))
def alg1(ctx: Context) -> Result:
    ev, curves = _alg1(ctx)
    figs = []
    path = ctx.figure_path("convergence")
    if path is not None:
        ms = np.array([m for _, m in LADDER], dtype=float)
        fig, ax = new_figure(figsize=(5, 3.5))
        for mode, (mse, se) in curves.items():
            rm = np.sqrt(mse)
            ax.errorbar(ms, rm, yerr=N_SE * np.asarray(se) / (2 * rm), fmt="o-", label=f"{mode} RMS error")
        ax.plot(ms, np.sqrt(curves["bidirectional"][0][0]) * (ms / ms[0]) ** -0.5, "k--", label="m^{-1/2} "
                                                                                                "reference")
        ax.set(xscale="log", yscale="log", xlabel="m (random features), r = m/8 (RPE features)",
               ylabel="RMS error vs masked softmax")
        ax.legend(fontsize=7)
        figs.append(save_figure(fig, path, dpi=110))
    mse = ev["bidirectional: MSE per rung"]
    return Result(ctx.decide(ev), ev, figures=figs,
                  summary="converges to the masked softmax: at (r, m) = (128, 1024) mean z^2 of the mean "
                          f"error {ev['bidirectional: top rung mean z^2']:.2f} / "
                          f"{ev['causal: top rung mean z^2']:.2f} (bidir./causal; "
                          f"{ev['top_mean_z2_excess_null_sd']:.1f} null SD above 1, limit {N_SE:g}; zero-SE "
                          f"entries exact to {ev['zero_se_max_dev']:.0e}); MSE {mse[0]:.1e} -> "
                          f"{mse[-1]:.1e}, every step lower (by >= {ev['min_step_z']:.0f} SE); Eq. (3) "
                          f"identity exact ({ev['identity_max_err']:.0e})")


@must_fail("flt.alg1-favor")
def alg1_wrong(ctx: Context) -> Result:
    """Against the attention with the mask's sign flipped (exp(-N + ...)) the mean error stays many SE
    wide."""
    ev, _ = _alg1(ctx, mask_sign=-1.0)
    return Result(ctx.decide(ev), ev, summary="target with mask -N: mean z^2 "
                                              f"{ev['top_mean_z2_excess_null_sd']:.0f} null SD above 1")


def _scaled_positions(factor):
    return wrapped(_HERE, "flt_attention",
                   lambda f: (lambda q, k, v, pos, *a, **kw: f(q, k, v, pos * factor, *a, **kw)))


for _f in (0.5, 0.9, 2.0):
    mutation("flt.alg1-favor", f"target mask x {_f:g}", kind="refattn")(
        lambda f=_f: scaled(_HERE, "rpe_mask", f))
mutation("flt.alg1-favor", "positions x 0.5 (flt_attention)", kind="refattn")(lambda: _scaled_positions(0.5))


@mutation("flt.alg1-favor", "orthogonal rows of norm sqrt(d) instead of chi(d) (draw_orthogonal)",
          kind="refattn",
          bug="normalisation")
def _fixed_norms():
    return wrapped(_HERE, "draw_orthogonal", lambda f: (lambda g, m, d, **kw: f(g, m, d, norms="sqrt_d")))


@mutation("flt.alg1-favor", "causal prefix state not carried across chunks (linear attention restarts per "
                            "chunk)",
          kind="refattn", bug="state-not-carried")
def _state_not_carried():
    """refattn's linear-attention core (as flt_attention calls it) run chunk by chunk with a fresh prefix
    state: what a causal scan that drops its carried state computes."""
    def wrap(f):
        def g(phi_q, phi_k, v, causal, s, chunk_size, *a, **kw):
            if not causal:
                return f(phi_q, phi_k, v, causal, s, chunk_size, *a, **kw)
            L = phi_q.shape[-2]
            ys = []
            for c0 in range(0, L, chunk_size):
                sl = slice(c0, c0 + chunk_size)
                s_c = None if s is None else (s[..., sl, :] if s.ndim == phi_k.ndim else s[..., sl])
                ys.append(f(phi_q[..., sl, :], phi_k[..., sl, :], v[..., sl, :], causal, s_c, chunk_size,
                            *a, **kw)[0])
            return np.concatenate(ys, axis=-2), None
        return g
    return wrapped(flt_module, "linear_attention_fwd_core", wrap)
mutation("flt.alg1-favor", "positions x 2 pi (flt_attention)",
         kind="refattn", bug="normalisation")(lambda: _scaled_positions(2 * math.pi))


# ------------------------------------------------------------------------------------------------------
# complexity


def _complexity(ctx: Context, columns):
    """Column count of refattn's Q_hat = [N1, Q d^{-1/4}] (from ``flt_features``) against `columns(r, d, m)`
    and against the printed width m + r."""
    spec = GaussianMixture(A([1.0]), A([[0.0]]), A([0.3]))
    prop = Proposal("gaussian", A([0.0]), A(0.5))
    L, d, m = 32, 8, 16
    counts, dev_formula, dev_printed = {}, 0, math.inf
    for r in (4, 16):
        pos = np.arange(L, dtype=np.float64)[:, None]
        N1, _ = flt_features(pos, draw_flt_noise(ctx.rng(r), r, 1), spec, prop)
        width = int(N1.shape[1]) + d
        counts[f"r={r}"] = {"Q_hat columns": width, "formula": columns(r, d, m),
                            "projection MACs L*m*(2r+d)": L * m * width, "printed L(m+r)d": L * (m + r) * d,
                            "printed width m + r": m + r}
        dev_formula = max(dev_formula, abs(width - columns(r, d, m)))
        dev_printed = min(dev_printed, abs(width - (m + r)))
    return {**stat_evidence(n=2, seed=ctx.seed, detectable=1), **counts,
            "max |columns - formula|": dev_formula, "min |columns - printed m + r|": dev_printed}


def _decide_complexity(ev: dict) -> str:
    if value(ev, "min |columns - printed m + r|") == 0:
        return "holds"
    return "erratum" if value(ev, "max |columns - formula|") == 0 else "fails"


@claim("flt.complexity", paper=CHOROMANSKI, section="Sec. 4.1 (after Eq. 3), Sec. 5.1",
       statement="Q_hat, K_hat in R^{L x (m + r)}; time O(L(m + r)d), space O(L(m + r) + (m + r)d + Ld).",
       expected="erratum",
       derivation="Q_hat = [N1, Q d^{-1/4}] has r + d columns (2r + d in the real form), not m + r. "
                  "phi(Q_hat) costs an (L x (d + 2r)) by ((d + 2r) x m) product, O(L m (d + r)), attention "
                  "O(L m d), N1 O(L r l): total O(L m (d + r) + L r l); omega is m x (d + 2r). Printed O(L(m "
                  "+ r)d) has L r d instead of L m r. Checked: the column count of refattn's Q_hat against "
                  "2r + d (exact integers).",
       decide=with_rule(_decide_complexity,
                        "holds iff refattn's Q_hat has the printed m + r columns; erratum iff it does not "
                        "and has the "
                        "corrected 2r + d (real form) for every r; fails otherwise (exact integers)."))
def complexity(ctx: Context) -> Result:
    ev = _complexity(ctx, lambda r, d, m: 2 * r + d)
    return Result(ctx.decide(ev), ev,
                  corrected="Q_hat, K_hat in R^{L x (r + d)} (complex) / R^{L x (2r + d)} (real); time O(L m "
                            "(d + r) + "
                            "L r l); space O(L(m + d + r) + m(d + r))",
                  summary="Q_hat has r + d (2r + d real) columns; time O(L m (d + r)), not O(L (m + r) d)")


@must_fail("flt.complexity")
def complexity_wrong(ctx: Context) -> Result:
    """The complex column count r + d applied to refattn's real form must fail."""
    ev = _complexity(ctx, lambda r, d, m: r + d)
    return Result(ctx.decide(ev), ev, summary="r + d columns for the real form")


@mutation("flt.complexity", "N1 with only the cosine half (complex count r + d)", kind="refattn", bug="index")
def _cos_half():
    return wrapped(_HERE, "flt_features",
                   lambda f: (lambda *a, **kw: tuple(x[:, : x.shape[1] // 2] for x in f(*a, **kw))))


@mutation("flt.complexity", "N1 duplicated (4r + d columns)", kind="refattn")
def _doubled():
    return wrapped(_HERE, "flt_features",
                   lambda f: (lambda *a, **kw: tuple(np.concatenate([x, x], 1) for x in f(*a, **kw))))

