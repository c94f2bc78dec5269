"""Horn et al. Sec. 2.3: S1 shift invariance, the S2 window trick and its cost (Lemma 1 is in lemma1.py)."""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from refattn.random.performer import draw_gaussian
from refattn.random.positional import init_s1_params
from refattn.rpe import s1_rotation
from refattn.rpe.s1_rotation import S1Params, s1_attention
from refattn.rpe.s2_clipped import s2_attention, s2_attention_naive, s2_class_index, s2_window_sums_reference
from validation.montecarlo import mean_test

from ..figures import new_figure, save_figure
from ..mutations import mutation, patched, scaled, wrapped
from ..registry import HORN, Context, Result, claim, must_fail, stat_evidence
from ..rounding import U, gamma
from ..rules import slip, value, with_rule

# mutations wrap the refattn functions this module uses
_HERE = sys.modules[__name__]

# ------------------------------------------------------------------------------------------------------
# S1 shift invariance with random features


S1_BATCH = 50          # FAVOR draws per Monte Carlo task (fixed by the claim, not by the worker count)


# Rounding bounds (Higham's model, paper_checks.rounding: gamma_k = k u / (1 - k u), u = 2^-53) of the two
# comparisons that are exact in exact arithmetic. First order in u throughout.
#
# exact_s1_change_bound: one exact S1 output, y = softmax(q_aug k_aug^T / sqrt(D)) v, D = d + P. The content
# coordinates are the same floats at both positions. A positional key coordinate sin t or cos t, t = fl(fl(z
# + tau) omega_as), has t off by |t| gamma_2 and the function adds one rounding: off by e_t = T gamma_2 + u
# (T = max |t|, derivative <= 1). A query coordinate alpha sin t - beta cos t (or beta sin + alpha cos) is off
# by (|alpha| + |beta|)(e_t + gamma_2). A score is an inner product of D terms (gamma_{D+2} sum_l |q_l k_l|
# with the scaling) plus the positional coordinates' errors, sum over the 2AS pairs of |dQ| |K| + |Q| |dK| <=
# 4 A_sum (e_t + gamma_2), A_sum = sum_as (|alpha_as| + |beta_as|): Delta <= (gamma_{D+2} M + 4 A_sum (e_t +
# gamma_2)) / sqrt(D), M = max_ij sum_l |q_aug,il| |k_aug,jl|. Scores off by <= Delta move every softmax
# weight by a factor within exp(+-2 Delta); computing the weights adds rho = R gamma_2 + gamma_{L+4} relative
# (the subtraction of the row maximum, R the largest row range of the scores, exp's argument and rounding,
# the row sum, the division; 2 more for a blockwise rescaling), and y = sum_j a_j v_j gamma_L. One output
# is off from the exact one by (expm1(2 Delta) + rho + gamma_L) max|v|; both positions are within it of
# the same exact output, so their difference is within twice that.
def exact_s1_change_bound(q, k, v, positions, p) -> float:
    """Rounding bound of ``|s1_attention(.., positions[0]) - s1_attention(.., positions[1])|`` (exact S1) when
    the two are equal in exact arithmetic (derivation above)."""
    aug = [s1_rotation.s1_augment(q, k, z, p) for z in positions]
    D, L = aug[0][0].shape[-1], q.shape[-2]
    T = max(float(np.max(np.abs(np.asarray(z, float)[:, None, None] * p.freqs))) for z in positions)
    e_t = T * gamma(2) + U
    a_sum = float(np.sum(np.abs(p.alpha) + np.abs(p.beta)))
    M = max(float(np.max(np.abs(qa) @ np.abs(ka).T)) for qa, ka in aug)
    delta = (gamma(D + 2) * M + 4 * a_sum * (e_t + gamma(2))) / math.sqrt(D)
    scores = [qa @ ka.T / math.sqrt(D) for qa, ka in aug]
    R = max(float(np.max(np.ptp(s, axis=-1))) for s in scores)
    rho = R * gamma(2) + gamma(L + 4)
    return 2.0 * (math.expm1(2.0 * delta) + rho + gamma(L)) * float(np.max(np.abs(v)))


# favor_output_rounding_bound: one FAVOR+ output (positive features with per-feature key frames,
# bidirectional) from fixed draws. Every feature is exp(e), e a sum of at most 4 terms (the projection x~
# omega_i, x~ = D^-1/4 x_aug; |x~|^2/2; the key frame, a column maximum; the query row maximum, with
# log(m)/2), each of magnitude <= E = 2 (S + log m), S = max over rows and features of sum_l |x~_l omega_il| +
# |x~|^2/2, and each computed within gamma_{D+2} of its magnitude (D products and sums, the scaling); with the
# 3 additions e is off by <= 4 E gamma_{D+5}, so the feature by r = 4 E gamma_{D+5} + u (relative; exp's
# rounding). The numerator sum_j (phi_q . phi_k,j) v_j and the normaliser sum_j phi_q . phi_k,j sum positive
# products (relative 2 r + u each) over j and the m features in any order: relative 2 r + gamma_{L+m+1} of
# sum_j K_ij |v_j| and of sum_j K_ij. Their ratio y, a convex combination of the rows of v, is off by at most
# (4 r + 2 gamma_{L+m+1} + u) max|v|. A paired difference y0 - y1 of two such outputs (|y| <= max|v|) is off
# by B0 + B1 + u 2 max|v|; a difference of squares y0^2 - y1^2 by sum_b (2 max|v| B_b + B_b^2 + u max|v|^2) +
# u max|v|^2.
def favor_output_rounding_bound(q_aug, k_aug, omega, v) -> float:
    """Rounding bound of one bidirectional positive-feature FAVOR output from fixed `omega` (derivation
    above): ``(4 r + 2 gamma_{L+m+1} + u) max|v|``."""
    D, L, m = q_aug.shape[-1], q_aug.shape[-2], omega.shape[0]
    x = np.concatenate([q_aug, k_aug], axis=-2) * D ** -0.25                      # (2L, D)
    S = float(np.max(np.abs(x) @ np.abs(omega).T + 0.5 * np.sum(x * x, axis=-1, keepdims=True)))
    r = 4.0 * 2.0 * (S + math.log(m)) * gamma(D + 5) + U
    return (4.0 * r + 2.0 * gamma(L + m + 1) + U) * float(np.max(np.abs(v)))


def _paired_bounds(b0, b1, vmax):
    """Rounding bounds of one draw's ``y0 - y1`` and ``y0^2 - y1^2`` (derivation above)."""
    diff = b0 + b1 + 2.0 * U * vmax
    sq = sum(2.0 * vmax * b + b * b + U * vmax ** 2 for b in (b0, b1)) + U * vmax ** 2
    return diff, sq


def _s1_task(task):
    """Paired FAVOR outputs y(pos) - y(pos + tau) and y^2 - y'^2 for one batch of draws (one seed sequence
    per draw), with each draw's rounding bounds of the two (:func:`favor_output_rounding_bound`);
    module-level (picklable), calls ``s1_attention`` through refattn.rpe.s1_rotation."""
    seqs, q, k, v, pos, tau, p, scale = task
    diffs, sq, bounds = [], [], []
    aug = [s1_rotation.s1_augment(q, k, z, p) for z in (pos, pos + tau)]
    vmax = float(np.max(np.abs(v)))
    for seq in seqs:
        omega = draw_gaussian(np.random.default_rng(seq), 16, scale.shape[0]) * scale
        y0 = s1_attention(q, k, v, pos, p, omega=omega)
        y1 = s1_attention(q, k, v, pos + tau, p, omega=omega)
        diffs.append(y0 - y1)
        sq.append(y0 ** 2 - y1 ** 2)
        b0, b1 = (favor_output_rounding_bound(qa, ka, omega, v) for qa, ka in aug)
        bounds.append(_paired_bounds(b0, b1, vmax))
    return np.asarray(diffs), np.asarray(sq), np.asarray(bounds)


def _s1_shift(ctx: Context, anisotropic: bool) -> Result:
    rng = ctx.rng()
    L, d, S = 8, 4, 2
    p0 = init_s1_params(rng, n_axes=1, n_lengthscales=S, base=10.0)
    p = S1Params(p0.freqs, p0.alpha + 0.7 * rng.standard_normal(p0.alpha.shape), p0.beta + 0.7)
    q, k, v = (0.7 * rng.standard_normal((L, d)) for _ in range(3))
    pos, tau, D = np.arange(L), 1.3, d + 2 * S
    exact_change = float(np.max(np.abs(s1_attention(q, k, v, pos + tau, p) - s1_attention(q, k, v, pos, p))))
    exact_bound = exact_s1_change_bound(q, k, v, (pos, pos + tau), p)
    n = ctx.pick(200, 1000)
    scale = np.ones(D)
    if anisotropic:
        scale[d::2], scale[d + 1::2] = 2.0, 0.3
    seqs = ctx.seed_sequences(n)                                  # one per draw; batches of S1_BATCH draws
    out = ctx.map(_s1_task, [(seqs[i:i + S1_BATCH], q, k, v, pos, tau, p, scale)
                             for i in range(0, n, S1_BATCH)])
    diffs = np.concatenate([o[0] for o in out])
    sq = np.concatenate([o[1] for o in out])
    bounds = np.concatenate([o[2] for o in out])                                  # (n, 2) per draw
    # An entry whose n replicates are equal in exact arithmetic (0: the claim) has each within the largest
    # per-draw bound B of it: its SE is at most B / sqrt(n - 1) (values in an interval of width 2B), its mean
    # within B (1 + gamma_n). Entries at or below that SE are compared exactly against that mean bound.
    b_diff, b_sq = float(np.max(bounds[:, 0])), float(np.max(bounds[:, 1]))
    t_mean = mean_test(diffs, 0.0, se_floor=b_diff / math.sqrt(n - 1), atol=b_diff * (1 + gamma(n)))
    t_sq = mean_test(sq, 0.0, se_floor=b_sq / math.sqrt(n - 1), atol=b_sq * (1 + gamma(n)))
    se_m = t_mean.se
    z_mean, z_sq = t_mean.z, t_sq.z
    zero_se_ratio = max(t_mean.zero_se_max_dev / (b_diff * (1 + gamma(n))),
                        t_sq.zero_se_max_dev / (b_sq * (1 + gamma(n))))
    # one draw: an invariant draw's computed change is within its rounding bound; a change past it proves
    # that the draw is not invariant
    single = float(np.max(np.abs(diffs[0])))
    single_bound = float(bounds[0, 0])
    # Bonferroni over the L d_v output entries at family-wise 1e-4
    n_tests = diffs[0].size
    z_crit = 5.0 if n_tests <= 64 else 5.5
    # detectable: the smallest mean change of an output entry that the paired test is sure to see
    ev = {**stat_evidence(n=n, seed=ctx.seed, detectable=float(z_crit * se_m.max())),
          "exact_softmax_max_change": exact_change, "tau": tau, "m": 16,
          "max_z_mean_difference": z_mean, "max_z_second_moment_difference": z_sq, "z_critical": z_crit,
          "exact_softmax_change_rounding_bound": exact_bound,
          "exact_softmax_change_over_rounding_bound": exact_change / exact_bound,
          "single_draw_max_change": single, "single_draw_change_rounding_bound": single_bound,
          "single_draw_change_over_rounding_bound": single / single_bound,
          "paired_rounding_bounds_max (difference, second moment)": [b_diff, b_sq],
          "zero_se_entries": t_mean.zero_se_count + t_sq.zero_se_count,
          "zero_se_dev_over_rounding_bound": zero_se_ratio,
          "anisotropic_draws": anisotropic, "seed": ctx.seed}
    ok = ctx.decide(ev) == "holds"
    return Result(ctx.decide(ev), ev,
                  summary=(f"exact S1: change {exact_change:.0e}; FAVOR: one draw moves by {single:.2e}, the "
                           f"mean and second moment over {n} draws do not (max z {max(z_mean, z_sq):.1f} "
                           f"< {z_crit})") if ok else f"max z {max(z_mean, z_sq):.1f} (critical {z_crit})")


def _decide_s1(ev: dict) -> str:
    zc = value(ev, "z_critical")
    ok = (value(ev, "exact_softmax_change_over_rounding_bound") <= 1.0
          and value(ev, "max_z_mean_difference") < zc and value(ev, "max_z_second_moment_difference") < zc
          and value(ev, "zero_se_dev_over_rounding_bound") <= 1.0
          and value(ev, "single_draw_change_over_rounding_bound") > 1.0)
    return "holds" if ok else "fails"


@claim("horn.s1-shift-invariance", paper=HORN, section="Sec. 2.3, Strategy 1",
       statement="While our construction is invariant to the absolute position in expectation, this might "
                 "entirely not be the case for any set of random features.",
       expected="holds",
       derivation="A shift multiplies both augmented Q and K by one orthogonal R (identity on content, "
                  "rotations on the positional blocks); phi(x R; omega) = phi(x; omega R^T), and omega R^T ~ "
                  "omega for isotropic Gaussian draws. So the output distribution is unchanged (paired tests "
                  "of the mean and of the second moment over draws), while a single draw is not invariant; "
                  "exact softmax S1 is invariant to rounding. Rounding bounds (exact_s1_change_bound, "
                  "favor_output_rounding_bound in this module) decide the exact comparisons.",
       decide=with_rule(_decide_s1,
                        "holds iff exact softmax S1 is shift invariant (change within its rounding bound, "
                        "exact_s1_change_bound), the paired mean and second-moment differences of the FAVOR "
                        "output over draws are within z_critical (5, or 5.5 past 64 entries: Bonferroni) on "
                        "entries whose SE exceeds what rounding alone gives (B / sqrt(n - 1), B the largest "
                        "per-draw bound, favor_output_rounding_bound) and within B (1 + gamma_n) on the "
                        "others, and a single draw is not invariant (its change exceeds its rounding "
                        "bound); fails otherwise."))
def s1_shift(ctx: Context) -> Result:
    return _s1_shift(ctx, False)


@must_fail("horn.s1-shift-invariance")
def s1_shift_wrong(ctx: Context) -> Result:
    """With anisotropic draws (sin coordinates scaled by 2, cos by 0.3) the invariance in distribution
    fails."""
    return _s1_shift(ctx, True)


def _key_positions(factor):
    """s1_augment_fwd (refattn.rpe.s1_rotation, called by s1_attention) rotating the keys by positions x
    factor."""
    def wrap(f):
        def g(q, k, positions, params):
            (q_aug, _), cache = f(q, k, positions, params)
            (_, k_aug), _ = f(q, k, positions * factor, params)
            return (q_aug, k_aug), cache
        return g
    return wrapped(s1_rotation, "s1_augment_fwd", wrap)


mutation("horn.s1-shift-invariance", "key positions x 0.5 (s1_augment_fwd)",
         kind="refattn")(lambda: _key_positions(0.5))
mutation("horn.s1-shift-invariance", "key positions x 2 (s1_augment_fwd)",
         kind="refattn")(lambda: _key_positions(2.0))
mutation("horn.s1-shift-invariance", "keys rotated by -positions (s1_augment_fwd)",
         kind="refattn", bug="sign")(
    lambda: _key_positions(-1.0))


# ------------------------------------------------------------------------------------------------------
# S2: the window formula


def s2_favor_scores(q, w, omega):
    d = q.shape[-1]

    def phi(x):
        u = (x * d ** -0.25) @ omega.T
        return np.exp(u - (x * d ** -0.25) ** 2 @ np.ones(d)[:, None] / 2)

    return phi(q) @ phi(w).T                                                       # (L, R)


# Rounding bounds of the S2 comparisons (Higham's model, paper_checks.rounding; first order in u). Per output
# row i and value column e, with K_ij = S_i,class(i, j) > 0 the score of the pair, the scales are
#   A_ie = sum_j K_ij |v_je| (the naive sum's terms),  T_e = sum_j |v_je|,  Z_i = sum_j K_ij,
#   C_ie = A_ie + 2 sum_f S_if T_e, f over the far classes (w_k; w_-k and w_k for the signed clip).
# Any order of summing N terms is off by <= gamma_{N-1} sum |terms|, and a term computed with relative error
# gamma_a adds a roundings to its chain.
# * naive, sum_j K_ij v_j (one inner product of length L): <= gamma_L A.
# * a window formula, S_if fl(sum_j v_j) + sum_{m in window} (S_ir - S_if) v_m, or the class sums
#   sum_r S_ir V_r with the far V_f = total - window or a prefix-sum difference: the total is off by <=
#   gamma_{L-1} T, the window of N_w cells by gamma_{N_w} of its |terms| (a score difference and a product
#   each, <= (S_ir + S_if) |v_m|), a far class's difference by u (|total| + |window|), and summing the R
#   classes' products adds gamma_R of sum_r S_ir |V_r|. Every term is bounded by C's terms (the far scores
#   weigh the total and the window once each: 2 S_if T), the longest chain is L + N_w + R + 1 roundings:
#   <= gamma_{L + N_w + R + 1} C. Two such sides differ by at most the sum of their bounds.
def s2_scales(S, cls, v, far):
    """``(A, C, Z)`` of the derivation above: ``S (L, R)`` scores, ``cls (L, L)`` class indices, ``v (L, e)``,
    `far` the far classes' columns of S."""
    K = np.take_along_axis(S, cls, axis=1)                                         # (L, L) K_ij = S_i,cls_ij
    A = K @ np.abs(v)                                                              # (L, e)
    T = np.sum(np.abs(v), axis=0)                                                  # (e,)
    C = A + 2.0 * np.sum(S[:, list(far)], axis=1, keepdims=True) * T               # (L, e)
    return A, C, np.sum(K, axis=1, keepdims=True)


def window_formula_bound(S, cls, v, far, n_window):
    """Per entry, the rounding bound of ``|window formula - naive sum|`` (both from the same floats S, v; the
    window of `n_window` cells): ``gamma_{L + n_window + R + 1} C + gamma_L A``."""
    L, R = v.shape[0], S.shape[1]
    A, C, _ = s2_scales(S, cls, v, far)
    return gamma(L + n_window + R + 1) * C + gamma(L) * A


# s2_attention against s2_attention_naive (FAVOR+ scores from fixed omega, 2-D grid, far class k). Each
# computes its own scores, the same formula (pq @ pws^T, in exact arithmetic S_ir c_i for one positive c_i per
# row, which cancels in y):
# * scores: every exp argument is a sum of at most 6 terms (a projection x~ omega_l, x~ = d^-1/4 x; a row or
#   head maximum of such; |x~|^2/2; log(m)/2), each of magnitude <= E = P + N + log m (P = max_l |x~| .
#   |omega_l|, N = max |x~|^2/2, over the rows of q and w) and computed within gamma_{d+2} of it, with 5
#   additions: off by <= 6 E gamma_{d+7} (2 E gamma_{d+3} for 2 terms); exp turns an argument error t into a
#   relative error t + u (its condition is |argument|, here at most the E terms). A score multiplies three
#   such exps (the query feature, the key feature, the head factor: 2 + 2 + 6 terms) with 2 roundings and
#   sums m positive products: relative sigma = 10 E gamma_{d+7} + gamma_{m+4}.
# * a relative perturbation <= sigma of the weights K_ij moves y_i = sum_j K_ij v_j / Z_i by <= sigma sum_j
#   K_ij |v_j - y_i| / Z_i <= 2 sigma A / Z, per side.
# * fast, y = numer / z, numer = sum_r S_ir V_r(i) with V the class sums of [v, 1]: numer off by <= gamma_nf
#   C (above, N_w = 1 + 2k(k-1) cells within distance k - 1, R = k + 1), z exact class counts (sums of ones)
#   times scores, off by gamma_R Z, and the division: <= (gamma_nf C + gamma_{R+1} A) / Z.
# * naive, (K @ v) / sum(K): <= (gamma_L A + gamma_{L-1} A + u A) / Z = gamma_{2L} A / Z.
# Together: |fast - naive| <= (gamma_nf C + (gamma_{R+1} + gamma_{2L} + 4 sigma) A) / Z per entry.
def s2_fast_naive_bound(q, v, w, omega, k, grid):
    """Per entry ``(L, d_v)``, the rounding bound of ``|s2_attention - s2_attention_naive|`` (FAVOR+ scores
    from `omega`, the 2-D `grid`; derivation above)."""
    L, d, m = q.shape[0], q.shape[1], omega.shape[0]
    x = np.concatenate([q, w]) * d ** -0.25
    E = float(np.max(np.abs(x) @ np.abs(omega).T) + np.max(np.sum(x * x, axis=1)) / 2 + math.log(m))
    sigma = 10.0 * E * gamma(d + 7) + gamma(m + 4)
    A, C, Z = s2_scales(s2_favor_scores(q, w, omega), s2_class_index(L, k, grid, xp=np), v, (k,))
    n_fast = L + (1 + 2 * k * (k - 1)) + (k + 1) + 1
    return (gamma(n_fast) * C + (gamma(k + 2) + gamma(2 * L) + 4.0 * sigma) * A) / Z


def _over_bound(a, b, bound):
    """``(max |a - b|, max bound, max_entries |a - b| / bound)``."""
    diff = np.abs(np.asarray(a) - np.asarray(b))
    return float(np.max(diff)), float(np.max(bound)), float(np.max(diff / bound))


def paper_window_formula(S, v, H, W, k, radius):
    """Horn's formula literally: <q'_i, w'_k> sum_j v_j + sum_{m within `radius`} <q'_i, a'_im - w'_k> v_m."""
    L = H * W
    out = np.outer(S[:, k], v.sum(0))                                              # (L, d_v)
    for i in range(L):
        yi, xi = divmod(i, W)
        for dy in range(-radius, radius + 1):
            for dx in range(-(radius - abs(dy)), radius - abs(dy) + 1):
                y, x = yi + dy, xi + dx
                if 0 <= y < H and 0 <= x < W:
                    r = min(abs(dy) + abs(dx), k)
                    out[i] += (S[i, r] - S[i, k]) * v[y * W + x]
    return out


def _s2_formula(ctx: Context, radius_offset: int) -> Result:
    rng = ctx.rng()
    H, W, k, d, d_v, m = 6, 7, 3, 4, 3, 8
    L = H * W
    q, v = rng.standard_normal((L, d)), rng.standard_normal((L, d_v))
    w, omega = rng.standard_normal((k + 1, d)), rng.standard_normal((m, d))
    S = s2_favor_scores(q, w, omega)
    cls = s2_class_index(L, k, (H, W), xp=np)
    naive = np.stack([S[i, cls[i]] for i in range(L)]) @ v                        # sum_j <q'_i, a'_ij> v_j
    radius = k - 1 + radius_offset
    paper = paper_window_formula(S, v, H, W, k, radius)
    paper_diff, paper_bound, paper_ratio = _over_bound(
        paper, naive, window_formula_bound(S, cls, v, (k,), 1 + 2 * radius * (radius + 1)))
    fast = s2_attention(q[None], v[None], w, k=k, grid=(H, W), omega=omega)[0]
    fast_diff, fast_bound, fast_ratio = _over_bound(
        fast, s2_attention_naive(q[None], v[None], w, k=k, grid=(H, W), omega=omega)[0],
        s2_fast_naive_bound(q, v, w, omega, k, (H, W)))
    # the table size: Manhattan distances clipped to k take k + 1 values (0 included: i = j)
    n_classes = len(np.unique(s2_class_index(32 * 32, 6, (32, 32), xp=np)))
    ev = {**stat_evidence(n=L, seed=ctx.seed, detectable=max(paper_bound, fast_bound)), "grid": (H, W),
          "k": k, "m": m,
          "paper_formula_max_abs_diff": paper_diff, "paper_formula_rounding_bound_max": paper_bound,
          "paper_formula_diff_over_rounding_bound": paper_ratio,
          "fast_vs_naive_max_abs_diff": fast_diff, "fast_vs_naive_rounding_bound_max": fast_bound,
          "fast_vs_naive_diff_over_rounding_bound": fast_ratio,
          "window_cells_radius_k_minus_1": 1 + 2 * k * (k - 1),
          "distinct_clipped_distances_32x32_k6": n_classes, "seed": ctx.seed}
    if n_classes == 6 + 1:
        ev["slips"] = [slip("'learn the relative position encodings w_1, w_2, ..., w_k'",
                            "w_0, w_1, ..., w_k",
                            "the Manhattan distance of a pixel to itself is 0 (the sum runs over every "
                            "j, i = "
                            "j included), so distances clipped to k take k + 1 values",
                            {"distinct clipped distances on 32 x 32 at k = 6": n_classes})]
    ok = ctx.decide(ev) == "holds"
    return Result(ctx.decide(ev), ev,
                  summary=(f"window formula = naive sum ({paper_ratio:.2f} rounding bounds), fast path = "
                           f"naive ({fast_ratio:.0e} bounds); notation slip: distances 0..k need k+1 vectors "
                           "w_0..w_k, not w_1..w_k")
                  if ok else f"window formula off by {paper_ratio:.1e} rounding bounds, fast path by "
                             f"{fast_ratio:.1e}")


def _decide_s2(ev: dict) -> str:
    ratio = max(value(ev, "paper_formula_diff_over_rounding_bound"),
                value(ev, "fast_vs_naive_diff_over_rounding_bound"))
    return "holds" if ratio <= 1.0 else "fails"


@claim("horn.s2-fast-equals-naive", paper=HORN, section="Sec. 2.3, Strategy 2 (window formula)",
       statement="sum_j <q'_i, a'_ij> v_j = <q'_i, w'_k> sum_j v_j + sum_m <q'_i, a'_im - w'_k> v_m, where "
                 "the final term sums over all positions m within clipping distance k - 1 from i "
                 "(Manhattan pixel distance).",
       expected="holds",
       derivation="For non-negative clipped distances every pair outside the radius-(k-1) window has a_ij = "
                  "w_k, so adding and subtracting <q'_i, w'_k> v_m inside the window is an identity: exact, "
                  "not statistical (the FAVOR features are fixed). Checked literally on a 6 x 7 grid and "
                  "through refattn's class-sum path; rounding bounds (window_formula_bound, "
                  "s2_fast_naive_bound in this module) decide both comparisons.",
       decide=with_rule(_decide_s2, "holds iff Horn's window formula equals the naive sum "
                                    "(window_formula_bound) and refattn's s2_attention equals "
                                    "s2_attention_naive (s2_fast_naive_bound), each entry within its "
                                    "rounding bound (measured / bound <= 1); fails otherwise."))
def s2_fast(ctx: Context) -> Result:
    return _s2_formula(ctx, 0)


@must_fail("horn.s2-fast-equals-naive")
def s2_fast_wrong(ctx: Context) -> Result:
    """A window of radius k - 2 (one ring short) must fail."""
    return _s2_formula(ctx, -1)


def _grid_transposed():
    return wrapped(_HERE, "s2_class_index",
                   lambda f: (lambda L, k, grid=None, **kw: f(L, k, None if grid is None
                                                              else tuple(grid)[::-1], **kw)))


mutation("horn.s2-fast-equals-naive", "s2_attention x 0.5",
         kind="refattn")(lambda: scaled(_HERE, "s2_attention", 0.5))
mutation("horn.s2-fast-equals-naive", "s2_attention x 2",
         kind="refattn")(lambda: scaled(_HERE, "s2_attention", 2.0))
mutation("horn.s2-fast-equals-naive", "grid (H, W) read as (W, H) (s2_class_index)",
         kind="refattn", bug="transpose")(_grid_transposed)


def _s2_signed(ctx: Context, two_sided: bool) -> Result:
    rng = ctx.rng()
    L, k, d, d_v, m = 20, 3, 4, 3, 8
    q, v = rng.standard_normal((L, d)), rng.standard_normal((L, d_v))
    w, omega = rng.standard_normal((2 * k + 1, d)), rng.standard_normal((m, d))
    # (L, 2k + 1), row r + k = w_r
    S = s2_favor_scores(q, w, omega)
    cls = s2_class_index(L, k, None, xp=np)
    naive = np.stack([S[i, cls[i]] for i in range(L)]) @ v
    printed = np.outer(S[:, 2 * k], v.sum(0))                                      # one baseline w_k
    for i in range(L):
        for j in range(max(0, i - k + 1), min(L, i + k)):
            printed[i] += (S[i, j - i + k] - S[i, 2 * k]) * v[j]
    V = s2_window_sums_reference(v[None], k, None)[0]                                 # (L, 2k + 1, d_v)
    if not two_sided:                                                              # far-left folded into w_k
        V = V.copy()
        V[:, 2 * k] += V[:, 0]
        V[:, 0] = 0
    corrected = np.einsum("ir,ire->ie", S, V)
    # both against the naive sum from the same floats S, v (window_formula_bound): the printed formula's
    # window is the 2k - 1 cells |j - i| < k; the class sums sum no window, the bound's 2k - 1 + 1 counts the
    # fold's one addition; the far classes are w_-k (column 0) and w_k (column 2k)
    far = (0, 2 * k)
    p_diff, p_bound, p_ratio = _over_bound(printed, naive, window_formula_bound(S, cls, v, far, 2 * k - 1))
    c_diff, c_bound, c_ratio = _over_bound(corrected, naive, window_formula_bound(S, cls, v, far, 2 * k))
    err_printed = float(np.max(np.abs(printed - naive)) / np.max(np.abs(naive)))
    ev = {**stat_evidence(n=L, seed=ctx.seed, detectable=max(p_bound, c_bound)), "k": k,
          "printed_formula_rel_err": err_printed, "printed_formula_max_abs_diff": p_diff,
          "printed_formula_rounding_bound_max": p_bound, "printed_formula_diff_over_rounding_bound": p_ratio,
          "two_far_regions_max_abs_diff": c_diff, "two_far_regions_rounding_bound_max": c_bound,
          "two_far_regions_diff_over_rounding_bound": c_ratio, "seed": ctx.seed}
    verdict = ctx.decide(ev)
    if verdict == "erratum":
        return Result("erratum", ev,
                      corrected=("With signed a_ij = w_clip(j - i, k) there are two far regions: sum_j "
                                 "<q'_i, a'_ij> v_j = <q'_i, w'_k> sum_{j >= i+k} v_j + <q'_i, w'_{-k}> "
                                 "sum_{j <= i-k} v_j + sum_{|j - i| < k} <q'_i, a'_ij> v_j (prefix "
                                 "sums; O(L k))."),
                      summary=f"one-baseline formula off by {err_printed:.2f} (relative) for signed "
                              f"distances; two far regions exact ({c_ratio:.2f} rounding bounds)")
    return Result(verdict, ev, summary=f"one-baseline formula off by {p_ratio:.1e} rounding bounds, "
                                       f"two-region formula by {c_ratio:.1e}")


def _decide_signed(ev: dict) -> str:
    if value(ev, "printed_formula_diff_over_rounding_bound") <= 1.0:
        return "holds"
    return "erratum" if value(ev, "two_far_regions_diff_over_rounding_bound") <= 1.0 else "fails"


@claim("horn.s2-signed-clip", paper=HORN, section="Sec. 2.3, Strategy 2 (clip(j - i, k) with the window "
                                                  "formula)",
       statement="a_ij = w_clip(j-i, k), clip(x, k) = max(-k, min(k, x)); 'most a_ij are equal to w_k', so "
                 "sum_j <q'_i, a'_ij> v_j = <q'_i, w'_k> sum_j v_j + sum_m <q'_i, a'_im - w'_k> v_m.",
       expected="erratum",
       derivation="With the signed clip as printed, pairs with j - i <= -k use w_{-k}, not w_k, so the "
                  "one-baseline formula is wrong unless w_{-k} = w_k (refattn.rpe.s2_clipped); the corrected "
                  "form has two far regions, each a prefix sum. Exact, not statistical: rounding bounds "
                  "(window_formula_bound in this module) decide both comparisons.",
       decide=with_rule(_decide_signed, "holds iff the printed one-baseline formula equals the naive "
                                        "signed-clip sum, each entry within its rounding bound "
                                        "(window_formula_bound, measured / bound <= 1); erratum iff it does "
                                        "not and the two-far-region form (refattn's class sums) does; fails "
                                        "otherwise."))
def s2_signed(ctx: Context) -> Result:
    return _s2_signed(ctx, True)


@must_fail("horn.s2-signed-clip")
def s2_signed_wrong(ctx: Context) -> Result:
    """The 'corrected' formula with the far-left region folded into w_k must fail."""
    return _s2_signed(ctx, False)


mutation("horn.s2-signed-clip", "class sums x 0.5 (s2_window_sums_reference)", kind="refattn")(
    lambda: scaled(_HERE, "s2_window_sums_reference", 0.5))
mutation("horn.s2-signed-clip", "clip(i - j) for clip(j - i) (s2_class_index)", kind="refattn", bug="sign")(
    lambda: wrapped(_HERE, "s2_class_index",
                    lambda f: (lambda L, k, grid=None, **kw: 2 * k - f(L, k, grid, **kw))))


# ------------------------------------------------------------------------------------------------------
# complexity


def _best_time(fn, repeats=3):
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _complexity(ctx: Context, swap: bool) -> Result:
    rng = ctx.rng()
    k, d, d_v = 6, 16, 16
    fast_sides = ctx.pick([32, 64, 96], [32, 64, 96, 128], [32, 64, 128, 192])
    naive_sides = ctx.pick([16, 24, 32], [24, 32, 40, 48], [24, 32, 48, 64])
    t_fast, t_naive, Ls, Ls_naive = [], [], [], []
    # the fast path needs larger L to leave its fixed overhead behind
    for s in fast_sides:
        L = s * s
        q, v = rng.standard_normal((2, L, d)), rng.standard_normal((2, L, d_v))
        w = rng.standard_normal((k + 1, d))
        t_fast.append(_best_time(lambda: s2_attention(q, v, w, k=k, grid=(s, s)), repeats=5))  # noqa: B023 (called at once)
        Ls.append(L)
    for s in naive_sides:
        L = s * s
        q, v = rng.standard_normal((2, L, d)), rng.standard_normal((2, L, d_v))
        w = rng.standard_normal((k + 1, d))
        t_naive.append(_best_time(lambda: s2_attention_naive(q, v, w, k=k, grid=(s, s)), repeats=3))  # noqa: B023 (called at once)
        Ls_naive.append(L)
    if swap:
        t_fast, t_naive, Ls, Ls_naive = t_naive, t_fast, Ls_naive, Ls
    slope_fast = float(np.polyfit(np.log(Ls), np.log(t_fast), 1)[0])
    slope_naive = float(np.polyfit(np.log(Ls_naive), np.log(t_naive), 1)[0])
    # same-L speedup at the largest naive size
    s = naive_sides[-1]
    q, v = rng.standard_normal((2, s * s, d)), rng.standard_normal((2, s * s, d_v))
    w = rng.standard_normal((k + 1, d))
    speedup = (_best_time(lambda: s2_attention_naive(q, v, w, k=k, grid=(s, s)), repeats=2)
               / _best_time(lambda: s2_attention(q, v, w, k=k, grid=(s, s)), repeats=3))
    # k-scaling of the fast path at fixed L
    s = fast_sides[-1]
    L = s * s
    q, v = rng.standard_normal((1, L, d)), rng.standard_normal((1, L, d_v))
    ks, t_k = [2, 4, 8], []
    for kk in ks:
        w = rng.standard_normal((kk + 1, d))
        t_k.append(_best_time(lambda: s2_attention(q, v, w, k=kk, grid=(s, s))))  # noqa: B023 (called at once)
    cells = [1 + 2 * kk * (kk - 1) for kk in ks]
    ev = {"L_fast": Ls, "t_fast_s": t_fast, "L_naive": Ls_naive, "t_naive_s": t_naive,
          "slope_fast_in_L": slope_fast,
          "slope_naive_in_L": slope_naive, "k": ks, "window_cells": cells, "t_fast_vs_k_s": t_k,
          "slope_fast_in_k": float(np.polyfit(np.log(ks), np.log(t_k), 1)[0]),
          "criterion": ("fast slope closer to 1 than to 2 (< 1.5) and naive slope closer to 2 (> 1.5); "
                        "timings: min of repeats, same run; memory-bound array code runs out of cache at "
                        "large L, which bends the fast path's line upwards"),
          "speedup_at_L": (naive_sides[-1] ** 2, speedup)}
    figures = []
    path = ctx.figure_path("s2-scaling")
    if path is not None:
        fig, ax = new_figure(figsize=(5, 3.5))
        ax.loglog(Ls, t_fast, "o-", label=f"S2 window trick (slope {slope_fast:.2f})")
        ax.loglog(Ls_naive, t_naive, "s-", label=f"naive quadratic (slope {slope_naive:.2f})")
        ax.set_xlabel("L (2-D grid, k = 6)")
        ax.set_ylabel("seconds")
        ax.legend()
        figures.append(save_figure(fig, path, dpi=100))
    return Result(ctx.decide(ev), ev, figures=figures,
                  summary=f"time ~ L^{slope_fast:.2f} (window trick) vs L^{slope_naive:.2f} (naive); "
                          f"{speedup:.0f}x faster at L = {naive_sides[-1] ** 2}")


def _decide_complexity(ev: dict) -> str:
    return "holds" if value(ev, "slope_fast_in_L") < 1.5 < value(ev, "slope_naive_in_L") else "fails"


@claim("horn.complexity", paper=HORN, section="Sec. 2.3, Strategy 2",
       statement="This allows the attention output to be computed with O(L k^2) cost instead of O(L^2).",
       expected="holds", slow=True,
       derivation="The radius-(k-1) Manhattan window has 1 + 2k(k-1) cells, each a shifted copy of the "
                  "values, plus one total sum: O(L k^2 d_v); the naive sum materialises L^2 kernel entries. "
                  "Measured: log-log slopes of wall time in L (same run, min of repeats); "
                  "timing, not statistical.",
       decide=with_rule(_decide_complexity, "holds iff the log-log slope of the window trick's wall time in "
                                            "L is < 1.5 and the naive path's is > 1.5 (same run, min of "
                                            "repeats); fails otherwise."))
def complexity(ctx: Context) -> Result:
    return _complexity(ctx, False)


@must_fail("horn.complexity")
def complexity_wrong(ctx: Context) -> Result:
    """Swapping the two timings (calling the naive path the fast one) must fail."""
    return _complexity(ctx, True)


mutation("horn.complexity", "fast path replaced by the naive one (s2_attention)", kind="refattn")(
    lambda: patched(_HERE, "s2_attention", s2_attention_naive))
mutation("horn.complexity", "naive path replaced by the fast one (s2_attention_naive)", kind="refattn")(
    lambda: patched(_HERE, "s2_attention_naive", s2_attention))
