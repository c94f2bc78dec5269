"""GMM spectra (KL Eqs. 4-5, 10; Theorem 3): reparameterised frequencies, unbiasedness of GMM-RKS/PRF against
their closed-form kernels, the derived MSE formulas (Theorem 3 corrected), MSE vs covariance eigenvalues,
gradients for x, noise, logits, means and factors, stabilisation, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.features.gmm import (
    gmm_prf_features, gmm_prf_features_bwd, gmm_prf_features_fwd, gmm_prf_features_stable,
    gmm_prf_features_stable_bwd, gmm_prf_features_stable_fwd, gmm_prf_kernel, gmm_prf_mse,
    gmm_rks_antithetic_mse, gmm_rks_features, gmm_rks_features_bwd, gmm_rks_features_fwd, gmm_rks_kernel,
    gmm_rks_mse)
from refattn.features.gmm_spectrum import (GMMParams, gmm_antithetic_params, gmm_frequencies,
                                           gmm_frequencies_bwd, gmm_frequencies_fwd, gmm_weights)
from refattn.features.trig import trig_features
from refattn.random import draw_gmm_antithetic_noise, draw_gmm_noise, gmm_as_xp, init_gmm
from tests.helpers import asxp, randn
from validation import assert_close, assert_mean_within_se, check_vjp, mean_test


def _params(rng, C=3, d=4, diagonal=False, s=0.6):
    logits = rng.standard_normal(C)
    mu = 0.5 * rng.standard_normal((C, d))
    if diagonal:
        S = s * (0.5 + rng.random((C, d)))
    else:
        S = s * (np.eye(d) + 0.3 * rng.standard_normal((C, d, d)))       # non-symmetric on purpose
    return GMMParams(logits=logits, mu=mu, S=S)


# ------------------------------------------------------------------------------------------------------------
# frequencies and the feature maps (exact)


@pytest.mark.parametrize("diagonal", [False, True])
def test_frequencies_follow_the_convention(xp, rng, diagonal):
    p = _params(rng, diagonal=diagonal)
    noise = draw_gmm_noise(rng, 3, 12, 4)
    omega, scale = gmm_frequencies(asxp(xp, noise), gmm_as_xp(p, like=asxp(xp, noise)))
    S_full = np.stack([np.diag(s) for s in p.S]) if diagonal else p.S
    expected = (p.mu[:, None, :] + np.einsum("cab,cjb->cja", S_full, noise)).reshape(12, 4)   # mu + S n
    assert_close(omega, asxp(xp, expected), rtol=1e-12, atol=1e-14)
    pi = np.exp(p.logits) / np.exp(p.logits).sum()
    assert_close(scale, asxp(xp, np.repeat(np.sqrt(3 * pi), 4)), rtol=1e-12)
    assert_close(gmm_weights(asxp(xp, p.logits)), asxp(xp, pi), rtol=1e-12)


def test_equal_weights_reduce_to_rks_of_the_frequencies(xp, rng):
    p = init_gmm(rng, 2, 5, mu_scale=0.3)
    noise = draw_gmm_noise(rng, 2, 8, 5)
    x = randn(rng, xp, 2, 3, 5)
    pp = gmm_as_xp(p, like=x)
    omega, _ = gmm_frequencies(asxp(xp, noise), pp)
    assert_close(gmm_rks_features(x, asxp(xp, noise), pp), trig_features(x, omega), rtol=1e-12, atol=1e-15)


def test_stable_prf_equals_raw_and_survives_large_norms(xp, rng):
    p = _params(rng, diagonal=True)
    noise = draw_gmm_noise(rng, 3, 9, 4)
    x = randn(rng, xp, 2, 5, 4, scale=0.5)
    pp, nn = gmm_as_xp(p, like=x), asxp(xp, noise)
    phi, ls = gmm_prf_features_stable(x, nn, pp)
    assert_close(phi * xp.exp(xp.expand_dims(ls, axis=-1)), gmm_prf_features(x, nn, pp), rtol=1e-12)
    big = rng.standard_normal((4, 4))
    big = 60.0 * big / np.linalg.norm(big, axis=-1, keepdims=True)   # |x|^2 = 3600: the raw map underflows
    phi_b, ls_b = gmm_prf_features_stable(big, noise, p)
    assert np.all(gmm_prf_features(big, noise, p) < 1e-300)              # the raw map has lost every entry
    assert np.all(np.isfinite(phi_b)) and np.all(np.isfinite(ls_b)) and np.all(phi_b > 0)


# ------------------------------------------------------------------------------------------------------------
# unbiasedness (replicates: independent noise slices)


def _replicates(phi_q, phi_k, parts, C, n):
    """Estimates per replicate from features of noise (C, n * Mc, d): columns (parts, C, n, Mc)."""
    W = phi_q.shape[-1]
    Mc = W // (parts * C * n)
    a = phi_q.reshape(phi_q.shape[0], parts, C, n, Mc)
    b = phi_k.reshape(phi_k.shape[0], parts, C, n, Mc)
    return np.einsum("ipcrj,kpcrj->rik", a, b) * n


def test_rks_unbiased_for_eq4_kernel(rng):
    C, d, n, Mc = 3, 4, 4000, 2
    p = _params(rng, C, d)
    U = np.triu(np.ones((d, d)), 1)                                  # make S clearly non-symmetric: S != S^T
    p = p._replace(S=p.S + 0.5 * U)
    q, k = 0.6 * rng.standard_normal((3, d)), 0.6 * rng.standard_normal((2, d))
    noise = draw_gmm_noise(rng, C, C * n * Mc, d)
    est = _replicates(gmm_rks_features(q, noise, p), gmm_rks_features(k, noise, p), 2, C, n)
    assert_mean_within_se(est, gmm_rks_kernel(q, k, p), label="GMM-RKS")
    # must fail: the paper's stated Sigma = S^T S (S transposed), and equal weights instead of softmax(logits)
    p_t = p._replace(S=np.swapaxes(p.S, 1, 2))
    assert not mean_test(est, gmm_rks_kernel(q, k, p_t)).passed
    assert not mean_test(est, gmm_rks_kernel(q, k, p._replace(logits=np.zeros(C)))).passed


def test_prf_unbiased_for_its_kernel_diagonal(rng):
    C, d, n, Mc = 2, 4, 4000, 2
    p = _params(rng, C, d, diagonal=True, s=0.5)
    q, k = 0.4 * rng.standard_normal((3, d)), 0.4 * rng.standard_normal((2, d))
    noise = draw_gmm_noise(rng, C, C * n * Mc, d)
    est = _replicates(gmm_prf_features(q, noise, p), gmm_prf_features(k, noise, p), 1, C, n)
    assert_mean_within_se(est, gmm_prf_kernel(q, k, p), label="GMM-PRF")
    assert not mean_test(est, gmm_prf_kernel(q, k, p._replace(logits=np.zeros(C)))).passed


def test_prf_kernel_is_gaussian_at_standard_normal(rng):
    p = init_gmm(rng, 1, 5)
    q, k = rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    gauss = np.exp(-0.5 * ((q[:, None] - k[None]) ** 2).sum(-1))
    np.testing.assert_allclose(gmm_prf_kernel(q, k, p), gauss, rtol=1e-12)
    np.testing.assert_allclose(gmm_rks_kernel(q, k, p), gauss, rtol=1e-12)


# ------------------------------------------------------------------------------------------------------------
# Theorem 3: the derived MSE formulas (the printed Eqs. 13-14 are paper_checks verdicts; here they must fail)


def test_rks_mse_general_mixture(rng):
    C, d, M, n = 2, 3, 8, 20000
    p = _params(rng, C, d, s=0.8)
    q, k = 0.7 * rng.standard_normal((1, d)), 0.7 * rng.standard_normal((1, d))
    noise = draw_gmm_noise(rng, C, n * M, d)
    est = _replicates(gmm_rks_features(q, noise, p), gmm_rks_features(k, noise, p), 2, C, n)[:, 0, 0]
    e2 = (est - gmm_rks_kernel(q, k, p)[0, 0]) ** 2
    assert_mean_within_se(e2[:, None], gmm_rks_mse(q, k, p, M)[0], label="MSE GMM-RKS")
    assert not mean_test(e2[:, None], 2.0 * gmm_rks_mse(q, k, p, M)[0]).passed


def _antithetic_mse_samples(rng, mu, S, q, k, M, n):
    p = gmm_antithetic_params(mu, S)
    noise = np.concatenate([draw_gmm_antithetic_noise(rng, M, len(mu)) for _ in range(n)],
                           axis=1)  # (2, n M/2, d)
    est = _replicates(gmm_rks_features(q, noise, p), gmm_rks_features(k, noise, p), 2, 2, n)[:, 0, 0]
    return est, (est - gmm_rks_kernel(q, k, p)[0, 0]) ** 2


def test_rks_mse_antithetic_theorem3_case(rng):
    d, M, n = 3, 8, 20000
    mu = np.array([0.3, -0.2, 0.5])
    S = 0.9 * np.eye(d) + 0.3 * rng.standard_normal((d, d))
    q, k = np.array([[0.4, 0.1, -0.6]]), np.array([[-0.5, 0.7, 0.2]])
    est, e2 = _antithetic_mse_samples(rng, mu, S, q, k, M, n)
    assert_mean_within_se(est[:, None], gmm_rks_kernel(q, k, gmm_antithetic_params(mu, S))[0], label="mean")
    derived = gmm_rks_antithetic_mse(q, k, mu, S, M)[0]
    assert_mean_within_se(e2[:, None], derived, label="MSE antithetic")
    # must fail: printed Eq. 13, 2/m cos^2(mu^T p)(1 - e^{-|S^T p|^2})^2 with m = M/2 pairs (and with m = M)
    p_ = q[0] - k[0]
    core = np.cos(mu @ p_) ** 2 * (1 - np.exp(-np.sum((S.T @ p_) ** 2))) ** 2
    assert not mean_test(e2[:, None], np.array([2.0 / (M // 2) * core])).passed
    assert not mean_test(e2[:, None], np.array([2.0 / M * core])).passed
    # the antithetic pairs are *not* independent components: the independent-noise formula differs
    assert not mean_test(e2[:, None], gmm_rks_mse(q, k, gmm_antithetic_params(mu, S), M)[0]).passed


@pytest.mark.parametrize("diagonal", [True, False])
def test_prf_mse(rng, diagonal):
    C, d, M, n = 1, 3, 4, 40000
    p = _params(rng, C, d, diagonal=diagonal, s=0.4)
    q, k = np.array([[0.3, -0.2, 0.1]]), np.array([[0.2, 0.25, -0.3]])
    noise = draw_gmm_noise(rng, C, n * M, d)
    est = _replicates(gmm_prf_features(q, noise, p), gmm_prf_features(k, noise, p), 1, C, n)[:, 0, 0]
    e2 = (est - gmm_prf_kernel(q, k, p)[0, 0]) ** 2
    assert_mean_within_se(e2[:, None], gmm_prf_mse(q, k, p, M)[0], label="MSE GMM-PRF")
    # must fail: printed Eq. 14 (unsquared norms ||S^T o|| in the last factor)
    o = (q + k)[0]
    S_full = np.diag(p.S[0]) if diagonal else p.S[0]
    t = np.linalg.norm(S_full.T @ o)
    printed = np.exp(-2 * (q @ q.T + k @ k.T - p.mu[0] @ o))[0, 0] * (np.exp(2 * t) - np.exp(t)) / M
    assert not mean_test(e2[:, None], np.array([printed])).passed


def test_mse_falls_with_covariance_eigenvalues(rng):
    """Sec. 4.1's argument, measured: scaling S by t scales Sigma's eigenvalues by t^2; both MSEs fall."""
    d, M, n = 3, 8, 20000
    mu = np.array([0.2, -0.1, 0.3])
    S0 = np.eye(d) + 0.2 * rng.standard_normal((d, d))
    q, k = np.array([[0.5, 0.1, -0.6]]), np.array([[-0.4, 0.6, 0.3]])
    rks, prf = [], []
    for t in (1.0, 0.5, 0.25):
        _, e2 = _antithetic_mse_samples(rng, mu, t * S0, q, k, M, n)
        assert_mean_within_se(e2[:, None], gmm_rks_antithetic_mse(q, k, mu, t * S0, M)[0], label=f"RKS t={t}")
        rks.append(e2)
        p = GMMParams(np.zeros(1), mu[None], (t * S0)[None])
        noise = draw_gmm_noise(rng, 1, n * M, d)
        est = _replicates(gmm_prf_features(q, noise, p), gmm_prf_features(k, noise, p), 1, 1, n)[:, 0, 0]
        e2p = (est - gmm_prf_kernel(q, k, p)[0, 0]) ** 2
        assert_mean_within_se(e2p[:, None], gmm_prf_mse(q, k, p, M)[0], label=f"PRF t={t}")
        prf.append(e2p)
    for series in (rks, prf):
        for a, b in zip(series[:-1], series[1:], strict=True):
            se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
            assert a.mean() - b.mean() > 5 * se, (a.mean(), b.mean(), se)


# ------------------------------------------------------------------------------------------------------------
# gradients


def _gargs(rng, diagonal=False, C=3, d=4, Mc=2):
    return {"x": 0.5 * rng.standard_normal((2, 3, d)), "noise": draw_gmm_noise(rng, C, C * Mc, d),
            "params": _params(rng, C, d, diagonal=diagonal)}


@pytest.mark.parametrize("diagonal", [False, True])
def test_frequencies_gradients(rng, diagonal):
    a = _gargs(rng, diagonal)
    check_vjp(gmm_frequencies_fwd, gmm_frequencies_bwd, {"noise": a["noise"], "params": a["params"]})


@pytest.mark.parametrize("diagonal", [False, True])
def test_rks_gradients(rng, diagonal):
    check_vjp(gmm_rks_features_fwd, gmm_rks_features_bwd, _gargs(rng, diagonal))


@pytest.mark.parametrize("diagonal", [False, True])
def test_prf_gradients(rng, diagonal):
    check_vjp(gmm_prf_features_fwd, gmm_prf_features_bwd, _gargs(rng, diagonal))


@pytest.mark.parametrize("with_log_scale", [True, False])
def test_prf_stable_gradients(rng, with_log_scale):
    a = _gargs(rng, True)
    if with_log_scale:
        check_vjp(gmm_prf_features_stable_fwd, gmm_prf_features_stable_bwd, a)
    else:
        check_vjp(gmm_prf_features_stable_fwd, lambda dphi, c: gmm_prf_features_stable_bwd((dphi, None), c),
                  a, output=lambda y: y[0])


def _split(fwd, bwd):
    """The pair with logits, mu and S as separate arguments, so each parameter is checked on its own scale."""
    def f(x, noise, logits, mu, S):
        return fwd(x, noise, GMMParams(logits, mu, S))

    def b(dy, cache):
        g = bwd(dy, cache)
        return {"x": g.x, "noise": g.noise, "logits": g.params.logits, "mu": g.params.mu, "S": g.params.S}
    return f, b


def _split_args(a):
    return {"x": a["x"], "noise": a["noise"], **a["params"]._asdict()}


@pytest.mark.parametrize("which", ["rks", "prf"])
def test_each_parameter_separately(rng, which):
    pair = (gmm_rks_features_fwd, gmm_rks_features_bwd) if which == "rks" else (gmm_prf_features_fwd,
                                                                                gmm_prf_features_bwd)
    errs = check_vjp(*_split(*pair), _split_args(_gargs(rng, which == "prf")))
    assert set(errs) >= {"x", "noise", "logits", "mu", "S"}


def test_gradient_check_catches_a_wrong_logit_gradient(rng):
    f, b = _split(gmm_rks_features_fwd, gmm_rks_features_bwd)

    def bad(dy, cache):
        g = b(dy, cache)
        g["logits"] = g["logits"] * (1 + 1e-4)
        return g

    with pytest.raises(AssertionError, match="logits"):
        check_vjp(f, bad, _split_args(_gargs(rng)))


# ------------------------------------------------------------------------------------------------------------
# bad inputs


def test_bad_inputs(rng):
    with pytest.raises(ValueError, match="C: expected a positive integer; got 0"):
        init_gmm(rng, 0, 4)
    with pytest.raises(ValueError, match="C: expected a positive integer; got -1"):
        draw_gmm_noise(rng, -1, 4, 4)
    with pytest.raises(ValueError, match="M: expected a multiple of C = 3"):
        draw_gmm_noise(rng, 3, 10, 4)
    with pytest.raises(ValueError, match="M: expected an even number"):
        draw_gmm_antithetic_noise(rng, 7, 4)
    with pytest.raises(ValueError, match="covariance"):
        init_gmm(rng, 2, 4, covariance="spherical")
    with pytest.raises(TypeError, match="rng"):
        init_gmm(None, 2, 4)
    p = _params(rng, 2, 4)
    noise = draw_gmm_noise(rng, 2, 6, 4)
    x = rng.standard_normal((3, 4))
    bad = p.logits.copy()
    bad[1] = np.inf
    with pytest.raises(ValueError, match="params.logits: expected finite values"):
        gmm_rks_features(x, noise, p._replace(logits=bad))
    with pytest.raises(ValueError, match=r"params.S: expected shape \(C, d, d\)"):
        gmm_rks_features(x, noise, p._replace(S=p.S[:, :3, :]))
    with pytest.raises(ValueError, match=r"params.S: expected shape \(C, d\)"):
        gmm_prf_features(x, noise, p._replace(S=np.ones((3, 4))))
    with pytest.raises(ValueError, match=r"noise: expected shape \(C, Mc, d\) with C = 2"):
        gmm_rks_features(x, draw_gmm_noise(rng, 3, 6, 4), p)
    with pytest.raises(ValueError, match=r"params.mu: expected shape \(C, d\) with .*d = 5 \(from x\)"):
        gmm_rks_features(rng.standard_normal((3, 5)), noise, p)
    with pytest.raises(ValueError, match=r"params.logits: expected at least one component"):
        gmm_rks_features(x, noise[:0], GMMParams(np.zeros(0), np.zeros((0, 4)), np.zeros((0, 4, 4))))
    with pytest.raises(TypeError, match="params: expected GMMParams"):
        gmm_rks_features(x, noise, tuple(p))
    with pytest.raises(ValueError, match="M: expected a positive multiple of C = 2"):
        gmm_rks_mse(x, x, p, 5)


def test_closed_forms_run_on_every_namespace(xp, rng):
    p = _params(rng, 2, 3)
    q, k = 0.5 * rng.standard_normal((2, 3)), 0.5 * rng.standard_normal((4, 3))
    qx, kx = asxp(xp, q), asxp(xp, k)
    px = gmm_as_xp(p, like=qx)
    for fn in (gmm_rks_kernel, gmm_prf_kernel):
        assert_close(fn(qx, kx, px), asxp(xp, fn(q, k, p)), rtol=1e-12)
    for fn in (gmm_rks_mse, gmm_prf_mse):
        assert_close(fn(qx, kx, px, 4), asxp(xp, fn(q, k, p, 4)), rtol=1e-12)
    mu, S = asxp(xp, p.mu[0]), asxp(xp, p.S[0])
    assert_close(gmm_rks_antithetic_mse(qx, kx, mu, S, 4),
                 asxp(xp, gmm_rks_antithetic_mse(q, k, p.mu[0], p.S[0], 4)), rtol=1e-12, atol=1e-300)


def test_float32_follows_float64(xp, rng):
    """float32 is supported: same dtype out, within 1e-4 relative (1e-5 absolute) of the float64 reference."""
    p = _params(rng, 2, 4, diagonal=True)
    noise = draw_gmm_noise(rng, 2, 8, 4)
    x = 0.5 * rng.standard_normal((3, 4))
    for fn in (gmm_rks_features, gmm_prf_features):
        y64 = fn(asxp(xp, x), asxp(xp, noise), gmm_as_xp(p, like=asxp(xp, x)))
        x32 = asxp(xp, x, xp.float32)
        y32 = fn(x32, asxp(xp, noise, xp.float32), gmm_as_xp(p, like=x32))
        assert y32.dtype == xp.float32
        assert_close(xp.astype(y32, xp.float64), y64, rtol=1e-4, atol=1e-5)
