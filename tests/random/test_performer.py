"""Performer projection draws: shapes and dtypes, exact orthogonality, Haar distribution (against the exact
law of a coordinate and against scipy.stats.ortho_group), the direction-dependent bias of uncorrected QR
(docs/guide/features.md, draw_orthogonal), the MSE advantage of orthogonal over iid projections, and bad
input.

Monte Carlo sizes: 2 * 10^4 draws of a (16, 16) block per direction (vectorised: one batched QR), well under a
second each. Every statistical test has a must-fail companion on a known-wrong draw or formula.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from refattn import positive_features
from refattn.random import draw_gaussian, draw_orthogonal
from refattn.random.performer import _haar_blocks, draw_orthogonal_core
from validation import assert_mean_within_se, mean_test

#: false-alarm level of the KS tests (a correct sampler fails one seed in a thousand)
KS_ALPHA = 1e-3


# ----------------------------------------------------------------------------------------------------------
# shapes, dtypes, determinism


@pytest.mark.parametrize("draw", [draw_gaussian, draw_orthogonal])
@pytest.mark.parametrize("m,d", [(1, 1), (16, 16), (20, 8), (5, 8), (256, 64)])
def test_shape_dtype_and_seed(draw, m, d):
    a = draw(np.random.default_rng(3), m, d)
    b = draw(np.random.default_rng(3), m, d)
    c32 = draw(np.random.default_rng(3), m, d, dtype=np.float32)
    assert a.shape == (m, d) and a.dtype == np.float64 and c32.dtype == np.float32
    np.testing.assert_array_equal(a, b)                       # a pure function of the generator state
    np.testing.assert_array_equal(c32, a.astype(np.float32))  # float32 is the float64 draw, cast
    assert np.all(np.isfinite(a))


@pytest.mark.parametrize("m,d", [(16, 16), (20, 8), (5, 8), (64, 16)])
@pytest.mark.parametrize("norms", ["chi", "sqrt_d"])
def test_orthogonal_blocks_are_orthogonal(m, d, norms):
    omega = draw_orthogonal(np.random.default_rng(1), m, d, norms=norms)
    norms_row = np.linalg.norm(omega, axis=1)
    if norms == "sqrt_d":
        np.testing.assert_allclose(norms_row, np.sqrt(d), rtol=1e-13)
    for start in range(0, m, d):
        block = omega[start:start + d]                        # last block truncated when d does not divide m
        unit = block / np.linalg.norm(block, axis=1, keepdims=True)
        np.testing.assert_allclose(unit @ unit.T, np.eye(block.shape[0]), atol=1e-13)


def test_chi_norms_follow_chi_d():
    """Row norms of the "chi" variant are chi(d)-distributed (KS test at level KS_ALPHA), the sqrt_d ones
    are not."""
    d = 8
    W = draw_orthogonal_core(np.random.default_rng(2), 500, 8, d, norms="chi")
    p = scipy.stats.kstest(np.linalg.norm(W, axis=-1).ravel(), scipy.stats.chi(d).cdf).pvalue
    assert p > KS_ALPHA, f"chi(d) row norms rejected by KS, p = {p:.2e}"
    W = draw_orthogonal_core(np.random.default_rng(2), 500, 8, d, norms="sqrt_d")
    p = scipy.stats.kstest(np.linalg.norm(W, axis=-1).ravel(), scipy.stats.chi(d).cdf).pvalue
    assert p < KS_ALPHA, "must fail: constant sqrt(d) norms are not chi(d)"


# ----------------------------------------------------------------------------------------------------------
# Haar distribution


def _coordinate_cdf(d):
    """CDF of one coordinate of a Haar-orthogonal d x d matrix: (Q_ij + 1)/2 ~ Beta((d-1)/2, (d-1)/2)
    (a coordinate of a uniform unit vector in R^d)."""
    beta = scipy.stats.beta((d - 1) / 2, (d - 1) / 2)
    return lambda t: beta.cdf((np.asarray(t) + 1) / 2)


@pytest.mark.parametrize("d", [4, 16])
@pytest.mark.parametrize("coord", [(0, 0), (1, 2)])
def test_haar_coordinate_matches_exact_law_and_ortho_group(d, coord):
    """One fixed coordinate of the draws, KS-tested at level KS_ALPHA against (a) its exact law and (b) the
    same coordinate of scipy.stats.ortho_group draws (two-sample)."""
    n = 3000
    rng = np.random.default_rng(10 + d)
    ours = _haar_blocks(rng, n, d)[:, coord[0], coord[1]]
    p_exact = scipy.stats.kstest(ours, _coordinate_cdf(d)).pvalue
    ref = scipy.stats.ortho_group.rvs(d, size=n, random_state=np.random.default_rng(99 + d))
    ref = ref[:, coord[0], coord[1]]
    p_two = scipy.stats.ks_2samp(ours, ref).pvalue
    assert p_exact > KS_ALPHA and p_two > KS_ALPHA, (
        f"Haar test rejected: p exact {p_exact:.2e}, ortho_group {p_two:.2e}")
    # the draw_orthogonal path: rows normalised are the same Haar blocks
    om = draw_orthogonal_core(np.random.default_rng(20 + d), n, d, d)
    unit = om / np.linalg.norm(om, axis=-1, keepdims=True)
    p_pub = scipy.stats.kstest(unit[:, coord[0], coord[1]], _coordinate_cdf(d)).pvalue
    assert p_pub > KS_ALPHA, f"draw_orthogonal rows rejected by KS, p = {p_pub:.2e}"


def test_haar_must_fail_without_sign_correction():
    """Must fail: QR without the sign(diag R) correction. Householder QR makes R_00 = -sign(G_00) |G_:0|, so
    Q_00 is always negative: the same KS tests reject it."""
    d, n = 16, 3000
    bad = _haar_blocks(np.random.default_rng(5), n, d, sign_correction=False)[:, 0, 0]
    ref = scipy.stats.ortho_group.rvs(d, size=n, random_state=np.random.default_rng(6))[:, 0, 0]
    assert scipy.stats.kstest(bad, _coordinate_cdf(d)).pvalue < KS_ALPHA
    assert scipy.stats.ks_2samp(bad, ref).pvalue < KS_ALPHA


# ----------------------------------------------------------------------------------------------------------
# PRF with orthogonal draws: unbiased in every direction; uncorrected QR is biased, more along all-ones


def _prf_estimates(W, x):
    """Per-draw PRF estimates of exp(x . x) from a batch W: (n, m, d), through refattn.positive_features on
    the stacked (n m, d) projections (the 1/sqrt(n m) normalisation is undone per draw)."""
    n, m, d = W.shape
    phi = positive_features(x[None, :], W.reshape(n * m, d)).reshape(n, m) * np.sqrt(n)   # (n, m)
    return np.sum(phi * phi, axis=-1)                                                      # (n,)


def _directions(d, rng):
    ones = np.ones(d) / np.sqrt(d)
    rnd = rng.standard_normal(d)
    return {"e1": np.eye(d)[0], "all-ones": ones, "random": rnd / np.linalg.norm(rnd)}


@pytest.mark.parametrize("direction", ["e1", "all-ones", "random"])
def test_orthogonal_prf_unbiased_every_direction(direction, seed):
    d, m, n, r = 16, 16, 20000, 0.6
    rng = np.random.default_rng(seed)
    x = r * _directions(d, np.random.default_rng(7))[direction]
    est = _prf_estimates(draw_orthogonal_core(rng, n, m, d), x)
    assert_mean_within_se(est, np.exp(r * r), label=f"ORF PRF along {direction}", seed=seed)


def test_uncorrected_qr_bias_depends_on_direction(seed):
    """Must fail (docs/guide/features.md, draw_orthogonal): without the sign correction the same estimator
    is biased; the bias is a few percent along e1 and several times larger along the all-ones direction
    (d = 16)."""
    d, m, n, r = 16, 16, 20000, 0.6
    rng = np.random.default_rng(seed)
    W = draw_orthogonal_core(rng, n, m, d, sign_correction=False)
    dirs = _directions(d, np.random.default_rng(7))
    rel_bias = {}
    for name in ("e1", "all-ones"):
        res = mean_test(_prf_estimates(W, r * dirs[name]), np.exp(r * r))
        assert not res.passed, f"uncorrected QR not detected along {name}: z = {res.z:.1f}"
        rel_bias[name] = abs(float(res.mean) / np.exp(r * r) - 1)
    assert rel_bias["all-ones"] > 2 * rel_bias["e1"], rel_bias


# ----------------------------------------------------------------------------------------------------------
# orthogonal projections have lower MSE than iid ones at equal m


def test_orthogonal_lower_mse_than_iid(seed):
    d, m, n = 16, 16, 20000
    rng = np.random.default_rng(seed)
    x = 0.35 * _directions(d, rng)["random"]      # q = k = x, |q + k| = 0.7: moderate tails, ORF gain ~16%
    target = np.exp(x @ x)
    e_orth = (_prf_estimates(draw_orthogonal_core(rng, n, m, d), x) - target) ** 2
    e_iid = (_prf_estimates(rng.standard_normal((n, m, d)), x) - target) ** 2
    diff = e_iid.mean() - e_orth.mean()
    se = np.sqrt(e_iid.var(ddof=1) / n + e_orth.var(ddof=1) / n)
    assert diff > 5 * se, (
        f"MSE iid {e_iid.mean():.4e} vs orthogonal {e_orth.mean():.4e}, se of difference {se:.2e}")
    # must fail: two iid batches are not distinguishable by the same test
    e_iid2 = (_prf_estimates(rng.standard_normal((n, m, d)), x) - target) ** 2
    diff0 = e_iid.mean() - e_iid2.mean()
    se0 = np.sqrt(e_iid.var(ddof=1) / n + e_iid2.var(ddof=1) / n)
    assert not diff0 > 5 * se0


# ----------------------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("draw", [draw_gaussian, draw_orthogonal])
def test_rng_must_be_a_generator(draw):
    with pytest.raises(TypeError, match=r"rng: expected a numpy.random.Generator .*got None"):
        draw(None, 4, 4)
    with pytest.raises(TypeError, match=r"rng: expected a numpy.random.Generator .*got RandomState"):
        draw(np.random.RandomState(0), 4, 4)
    with pytest.raises(TypeError, match=r"rng: expected a numpy.random.Generator .*got int"):
        draw(0, 4, 4)


@pytest.mark.parametrize("draw", [draw_gaussian, draw_orthogonal])
def test_bad_sizes_and_dtype(draw):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"m: expected a positive integer; got 0"):
        draw(rng, 0, 4)
    with pytest.raises(ValueError, match=r"m: expected a positive integer; got -3"):
        draw(rng, -3, 4)
    with pytest.raises(TypeError, match=r"m: expected a positive integer; got 2.5"):
        draw(rng, 2.5, 4)
    with pytest.raises(ValueError, match=r"d: expected a positive integer; got 0"):
        draw(rng, 4, 0)
    with pytest.raises(TypeError, match=r"dtype: expected float32 or float64; got int64"):
        draw(rng, 4, 4, dtype=np.int64)


def test_unknown_norms():
    with pytest.raises(ValueError, match=r"norms: expected one of 'chi', 'sqrt_d'; got 'unit'"):
        draw_orthogonal(np.random.default_rng(0), 4, 4, norms="unit")
