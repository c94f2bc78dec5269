"""Each claim's baseline run at tiny (seed 0), made once per test process and read by every test that needs
it (the rule re-applied, the Horn/FLT verdicts, the baselines the mutation tests compare with). The tests only
read a :class:`~paper_checks._claims.Result`; a check is deterministic in its seed, so sharing changes no
assertion."""

from __future__ import annotations

import functools

from paper_checks import Context, load_all
from paper_checks.runner import run_check

REGISTRY = load_all()


@functools.cache
def tiny(cid: str):
    """``run_check`` of claim `cid` at tiny, seed 0 (cached for the test process)."""
    return run_check(REGISTRY[cid], Context(seed=0, size="tiny", claim_id=cid))
