"""The named checks: the kinds, which checks apply to which kind, and the function that runs each.

:func:`validation.check` (``check(fn, kind=..., framework=..., family=...)``, in :mod:`validation.runner`)
runs the named checks on a candidate and returns a :class:`~validation.checks.report.Report`; ``python -m
validation check TARGET --kind KIND [--as FAMILY]`` does the same from the command line. One module per named
check (``values``, ``gradients``, ``kernel``, ``unbiased``, ``haar``, ``row_norms``, ``prefix_invariance``
with ``stability``, ``same_features``, ``batch_independence``, ``dtype``), the shared context in
:mod:`~validation.checks.context`, the omega contract's families in :mod:`~validation.checks.favor`, the table
of checks by kind here.

The omega contract (arrays of the candidate's framework; layout ``(B, H, L, d)``; ``omega: (m, d)``):

* ``draw``:      ``fn(seed: int, m: int, d: int) -> omega (m, d)``, its sampler of projection matrices;
* ``features``:  ``fn(x (..., L, d), omega (m, d)) -> phi (..., L, m')``, a random feature map (a pair
  ``(phi, log_scale)`` is read as ``phi * exp(log_scale)[..., None]``, refattn's stabilised convention);
* ``attention``: ``fn(q, k, v, omega, causal) -> out (..., L, d_v)``, a FAVOR-style estimator given omega.

The papers' families (``--as gmm-rks`` ..., :data:`validation.families.FAMILIES`) have their own contracts,
documented in :mod:`validation.families` and listed by ``python -m validation check --help``.

Statistical checks use ``ALPHA = 1e-3`` as their false-alarm probability (Bonferroni over the z-scores they
take, normal approximation), so a correct candidate passes each at well over 19 of 20 seeds.
"""

from __future__ import annotations

from typing import Callable

from . import (batch_independence, dtype, gradients, haar, kernel, prefix_invariance, row_norms,
               same_features, unbiased, values)
from .context import Ctx
from .report import CheckResult

__all__ = ["KINDS", "CHECKS", "KIND_CHECKS", "RUNNERS"]

KINDS = ("draw", "features", "attention")
CHECKS = (
    "values",
    "gradients",
    "kernel",
    "unbiased",
    "haar",
    "row_norms",
    "prefix_invariance",
    "stability",
    "same_features",
    "batch_independence",
    "dtype",
)
#: which checks apply to which kind (omega contract; a family spec lists its own)
KIND_CHECKS = {
    "draw": ("haar", "unbiased", "row_norms"),
    "features": ("values", "gradients", "kernel", "unbiased", "dtype"),
    "attention": (
        "values",
        "gradients",
        "kernel",
        "same_features",
        "prefix_invariance",
        "stability",
        "batch_independence",
        "dtype",
    ),
}
#: check name -> its function (one module per named check)
RUNNERS: dict[str, Callable[[Ctx], CheckResult]] = {
    "values": values.run,
    "gradients": gradients.run,
    "kernel": kernel.run,
    "unbiased": unbiased.run,
    "haar": haar.run,
    "row_norms": row_norms.run,
    "prefix_invariance": prefix_invariance.run,
    "stability": prefix_invariance.run_stability,
    "same_features": same_features.run,
    "batch_independence": batch_independence.run,
    "dtype": dtype.run,
}
