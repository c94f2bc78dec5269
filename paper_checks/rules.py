"""Reusable decision rules: functions of a check's evidence that return its verdict.

Each builder returns ``decide(evidence: dict) -> verdict`` with its one-sentence statement as ``decide.rule``;
register it with ``@claim(..., decide=builder(...))`` (the rule sentence is taken from ``decide.rule`` unless
``rule=`` is given) and return ``Result(ctx.decide(evidence), evidence, ...)`` from the check. The runner
(:func:`paper_checks._claims.run_check`) re-applies the rule to the stored evidence, so a verdict is always a
function of numbers the check reported.

Builders::

    printed_vs_corrected("z_printed", "z_corrected", n_se=5)  erratum / holds / fails from two |z|
    holds_iff_accepted("z", n_se=5)                           holds iff |z| < n_se
    holds_iff_at_most("err", "tol")                           holds iff a measured value is within a tolerance
    bound_respected("measured", "bound", slack="slack")       holds iff measured <= bound + slack
    separated("z_a", "z_b", n_se=5)                           which of two readings the data prefers, if any
    ranked("scores", "se", order=[...], n_se=2)               an experiment's ordering of methods
    guarded(inner, "metric", minimum)                         not-checkable below a learning guard, else inner
    readings({...}, combine)                                  several readings, each decided, then combined
    not_checkable(reason)                                     a statement no measurement decides
    budget_ladder("ladder", n_se=2)                           a trained effect along a compute ladder:
                                                              holds / fails / not-reproduced
    trained(inner, "budget_fraction", "ladder")               a trained claim's pre-registered rule under the
                                                              taxonomy: its fails stands only at the paper's
                                                              compute or on a ladder (else not-reproduced)
    slip(printed, corrected, why, check)                      a notation slip for ``evidence["slips"]``

**Notation slips** (``docs/guide/paper-checks.md``, section "The criterion"): a printed expression that is
wrong only as notation -- unbuildable or ill-typed, or contradicted by the paper's own construction, figure
or next line -- while the statement read as evidently meant holds, does not make an erratum. The check
decides the statement as meant, records each slip with :func:`slip` (printed, corrected, why it is notation
only, and the numbers that check both forms) in ``evidence["slips"]``, and the summaries count verdicts with
slips apart (:func:`paper_checks.report.totals_line`).

Numbers may be NumPy scalars; a missing key raises ``KeyError`` naming it (a rule never guesses).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping

from .registry import SLIP_KEYS

__all__ = ["printed_vs_corrected", "holds_iff_accepted", "holds_iff_at_most", "bound_respected", "separated",
           "ranked", "guarded", "readings", "per_reading", "not_checkable", "with_rule", "value",
           "budget_ladder", "trained", "slip", "SLIP_KEYS"]

Decide = Callable[[dict], str]


def with_rule(fn: Decide, rule: str) -> Decide:
    """Attach the one-sentence `rule` to `fn` (``fn.rule``) and return it."""
    fn.rule = rule  # type: ignore[attr-defined]
    return fn


def value(evidence: dict, key: str) -> float:
    """``float(evidence[key])`` with a KeyError naming the key and the keys present."""
    try:
        v = evidence[key]
    except KeyError:
        raise KeyError(f"decision rule needs evidence[{key!r}]; the evidence has {sorted(evidence)}"
                       ) from None
    return float(v)


def printed_vs_corrected(printed: str = "z_printed", corrected: str = "z_corrected", *, n_se: float = 5.0
                         ) -> Decide:
    """holds iff |printed| < n_se; erratum iff |printed| >= n_se and |corrected| < n_se; fails otherwise.

    A NaN statistic counts as rejected (a formula that cannot be evaluated is not accepted)."""

    def decide(ev: dict) -> str:
        zp, zc = abs(value(ev, printed)), abs(value(ev, corrected))
        if zp < n_se:
            return "holds"
        return "erratum" if zc < n_se else "fails"

    return with_rule(decide, f"holds iff the printed form is accepted (|{printed}| < {n_se:g}); erratum iff "
                             f"it is rejected (|{printed}| >= {n_se:g}) and the corrected form is accepted "
                             f"(|{corrected}| < {n_se:g}); fails otherwise.")


def holds_iff_accepted(stat: str = "z", *, n_se: float = 5.0) -> Decide:
    """holds iff |evidence[stat]| < n_se, fails otherwise (NaN fails)."""

    def decide(ev: dict) -> str:
        return "holds" if abs(value(ev, stat)) < n_se else "fails"

    return with_rule(decide, f"holds iff |{stat}| < {n_se:g}, fails otherwise.")


def holds_iff_at_most(measured: str, tol: str | float) -> Decide:
    """holds iff evidence[measured] <= tol (a number or an evidence key), fails otherwise (NaN fails)."""

    def decide(ev: dict) -> str:
        t = value(ev, tol) if isinstance(tol, str) else float(tol)
        return "holds" if value(ev, measured) <= t else "fails"

    return with_rule(decide, f"holds iff {measured} <= {tol}, fails otherwise.")


def bound_respected(measured: str, bound: str, *, slack: str | float = 0.0) -> Decide:
    """holds iff evidence[measured] <= evidence[bound] + slack (slack a number or an evidence key)."""

    def decide(ev: dict) -> str:
        s = value(ev, slack) if isinstance(slack, str) else float(slack)
        return "holds" if value(ev, measured) <= value(ev, bound) + s else "fails"

    return with_rule(decide, f"holds iff {measured} <= {bound} + {slack} (the bound is respected), fails "
                             "otherwise.")


def separated(z_a: str, z_b: str, *, n_se: float = 5.0, a: str = "holds", b: str = "erratum",
              neither: str = "fails", unseparated: str = "not-checkable") -> Decide:
    """Two readings a and b, each with a z of the data against it: `a` iff |z_a| < n_se <= |z_b|, `b` iff
    |z_b| < n_se <= |z_a|, `neither` iff both are rejected, `unseparated` iff both are accepted (the data do
    not tell them apart)."""

    def decide(ev: dict) -> str:
        ok_a, ok_b = abs(value(ev, z_a)) < n_se, abs(value(ev, z_b)) < n_se
        if ok_a and ok_b:
            return unseparated
        if ok_a:
            return a
        if ok_b:
            return b
        return neither

    return with_rule(decide, f"{a} iff |{z_a}| < {n_se:g} <= |{z_b}|; {b} iff |{z_b}| < {n_se:g} <= |{z_a}|; "
                             f"{unseparated} iff both are < {n_se:g} (not separated); {neither} iff both >= "
                             f"{n_se:g}.")


def ranked(scores: str, se: str, order: Iterable[str], *, n_se: float = 2.0, higher_is_better: bool = True
           ) -> Decide:
    """An experiment's claimed ordering of methods: `order` lists method names best first; evidence[scores]
    and evidence[se] map method -> score and its standard error. holds iff every adjacent pair is in the
    claimed order by more than n_se combined SE; fails iff some adjacent pair is reversed by more than n_se
    combined SE; not-checkable otherwise (the measurement does not separate them)."""
    order = list(order)
    sign = 1.0 if higher_is_better else -1.0

    def decide(ev: dict) -> str:
        sc, er = ev[scores], ev[se]
        gaps = []
        for better, worse in zip(order[:-1], order[1:], strict=True):
            d = sign * (float(sc[better]) - float(sc[worse]))
            s = math.hypot(float(er[better]), float(er[worse]))
            gaps.append(d / s if s > 0 else math.copysign(math.inf, d) if d else 0.0)
        if all(g > n_se for g in gaps):
            return "holds"
        if any(g < -n_se for g in gaps):
            return "fails"
        return "not-checkable"

    better = "higher" if higher_is_better else "lower"
    return with_rule(decide, f"holds iff {scores} ({better} is better) orders {' > '.join(order)} with every "
                             f"adjacent gap > {n_se:g} combined SE; fails iff an adjacent pair is reversed "
                             f"by > {n_se:g} SE; not-checkable otherwise.")


def guarded(inner: Decide, metric: str, minimum: float | str, *, what: str = "the models learned the task"
            ) -> Decide:
    """not-checkable iff evidence[metric] < minimum (the learning guard: the models did not learn enough for
    the comparison to mean anything), else the inner rule."""

    def decide(ev: dict) -> str:
        lo = value(ev, minimum) if isinstance(minimum, str) else float(minimum)
        m = value(ev, metric)
        if not m >= lo:   # NaN is below the guard
            return "not-checkable"
        return inner(ev)

    inner_rule = getattr(inner, "rule", "the inner rule")
    return with_rule(decide, f"not-checkable iff {metric} < {minimum} ({what} is the guard); otherwise "
                             f"{inner_rule}")


def readings(rules: Mapping[str, Decide], combine: Callable[[dict], str], *, rule: str) -> Decide:
    """Several readings of one printed statement, each decided by its own rule; `combine({reading:
    verdict})` gives the claim's verdict. The evidence should also carry each reading's verdict (see
    :func:`per_reading`)."""

    def decide(ev: dict) -> str:
        return combine({name: r(ev) for name, r in rules.items()})

    return with_rule(decide, rule)


def per_reading(rules: Mapping[str, Decide], evidence: dict) -> dict:
    """``{reading: verdict}`` for the evidence (put it in the evidence and the summary: both readings
    shown)."""
    return {name: r(evidence) for name, r in rules.items()}


def not_checkable(reason: str) -> Decide:
    """A statement no measurement decides: always not-checkable (only for ``statistical=False`` claims)."""

    def decide(ev: dict) -> str:
        return "not-checkable"

    return with_rule(decide, f"not-checkable: {reason}")


def slip(printed: str, corrected: str, why: str, check: Mapping) -> dict:
    """One notation slip for ``evidence["slips"]``: the printed symbols, the corrected ones, why the repair
    is notation only (what in the paper itself fixes the meaning: the only form that can be built or that
    typechecks, the paper's own construction, figure or next line) and `check`, the numbers that check both
    forms (the printed one rejected or unbuildable, the corrected one verified)."""
    if not (printed and corrected and why and check):
        raise ValueError("slip: printed, corrected, why and check are all required (a slip is quoted, "
                         "corrected and checked)")
    return {"printed": printed, "corrected": corrected, "why": why, "check": dict(check)}


def budget_ladder(ladder: str = "ladder", *, n_se: float = 2.0) -> Decide:
    """A trained effect measured along a budget ladder: holds / fails / not-reproduced.

    ``evidence[ladder]`` is a list of rungs ``{"budget_fraction", "effect", "se"}`` (any order): the compute
    of the rung as a fraction of the paper's stated compute, the effect signed so that the paper's claim is
    ``effect > 0``, and its standard error. With the rungs sorted by budget and the largest rung last:

    * holds iff the largest rung shows the effect (``effect > n_se * se``);
    * fails iff the largest rung is at the paper's compute or beyond (``budget_fraction >= 1``) and the
      effect is absent or reversed there (``effect <= n_se * se``), or the ladder has at least two rungs, the
      effect is reversed on every rung (``effect < -n_se * se``) and the reversal holds or grows with the
      budget (no rung's effect exceeds the previous rung's by more than ``n_se`` combined SE);
    * not-reproduced otherwise: the effect is not seen below the paper's compute and the ladder is flat,
      shrinking towards the paper's direction, or too short to say that more budget would not change it.
    """

    def decide(ev: dict) -> str:
        rungs = ev.get(ladder)
        if not rungs:
            raise KeyError(f"decision rule needs evidence[{ladder!r}] (a non-empty list of rungs); the "
                           f"evidence has {sorted(ev)}")
        rs = sorted(((value(r, "budget_fraction"), value(r, "effect"), value(r, "se")) for r in rungs))
        budget, effect, se = rs[-1]
        if effect > n_se * se:
            return "holds"
        if budget >= 1.0:
            return "fails"
        reversed_all = all(e < -n_se * s for _, e, s in rs)
        holding = all(e1 <= e0 + n_se * math.hypot(s0, s1)
                      for (_, e0, s0), (_, e1, s1) in zip(rs[:-1], rs[1:], strict=True))
        if len(rs) >= 2 and reversed_all and holding:
            return "fails"
        return "not-reproduced"

    return with_rule(decide, f"holds iff the largest rung of {ladder} shows the paper's effect (effect > "
                             f"{n_se:g} SE); fails iff the effect is absent or reversed at the "
                             f"paper's compute (budget_fraction >= 1), or reversed by > {n_se:g} SE on "
                             "every rung of a ladder of >= 2 rungs with the reversal holding or growing "
                             "with the budget; not-reproduced otherwise (not seen below the paper's compute, "
                             "the ladder flat or inconclusive).")


def trained(inner: Decide, *, budget: str = "budget_fraction", ladder: str = "ladder", n_se: float = 2.0
            ) -> Decide:
    """A trained claim's pre-registered rule `inner` under the verdict taxonomy.

    `inner` decides the claim at one budget (its holds, not-checkable and skipped stand as they are). Its
    ``fails`` is a fact about that budget only, so it stands as the claim's verdict only when

    * the budget is at least the paper's stated compute (``evidence[budget] >= 1``), or
    * ``evidence[ladder]`` has at least two rungs and :func:`budget_ladder` (``n_se``) says ``fails`` on them
      (the effect reversed on every rung and not shrinking with the budget);

    otherwise it is ``not-reproduced``: the effect was not seen below the paper's compute and nothing
    measured says that more compute would not show it. Calibrated on the authors' published numbers (at
    their own compute, ``budget = 1``), the rule gives their stated verdict and ``fails`` their negative
    controls (``tests/paper_checks/test_calibration.py``).
    """
    ladder_rule = budget_ladder(ladder, n_se=n_se)

    def decide(ev: dict) -> str:
        v = inner(ev)
        if v != "fails":
            return v
        if value(ev, budget) >= 1.0:
            return "fails"
        rungs = ev.get(ladder) or []
        if len(rungs) >= 2 and ladder_rule(ev) == "fails":
            return "fails"
        return "not-reproduced"

    inner_rule = getattr(inner, "rule", "the inner rule")
    return with_rule(decide, f"{inner_rule} Taxonomy: a fails stands only at the paper's compute ({budget} "
                             f">= 1) or when {ladder} (>= 2 rungs) shows the effect reversed by > {n_se:g} "
                             "SE on every rung and not shrinking with the budget; otherwise not-reproduced.")
