"""NumPy-only edge: statistical assertions for Monte Carlo estimators, with tolerances from their variance.

Every tolerance here is a number of standard errors estimated from the replicates themselves (ddof = 1), never
a bound typed in by hand:

* :func:`mean_test` / :func:`assert_mean_within_se`: is the replicates' mean equal to `expected`?
  ``|mean - expected| <= n_se * std / sqrt(n)`` elementwise. With ``n_se = 5`` a correct estimator fails one
  element in 1.7 million (normal approximation); ``detectable = n_se * se`` is the smallest deviation the test
  is sure to see, and is reported so that a check can show it would have caught a wrong formula.
  z-scores are taken only over entries with positive standard error; entries whose replicates are all equal
  (zero SE, e.g. a causal position 0, or SE below `se_floor`: rounding noise) are compared with `expected`
  exactly (within `atol`) and reported apart (``zero_se_count``, ``zero_se_max_dev``), never as an infinite or
  enormous z.
* :func:`mse_estimate` / :func:`mse_test` / :func:`assert_mse_matches`: is the mean squared error equal to a
  predicted MSE? The squared errors e^2 are themselves the replicates, so the standard error of their mean is
  ``std(e^2) / sqrt(n)``, a fourth-moment quantity (Var(e^2) = E[e^4] - MSE^2).
* :func:`variance_test`: a one-sided test of a variance against a bound (is Var <= bound?), with the
  fourth-moment standard error of the sample variance.
* :func:`binomial_coverage`: does an interval (or any event) occur at its nominal rate? Binomial z and the
  exact two-sided p-value.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .assertions import to_numpy

__all__ = ["MeanTest", "MseEstimate", "VarianceTest", "Coverage", "mean_test", "assert_mean_within_se",
           "mse_estimate", "mse_test", "assert_mse_matches", "variance_test", "binomial_coverage", "scalar_z",
           "MeanZ2Test", "mean_z2_test"]


class MeanTest(NamedTuple):
    """Result of :func:`mean_test`: mean, standard error, z-scores, detectable deviation, ``passed``."""

    mean: np.ndarray        # (...) replicate mean
    se: np.ndarray          # (...) standard error of the mean (ddof = 1)
    expected: np.ndarray    # (...) target
    z: float                # max |mean - expected| / se over elements
    n: int                  # replicates
    n_se: float             # tolerance in standard errors
    detectable: float       # max over elements of n_se * se: deviations larger than this are caught
    passed: bool            # every positive-SE entry within n_se SE + atol, every zero-SE entry within atol
    z_signed: np.ndarray    # (...) (mean - expected) / se where se > 0, NaN on zero-SE entries
    mean_z2: float          # mean z^2 over positive-SE entries (about 1 for a correct estimator); NaN if none
    n_positive_se: int      # entries with se > se_floor (the z statistics are over these)
    zero_se_count: int      # entries with se <= se_floor, compared exactly
    zero_se_max_dev: float  # max |mean - expected| over the zero-SE entries (0 when there are none)


class MseEstimate(NamedTuple):
    """Result of :func:`mse_estimate`: ``mse``, its fourth-moment standard error ``se``, and ``n``."""

    mse: np.ndarray   # (...) mean of the squared errors
    se: np.ndarray    # (...) its standard error, std(e^2) / sqrt(n) (fourth moment)
    n: int


def _as_np(x: Any) -> np.ndarray:
    if np.isscalar(x):
        return np.asarray(x, dtype=np.float64)
    return np.asarray(to_numpy(x), dtype=np.float64)


def mean_test(samples: Any, expected: Any, *, n_se: float = 5.0, atol: float = 0.0, se_floor: float = 0.0
              ) -> MeanTest:
    """Test ``mean(samples, axis=0) == expected`` within `n_se` standard errors (plus `atol`).

    z statistics are over the entries with ``se > se_floor``; the others (replicates all equal) are compared
    exactly: ``|mean - expected| <= atol``, and reported apart.

    Parameters
    ----------
    samples : (n, ...) array
        Independent replicates of the estimator (n >= 2).
    expected : array broadcastable to ``samples.shape[1:]``
        The value the estimator's mean should have.
    n_se : float
        Tolerance in standard errors.
    atol : float
        Absolute slack for estimators whose replicates can be identical (zero standard error); 0 by default.
    se_floor : float
        Entries with a standard error at or below this are treated as zero-SE (rounding noise, e.g. 1e-17 on a
        diagonal that is exact up to float error); 0 by default.

    Returns
    -------
    MeanTest
        ``mean``, ``se`` (ddof = 1) and ``expected`` of shape ``samples.shape[1:]``, the largest ``z``, ``n``,
        ``n_se``, ``detectable = max(n_se * se)`` (the smallest deviation sure to be caught), ``passed``, the
        signed z-scores ``z_signed`` (NaN on zero-SE entries), ``mean_z2`` and the zero-SE counts.

    Raises
    ------
    ValueError
        If `samples` has fewer than 2 replicates.

    See Also
    --------
    assert_mean_within_se : the same test, raising on failure.

    Examples
    --------
    >>> import numpy as np
    >>> from validation import mean_test
    >>> samples = 1.0 + np.random.default_rng(0).standard_normal((1000, 3))   # (n, ...) replicates
    >>> result = mean_test(samples, 1.0)
    >>> result.passed, result.n, result.se.shape
    (True, 1000, (3,))
    >>> mean_test(samples, 1.2).passed           # a bias of 0.2 is about 6 standard errors (se ~ 0.03)
    False
    """
    x = _as_np(samples)
    if x.ndim < 1 or x.shape[0] < 2:
        raise ValueError(f"samples: expected shape (n, ...) with n >= 2 replicates; got {x.shape}")
    n = x.shape[0]
    mean = x.mean(axis=0)
    se = x.std(axis=0, ddof=1) / np.sqrt(n)
    exp = np.broadcast_to(_as_np(expected), mean.shape)
    pos = se > se_floor
    with np.errstate(divide="ignore", invalid="ignore"):
        zs = np.where(pos, (mean - exp) / np.where(pos, se, 1.0), np.nan)
    zp = np.abs(zs[pos])
    dev0 = np.abs(mean - exp)[~pos]
    zero_max = float(np.max(dev0)) if dev0.size else 0.0
    dev_pos = np.abs(mean - exp)[pos]
    passed = bool(np.all(dev_pos <= n_se * se[pos] + atol) and zero_max <= atol and np.all(np.isfinite(mean)))
    return MeanTest(mean, se, exp, float(np.max(zp)) if zp.size else 0.0, n, n_se,
                    float(np.max(n_se * se)) if se.size else 0.0, passed, zs,
                    float(np.mean(zp ** 2)) if zp.size else float("nan"), int(np.count_nonzero(pos)),
                    int(dev0.size), zero_max)


def assert_mean_within_se(samples: Any, expected: Any, *, n_se: float = 5.0, atol: float = 0.0,
                          label: str = "", seed: Any = None) -> MeanTest:
    """Assert that the replicates' mean equals `expected` within `n_se` standard errors (:func:`mean_test`).

    ``|mean - expected| <= n_se * std / sqrt(n) + atol`` elementwise, the standard error estimated from the
    replicates (ddof = 1); entries whose replicates are all equal are compared within `atol`.

    Parameters
    ----------
    samples : (n, ...) array
        Independent replicates of the estimator (n >= 2), of any array-API library (compared in float64).
    expected : array broadcastable to ``samples.shape[1:]``
        The value the estimator's mean should have (e.g. the exact kernel).
    n_se : float, default 5.0
        Tolerance in standard errors (a correct estimator fails one element in 1.7 million).
    atol : float, default 0.0
        Absolute slack, for entries whose replicates can be identical (zero standard error).
    label : str, default ""
        Prefix of the failure message.
    seed : object, optional
        The seed the replicates came from, quoted in the failure message.

    Returns
    -------
    MeanTest
        The test's figures (see :func:`mean_test`), when it passes.

    Raises
    ------
    AssertionError
        The mean differs by more than `n_se` standard errors; the message gives the worst element, the
        estimate, the expected value, the standard error, n and the seed.
    ValueError
        If `samples` has fewer than 2 replicates.

    Examples
    --------
    >>> import numpy as np
    >>> from validation import assert_mean_within_se
    >>> samples = 1.0 + np.random.default_rng(0).standard_normal((1000, 3))
    >>> assert_mean_within_se(samples, 1.0, seed=0).passed
    True
    >>> assert_mean_within_se(samples, 1.2, label="demo", seed=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: demo: Monte Carlo mean differs from the expected value by ... standard errors (> 5.0); ...
    """
    r = mean_test(samples, expected, n_se=n_se, atol=atol)
    if not r.passed:
        dev = np.abs(r.mean - r.expected)
        with np.errstate(divide="ignore", invalid="ignore"):
            zz = np.where(r.se > 0, dev / r.se, np.where(dev > atol, np.inf, 0.0))
        i = np.unravel_index(int(np.argmax(zz)), zz.shape) if zz.ndim else ()
        raise AssertionError(
            f"{label + ': ' if label else ''}Monte Carlo mean differs from the expected value by "
            f"{r.z:.2f} standard errors (> {n_se}); worst element {tuple(int(j) for j in i)}: estimate "
            f"{float(r.mean[i]):.6e}, expected {float(r.expected[i]):.6e}, se {float(r.se[i]):.3e}, "
            f"n = {r.n}, seed = {seed}"
        )
    return r


def mse_estimate(estimates: Any, target: Any) -> MseEstimate:
    """MSE of replicated `estimates` against `target`, with its fourth-moment standard error.

    ``mse = mean_n (estimate_n - target)^2`` and ``se = std(e^2) / sqrt(n)`` (ddof = 1): the squared errors
    are themselves the replicates, so their standard error involves the fourth moment.

    Parameters
    ----------
    estimates : (n, ...) array
        Independent replicates of the estimator (n >= 2), of any array-API library (computed in float64).
    target : array broadcastable to ``estimates.shape[1:]``
        The exact value.

    Returns
    -------
    MseEstimate
        ``mse`` and ``se``, each of shape ``estimates.shape[1:]`` (NumPy float64), and ``n``.

    Raises
    ------
    ValueError
        If `estimates` has fewer than 2 replicates.

    Examples
    --------
    >>> import numpy as np
    >>> from validation import mse_estimate
    >>> estimates = 1.0 + np.random.default_rng(0).standard_normal((1000, 3))   # unit variance around 1
    >>> est = mse_estimate(estimates, 1.0)
    >>> est.n, est.mse.shape, bool(np.all(np.abs(est.mse - 1.0) < 5 * est.se))
    (1000, (3,), True)
    """
    x = _as_np(estimates)
    if x.ndim < 1 or x.shape[0] < 2:
        raise ValueError(f"estimates: expected shape (n, ...) with n >= 2 replicates; got {x.shape}")
    e2 = (x - _as_np(target)) ** 2
    n = x.shape[0]
    return MseEstimate(e2.mean(axis=0), e2.std(axis=0, ddof=1) / np.sqrt(n), n)


def mse_test(estimates: Any, target: Any, predicted_mse: Any, *, n_se: float = 5.0, atol: float = 0.0
             ) -> MeanTest:
    """Test whether the empirical MSE of `estimates` against `target` equals `predicted_mse`.

    A :func:`mean_test` of the squared errors ``(estimates - target)^2``, whose standard error is the
    fourth-moment one (see :func:`mse_estimate`); the non-raising form of :func:`assert_mse_matches`.

    Parameters
    ----------
    estimates : (n, ...) array
        Independent replicates of the estimator (n >= 2).
    target : array broadcastable to ``estimates.shape[1:]``
        The exact value.
    predicted_mse : array broadcastable to ``estimates.shape[1:]``
        The MSE the formula predicts (e.g. :func:`refattn.features.positive_mse`).
    n_se : float, default 5.0
        Tolerance in standard errors.
    atol : float, default 0.0
        Absolute slack on the MSE, for entries whose true MSE is 0 (see :func:`assert_mse_matches`).

    Returns
    -------
    MeanTest
        The test's figures (see :func:`mean_test`); ``passed`` says whether the formula is accepted.

    Raises
    ------
    ValueError
        If `estimates` has fewer than 2 replicates, or `atol` is negative or not finite.
    """
    x = _as_np(estimates)
    if x.ndim < 1 or x.shape[0] < 2:
        raise ValueError(f"estimates: expected shape (n, ...) with n >= 2 replicates; got {x.shape}")
    return mean_test((x - _as_np(target)) ** 2, predicted_mse, n_se=n_se, atol=_check_atol(atol))


def _check_atol(atol: Any) -> float:
    if isinstance(atol, bool) or not isinstance(atol, (int, float, np.floating, np.integer)) \
            or not np.isfinite(atol) or atol < 0:
        raise ValueError(f"atol: expected a finite number >= 0; got {atol!r}")
    return float(atol)


def assert_mse_matches(estimates: Any, target: Any, predicted_mse: Any, *, n_se: float = 5.0,
                       atol: float = 0.0, label: str = "", seed: Any = None) -> MeanTest:
    """Assert that the empirical MSE of `estimates` equals `predicted_mse` within `n_se` standard errors.

    An :func:`assert_mean_within_se` of the squared errors ``(estimates - target)^2``, whose standard error is
    the fourth-moment one (see :func:`mse_estimate`). Used to check a paper's MSE formula (e.g. Chowdhury et
    al. Theorem 3).

    Parameters
    ----------
    estimates : (n, ...) array
        Independent replicates of the estimator (n >= 2).
    target : array broadcastable to ``estimates.shape[1:]``
        The exact value.
    predicted_mse : array broadcastable to ``estimates.shape[1:]``
        The MSE the formula predicts.
    n_se : float, default 5.0
        Tolerance in standard errors.
    atol : float, default 0.0
        Absolute slack on the MSE, added to ``n_se * se``. Needed where the true MSE is 0 (an estimator
        exact for that entry, e.g. trig features at ``q = k``): the squared errors are then rounding noise,
        ``~(eps |target|)^2``, and so is their standard error, so the z-score of a correct formula is
        arbitrary (hundreds of SE). Give the rounding scale, e.g. ``(16 * eps * max|target|)^2``, never a
        value near the MSEs under test (it would hide a wrong formula).
    label : str, default ""
        Prefix of the failure message (default ``"MSE"``).
    seed : object, optional
        The seed the replicates came from, quoted in the failure message.

    Returns
    -------
    MeanTest
        The test's figures (see :func:`mean_test`), when it passes.

    Raises
    ------
    AssertionError
        The empirical MSE differs from `predicted_mse` by more than `n_se` standard errors.
    ValueError
        If `estimates` has fewer than 2 replicates.

    Examples
    --------
    >>> import numpy as np
    >>> from validation import assert_mse_matches
    >>> estimates = 1.0 + np.random.default_rng(0).standard_normal((1000, 3))   # MSE = variance = 1
    >>> assert_mse_matches(estimates, 1.0, 1.0).passed
    True
    >>> assert_mse_matches(estimates, 1.0, 0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: MSE: Monte Carlo mean differs from the expected value by ...
    >>> exact = 1.0 + 1e-16 * np.random.default_rng(1).standard_normal((1000, 3))   # true MSE 0, rounding
    >>> assert_mse_matches(exact, 1.0, 0.0, atol=(16 * np.finfo(float).eps) ** 2).passed
    True
    """
    x = _as_np(estimates)
    e2 = (x - _as_np(target)) ** 2
    return assert_mean_within_se(e2, predicted_mse, n_se=n_se, atol=_check_atol(atol), label=label or "MSE",
                                 seed=seed)


class VarianceTest(NamedTuple):
    """Result of :func:`variance_test`: sample variance, its standard error, the bound, z, ``passed``."""

    var: np.ndarray     # (...) sample variance (ddof = 1)
    se: np.ndarray      # (...) its standard error, sqrt((m4 - var^2) / n) (fourth central moment)
    bound: np.ndarray   # (...) the bound tested against
    z: float            # max over entries of (var - bound) / se (one-sided: positive = above the bound)
    n: int
    n_se: float
    passed: bool        # var <= bound + n_se * se everywhere


def variance_test(samples: Any, bound: Any, *, n_se: float = 5.0) -> VarianceTest:
    """Test one-sidedly whether ``Var(samples, axis=0) <= bound``, elementwise.

    Rejected when the sample variance (ddof = 1) exceeds the bound by more than `n_se` of its standard error
    ``sqrt((m4 - s^4) / n)``, with ``m4`` the fourth central moment of the replicates. (To test
    Var(a) < Var(b) for independent replicates, pass ``bound = Var(b)`` only when b's variance is known;
    otherwise compare two :func:`mean_test` of squared deviations.)

    Parameters
    ----------
    samples : (n, ...) array
        Independent replicates (n >= 3).
    bound : array broadcastable to ``samples.shape[1:]``
        The upper bound on the variance.
    n_se : float, default 5.0
        Tolerance in standard errors of the sample variance.

    Returns
    -------
    VarianceTest
        ``var`` and ``se`` of shape ``samples.shape[1:]``, the broadcast ``bound``, the largest one-sided
        ``z = (var - bound) / se``, ``n``, ``n_se`` and ``passed`` (``var <= bound + n_se * se``
        everywhere).

    Raises
    ------
    ValueError
        If `samples` has fewer than 3 replicates.

    Examples
    --------
    >>> import numpy as np
    >>> from validation.montecarlo import variance_test
    >>> x = 2.0 * np.random.default_rng(0).standard_normal((4000, 2))     # variance 4
    >>> variance_test(x, 4.0).passed, variance_test(x, 3.0).passed
    (True, False)
    """
    x = _as_np(samples)
    if x.ndim < 1 or x.shape[0] < 3:
        raise ValueError(f"samples: expected shape (n, ...) with n >= 3 replicates; got {x.shape}")
    n = x.shape[0]
    c = x - x.mean(axis=0)
    var = (c ** 2).sum(axis=0) / (n - 1)
    m4 = (c ** 4).mean(axis=0)
    se = np.sqrt(np.maximum(m4 - var ** 2, 0.0) / n)
    b = np.broadcast_to(_as_np(bound), var.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, (var - b) / np.where(se > 0, se, 1.0), np.where(var > b, np.inf, 0.0))
    return VarianceTest(var, se, b, float(np.max(z)) if z.size else 0.0, n, n_se,
                        bool(np.all(var <= b + n_se * se)))


class Coverage(NamedTuple):
    """Result of :func:`binomial_coverage`: hits, trials, rate, nominal p, z, exact p-value, ``passed``."""

    hits: int
    n: int
    rate: float         # hits / n
    p: float            # nominal probability
    z: float            # (hits - n p) / sqrt(n p (1 - p))
    pvalue: float       # exact two-sided binomial p-value (scipy), NaN without scipy
    n_se: float
    passed: bool        # |z| <= n_se


def binomial_coverage(hits: int, n: int, p: float, *, n_se: float = 5.0) -> Coverage:
    """Test whether an event of nominal probability `p` occurring `hits` times in `n` trials is on rate.

    The coverage of a confidence interval or the false-alarm rate of a test: the binomial
    ``z = (hits - n p) / sqrt(n p (1 - p))`` must satisfy ``|z| <= n_se``; the exact two-sided binomial
    p-value (SciPy) is reported beside it.

    Parameters
    ----------
    hits : int
        Number of trials in which the event occurred, in ``[0, n]``.
    n : int
        Number of independent trials, >= 1.
    p : float
        The event's nominal probability, in (0, 1).
    n_se : float, default 5.0
        Tolerance on ``|z|``.

    Returns
    -------
    Coverage
        ``hits``, ``n``, ``rate = hits / n``, ``p``, ``z``, ``pvalue`` (NaN without SciPy), ``n_se`` and
        ``passed``.

    Raises
    ------
    ValueError
        If `n` is not a positive integer, `hits` not an integer in ``[0, n]``, or `p` not in (0, 1).

    Examples
    --------
    >>> from validation.montecarlo import binomial_coverage
    >>> binomial_coverage(951, 1000, 0.95).passed, binomial_coverage(900, 1000, 0.95).passed
    (True, False)
    """
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"n: expected a positive integer number of trials; got {n!r}")
    if not (isinstance(hits, (int, np.integer)) and 0 <= hits <= n):
        raise ValueError(f"hits: expected an integer in [0, n={n}]; got {hits!r}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"p: expected a probability in (0, 1); got {p!r}")
    z = (hits - n * p) / float(np.sqrt(n * p * (1.0 - p)))
    try:
        from scipy.stats import binomtest

        pv = float(binomtest(int(hits), int(n), float(p)).pvalue)
    except ImportError:  # pragma: no cover - scipy is a test dependency
        pv = float("nan")
    return Coverage(int(hits), int(n), hits / n, float(p), float(z), pv, n_se, bool(abs(z) <= n_se))


def scalar_z(samples: Any, expected: float) -> tuple[float, float, float]:
    """Return the mean, standard error and signed z-score of scalar replicates against `expected`.

    Parameters
    ----------
    samples : (n,) array
        Scalar replicates (any shape with n >= 2 elements is flattened).
    expected : float
        The value the mean should have.

    Returns
    -------
    tuple of float
        ``(mean, se, z)`` with ``se = std(ddof=1) / sqrt(n)`` and ``z = (mean - expected) / se``; when
        ``se = 0`` the mean is compared exactly: z is 0 if it equals `expected`, inf otherwise.

    Raises
    ------
    ValueError
        If `samples` has fewer than 2 elements.
    """
    x = _as_np(samples).reshape(-1)
    if x.shape[0] < 2:
        raise ValueError(f"samples: expected n >= 2 scalar replicates; got shape {x.shape}")
    m = float(x.mean())
    se = float(x.std(ddof=1) / np.sqrt(x.shape[0]))
    if se > 0:
        return m, se, (m - float(expected)) / se
    return m, se, 0.0 if m == float(expected) else float("inf")


class MeanZ2Test(NamedTuple):
    """Result of :func:`mean_z2_test`: mean z^2, its null mean and spread, the threshold, ``passed``."""

    mean_z2: float          # mean over positive-SE entries of z^2, z = (mean - expected) / se
    null_mean: float        # its expectation for a correct estimator: (n - 1) / (n - 3) (Student t)
    null_sd: float          # its standard deviation for a correct estimator: sqrt(2 sum_ij rho_ij^2) / K
    threshold: float        # null_mean + n_sd * null_sd
    n_sd: float
    n_positive_se: int      # K, the entries with se > se_floor
    zero_se_count: int      # entries with se <= se_floor, compared exactly
    zero_se_max_dev: float  # max |mean - expected| over the zero-SE entries
    n: int
    passed: bool            # mean_z2 <= threshold and every zero-SE entry within atol


def mean_z2_test(samples: Any, expected: Any, *, n_sd: float = 5.0, se_floor: float = 0.0, atol: float = 0.0
                 ) -> MeanZ2Test:
    """Test whether the replicates' mean equals `expected` over many *correlated* entries at once.

    The mean of z^2 over the K entries with positive SE is about 1 for a correct estimator; a bias common to
    many entries raises it (a bias of b standard errors on every entry adds b^2). Its null spread depends on
    how correlated the entries are: for Gaussian z, Var(mean z^2) = 2 sum_ij rho_ij^2 / K^2 with rho the
    entries' correlation across replicates (estimated from the replicates: each rho_ij^2 is biased up by
    about 1/n, so the threshold errs on the safe side). Rejected when mean z^2 > null_mean + n_sd * null_sd;
    zero-SE entries are compared exactly (within `atol`) and reported apart, as in :func:`mean_test`.

    Parameters
    ----------
    samples : (n, ...) array
        Independent replicates (n >= 4).
    expected : array broadcastable to ``samples.shape[1:]``
        The value the mean should have.
    n_sd : float, default 5.0
        Tolerance in null standard deviations of mean z^2.
    se_floor : float, default 0.0
        Entries with a standard error at or below this are compared exactly (zero-SE entries).
    atol : float, default 0.0
        Absolute slack for the zero-SE entries.

    Returns
    -------
    MeanZ2Test
        ``mean_z2``, ``null_mean = (n - 1) / (n - 3)`` (Student t), ``null_sd``, ``threshold``, ``n_sd``,
        the entry counts, the largest zero-SE deviation, ``n`` and ``passed`` (NaN statistics when no entry
        has a positive SE).

    Raises
    ------
    ValueError
        If `samples` has fewer than 4 replicates.
    """
    x = _as_np(samples)
    if x.ndim < 1 or x.shape[0] < 4:
        raise ValueError(f"samples: expected shape (n, ...) with n >= 4 replicates; got {x.shape}")
    n = x.shape[0]
    flat = x.reshape(n, -1)
    exp = np.broadcast_to(_as_np(expected), x.shape[1:]).reshape(-1)
    mean = flat.mean(axis=0)
    sd = flat.std(axis=0, ddof=1)
    se = sd / np.sqrt(n)
    pos = se > se_floor
    dev0 = np.abs(mean - exp)[~pos]
    zero_max = float(np.max(dev0)) if dev0.size else 0.0
    K = int(np.count_nonzero(pos))
    if K == 0:
        return MeanZ2Test(float("nan"), float("nan"), float("nan"), float("nan"), n_sd, 0, int(dev0.size),
                          zero_max, n, bool(zero_max <= atol))
    z = (mean[pos] - exp[pos]) / se[pos]
    u = (flat[:, pos] - mean[pos]) / sd[pos]                                      # (n, K) standardised
    rho = (u.T @ u) / (n - 1)                                                     # (K, K) correlation
    null_sd = float(np.sqrt(2.0 * np.sum(rho ** 2)) / K)
    null_mean = (n - 1) / (n - 3)
    mz2 = float(np.mean(z ** 2))
    thr = null_mean + n_sd * null_sd
    return MeanZ2Test(mz2, null_mean, null_sd, thr, n_sd, K, int(dev0.size), zero_max, n,
                      bool(mz2 <= thr and zero_max <= atol and np.all(np.isfinite(mean))))
