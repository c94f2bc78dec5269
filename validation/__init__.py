"""NumPy-only edge: validation helpers (assertions, gradient checks, Monte Carlo statistics) and cross-checks.

The test suite and ``paper_checks`` import these; a user cross-checking their own implementation imports them
too. Layers (imports only point down; a package's ``__init__`` lists names and loads nothing else)::

    validation.__main__        the CLI: python -m validation check | report | conformance
       |
    validation.conformance     adapters of outside implementations (sources checked out by the user) and
       |                       the conformance report: every adapter's rows through check()
    validation.findings        the findings table of `report` (every built-in target, measured)
       |
    validation.runner          check(): resolve a TARGET, run the checks of its kind or family;
    validation.worker          the target in a worker process (timeout, captured output, inputs as copies)
       |
    validation.crosscheck      framework adapters (torch, jax), built-in targets (refattn, performer-pytorch,
       |                       sklearn-rbf) and the registry of the names --framework and TARGET accept
    validation.families        the papers' families (--as): contracts, refattn's computation, their checks
       |
    validation.checks          the named checks, their context and report types, the omega contract's families
       |
    validation.base            UsageError, Framework, Target
       |
    validation.assertions, .gradcheck, .montecarlo      numeric helpers (no other validation import)

Every layer may import refattn.
"""

from .assertions import assert_close
from .base import TargetError, UsageError
from .checks.report import CheckResult, Report
from .gradcheck import check_vjp, jacobian_fd
from .montecarlo import (
    MeanTest,
    MseEstimate,
    assert_mean_within_se,
    assert_mse_matches,
    mean_test,
    mse_estimate,
)
from .runner import check

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
    "check",
    "Report",
    "CheckResult",
    "UsageError",
    "TargetError",
]
