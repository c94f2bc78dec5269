"""Claim runs made once per test run and read by every test that needs them: a claim's run at (size, seed),
unmutated or under one of its registered mutations (the rule re-applied, the Horn/FLT verdicts, the
baselines the mutation tests compare with, the power test's runs).

A check is deterministic in its seed and a registered mutation is a fixed patch, so one run serves every
test that asks for the same (claim, size, seed, mutation): sharing changes no assertion, only how often the
same numbers are computed. Under pytest-xdist the workers share one directory of the run
(:func:`share_in`, set by this folder's ``conftest.py``): the first worker to ask for a run takes its lock
file and computes it, the others wait for its pickled outcome (or compute it themselves when the holder
failed: the lock is released without an outcome, and each test then sees the error itself).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import time
from pathlib import Path

from paper_checks import Context, load_all
from paper_checks.power import outcome as outcome_of_run
from paper_checks.mutations import MUTATIONS

REGISTRY = load_all()
WAIT_S = 900.0      # longer than any claim run at tiny; past it a waiting worker computes the run itself
_shared_dir: Path | None = None


def share_in(directory: Path) -> None:
    """Share the runs through `directory` (created), one per test run, seen by every worker of the run."""
    global _shared_dir
    directory.mkdir(parents=True, exist_ok=True)
    _shared_dir = directory


@functools.cache
def outcome(cid: str, mutation: str | None = None, size: str = "tiny", seed: int = 0):
    """The :class:`~paper_checks.registry.Result` of claim `cid` under its registered `mutation` (None:
    unmutated) at (`size`, `seed`), or the ``error: ...`` line when the run raised
    (``paper_checks.power.outcome``); computed once per test run (cached in the process and, when shared,
    across the run's workers). The signature of ``run_power``'s ``outcome_of``."""
    def compute():
        c = REGISTRY[cid]
        m = None if mutation is None else next(m for m in MUTATIONS[cid] if m.name == mutation)
        return outcome_of_run(c, Context(seed=seed, size=size, claim_id=cid), m)
    return _once((cid, mutation, size, seed), compute)


def tiny(cid: str):
    """The unmutated run of claim `cid` at tiny, seed 0 (a raise there fails the asking test)."""
    res = outcome(cid)
    if isinstance(res, str):
        raise AssertionError(f"{cid} at tiny, seed 0 raised: {res}")
    return res


def _once(key: tuple, compute):
    if _shared_dir is None:
        return compute()
    stem = _shared_dir / hashlib.sha256(repr(key).encode()).hexdigest()[:32]
    done, lock = stem.with_suffix(".pkl"), stem.with_suffix(".lock")
    deadline = time.monotonic() + WAIT_S
    while not done.exists():
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:                  # another worker is computing it
            if time.monotonic() > deadline:
                return compute()
            time.sleep(0.05)
            continue
        try:
            value = compute()
            tmp = stem.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(pickle.dumps(value))
            os.replace(tmp, done)
            return value
        finally:
            if not done.exists():
                lock.unlink()
    return pickle.loads(done.read_bytes())
