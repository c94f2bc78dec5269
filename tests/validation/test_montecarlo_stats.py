"""validation.montecarlo's statistics beyond the mean test: zero-SE entries reported apart, the MSE test, the
one-sided variance test and binomial coverage -- each accepts the right answer and rejects a planted wrong
one."""

from __future__ import annotations

import numpy as np
import pytest

from validation.montecarlo import binomial_coverage, mean_test, mse_test, scalar_z, variance_test


def test_zero_se_entries_are_compared_exactly_and_reported_apart(rng):
    x = np.concatenate([rng.standard_normal((400, 3)), np.ones((400, 1))], axis=1)   # last column: zero SE
    r = mean_test(x, [0.0, 0.0, 0.0, 1.0])
    assert r.passed and r.n_positive_se == 3 and r.zero_se_count == 1 and r.zero_se_max_dev == 0.0
    assert np.isfinite(r.z) and np.isnan(r.z_signed[3]) and 0.0 < r.mean_z2 < 5.0
    bad = mean_test(x, [0.0, 0.0, 0.0, 1.0 + 1e-9])                                 # zero-SE mismatch
    assert not bad.passed and bad.zero_se_max_dev == pytest.approx(1e-9) and np.isfinite(bad.z)
    shifted = mean_test(x, [1.0, 0.0, 0.0, 1.0])                                    # a positive-SE mismatch
    assert not shifted.passed and shifted.z > 10 and shifted.mean_z2 > 30


def test_se_floor_treats_rounding_noise_as_exact(rng):
    x = 1e-17 * rng.standard_normal((100, 2))                  # rounding-level noise around an exact 0
    assert mean_test(x, 4e-16).z > 5                             # a huge z from rounding noise alone ...
    r = mean_test(x, 4e-16, se_floor=1e-15, atol=1e-15)   # ... is an exact comparison with a floor
    assert r.passed and r.zero_se_count == 2 and r.n_positive_se == 0 and np.isnan(r.mean_z2)


def test_mse_test(rng):
    s, n = 1.5, 40000
    est = 3.0 + s * rng.standard_normal((n, 2))
    assert mse_test(est, 3.0, s ** 2).passed
    assert not mse_test(est, 3.0, 1.1 * s ** 2).passed


def test_variance_test_is_one_sided(rng):
    x = 2.0 * rng.standard_normal((20000, 2))                    # Var = 4
    assert variance_test(x, 4.0).passed and variance_test(x, 10.0).passed
    r = variance_test(x, 3.5)
    assert not r.passed and r.z > 5
    np.testing.assert_allclose(r.se, 4.0 * np.sqrt(2.0 / 20000), rtol=0.1)   # Gaussian: sqrt(2 s^4 / n)


def test_binomial_coverage(rng):
    hits = int(np.sum(rng.random(10000) < 0.95))
    c = binomial_coverage(hits, 10000, 0.95)
    assert c.passed and c.pvalue > 1e-4
    assert not binomial_coverage(hits, 10000, 0.90).passed
    with pytest.raises(ValueError, match="hits"):
        binomial_coverage(10001, 10000, 0.5)


def test_scalar_z(rng):
    m, se, z = scalar_z(rng.standard_normal(10000), 0.0)
    assert abs(z) < 5 and se == pytest.approx(0.01, rel=0.05)
    assert scalar_z(np.ones(5), 1.0)[2] == 0.0 and scalar_z(np.ones(5), 2.0)[2] == float("inf")
