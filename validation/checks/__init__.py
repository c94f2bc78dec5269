"""Cross-check any implementation against refattn: the named checks (values, gradients, bias, known defects)
of the omega contract, one module each; the contracts and the table in :mod:`validation.checks.catalog`."""

from .catalog import CHECKS, KIND_CHECKS, KINDS
from .context import ALPHA
from .favor import ATTENTION_FAMILIES, FEATURE_FAMILIES
from .report import CheckResult, Report

__all__ = [
    "Report",
    "CheckResult",
    "CHECKS",
    "KINDS",
    "KIND_CHECKS",
    "FEATURE_FAMILIES",
    "ATTENTION_FAMILIES",
    "ALPHA",
]
