"""Numerical checks of the three papers' claims (the main job: ``python -m paper_checks``).

Claims are registered per paper in the packages ``paper_checks.horn``, ``paper_checks.chowdhury`` and
``paper_checks.choromanski`` (one module per topic; every module in those packages is loaded). See
``paper_checks._claims`` for the registry and the verdicts.
"""

from ._claims import REGISTRY, Claim, Context, Result, claim, load_all, must_fail, select

__all__ = ["REGISTRY", "Claim", "Context", "Result", "claim", "load_all", "must_fail", "select"]
