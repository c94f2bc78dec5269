"""FastFood features (KL Eqs. 6, 12): fwht vs scipy's Hadamard, the projection vs a dense V built from its
definition, unbiasedness of RKS/PRF against their kernels, the row-norm law of S, gradients, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from refattn.features.fastfood import (
    fastfood_prf_features, fastfood_prf_features_bwd, fastfood_prf_features_fwd, fastfood_prf_features_stable,
    fastfood_prf_features_stable_bwd, fastfood_prf_features_stable_fwd, fastfood_prf_kernel,
    fastfood_rks_features, fastfood_rks_features_bwd, fastfood_rks_features_fwd, fastfood_rks_kernel)
from refattn.features.fastfood_transform import (
    FastFoodParams, fastfood_matrix, fastfood_projection, fastfood_projection_bwd, fastfood_projection_fwd,
    padded_dim)
from refattn.features.fwht import fwht, fwht_bwd, fwht_fwd
from refattn.features.positive import gaussian_positive_features
from refattn.features.trig import trig_features
from refattn.random import draw_fastfood, fastfood_as_xp
from tests.helpers import asxp, randn
from validation import assert_close, assert_mean_within_se, check_vjp, mean_test


# ------------------------------------------------------------------------------------------------------------
# fwht

@pytest.mark.parametrize("D", [2 ** j for j in range(11)])
def test_fwht_equals_dense_hadamard(xp, D, rng):
    x = randn(rng, xp, 3, D)
    H = asxp(xp, scipy.linalg.hadamard(D).astype(np.float64))
    assert_close(fwht(x), x @ H, rtol=1e-12, atol=1e-12 * math.sqrt(D))


def test_fwht_float32_and_involution(xp, rng):
    x = randn(rng, xp, 2, 5, 64, dtype=xp.float32)
    y = fwht(x)
    assert y.dtype == xp.float32
    assert_close(fwht(y) / 64.0, x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("D", [3, 6, 12, 1000])
def test_fwht_rejects_non_power_of_two(xp, D):
    with pytest.raises(ValueError,
                       match=rf"x: expected a last axis whose length D is a power of two.*got D = {D}"):
        fwht(xp.ones((2, D), dtype=xp.float64))


def test_fwht_backward_is_itself(rng):
    x = rng.standard_normal((4, 16))
    check_vjp(fwht_fwd, fwht_bwd, {"x": x})
    dy = rng.standard_normal((4, 16))
    np.testing.assert_allclose(fwht_bwd(dy, None).x, dy @ scipy.linalg.hadamard(16), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------------------
# the projection against a dense V built from Eq. 6


def _dense_V(p: FastFoodParams, d: int, sigma: float) -> np.ndarray:  # noqa: N802  paper notation (V, Eq. 6)
    nb, D = p.S.shape
    H = scipy.linalg.hadamard(D).astype(np.float64)
    blocks = []
    for b in range(nb):
        P = np.zeros((D, D))
        P[np.arange(D), p.perm[b]] = 1.0                        # (P u)_i = u_{perm[i]}
        V = np.diag(p.S[b]) @ H @ np.diag(p.G[b]) @ P @ H @ np.diag(p.B[b]) / (sigma * math.sqrt(D))
        blocks.append(V[:, :d])                                   # padded coordinates of x are zero
    return np.concatenate(blocks)


@pytest.mark.parametrize("d,M", [(8, 8), (10, 32), (1, 4), (5, 16)])
def test_projection_matches_dense_eq6(xp, rng, d, M):
    p = draw_fastfood(rng, M, d)
    x = randn(rng, xp, 2, 3, d)
    sigma = 1.7
    V = asxp(xp, _dense_V(p, d, sigma))
    pp = fastfood_as_xp(p, like=x)
    assert_close(fastfood_projection(x, pp, sigma=sigma), x @ xp.matrix_transpose(V), rtol=1e-12, atol=1e-12)
    assert_close(fastfood_matrix(pp, d, sigma=sigma), V, rtol=1e-12, atol=1e-13)


def test_rks_and_prf_equal_the_dense_maps(xp, rng):
    d, M = 6, 16
    p = draw_fastfood(rng, M, d)
    x = randn(rng, xp, 2, 5, d, scale=0.5)
    pp = fastfood_as_xp(p, like=x)
    V = fastfood_matrix(pp, d)
    assert_close(fastfood_rks_features(x, pp), trig_features(x, V), rtol=1e-12, atol=1e-14)
    assert_close(fastfood_prf_features(x, pp), gaussian_positive_features(x, V), rtol=1e-12)
    phi, ls = fastfood_prf_features_stable(x, pp)
    assert_close(phi * xp.exp(xp.expand_dims(ls, axis=-1)), fastfood_prf_features(x, pp), rtol=1e-12)


def test_stable_prf_survives_large_norms(rng):
    d, M = 8, 16
    p = draw_fastfood(rng, M, d)
    x = 40.0 * rng.standard_normal((3, 7, d))                  # |x|^2 ~ 1.3e4: the raw map underflows to 0
    raw = fastfood_prf_features(x, p)
    phi, ls = fastfood_prf_features_stable(x, p)
    assert np.all(raw == 0.0)
    assert np.all(np.isfinite(phi)) and np.all(np.isfinite(ls))
    assert np.all(phi >= 0) and np.all(phi.max(axis=-1) == 1.0)  # entries far below the row max may underflow
    x32 = (x / 40.0 * 12.0).astype(np.float32)                # float32 overflow range of exp(w.x)
    p32 = FastFoodParams(*(a.astype(np.float32) for a in p[:3]), perm=p.perm)
    phi32, ls32 = fastfood_prf_features_stable(x32, p32)
    assert np.all(np.isfinite(phi32)) and np.all(np.isfinite(ls32))


# ------------------------------------------------------------------------------------------------------------
# unbiasedness (each block of a many-block draw is an independent replicate)


def _block_estimates(phi_q, phi_k, n_blocks, parts):
    """Per-block kernel estimates: phi columns grouped (parts, n_blocks, D) -> (n_blocks, Lq, Lk)."""
    Lq, W = phi_q.shape
    D = W // (parts * n_blocks)
    a = phi_q.reshape(Lq, parts, n_blocks, D)
    b = phi_k.reshape(phi_k.shape[0], parts, n_blocks, D)
    return np.einsum("ipbj,kpbj->bik", a, b) * n_blocks


@pytest.mark.parametrize("s_law", ["chi", "identity"])
@pytest.mark.parametrize("sigma", [1.0, 1.5])
def test_rks_unbiased_for_gaussian_kernel(rng, s_law, sigma):
    d, n = 6, 6000
    p = draw_fastfood(rng, 8 * n, d, s_law=s_law)
    q, k = 0.5 * rng.standard_normal((3, d)), 0.5 * rng.standard_normal((2, d))
    est = _block_estimates(fastfood_rks_features(q, p, sigma=sigma), fastfood_rks_features(k, p, sigma=sigma),
                           n, 2)
    assert_mean_within_se(est, fastfood_rks_kernel(q, k, sigma=sigma), label=f"FastFood-RKS ({s_law})")
    # must fail: the unit-bandwidth kernel when sigma = 1.5, the softmax kernel when sigma = 1
    wrong = np.exp(q @ k.T) if sigma == 1.0 else fastfood_rks_kernel(q, k, sigma=1.0)
    assert not mean_test(est, wrong).passed


@pytest.mark.parametrize("sigma", [1.0, 2.0])
def test_prf_unbiased_for_its_kernel(rng, sigma):
    d, n = 5, 6000
    p = draw_fastfood(rng, 8 * n, d)
    q, k = 0.3 * rng.standard_normal((3, d)), 0.3 * rng.standard_normal((2, d))
    est = _block_estimates(fastfood_prf_features(q, p, sigma=sigma), fastfood_prf_features(k, p, sigma=sigma),
                           n, 1)
    assert_mean_within_se(est, fastfood_prf_kernel(q, k, sigma=sigma), label="FastFood-PRF")
    if sigma == 1.0:
        # Gaussian at sigma = 1
        assert_close(fastfood_prf_kernel(q, k), fastfood_rks_kernel(q, k), rtol=1e-12)
    # must fail: the softmax-style offset |x|^2/2 (docs/guide/features.md, the maps' table): exp(q.k) at
    # sigma = 1
    wrong = np.exp(q @ k.T) if sigma == 1.0 else fastfood_rks_kernel(q, k, sigma=sigma)
    assert not mean_test(est, wrong).passed


# ------------------------------------------------------------------------------------------------------------
# the law of S: row norms


def _row_sq_norms(p, D):
    V = fastfood_matrix(p, D)                                    # d = D: no padding
    return (V ** 2).sum(axis=1).reshape(-1, D)                   # (n_blocks, D)


def test_chi_law_gives_gaussian_row_norms_independent_within_block(rng):
    D, n = 16, 3000
    r2 = _row_sq_norms(draw_fastfood(rng, D * n, D, s_law="chi"), D)       # (n, D), sigma = 1
    # |v|^2 ~ chi^2(D): mean D, variance 2D
    assert_mean_within_se(r2.reshape(-1, 1)[: n], np.array([D]), label="E|v|^2")
    assert_mean_within_se(((r2[:, :1] - D) ** 2), np.array([2.0 * D]), label="Var|v|^2")
    # two rows of one block: uncorrelated squared norms (Gaussian rows are independent)
    prod = (r2[:, 0] - D) * (r2[:, 1] - D)
    assert_mean_within_se(prod[:, None], np.array([0.0]), label="Cov(|v_0|^2, |v_1|^2)")
    # must fail: chi(D + 2)
    assert not mean_test(r2[:, :1], np.array([D + 2.0])).passed


def test_identity_law_shares_one_norm_per_block(rng):
    D, n = 16, 3000
    r2 = _row_sq_norms(draw_fastfood(rng, D * n, D, s_law="identity"), D)
    np.testing.assert_allclose(r2, r2[:, :1] * np.ones((1, D)), rtol=1e-12)   # all rows of a block: ||G||_F^2
    assert_mean_within_se(r2[:, :1], np.array([D]), label="E|v|^2 (S = I)")  # the marginal is still chi^2(D)
    assert_mean_within_se((r2[:, :1] - D) ** 2, np.array([2.0 * D]), label="Var|v|^2 (S = I)")
    prod = (r2[:, 0] - D) * (r2[:, 1] - D)                                     # covariance 2D, not 0
    assert not mean_test(prod[:, None], np.array([0.0])).passed
    assert_mean_within_se(prod[:, None], np.array([2.0 * D]), label="Cov (S = I) = Var")


# ------------------------------------------------------------------------------------------------------------
# gradients


def _args(rng, d=6, M=16):
    p = draw_fastfood(rng, M, d)
    return {"x": 0.4 * rng.standard_normal((2, 3, d)), "params": p}


def test_projection_gradients(rng):
    check_vjp(fastfood_projection_fwd, fastfood_projection_bwd, _args(rng), kwargs={"sigma": 1.3})


def test_rks_gradients(rng):
    check_vjp(fastfood_rks_features_fwd, fastfood_rks_features_bwd, _args(rng))


def test_prf_gradients(rng):
    check_vjp(fastfood_prf_features_fwd, fastfood_prf_features_bwd, _args(rng), kwargs={"sigma": 0.8})


@pytest.mark.parametrize("with_log_scale", [True, False])
def test_prf_stable_gradients(rng, with_log_scale):
    args = _args(rng)
    if with_log_scale:
        check_vjp(fastfood_prf_features_stable_fwd, fastfood_prf_features_stable_bwd, args)
    else:
        check_vjp(fastfood_prf_features_stable_fwd,
                  lambda dphi, c: fastfood_prf_features_stable_bwd((dphi, None), c),
                  args, output=lambda y: y[0])


def test_variants_freeze_diagonals(rng):
    args = _args(rng)
    y, cache = fastfood_rks_features_fwd(**args, variant="S")
    g = fastfood_rks_features_bwd(np.ones_like(y), cache)
    assert g.params.G is None and g.params.B is None and g.params.S is not None
    g0 = fastfood_rks_features_bwd(np.ones_like(y), fastfood_rks_features_fwd(**args, variant="fixed")[1])
    assert g0.params.S is None and g0.params.G is None and g0.params.B is None
    # the S-only variant's gradients are those of S (and x)
    p = args["params"]

    def fwd(x, S):
        return fastfood_rks_features_fwd(x, p._replace(S=S), variant="S")

    def bwd(dy, c):
        gg = fastfood_rks_features_bwd(dy, c)
        return {"x": gg.x, "S": gg.params.S}

    check_vjp(fwd, bwd, {"x": args["x"], "S": p.S})


def test_gradient_check_catches_a_wrong_backward(rng):
    def bad_bwd(dy, cache):
        g = fastfood_rks_features_bwd(dy, cache)
        return g._replace(params=g.params._replace(G=g.params.G * (1 + 1e-4)))

    with pytest.raises(AssertionError, match="params"):
        check_vjp(fastfood_rks_features_fwd, bad_bwd, _args(rng))


# ------------------------------------------------------------------------------------------------------------
# bad inputs


def test_bad_inputs(rng):
    with pytest.raises(ValueError, match=r"M: expected a multiple of the padded width D = 16 \(d = 10"):
        draw_fastfood(rng, 24, 10)
    with pytest.raises(ValueError, match="s_law"):
        draw_fastfood(rng, 16, 10, s_law="gaussian")
    with pytest.raises(TypeError, match="rng"):
        draw_fastfood(None, 16, 10)
    p = draw_fastfood(rng, 16, 10)
    x = rng.standard_normal((3, 10))
    with pytest.raises(ValueError, match=r"params.S: expected shape \(n_blocks, D\)"):
        fastfood_projection(x, p._replace(S=p.S[:, :8]))
    with pytest.raises(ValueError, match=r"params.S: expected shape \(n_blocks, D\) with .*D = 8 "
                                         r"\(from x: d = 5 padded to a power of two\)"):
        fastfood_projection(rng.standard_normal((3, 5)), p)          # d = 5 pads to 8, params are for 16
    bad_perm = p.perm.copy()
    bad_perm[0, 0] = bad_perm[0, 1]
    with pytest.raises(ValueError, match="params.perm: expected each row to be a permutation"):
        fastfood_projection(x, p._replace(perm=bad_perm))
    with pytest.raises(TypeError, match="params.perm: expected an integer"):
        fastfood_projection(x, p._replace(perm=p.perm.astype(np.float64)))
    with pytest.raises(ValueError, match="sigma: expected a positive"):
        fastfood_projection(x, p, sigma=0.0)
    with pytest.raises(ValueError, match="variant: expected one of"):
        fastfood_rks_features_fwd(x, p, variant="SG")
    x_nan = x.copy()
    x_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="x: expected finite values"):
        fastfood_projection(x_nan, p)
    with pytest.raises(TypeError, match="params: expected a FastFoodParams"):
        fastfood_projection(x, tuple(p))
    assert padded_dim(10) == 16 and padded_dim(16) == 16 and padded_dim(1) == 1


@pytest.mark.parametrize("kind", ["rks", "prf_stable"])
def test_each_diagonal_separately(rng, kind):
    """S, G and B checked one by one (each on its own scale), for the SGB variant."""
    a = _args(rng)
    p = a["params"]
    fwd0, bwd0 = ((fastfood_rks_features_fwd, fastfood_rks_features_bwd) if kind == "rks" else
                  (fastfood_prf_features_stable_fwd, fastfood_prf_features_stable_bwd))

    def fwd(x, S, G, B):
        return fwd0(x, FastFoodParams(S, G, B, p.perm), sigma=0.9)

    def bwd(dy, cache):
        g = bwd0(dy, cache)
        return {"x": g.x, "S": g.params.S, "G": g.params.G, "B": g.params.B}

    errs = check_vjp(fwd, bwd, {"x": a["x"], "S": p.S, "G": p.G, "B": p.B})
    assert {"x", "S", "G", "B"} <= set(errs)


def test_float32_follows_float64(xp, rng):
    """float32 is supported: same dtype out, within 1e-4 relative (1e-5 absolute) of the float64 reference."""
    p = draw_fastfood(rng, 32, 10)
    x = 0.5 * rng.standard_normal((2, 3, 10))
    y64 = fastfood_rks_features(asxp(xp, x), fastfood_as_xp(p, like=asxp(xp, x)))
    x32 = asxp(xp, x, xp.float32)
    y32 = fastfood_rks_features(x32, fastfood_as_xp(p, like=x32))
    assert y32.dtype == xp.float32
    assert_close(xp.astype(y32, xp.float64), y64, rtol=1e-4, atol=1e-5)
