"""NumPy-only edge: statistical assertions for Monte Carlo estimators, with tolerances from their variance.

Every tolerance here is a number of standard errors estimated from the replicates themselves (ddof = 1), never
a bound typed in by hand:

* :func:`mean_test` / :func:`assert_mean_within_se`: is the replicates' mean equal to `expected`?
  ``|mean - expected| <= n_se * std / sqrt(n)`` elementwise. With ``n_se = 5`` a correct estimator fails one
  element in 1.7 million (normal approximation); ``detectable = n_se * se`` is the smallest deviation the test
  is sure to see, and is reported so that a check can show it would have caught a wrong formula.
* :func:`mse_estimate` / :func:`assert_mse_matches`: is the mean squared error equal to a predicted MSE?
  The squared errors e^2 are themselves the replicates, so the standard error of their mean is
  ``std(e^2) / sqrt(n)``, a fourth-moment quantity (Var(e^2) = E[e^4] - MSE^2).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .assertions import to_numpy

__all__ = ["MeanTest", "MseEstimate", "mean_test", "assert_mean_within_se", "mse_estimate",
           "assert_mse_matches"]


class MeanTest(NamedTuple):
    mean: np.ndarray        # (...) replicate mean
    se: np.ndarray          # (...) standard error of the mean (ddof = 1)
    expected: np.ndarray    # (...) target
    z: float                # max |mean - expected| / se over elements
    n: int                  # replicates
    n_se: float             # tolerance in standard errors
    detectable: float       # max over elements of n_se * se: deviations larger than this are caught
    passed: bool


class MseEstimate(NamedTuple):
    mse: np.ndarray   # (...) mean of the squared errors
    se: np.ndarray    # (...) its standard error, std(e^2) / sqrt(n) (fourth moment)
    n: int


def _as_np(x: Any) -> np.ndarray:
    return np.asarray(to_numpy(x), dtype=np.float64) if not np.isscalar(x) else np.asarray(x, dtype=np.float64)


def mean_test(samples: Any, expected: Any, *, n_se: float = 5.0, atol: float = 0.0) -> MeanTest:
    """Test ``mean(samples, axis=0) == expected`` within `n_se` standard errors (plus `atol`).

    Parameters
    ----------
    samples : (n, ...) array
        Independent replicates of the estimator (n >= 2).
    expected : array broadcastable to ``samples.shape[1:]``
    n_se : float
        Tolerance in standard errors.
    atol : float
        Absolute slack for estimators whose replicates can be identical (zero standard error); 0 by default.
    """
    x = _as_np(samples)
    if x.ndim < 1 or x.shape[0] < 2:
        raise ValueError(f"samples: expected shape (n, ...) with n >= 2 replicates; got {x.shape}")
    n = x.shape[0]
    mean = x.mean(axis=0)
    se = x.std(axis=0, ddof=1) / np.sqrt(n)
    exp = np.broadcast_to(_as_np(expected), mean.shape)
    dev = np.abs(mean - exp)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, dev / se, np.where(dev > atol, np.inf, 0.0))
    passed = bool(np.all(dev <= n_se * se + atol))
    return MeanTest(mean, se, exp, float(np.max(z)) if z.size else 0.0, n, n_se,
                    float(np.max(n_se * se)) if se.size else 0.0, passed)


def assert_mean_within_se(samples: Any, expected: Any, *, n_se: float = 5.0, atol: float = 0.0,
                          label: str = "", seed: Any = None) -> MeanTest:
    """Assert :func:`mean_test`; the message carries estimate, expected value, standard error and seed."""
    r = mean_test(samples, expected, n_se=n_se, atol=atol)
    if not r.passed:
        dev = np.abs(r.mean - r.expected)
        with np.errstate(divide="ignore", invalid="ignore"):
            zz = np.where(r.se > 0, dev / r.se, np.inf)
        i = np.unravel_index(int(np.argmax(zz)), zz.shape) if zz.ndim else ()
        raise AssertionError(
            f"{label + ': ' if label else ''}Monte Carlo mean differs from the expected value by "
            f"{r.z:.2f} standard errors (> {n_se}); worst element {tuple(int(j) for j in i)}: estimate "
            f"{float(r.mean[i]):.6e}, expected {float(r.expected[i]):.6e}, se {float(r.se[i]):.3e}, "
            f"n = {r.n}, seed = {seed}"
        )
    return r


def mse_estimate(estimates: Any, target: Any) -> MseEstimate:
    """MSE of replicated `estimates` ``(n, ...)`` against `target`, with its fourth-moment standard error."""
    x = _as_np(estimates)
    if x.ndim < 1 or x.shape[0] < 2:
        raise ValueError(f"estimates: expected shape (n, ...) with n >= 2 replicates; got {x.shape}")
    e2 = (x - _as_np(target)) ** 2
    n = x.shape[0]
    return MseEstimate(e2.mean(axis=0), e2.std(axis=0, ddof=1) / np.sqrt(n), n)


def assert_mse_matches(estimates: Any, target: Any, predicted_mse: Any, *, n_se: float = 5.0,
                       label: str = "", seed: Any = None) -> MeanTest:
    """Assert that the empirical MSE of `estimates` equals `predicted_mse` within `n_se` standard errors."""
    x = _as_np(estimates)
    e2 = (x - _as_np(target)) ** 2
    return assert_mean_within_se(e2, predicted_mse, n_se=n_se, label=label or "MSE", seed=seed)
