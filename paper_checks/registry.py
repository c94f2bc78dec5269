"""The claim registry: every checkable statement of the three papers, with its check and its expected verdict.

A claim module registers its checks with the :func:`claim` decorator (its Examples show one) and may attach a
must-fail companion (the same check run against a deliberately wrong formula, which must return ``"fails"``)
with :func:`must_fail`.

**The verdict is a function of the evidence.** A claim states its decision rule in one sentence
(``rule=``) and gives it as a function (``decide=``, ``decide(evidence: dict) -> verdict``; reusable builders
are in :mod:`paper_checks.rules`). The check puts the numbers in its evidence and returns
``Result(ctx.decide(evidence), evidence, ...)``; :func:`paper_checks.runner.run_check` (what the CLI, the
tests and ``--power`` call) re-applies ``decide`` to the returned evidence and raises ``RuleMismatchError`` if
the verdicts differ, so no branch of a check can return a verdict that no measured number decided. Verdicts:

``holds``           the statement holds as evidently meant (within the stated tolerance); notation-only
                    slips are quoted, corrected and checked in ``evidence["slips"]`` and counted apart;
``erratum``         its mathematical content as printed is false and a corrected statement, which the
                    result states, is verified;
``fails``           it fails and no correction is verified (for a trained claim: only with evidence that
                    more budget would not change it, :func:`paper_checks.rules.budget_ladder`);
``not-reproduced``  a trained effect not seen at a budget below the paper's (the evidence gives the budget as
                    a fraction of the paper's stated compute);
``not-checkable``   it cannot be checked numerically (the evidence says why);
``skipped``         a slow claim that was not selected (the evidence gives the command that runs it).

The criterion that separates them is ``docs/guide/paper-checks.md``, section "The criterion".

A claim is ``statistical`` (the default) when its check compares a measurement -- a Monte Carlo mean or MSE, a
quadrature, an exact computation, a count -- with a formula. Such a check must

* have a must-fail companion (the same check against a deliberately wrong formula returns ``"fails"``), which
  shows that the check can tell the formula it accepts from a wrong one;
* report :data:`EVIDENCE_KEYS` in its evidence: ``n`` (sample size: replicates, draws, points or cases),
  ``seed`` (the root seed, ``ctx.seed``) and ``detectable`` (the smallest deviation from the formula that the
  check is sure to detect: ``n_se * se`` for Monte Carlo tests, the tolerance for exact or quadrature checks,
  in the units of the compared quantity; :func:`stat_evidence` builds the three).

``statistical=False`` is only for statements that no measurement decides (an existence statement such as
Turing completeness): the check returns ``not-checkable`` with the reason.

The paper modules live in the packages ``paper_checks.horn``, ``paper_checks.chowdhury`` and
``paper_checks.choromanski``, each of which imports its claim modules; :func:`paper_checks.catalog.load_all`
imports the three packages and returns :data:`REGISTRY`.
"""

from __future__ import annotations

import dataclasses
import zlib
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["VERDICTS", "SIZES", "EVIDENCE_KEYS", "SLIP_KEYS",
           "HORN", "CHOWDHURY", "CHOROMANSKI", "Result", "Context",
           "Claim", "REGISTRY", "claim", "must_fail", "stat_evidence"]

VERDICTS = ("holds", "erratum", "fails", "not-reproduced", "not-checkable", "skipped")
SIZES = ("tiny", "small", "full")
EVIDENCE_KEYS = ("n", "seed", "detectable")   # every statistical check reports these (module docstring)
SLIP_KEYS = ("printed", "corrected", "why", "check")   # one notation slip (paper_checks.rules.slip)

HORN = "Horn et al., Translational Equivariance in Kernelizable Attention"
CHOWDHURY = "Chowdhury et al., Learning the Transformer Kernel"
CHOROMANSKI = "Choromanski et al., FourierLearner-Transformers"


@dataclasses.dataclass
class Result:
    """What a check found."""

    verdict: str
    evidence: dict = dataclasses.field(default_factory=dict)  # numbers: estimate, se, formula, n, seed, ...
    corrected: str | None = None                               # the corrected statement (erratum)
    figures: list = dataclasses.field(default_factory=list)    # paths of PNGs written
    summary: str = ""                                          # one line for the verdict table

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict: expected one of {VERDICTS}; got {self.verdict!r}")
        if self.verdict == "erratum" and not self.corrected:
            raise ValueError("an erratum must state the corrected statement (Result.corrected)")
        slips = self.evidence.get("slips", [])
        if not isinstance(slips, list) or any(not isinstance(s, dict) or set(s) != set(SLIP_KEYS)
                                              for s in slips):
            raise ValueError(f"evidence['slips']: expected a list of dicts with keys {SLIP_KEYS} "
                             f"(paper_checks.rules.slip); got {slips!r}")

    @property
    def slips(self) -> list:
        """The notation slips recorded in the evidence (``evidence["slips"]``; empty when none)."""
        return list(self.evidence.get("slips", []))


@dataclasses.dataclass
class Context:
    """What a check receives: seed, size knob, where figures go and how to map Monte Carlo tasks.

    ``executor`` is anything with a ``concurrent.futures``-style ``map(fn, tasks)`` that yields the results
    in task order: ``None`` (serial), a ``ProcessPoolExecutor``, or :class:`paper_checks.scale.DaskMap`
    (``--scheduler``: the tasks run on a dask cluster, also when the check itself is a cluster task). A check
    expresses its heavy Monte Carlo loop as ``ctx.map(fn, tasks)`` over batches whose boundaries it fixes
    itself (never from the worker count), each task seeded from :meth:`seed_sequences`, and reduces the list
    in order: the result is then bitwise the same whatever runs the tasks."""

    seed: int = 0
    size: str = "small"                     # tiny (test suite) | small (default run) | full
    report_dir: Path | None = None          # figures are written only when this is set
    executor: Executor | Any | None = None  # has map(fn, tasks) in task order; serial when None
    claim_id: str = ""

    def rng(self, *key: int) -> np.random.Generator:
        """A generator for this claim, independent of every other claim's: seeded with
        ``[seed, crc32(claim id), *key]``."""
        return np.random.default_rng([int(self.seed), zlib.crc32(self.claim_id.encode()), *map(int, key)])

    def seed_sequences(self, n: int, *key: int) -> list[np.random.SeedSequence]:
        """`n` independent child seed sequences for Monte Carlo tasks (``SeedSequence.spawn``)."""
        root = np.random.SeedSequence([int(self.seed), zlib.crc32(self.claim_id.encode()), *map(int, key)])
        return root.spawn(n)

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
        """``[fn(t) for t in tasks]``, serially or through the executor; results are in task order either way.

        `fn` must be a picklable module-level function and each task carry its own seed (a
        ``SeedSequence`` from :meth:`seed_sequences`), so no task depends on where or when it runs."""
        tasks = list(tasks)
        if self.executor is None:
            return [fn(t) for t in tasks]
        return list(self.executor.map(fn, tasks))

    def decide(self, evidence: dict) -> str:
        """The verdict of this claim's decision rule (``@claim(..., decide=fn)``) applied to `evidence`."""
        c = REGISTRY.get(self.claim_id)
        if c is None or c.decide is None:
            raise RuntimeError(f"claim {self.claim_id!r} registers no decide rule (@claim(..., decide=fn))")
        return c.decide(evidence)

    def pick(self, tiny: Any, small: Any, full: Any | None = None) -> Any:
        """The value of a size knob for the current size."""
        return {"tiny": tiny, "small": small, "full": small if full is None else full}[self.size]

    def figure_path(self, name: str) -> Path | None:
        """Where to write figure `name` (a PNG), or None when no report was asked for."""
        if self.report_dir is None:
            return None
        fig_dir = Path(self.report_dir) / "figures"
        fig_dir.mkdir(parents=True, exist_ok=True)
        return fig_dir / f"{self.claim_id}--{name}.png"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A registered claim: the statement as printed, its expected verdict, its check, rule and companion."""

    id: str
    paper: str
    section: str
    statement: str              # as printed (formula and where)
    expected: str               # expected verdict
    derivation: str             # one paragraph: why that verdict is expected
    check: Callable[[Context], Result]
    slow: bool = False
    must_fail: Callable[[Context], Result] | None = None
    statistical: bool = True    # compares a measurement with a formula: needs a companion and EVIDENCE_KEYS
    rule: str | None = None     # the decision rule in one sentence
    decide: Callable[[dict], str] | None = None   # the rule as a function of the evidence
    expected_by_size: dict | None = None          # {size: verdict} where the expectation depends on the size

    @property
    def command(self) -> str:
        return f"python -m paper_checks --all --only '{self.id}'"

    def expected_at(self, size: str) -> str:
        """The expected verdict at `size` (the pre-registered `expected` unless a per-size value is given)."""
        return (self.expected_by_size or {}).get(size, self.expected)


#: claim id -> :class:`paper_checks.Claim`, filled by the :func:`paper_checks.claim` decorators
#: (:func:`paper_checks.load_all` imports the claim modules).
REGISTRY: dict[str, Claim] = {}


def claim(id: str, *, paper: str, section: str, statement: str, expected: str | dict, derivation: str,
          slow: bool = False, statistical: bool = True, rule: str | None = None,
          decide: Callable[[dict], str] | None = None,
          ) -> Callable[[Callable[[Context], Result]], Callable[[Context], Result]]:
    """Register the decorated function as the check of claim `id`.

    A statistical check (the default) needs a must-fail companion (:func:`must_fail`) and reports ``n``,
    ``seed`` and ``detectable`` in its evidence. A per-size `expected` entry must cite the derivation that
    predicts it, never a measured verdict.

    Parameters
    ----------
    id : str
        The claim's id, ``<paper>.<topic>`` (``horn.``, ``kl.``, ``flt.``); unique in :data:`REGISTRY`.
    paper : str
        The paper (:data:`HORN`, :data:`CHOWDHURY` or :data:`CHOROMANSKI`).
    section : str
        Where the statement is printed (``"Sec. 2.1, Eq. (1)"``).
    statement : str
        The statement as printed (formula and where).
    expected : str or dict
        The expected verdict (one of :data:`VERDICTS`), or ``{size: verdict}`` with a ``"full"`` entry.
    derivation : str
        One paragraph: why that verdict is expected.
    slow : bool, default False
        Skipped unless selected (``--all`` or ``--only``); the result then gives the command that runs it.
    statistical : bool, default True
        Whether the check compares a measurement with a formula; False only for a statement no measurement
        can decide (expected verdict ``not-checkable``).
    rule : str, optional
        The decision rule in one sentence (default: ``decide.rule``, which the builders of
        :mod:`paper_checks.rules` set).
    decide : callable, optional
        ``decide(evidence: dict) -> verdict``, the rule as a function of the evidence.

    Returns
    -------
    callable
        The decorator: it registers ``fn(ctx: Context) -> Result`` as the claim's check and returns `fn`
        unchanged.

    Raises
    ------
    ValueError
        An unknown verdict in `expected`, a dict `expected` without ``"full"`` or with an unknown size,
        `decide` without a rule, or (when decorating) an `id` registered twice.

    Examples
    --------
    >>> from paper_checks import REGISTRY, Result, claim
    >>> from paper_checks.registry import CHOWDHURY
    >>> @claim("kl.doc-example", paper=CHOWDHURY, section="Eq. (1)", statement="1 + 1 = 2",
    ...        expected="holds", derivation="arithmetic", statistical=False,
    ...        rule="holds when the sum is 2", decide=lambda ev: "holds" if ev["sum"] == 2 else "fails")
    ... def doc_example(ctx):
    ...     evidence = {"sum": 1 + 1}
    ...     return Result(ctx.decide(evidence), evidence)
    >>> REGISTRY["kl.doc-example"].expected
    'holds'
    >>> del REGISTRY["kl.doc-example"]                  # keep the registry to the papers' claims
    """
    by_size = dict(expected) if isinstance(expected, dict) else None
    if by_size is not None:
        if "full" not in by_size or set(by_size) - set(SIZES):
            raise ValueError(f"expected: a dict needs a 'full' entry and keys among {SIZES}; "
                             f"got {sorted(by_size)}")
        expected = by_size["full"]
    for v in [expected, *(by_size or {}).values()]:
        if v not in VERDICTS:
            raise ValueError(f"expected: one of {VERDICTS}; got {v!r}")
    if decide is not None and rule is None:
        rule = getattr(decide, "rule", None)
    if decide is not None and not rule:
        raise ValueError(f"claim {id!r}: decide given without its one-sentence rule")

    def deco(fn: Callable[[Context], Result]) -> Callable[[Context], Result]:
        if id in REGISTRY:
            raise ValueError(f"claim {id!r} is registered twice")
        REGISTRY[id] = Claim(id, paper, section, statement, expected, derivation, fn, slow,
                             statistical=statistical, rule=rule, decide=decide, expected_by_size=by_size)
        return fn

    return deco


def must_fail(id: str) -> Callable[[Callable[[Context], Result]], Callable[[Context], Result]]:
    """Register the decorated function as claim `id`'s must-fail companion.

    The companion runs the claim's check against a deliberately wrong formula and must return ``"fails"``:
    it shows that the check can tell the formula it accepts from a wrong one.

    Parameters
    ----------
    id : str
        A claim already registered with :func:`claim`.

    Returns
    -------
    callable
        The decorator: it stores ``fn(ctx: Context) -> Result`` as the claim's ``must_fail`` and returns `fn`
        unchanged.

    Raises
    ------
    ValueError
        (When decorating) if no claim `id` is registered.
    """

    def deco(fn: Callable[[Context], Result]) -> Callable[[Context], Result]:
        if id not in REGISTRY:
            raise ValueError(f"must_fail: claim {id!r} is not registered (register the claim first)")
        REGISTRY[id] = dataclasses.replace(REGISTRY[id], must_fail=fn)
        return fn

    return deco




def stat_evidence(*, n: int, seed: int, detectable: float, **more: Any) -> dict:
    """The evidence every statistical check reports (:data:`EVIDENCE_KEYS`), plus any further items.

    n : sample size (replicates, draws, points or cases); seed : ``ctx.seed``; detectable : the smallest
    deviation from the formula that the check is sure to detect (``n_se * se`` or an exact tolerance)."""
    return {"n": int(n), "seed": int(seed), "detectable": float(detectable), **more}
