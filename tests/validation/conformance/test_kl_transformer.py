"""The KL-Transformer authors' GMM maps: findings established without the validator; skip without the
checkout."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from validation.conformance import kl_transformer as kl  # noqa: E402

D = 16


def test_gmm_prf_closed_form(sources):
    rng = np.random.default_rng(0)
    x, om = 0.5 * rng.standard_normal((2, 3, 8, D)), rng.standard_normal((32, D))
    phi = kl.gmm_prf(sources(kl.SUBDIR))(torch.from_numpy(x), torch.from_numpy(om)).detach().numpy()
    want = np.exp(x @ om.T - np.sum(x * x, -1, keepdims=True)) / np.sqrt(32)      # Eq. 9's offset |x|^2
    np.testing.assert_allclose(phi, want, rtol=1e-12)


def test_gmm_rks_estimates_twice_the_kernel(sources):
    """With mean 0 both halves are the [cos, sin] features of the same projections, each scaled by
    1/sqrt(m): phi(x).phi(y) = 2 (1/m) sum_j cos(w_j.(x - y)) exactly, whose mean over draws is twice
    exp(-|x - y|^2/2) (checked by Monte Carlo: the standard error from the spread of 300 estimates)."""
    fn = kl.gmm_rks(sources(kl.SUBDIR))
    rng = np.random.default_rng(1)
    x = 0.15 * rng.standard_normal((1, 1, 2, D))
    est = []
    for _ in range(300):
        om = rng.standard_normal((32, D))
        p = fn(torch.from_numpy(x), torch.from_numpy(om)).detach().numpy()[0, 0]
        exact = 2 * np.mean(np.cos(om @ (x[0, 0, 0] - x[0, 0, 1])))
        np.testing.assert_allclose(p[0] @ p[1], exact, rtol=1e-12)
        est.append(p[0] @ p[1])
    est = np.array(est)
    se, kern = est.std(ddof=1) / np.sqrt(len(est)), np.exp(-np.sum((x[0, 0, 0] - x[0, 0, 1]) ** 2) / 2)
    assert abs(est.mean() - 2 * kern) / se < 4
    assert abs(est.mean() - kern) / se > 10
