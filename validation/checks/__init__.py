r"""Cross-check any implementation against refattn: values, gradients, bias, known defects.

``check(fn, kind=..., framework=..., family=...)`` runs the named checks on a candidate and returns a
:class:`Report`; ``python -m validation check TARGET --kind KIND [--as FAMILY]`` does the same from the
command line. One module per named check (``values``, ``gradients``, ``kernel``, ``unbiased``, ``haar``,
``prefix_invariance`` with ``stability``, ``same_features``, ``dtype``), the shared context in
:mod:`~validation.checks.context`, the runner in :mod:`~validation.checks.runner`.

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

from ..crosscheck import UsageError
from ..families import FAMILIES
from ..families.favor import ATTENTION_FAMILIES, FEATURE_FAMILIES
from .context import ALPHA
from .report import CheckResult, Report
from .runner import CHECKS, KIND_CHECKS, KINDS, check, known_families, resolve_target, validate_options

__all__ = [
    "check",
    "Report",
    "CheckResult",
    "UsageError",
    "CHECKS",
    "KINDS",
    "KIND_CHECKS",
    "FEATURE_FAMILIES",
    "ATTENTION_FAMILIES",
    "FAMILIES",
    "resolve_target",
    "known_families",
    "validate_options",
    "ALPHA",
]
