"""Label-swap companions: the must-fail companion of a trained (experiment) claim.

A trained claim's companion is its own decision rule applied to its own evidence with the method labels
swapped (the compared methods exchanged): a rule that decides from the measurement must flip a ``holds`` to
``fails`` when the labels are swapped, and a guard (too small a run, a model that did not learn) must stay a
guard. A claim module declares it beside the claim with :func:`label_swap`, which registers the companion and
records the swap in :data:`SWAPS` and the evidence moved into the paper's direction in
:data:`PAPER_DIRECTION`. ``tests/paper_checks/test_rules.py`` checks both on the measured evidence and, for
the flip itself, on evidence moved into the paper's direction (so that the flip is shown at every size the
suite runs).
"""

from __future__ import annotations

from typing import Callable

from .registry import REGISTRY, Context, Result, must_fail

__all__ = ["SWAPS", "PAPER_DIRECTION", "label_swap", "swapped"]

Swap = Callable[[dict], dict]

#: claim id -> (which labels are exchanged, the swap, the evidence keys it needs)
SWAPS: dict[str, tuple[str, Swap, tuple[str, ...]]] = {}

#: claim id -> evidence moved into the direction the paper states (guards passed), for the flip test
PAPER_DIRECTION: dict[str, Swap] = {}


def label_swap(claim_id: str, what: str, swap: Swap, keys: tuple[str, ...], *, paper_direction: Swap) -> None:
    """Register claim `claim_id`'s must-fail companion: its rule on its evidence with the labels swapped.

    Parameters
    ----------
    claim_id : str
        A registered claim with a decision rule and no companion yet.
    what : str
        Which labels `swap` exchanges (``"GMM-RKS <-> GMM-PRF"``).
    swap : callable
        ``swap(evidence) -> evidence`` with the labels exchanged; it reads only `keys`.
    keys : tuple of str
        The evidence keys `swap` reads (a run without them has nothing to swap).
    paper_direction : callable
        ``paper_direction(evidence) -> evidence`` moved into the direction the paper states, guards passed.

    Raises
    ------
    ValueError
        If `claim_id` is not registered, has no decision rule or already has a companion.
    """
    c = REGISTRY.get(claim_id)
    if c is None or c.decide is None or c.must_fail is not None:
        raise ValueError(f"label_swap: claim {claim_id!r} must be registered with a rule and no companion")
    SWAPS[claim_id] = (what, swap, keys)
    PAPER_DIRECTION[claim_id] = paper_direction
    must_fail(claim_id)(_companion(claim_id))


def swapped(claim_id: str, evidence: dict) -> dict:
    """`evidence` with claim `claim_id`'s method labels swapped (unchanged when the keys the swap reads are
    absent: a run that produced no comparison, e.g. a missing model piece, has nothing to swap)."""
    what, fn, keys = SWAPS[claim_id]
    if not all(k in evidence for k in keys):
        return {**evidence, "labels_swapped": f"{what} (nothing to swap)"}
    out = fn(evidence)
    out["labels_swapped"] = what
    return out


def _companion(claim_id: str) -> Callable[[Context], Result]:
    def companion(ctx: Context) -> Result:
        c = REGISTRY[claim_id]
        res = c.check(ctx)
        ev = swapped(claim_id, res.evidence)
        verdict = c.decide(ev)
        return Result(verdict, ev, summary=f"labels swapped ({SWAPS[claim_id][0]}): {verdict} (unswapped: "
                                           f"{res.verdict})")

    companion.__doc__ = f"{claim_id}'s rule on its evidence with the labels swapped ({SWAPS[claim_id][0]})."
    return companion
