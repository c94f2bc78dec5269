"""The analytic claims' rounding bounds (paper_checks.rounding): they cover the rounding they bound, a bound
without its summation term would not, and a realistic bug still flips every claim that uses them.

The plants are bugs whose effect on the exactly compared entries is far above the bounds but, for two of
them, far below the Monte Carlo tests' reach: only the rounding comparison can catch them, so a bound made
loose enough to hide them would show here.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from paper_checks import Context, load_all
from paper_checks.mutations import patched, wrapped
from paper_checks.rounding import U, gamma, log_density_bound, mean_of_equal_replicates, weight_depth
from paper_checks.runner import run_check
from refattn.random import draw_flt_noise
from refattn.rpe import CauchyKernel, GaussianKernel, LaplaceKernel, flt_importance_weights, kernel_proposal

from . import baseline

REGISTRY = load_all()


def test_gamma():
    assert gamma(0) == 0.0
    assert gamma(3) == pytest.approx(3 * U, rel=1e-15)
    assert gamma(2) + gamma(5) <= gamma(7)
    with pytest.raises(ValueError, match="k u < 1"):
        gamma(2.0 ** 53)


def test_mean_bound_needs_the_summation_term():
    """The mean over axis 0 of 20000 replicates equal in exact arithmetic (the size of flt.lemmaA2's mean
    test): its error is within gamma_{n + depth} scale, and far above what a bound of the replicates' own
    rounding alone (no gamma_n) allows."""
    x = np.full((20000, 4), 1.2) * (1 + np.linspace(-4, 4, 20000)[:, None] * U)   # x_b = 1.2 (1 + d_b)
    dev = float(np.max(np.abs(x.mean(axis=0) - 1.2)))
    assert dev <= mean_of_equal_replicates(20000, 4, 1.2)
    assert dev > gamma(8) * 1.2, f"{dev:.2e}: the planted per-replicate bound would have held"


def test_log_density_bound_covers_each_kind():
    from refattn.rpe import proposal_log_density

    rng = np.random.default_rng(0)
    for kind in ("gaussian", "laplace", "cauchy", "mv_cauchy", "uniform"):
        for D in (1, 2, 3):
            eps = draw_flt_noise(rng, 2000, D, kind)
            E = log_density_bound(eps, kind)
            lp = np.asarray(proposal_log_density(kind, eps))
            assert float(np.max(np.abs(lp))) <= E, (kind, D)
            assert E <= float(np.max(np.abs(lp))) + 2 * D + 3, (kind, D)     # the bound is not vacuous


@pytest.mark.parametrize("kernel", [GaussianKernel, LaplaceKernel, CauchyKernel])
@pytest.mark.parametrize("D", [1, 2, 3])
def test_weight_depth_covers_refattn_weights(kernel, D):
    """Under a kernel's own density every importance weight is C in exact arithmetic; refattn's computed
    weights stay within gamma_{weight_depth(E)} relative (E from the draws), heavy tails included, and beyond
    a bound that leaves the exponents' magnitude out (planted: gamma_7, the operation count alone)."""
    spec = kernel(np.asarray(1.3), np.asarray(0.6))
    prop = kernel_proposal(spec, D)
    eps = draw_flt_noise(np.random.default_rng(D), 20000, D, prop.kind)
    w = np.asarray(flt_importance_weights(eps, spec, prop)[0])
    rel = float(np.max(np.abs(w - 1.3))) / 1.3
    assert rel <= gamma(weight_depth(log_density_bound(eps, prop.kind)) + 1)
    assert rel > gamma(7), f"{rel:.2e}: the planted bound without the condition would have held"


# ---- planted realistic bugs: each claim whose rule compares against a rounding bound flips ----------------
def _module(cid):
    return sys.modules[REGISTRY[cid].check.__module__]


def _normaliser_off_by_one(cid):
    """flt_features normalised by R - 1 draws for R (the block estimates' diagonal becomes C R / (R - 1):
    every replicate equal, so only the zero-SE comparison sees it; the bias, 1/R, is far below the SE)."""
    def wrap(f):
        def g(pos, eps, *a, **k):
            R = np.asarray(eps).shape[0]
            return tuple(np.asarray(x) * np.sqrt(R / (R - 1)) for x in f(pos, eps, *a, **k))
        return g
    return wrapped(_module(cid), "flt_features", wrap)


def _jacobian_exponent_off_by_one(cid):
    """flt_importance_weights with the proposal's Jacobian prod_j scale_j over D - 1 axes for D: the weights
    times one scale (under the kernel's own density the zero-SE mean at z = 0 is then s C, not C)."""
    def wrap(f):
        def g(eps, spec, prop, *a, **k):
            w = f(eps, spec, prop, *a, **k)
            return (w[0] * float(np.asarray(prop.scale).ravel()[0]), *w[1:])
        return g
    return wrapped(_module(cid), "flt_importance_weights", wrap)


def _causal_write_off_by_one(cid):
    """flt_attention's causal output written one position late (y_i <- y_{i-1}, y_0 = 0): position 0, the
    zero-SE entries, is then off by v_0."""
    def wrap(f):
        def g(*a, causal=False, **k):
            y = np.asarray(f(*a, causal=causal, **k))
            if not causal:
                return y
            out = np.zeros_like(y)
            out[..., 1:, :] = y[..., :-1, :]
            return out
        return g
    return wrapped(_module(cid), "flt_attention", wrap)


def _converse_sign(cid):
    """The four-term decomposition with (b + c)/2 for (b - c)/2 on the difference term (a sign slip)."""
    mod = _module(cid)
    orig = mod.four_terms

    def four_terms(M, omega, z, zp, with_sum_terms=True):
        a, b, c, d = np.asarray(M).ravel()
        return orig(M, omega, z, zp, with_sum_terms) + c * np.sin(omega * (z - zp))
    return patched(mod, "four_terms", four_terms)


PLANTS = [
    ("flt.shift-invariant-kernels", _normaliser_off_by_one),
    ("flt.thm4.1-unbiased", _normaliser_off_by_one),
    ("flt.lemmaA2-variance", _jacobian_exponent_off_by_one),
    ("flt.thmA3-variance-bound", _jacobian_exponent_off_by_one),
    ("flt.alg1-favor", _causal_write_off_by_one),
    ("horn.lemma1-converse", _converse_sign),
    ("horn.s1-shift-invariance", lambda cid: _key_sin_cos_swapped(cid)),
]


@pytest.mark.parametrize(("cid", "plant"), PLANTS, ids=[c for c, _ in PLANTS])
def test_a_planted_realistic_bug_flips_the_claim(cid, plant):
    claim = REGISTRY[cid]
    base = baseline.tiny(cid)
    with plant(cid):
        bad = run_check(claim, Context(seed=0, size="tiny", claim_id=cid))
    assert base.verdict == claim.expected_at("tiny")
    assert bad.verdict != base.verdict, (cid, bad.verdict, bad.summary)


def test_the_off_by_one_normaliser_hides_from_the_z_test():
    """The plant of the block estimates moves only the exactly compared diagonal: with the z statistics
    alone (the zero-SE entries ignored) flt.shift-invariant-kernels would still hold."""
    cid = "flt.shift-invariant-kernels"
    with _normaliser_off_by_one(cid):
        res = run_check(REGISTRY[cid], Context(seed=0, size="tiny", claim_id=cid))
    ev = res.evidence
    assert ev["z_kernel"] < 5.0 and ev["zero_se_dev_over_rounding_bound"] > 1e6, ev


# ---- horn.s1-shift-invariance: the exact S1 change and the FAVOR outputs against their rounding bounds ----
def _s1_inputs(seed):
    """Inputs built as the claim builds them (L = 8, d = 4, two lengthscales), from another seed."""
    from refattn.random.positional import init_s1_params
    from refattn.rpe.s1_rotation import S1Params

    rng = np.random.default_rng(seed)
    p0 = init_s1_params(rng, n_axes=1, n_lengthscales=2, base=10.0)
    p = S1Params(p0.freqs, p0.alpha + 0.7 * rng.standard_normal(p0.alpha.shape), p0.beta + 0.7)
    q, k, v = (0.7 * rng.standard_normal((8, 4)) for _ in range(3))
    return q, k, v, np.arange(8.0), p


def _augment_longdouble(x, z, p, query):
    """[x, Q_p(z)] or [x, K_p(z)] in extended precision, written from the S1 definition (not refattn's code):
    per (axis, lengthscale) the pair (sin t, cos t), t = z omega, or its rotation by [[alpha, beta], [-beta,
    alpha]]."""
    t = np.asarray(z, np.longdouble)[:, None] * np.asarray(p.freqs, np.longdouble).ravel()[None, :]
    s, c = np.sin(t), np.cos(t)
    if query:
        al = np.asarray(p.alpha, np.longdouble).ravel()
        be = np.asarray(p.beta, np.longdouble).ravel()
        s, c = al * s - be * c, be * s + al * c
    pos = np.stack([s, c], axis=-1).reshape(len(t), -1)
    return np.concatenate([np.asarray(x, np.longdouble), pos], axis=-1)


def _phi_longdouble(x, w):
    """The positive features exp(x~ w^T - |x~|^2/2), x~ = D^-1/4 x (the 1/sqrt(m) cancels in the ratio)."""
    xs = x * np.longdouble(x.shape[-1]) ** np.longdouble(-0.25)
    return np.exp(xs @ w.T - (xs * xs).sum(axis=-1, keepdims=True) / 2)


def test_s1_bounds_cover_the_rounding_they_bound():
    """Each float64 output (exact S1, and FAVOR+ at three fixed draws; at the positions and shifted by tau;
    six input sets) is within its rounding bound of an extended-precision reference written from the
    definitions; and the errors exceed one rounding of max|v| (planted: a bound of u max|v| would not cover
    them), so the comparison can fail."""
    from paper_checks.horn.rpe import exact_s1_change_bound, favor_output_rounding_bound
    from refattn.random.performer import draw_gaussian
    from refattn.rpe import s1_rotation
    from refattn.rpe.s1_rotation import s1_attention

    in_units = {"exact": [], "favor": []}                                          # err / (u max|v|)
    for case in range(6):
        q, k, v, pos, p = _s1_inputs(case)
        vmax = float(np.max(np.abs(v)))
        one_exact = exact_s1_change_bound(q, k, v, (pos, pos + 1.3), p) / 2            # per output
        for z in (pos, pos + 1.3):
            qa, ka = _augment_longdouble(q, z, p, True), _augment_longdouble(k, z, p, False)
            D = qa.shape[-1]
            s = qa @ ka.T / np.sqrt(np.longdouble(D))
            a = np.exp(s - s.max(axis=-1, keepdims=True))
            ref = (a / a.sum(axis=-1, keepdims=True)) @ np.asarray(v, np.longdouble)
            err = float(np.max(np.abs(s1_attention(q, k, v, z, p) - ref)))
            assert err <= one_exact, (case, err, one_exact)
            in_units["exact"].append(err / (U * vmax))
            q64, k64 = s1_rotation.s1_augment(q, k, z, p)
            for draw in range(3):
                omega = draw_gaussian(np.random.default_rng([case, draw]), 16, D)
                w = np.asarray(omega, np.longdouble)
                K = _phi_longdouble(qa, w) @ _phi_longdouble(ka, w).T
                ref = (K @ np.asarray(v, np.longdouble)) / K.sum(axis=-1, keepdims=True)
                err = float(np.max(np.abs(s1_attention(q, k, v, z, p, omega=omega) - ref)))
                assert err <= favor_output_rounding_bound(q64, k64, omega, v), (case, draw, err)
                in_units["favor"].append(err / (U * vmax))
    assert min(max(u) for u in in_units.values()) > 1, in_units


def _key_sin_cos_swapped(cid):
    """s1_augment_fwd storing each key's positional pair as (cos t, sin t) for (sin t, cos t), an index slip
    in K_p: the positional logit becomes alpha sin(t_i + t_j) - beta cos(t_i + t_j), absolute, not
    relative."""
    from refattn.rpe import s1_rotation

    def wrap(f):
        def g(q, k, positions, params):
            (q_aug, k_aug), cache = f(q, k, positions, params)
            d, ka = q.shape[-1], np.asarray(k_aug)
            pairs = ka[..., d:].reshape(*ka.shape[:-1], -1, 2)[..., ::-1].reshape(ka[..., d:].shape)
            return (q_aug, np.concatenate([ka[..., :d], pairs], axis=-1)), cache
        return g
    return wrapped(s1_rotation, "s1_augment_fwd", wrap)


def _positions_from_the_first(cid):
    """s1_augment_fwd measuring positions from the first one (z - z_0): every draw becomes exactly invariant,
    so the claim's single-draw observation is lost (only the single-draw rule sees it)."""
    from refattn.rpe import s1_rotation

    def wrap(f):
        return lambda q, k, positions, params: f(q, k, positions - positions[:1], params)
    return wrapped(s1_rotation, "s1_augment_fwd", wrap)


def test_s1_index_slip_flips_the_exact_comparison():
    """The swapped key pair moves the exact S1 output past its rounding bound: that comparison alone fails the
    claim (the paired z tests see it too)."""
    cid = "horn.s1-shift-invariance"
    with _key_sin_cos_swapped(cid):
        res = run_check(REGISTRY[cid], Context(seed=0, size="tiny", claim_id=cid))
    assert res.verdict == "fails"
    assert res.evidence["exact_softmax_change_over_rounding_bound"] > 1, res.evidence     # it alone flips


def test_s1_single_draw_rule_decides_alone():
    """Positions measured from the first make every draw invariant (in exact arithmetic): the paired
    differences are rounding, every entry is zero-SE and within the derived bound, the exact comparison holds,
    and the claim fails only because one draw's change is within its rounding bound."""
    cid = "horn.s1-shift-invariance"
    with _positions_from_the_first(cid):
        res = run_check(REGISTRY[cid], Context(seed=0, size="tiny", claim_id=cid))
    ev = res.evidence
    assert res.verdict == "fails"
    assert ev["exact_softmax_change_over_rounding_bound"] <= 1
    assert ev["zero_se_entries"] > 0 and ev["zero_se_dev_over_rounding_bound"] <= 1     # rounding-level pairs
    assert ev["max_z_mean_difference"] < ev["z_critical"]
    assert ev["single_draw_change_over_rounding_bound"] <= 1



# ---- horn.s2-fast-equals-naive, horn.s2-signed-clip: window formulas and class sums against the naive sum -
S2_FAST, S2_SIGNED = "horn.s2-fast-equals-naive", "horn.s2-signed-clip"


def _s2_one_rounding(seed):
    """At the claims' inputs for `seed` (their rngs, their draws in their order), the largest entry of |window
    formula - naive| and |s2_attention - s2_attention_naive| (6 x 7 grid, k = 3, d = 4, d_v = 3, m = 8) and of
    |two-far-region class sums - naive| (L = 20, k = 3, signed clip) in units of one rounding of the naive
    sum's terms (u A, u A / Z) and of the bounds' scale (u C, u C / Z)."""
    from paper_checks.horn.rpe import paper_window_formula, s2_favor_scores, s2_scales
    from refattn.rpe.s2_clipped import (s2_attention, s2_attention_naive, s2_class_index,
                                        s2_window_sums_reference)

    rng = Context(seed=seed, size="tiny", claim_id=S2_FAST).rng()
    H, W, k, d, d_v, m = 6, 7, 3, 4, 3, 8
    q, v = rng.standard_normal((H * W, d)), rng.standard_normal((H * W, d_v))
    w, omega = rng.standard_normal((k + 1, d)), rng.standard_normal((m, d))
    S = s2_favor_scores(q, w, omega)
    cls = s2_class_index(H * W, k, (H, W), xp=np)
    A, C, Z = s2_scales(S, cls, v, (k,))
    paper = np.abs(paper_window_formula(S, v, H, W, k, k - 1) - np.take_along_axis(S, cls, axis=1) @ v)
    fast = np.abs(s2_attention(q[None], v[None], w, k=k, grid=(H, W), omega=omega)[0]
                  - s2_attention_naive(q[None], v[None], w, k=k, grid=(H, W), omega=omega)[0])

    rng = Context(seed=seed, size="tiny", claim_id=S2_SIGNED).rng()
    L = 20
    q1, v1 = rng.standard_normal((L, d)), rng.standard_normal((L, d_v))
    w1, omega1 = rng.standard_normal((2 * k + 1, d)), rng.standard_normal((m, d))
    S1 = s2_favor_scores(q1, w1, omega1)
    cls1 = s2_class_index(L, k, None, xp=np)
    A1, _, _ = s2_scales(S1, cls1, v1, (0, 2 * k))
    corrected = np.einsum("ir,ire->ie", S1, s2_window_sums_reference(v1[None], k, None)[0])
    signed = np.abs(corrected - np.take_along_axis(S1, cls1, axis=1) @ v1)
    return {"paper_uA": float(np.max(paper / (U * A))), "fast_uA": float(np.max(fast * Z / (U * A))),
            "signed_uA": float(np.max(signed / (U * A1))),
            "paper_uC": float(np.max(paper / (U * C))), "fast_uC": float(np.max(fast * Z / (U * C)))}


@pytest.mark.parametrize("s2_seed", range(6))
def test_s2_bounds_cover_the_rounding_they_bound(s2_seed):
    """Both claims decide as expected with every comparison that is exact in exact arithmetic far inside its
    bound (measured / bound <= 0.1), while the same differences exceed one rounding of the naive sum's terms
    (u A; planted: a one-rounding bound would call rounding a refutation)."""
    fast = run_check(REGISTRY[S2_FAST], Context(seed=s2_seed, size="tiny", claim_id=S2_FAST))
    signed = run_check(REGISTRY[S2_SIGNED], Context(seed=s2_seed, size="tiny", claim_id=S2_SIGNED))
    assert (fast.verdict, signed.verdict) == ("holds", "erratum")
    for ev, key in ((fast.evidence, "paper_formula"), (fast.evidence, "fast_vs_naive"),
                    (signed.evidence, "two_far_regions")):
        assert ev[f"{key}_diff_over_rounding_bound"] <= 0.1, (key, ev)
    units = _s2_one_rounding(s2_seed)
    assert min(units["paper_uA"], units["fast_uA"], units["signed_uA"]) > 1, units


def test_s2_one_rounding_of_the_bound_scale_is_exceeded():
    """A bound of one rounding of C (the bound's own scale, without its chain length n) is exceeded, by the
    window formula and by refattn's fast path, at some of seeds 0-39. How often depends on the BLAS kernels'
    summation order: with OpenBLAS's Haswell kernels at 14 and 17 of the 40 seeds, with its AVX-512 kernels
    at 6 and 8 (none of seeds 0-5 for the window formula), so the test takes 40 seeds, not the claims' six."""
    units = [_s2_one_rounding(seed) for seed in range(40)]
    assert max(u["paper_uC"] for u in units) > 1 and max(u["fast_uC"] for u in units) > 1, units


def _refattn_ring_off_by_one(cid):
    """refattn's s2_class_index (read by s2_attention_naive) with Manhattan distances 1..k-1 inside the window
    off by one (d -> d + 1): the near rings take their neighbours' vectors; the fast path is untouched."""
    from refattn.rpe import s2_clipped

    def wrap(f):
        def g(L, k, grid=None, **kw):
            c = f(L, k, grid, **kw)
            return c if grid is None else np.where(c > 0, np.minimum(c + 1, k), c)
        return g
    return wrapped(s2_clipped, "s2_class_index", wrap)


def _claim_grid_transposed(cid):
    """The claim's own naive sum reading the (H, W) grid as (W, H) (its s2_class_index)."""
    def wrap(f):
        return lambda L, k, grid=None, **kw: f(L, k, None if grid is None else tuple(grid)[::-1], **kw)
    return wrapped(_module(cid), "s2_class_index", wrap)


def _claim_clip_sign(cid):
    """The claim's naive signed-clip sum with clip(i - j, k) for clip(j - i, k) (a sign slip)."""
    def wrap(f):
        return lambda L, k, grid=None, **kw: 2 * k - f(L, k, grid, **kw)
    return wrapped(_module(cid), "s2_class_index", wrap)


def _class_sums_mirrored(cid):
    """refattn's class sums with the classes in reverse order, i.e. of clip(i - j, k) (a sign slip)."""
    def wrap(f):
        return lambda u, k, grid, **kw: np.asarray(f(u, k, grid, **kw))[..., ::-1, :]
    return wrapped(_module(cid), "s2_window_sums_reference", wrap)


S2_PLANTS = [
    (S2_FAST, _refattn_ring_off_by_one, "fast_vs_naive"),
    (S2_FAST, _claim_grid_transposed, "paper_formula"),
    (S2_SIGNED, _claim_clip_sign, "two_far_regions"),
    (S2_SIGNED, _class_sums_mirrored, "two_far_regions"),
]


@pytest.mark.parametrize(("cid", "plant", "key"), S2_PLANTS, ids=[p.__name__ for _, p, _ in S2_PLANTS])
def test_s2_planted_bug_flips_the_claim(cid, plant, key):
    """An index or sign slip moves the comparison it touches past its rounding bound, and the claim flips
    (holds -> fails, erratum -> fails)."""
    claim = REGISTRY[cid]
    base = baseline.tiny(cid)
    with plant(cid):
        bad = run_check(claim, Context(seed=0, size="tiny", claim_id=cid))
    assert base.verdict == claim.expected_at("tiny")
    assert bad.verdict == "fails", (cid, bad.verdict, bad.summary)
    assert bad.evidence[f"{key}_diff_over_rounding_bound"] > 1, bad.evidence
