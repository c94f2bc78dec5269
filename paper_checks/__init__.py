"""Numerical checks of the three papers' claims (the main job: ``python -m paper_checks``).

Layers, bottom first; a module imports only from its own layer or the layers below it, and nothing imports
the package itself from inside it:

1. registry: ``registry``, ``rules``, ``mutations``, ``figures``, ``report``, ``rounding``
2. runner: ``runner``, ``companions``
3. experiment drivers: ``experiments.*``
4. per-paper claims: ``horn.*``, ``chowdhury.*``, ``choromanski.*``
5. catalog: ``catalog``, ``power``, ``redecide``
6. scale: ``scale``
7. CLI: ``__main__``, ``readme_table``, the package (this file)

::

    registry     what a claim is (Claim, Result, Context, REGISTRY, @claim, @must_fail), decision-rule
      |          builders, rounding-error bounds, mutations (@mutation, patched, scaled), figures,
      |          JSON/report writers
    runner       run_check (re-derives the verdict from the evidence), run_one, label-swap companions
      |
    experiments  the trained experiments (run, decide, CRITERION) and their harness
      |
    claims       horn/, chowdhury/, choromanski/: one module per topic registers its claims with their
      |          rules, must-fail companions and mutations (nothing edits another module's claims)
    catalog      load_all, select, run_by_id (imports the paper packages); power (runs the mutations);
      |          redecide (the current rules on committed trained records)
      |
    scale        claims as dask tasks
      |
    CLI          python -m paper_checks

The claims are registered per paper in ``paper_checks.horn``, ``paper_checks.chowdhury`` and
``paper_checks.choromanski`` (each package imports its modules); :mod:`paper_checks.registry` describes the
registry and the verdicts.
"""

from .catalog import load_all, select
from .registry import REGISTRY, Claim, Context, Result, claim, must_fail

__all__ = ["REGISTRY", "Claim", "Context", "Result", "claim", "load_all", "must_fail", "select"]
