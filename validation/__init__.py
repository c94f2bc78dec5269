"""NumPy-only edge: validation helpers (assertions, gradient checks, Monte Carlo statistics) and cross-checks.

The test suite and ``paper_checks`` import these; a user cross-checking their own implementation imports them
too.
"""

from .assertions import assert_close
from .gradcheck import check_vjp, jacobian_fd
from .montecarlo import (
    MeanTest,
    MseEstimate,
    assert_mean_within_se,
    assert_mse_matches,
    mean_test,
    mse_estimate,
)

__all__ = [
    "assert_close",
    "check_vjp",
    "jacobian_fd",
    "MeanTest",
    "MseEstimate",
    "assert_mean_within_se",
    "assert_mse_matches",
    "mean_test",
    "mse_estimate",
]

from .checks import CheckResult, Report, UsageError, check  # noqa: E402  (cross-checks: python -m validation)

__all__ += ["check", "Report", "CheckResult", "UsageError"]
