"""The catalog: every claim of the three papers, loaded, selected by id and run by id.

Importing this module imports the three paper packages, whose modules register their claims, companions and
mutations. :func:`run_by_id` is what a worker process or dask task runs: it names the claim by id, since a
:class:`~paper_checks.registry.Claim` (its rule is a closure) does not pickle.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from . import choromanski, chowdhury, horn
from .registry import REGISTRY, Claim, Result
from .runner import run_one

__all__ = ["PAPERS", "load_all", "select", "run_by_id"]

#: The paper packages, in the order claims are listed (by claim-id prefix).
PAPERS = {"horn": horn, "kl": chowdhury, "flt": choromanski}


def load_all() -> dict[str, Claim]:
    """Every claim of the three papers, by id.

    Returns
    -------
    dict of str to Claim
        :data:`~paper_checks.registry.REGISTRY` (claim id -> Claim), every paper package imported.
    """
    return REGISTRY


def select(patterns: list[str] | None) -> list[Claim]:
    """Claims whose id matches any glob in `patterns` (all when None), ordered by paper then id.

    Parameters
    ----------
    patterns : list of str or None
        ``fnmatch`` globs on claim ids (``"horn.*"``, ``"kl.eq1-softmax"``), as ``--only`` takes them;
        ``None`` or empty selects every claim.

    Returns
    -------
    list of Claim
        Horn, then Chowdhury (``kl.``), then FLT claims, each by id, each once.

    Raises
    ------
    ValueError
        Naming a pattern that matches no claim.

    Examples
    --------
    >>> from paper_checks import select
    >>> [c.id for c in select(["kl.eq1-*"])]
    ['kl.eq1-softmax']
    """
    rank = {prefix: i for i, prefix in enumerate(PAPERS)}
    claims = sorted(load_all().values(), key=lambda c: (rank.get(c.id.split(".")[0], len(rank)), c.id))
    if not patterns:
        return claims
    out = []
    for p in patterns:
        hit = [c for c in claims if fnmatch.fnmatchcase(c.id, p)]
        if not hit:
            raise ValueError(f"--only {p!r} matches no claim; see python -m paper_checks --list")
        out.extend(c for c in hit if c not in out)
    return out


def run_by_id(claim_id: str, seed: int, size: str, report_dir: Path | None, run_slow: bool,
              executor: Any = None) -> tuple[Result | None, float, str | None]:
    """:func:`paper_checks.runner.run_one` of the claim named `claim_id`: the worker of ``--workers`` and of
    ``--scheduler`` (:mod:`paper_checks.scale`, which passes the executor of the check's ``ctx.map``)."""
    return run_one(load_all()[claim_id], seed, size, report_dir, run_slow, executor)
