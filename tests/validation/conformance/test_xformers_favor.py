"""xFormers' favor: findings established without the validator; skip without the checkout."""

import numpy as np
import pytest
import scipy.special

torch = pytest.importorskip("torch")

from validation.conformance import xformers_favor as xf  # noqa: E402

from .test_fast_transformers import closed_form_favor  # noqa: E402

D = 16


def test_smreg_draw_has_norm_sqrt_d(sources):
    """SMReg's projections (m = d) are orthogonal with norm sqrt(d) exactly; for such w (uniform direction)
    E exp(2 w.x) = 0F1(; d/2; d |x|^2) (the sphere's moment generating function), so the positive estimate
    of exp(|x|^2), E exp(2 w.x - |x|^2), is off by the factor 0F1(; d/2; d |x|^2) / exp(2 |x|^2)."""
    fn = xf.draw(sources(xf.SUBDIR), "SMReg")
    w = fn(0, D, D).numpy().astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(w, axis=1), np.sqrt(D), rtol=1e-6)
    np.testing.assert_allclose(w @ w.T, D * np.eye(D), atol=1e-5 * D)
    r2 = 0.36
    factor = scipy.special.hyp0f1(D / 2, D * r2) / np.exp(2 * r2)
    assert factor < 0.99                                  # about -2.6 % at |x| = 0.6, d = 16
    rng = np.random.default_rng(0)                        # the closed form, by Monte Carlo on its own draws
    x = rng.standard_normal(D)
    x *= np.sqrt(r2) / np.linalg.norm(x)
    est = np.array([np.exp(2 * fn(s, D, D).numpy().astype(np.float64) @ x) for s in range(300)]).ravel()
    se = est.std(ddof=1) / np.sqrt(len(est) / D)          # rows of one draw are dependent: count draws
    assert abs(est.mean() - scipy.special.hyp0f1(D / 2, D * r2)) / se < 4


def test_epsilon_is_a_constant_factor(sources):
    rng = np.random.default_rng(1)
    x, om = (torch.from_numpy(a) for a in (rng.standard_normal((2, 8, D)), rng.standard_normal((32, D))))
    a = xf.feature_map(sources(xf.SUBDIR), "SMOrf")(x, om).numpy()
    b = xf.feature_map(sources(xf.SUBDIR), "SMOrf", 0.0)(x, om).numpy()
    np.testing.assert_allclose(a / b, np.exp(1e-6), rtol=1e-12)
    xs = x.numpy() * D ** -0.25
    want = np.exp(xs @ om.numpy().T - 0.5 * np.sum(xs * xs, -1, keepdims=True)) / np.sqrt(32)
    np.testing.assert_allclose(b, want, rtol=1e-12)


def test_hyperbolic_closed_form(sources):
    rng = np.random.default_rng(2)
    x, om = rng.standard_normal((2, 8, D)), rng.standard_normal((32, D))
    phi = xf.feature_map(sources(xf.SUBDIR), "SMHyperbolic", 0.0)(torch.from_numpy(x), torch.from_numpy(om))
    np.testing.assert_allclose(phi.numpy(), closed_form_favor(x, om), rtol=1e-12)


def test_causal_output_is_running_mean_of_own_values(sources):
    rng = np.random.default_rng(3)
    q, k, v = (torch.from_numpy(rng.standard_normal((1, 2, 10, D))) for _ in range(3))
    om = torch.from_numpy(rng.standard_normal((32, D)))
    y = xf.favor_attention(sources(xf.SUBDIR))(q, k, v, om, True).detach().numpy()
    vv = v.numpy()
    want = np.cumsum(vv, -1) / np.arange(1, D + 1)        # out[i, e] = mean(v[i, :e + 1])
    np.testing.assert_allclose(y, want, rtol=1e-10)


def test_favor_attention_underflows_to_nan(sources):
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((1, 1, 6, D)) for _ in range(3))
    k[..., 3:, :] *= 60.0                     # |k'|^2 / 2 ~ 60^2 d / (2 sqrt d) = 7200: exp underflows
    q[..., 3:, :] *= 60.0
    om = rng.standard_normal((32, D))
    y = xf.favor_attention(sources(xf.SUBDIR))(*(torch.from_numpy(a) for a in (q, k, v, om)), True)
    assert np.isnan(y.detach().numpy()).any()
    s = q[0, 0] @ k[0, 0].T / np.sqrt(D)                   # exact causal softmax attention stays finite
    s = np.where(np.tril(np.ones((6, 6))) > 0, s, -np.inf)
    a = np.exp(s - s.max(-1, keepdims=True))
    assert np.all(np.isfinite(a / a.sum(-1, keepdims=True) @ v[0, 0]))


def test_smorf_draw_is_biased_along_all_ones(sources):
    """Over 12000 SMOrf draws (m = d = 16) the positive estimate of exp(|x|^2), |x| = 0.6, is biased low
    along all-ones (z < -5; 20000 draws: z = -10.2, -2.2 %), while along e1, where each projection's
    coordinate is exactly N(0, 1) (a chi(m) norm times a coordinate of a uniform unit vector of R^m), it is
    within noise."""
    from .test_performer_pytorch import positive_estimate_z
    fn = xf.draw(sources(xf.SUBDIR), "SMOrf")
    draws = [fn(s, D, D).numpy().astype(np.float64) for s in range(12000)]
    assert positive_estimate_z(draws, np.full(D, 0.6 / np.sqrt(D))) < -5
    assert abs(positive_estimate_z(draws, 0.6 * np.eye(D)[0])) < 4


def test_smorf_row_norms_are_not_chi(sources):
    """A row of an unbiased draw is N(0, I_d), so |w|^2 ~ chi^2(d): mean d, variance 2d = 32, and the sample
    variance of n = 2000 independent values has standard error sqrt((mu_4 - sigma^4) / n) with mu_4 = sigma^4
    (3 + 12/d) (chi^2's excess kurtosis 12/d): sqrt(2816 / 2000) = 1.19. SMOrf's row norms (row i mod d of
    draw i, so independent) have the right mean but a variance near 6: more than 10 standard errors below 32;
    a KS test against chi(d) rejects at p < 1e-10."""
    import scipy.stats
    fn = xf.draw(sources(xf.SUBDIR), "SMOrf")
    n = 2000
    sq = np.array([np.sum(fn(s, D, D).numpy().astype(np.float64)[s % D] ** 2) for s in range(n)])
    sigma2 = 2.0 * D
    se = np.sqrt(sigma2 ** 2 * (3 + 12 / D - 1) / n)
    assert abs(sq.mean() - D) / np.sqrt(sigma2 / n) < 4                     # the mean is chi^2's
    assert (sq.var(ddof=1) - sigma2) / se < -10
    assert scipy.stats.kstest(np.sqrt(sq), scipy.stats.chi(D).cdf).pvalue < 1e-10
