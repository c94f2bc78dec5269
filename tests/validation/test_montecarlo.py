"""Monte Carlo assertions: they accept an unbiased estimator and reject a biased one; the MSE standard error
comes from the fourth moment."""

from __future__ import annotations

import numpy as np
import pytest

from validation import assert_close, assert_mean_within_se, assert_mse_matches, mean_test, mse_estimate


def test_accepts_unbiased_estimator(rng):
    samples = rng.exponential(2.0, size=(20000, 3))
    r = assert_mean_within_se(samples, [2.0, 2.0, 2.0])
    assert r.passed and r.n == 20000 and r.detectable < 0.1


def test_rejects_biased_estimator(rng):
    """Companion: the same samples against the wrong target (2.1 instead of 2) are rejected."""
    samples = rng.exponential(2.0, size=(20000,))
    with pytest.raises(AssertionError, match=r"standard errors .*expected 2\.1"):
        assert_mean_within_se(samples, 2.1, seed=0)


def test_false_alarm_rate_is_small(rng):
    """Across 400 independent correct tests at 5 SE, none fails (expected false alarms: 400 * 5.7e-7)."""
    fails = sum(not mean_test(rng.standard_normal(50), 0.0).passed for _ in range(400))
    assert fails == 0


def test_mse_standard_error_uses_fourth_moment(rng):
    """For Gaussian errors e ~ N(0, s^2): MSE = s^2 and Var(e^2) = 2 s^4, so se = s^2 sqrt(2/n)."""
    s, n = 1.5, 40000
    est = 3.0 + s * rng.standard_normal((n, 2))
    r = mse_estimate(est, 3.0)
    np.testing.assert_allclose(r.se, s**2 * np.sqrt(2.0 / n), rtol=0.05)
    assert_mse_matches(est, 3.0, s**2)
    with pytest.raises(AssertionError):
        assert_mse_matches(est, 3.0, 1.05 * s**2)


def test_needs_two_replicates():
    with pytest.raises(ValueError, match=r"samples: expected shape \(n, \.\.\.\) with n >= 2"):
        mean_test(np.ones((1, 3)), 1.0)


def test_zero_variance_needs_exact_match():
    assert mean_test(np.ones((5, 2)), 1.0).passed
    assert not mean_test(np.ones((5, 2)), 1.0 + 1e-9).passed
    assert mean_test(np.ones((5, 2)), 1.0 + 1e-9, atol=1e-8).passed


def test_assert_close_checks_metadata_first():
    a = np.ones(3)
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close(a, np.ones(4))
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_close(a, np.ones(3, dtype=np.float32))
    with pytest.raises(AssertionError, match=r"1 of 3 entries differ.*worst at \(1,\)"):
        assert_close(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.1, 3.0]))
    assert_close(np.array([0.0, 1.0]), np.array([1e-20, 1.0]), atol=1e-15)


# ----------------------------------------------------------------------------------------------------------
# assert_mse_matches(atol=): an entry whose true MSE is 0 (an estimator exact there, up to rounding)


def _trig_estimates_with_exact_diagonal(seed):
    """Trig (RKS) kernel estimates on (q, q) pairs: off the diagonal a real MSE, on it cos^2 + sin^2 = 1 up to
    rounding, i.e. true MSE 0 with squared errors ~ (eps)^2 of rounding noise."""
    from refattn.features import gaussian_kernel, trig_features, trig_mse
    from tests.features.test_trig import _points, per_draw_kernel

    rng = np.random.default_rng(seed)
    d, m, n = 4, 4, 20000
    q = _points(rng, 3, d, 1.0)
    est = per_draw_kernel(trig_features, q, q, rng.standard_normal((n, m, d)), 2)   # (n, 3, 3)
    return est, gaussian_kernel(q, q), trig_mse(q, q, m)


#: Rounding scale of a kernel estimate of size ~1 (sums of m = 4 products, each within a few eps): the atol
#: these tests give is (16 eps)^2 ~ 1.3e-29, ten orders below the smallest non-zero MSE here (~1e-3).
ROUNDING_ATOL = (16 * np.finfo(np.float64).eps) ** 2


def test_mse_atol_accepts_a_zero_true_mse(seed):
    est, target, mse = _trig_estimates_with_exact_diagonal(seed)
    assert np.all(np.diag(mse) == 0) and np.all(mse[~np.eye(3, dtype=bool)] > 1e-4)
    with pytest.raises(AssertionError, match="standard errors"):      # without atol: rounding noise, z ~ 100
        assert_mse_matches(est, target, mse)
    r = assert_mse_matches(est, target, mse, atol=ROUNDING_ATOL)
    assert r.passed and r.n_positive_se == 9


def test_mse_atol_does_not_hide_a_wrong_formula(seed):
    """Companion: with the same atol, the off-diagonal MSE doubled (the 2/m scale) is still rejected."""
    est, target, mse = _trig_estimates_with_exact_diagonal(seed)
    with pytest.raises(AssertionError, match="standard errors"):
        assert_mse_matches(est, target, 2 * mse, atol=ROUNDING_ATOL)


@pytest.mark.parametrize("atol", [-1e-30, float("nan"), float("inf"), "0", True])
def test_mse_atol_bad_value_names_the_argument(atol):
    x = np.ones((4, 2))
    with pytest.raises(ValueError, match=r"atol: expected a finite number >= 0; got"):
        assert_mse_matches(x, 1.0, 0.0, atol=atol)
