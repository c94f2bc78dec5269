"""What a cross-check returns: one :class:`CheckResult` per named check, gathered in a :class:`Report`.

A check has four outcomes: passed, FAILED, skipped (it does not apply), or inconclusive (it ran but could not
decide, e.g. the estimated kernel matches none of the known ones). A failed check names its likely cause from
the catalogue of known defects (:mod:`validation.checks.causes`), with the figure that points to it. The
report's verdict: FAIL when a check failed, inconclusive when none failed but one could not decide, PASS
otherwise; its exit status follows the one table of both CLIs (0 pass, 1 fail, 3 inconclusive).
"""

from __future__ import annotations

import dataclasses
import math

from .causes import unmatched

__all__ = ["CheckResult", "Report", "skip", "inconclusive", "EXIT_PASSED", "EXIT_FAILED", "EXIT_INCONCLUSIVE"]

#: exit statuses of a report (the CLI's table: 0 every check passed, 1 a check failed, 3 inconclusive)
EXIT_PASSED, EXIT_FAILED, EXIT_INCONCLUSIVE = 0, 1, 3


@dataclasses.dataclass
class CheckResult:
    """One named check's outcome: ``passed`` (``None``: skipped or inconclusive), its figure, threshold, a
    detail, whether it was ``inconclusive``, and for a failed check its likely ``cause``."""

    name: str
    passed: bool | None        # None: skipped or inconclusive (detail says why)
    figure: float | None
    threshold: float | None
    detail: str
    inconclusive: bool = False  # ran but could not decide (passed is None)
    cause: str | None = None    # a failed check: the likely defect and the figure that points to it

    @property
    def verdict(self) -> str:
        """``"pass"``, ``"FAIL"``, ``"skip"`` or ``"inconclusive"``."""
        if self.inconclusive:
            return "inconclusive"
        return "skip" if self.passed is None else ("pass" if self.passed else "FAIL")

    def to_dict(self) -> dict:
        def num(v):
            return None if v is None or not math.isfinite(v) else float(v)
        return {"name": self.name, "passed": self.passed, "figure": num(self.figure),
                "threshold": num(self.threshold), "detail": self.detail, "inconclusive": self.inconclusive,
                "cause": self.cause}


def skip(name: str, why: str) -> CheckResult:
    """A skipped check (``passed is None``), with the reason."""
    return CheckResult(name, None, None, None, f"skipped: {why}")


def inconclusive(name: str, why: str, figure: float | None = None,
                 threshold: float | None = None) -> CheckResult:
    """A check that ran but could not decide (``passed is None``, ``inconclusive``), with what it measured."""
    return CheckResult(name, None, figure, threshold, f"inconclusive: {why}", inconclusive=True)


@dataclasses.dataclass
class Report:
    """What :func:`validation.check` returns: one :class:`CheckResult` per check run, and the setting."""

    target: str
    kind: str
    framework: str
    dtype: str
    seed: int
    family: str | None
    checks: list[CheckResult]
    note: str = ""
    seconds: float = 0.0
    output: str = ""           # what an isolated target wrote to stdout and stderr (validation.worker)

    def __post_init__(self):
        for c in self.checks:                       # every failed check names a cause, if only "unmatched"
            if c.passed is False and not c.cause:
                c.cause = unmatched(c.detail if len(c.detail) <= 200 else c.detail[:197] + "...")

    @property
    def failed(self) -> bool:
        """True when a check failed."""
        return any(c.passed is False for c in self.checks)

    @property
    def inconclusive(self) -> bool:
        """True when no check failed but one could not decide."""
        return not self.failed and any(c.inconclusive for c in self.checks)

    @property
    def passed(self) -> bool:
        """True when no check failed and none was inconclusive (skipped checks do not count)."""
        return not self.failed and not self.inconclusive

    @property
    def verdict(self) -> str:
        """``"PASS"``, ``"FAIL"`` or ``"INCONCLUSIVE"``."""
        return "FAIL" if self.failed else ("INCONCLUSIVE" if self.inconclusive else "PASS")

    @property
    def exit_code(self) -> int:
        """0 every check passed (or was skipped), 1 a check failed, 3 inconclusive."""
        return EXIT_FAILED if self.failed else (EXIT_INCONCLUSIVE if self.inconclusive else EXIT_PASSED)

    def __getitem__(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check named {name!r} in this report (checks: {[c.name for c in self.checks]})")

    def to_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind, "framework": self.framework,
                "checks": [c.to_dict() for c in self.checks], "dtype": self.dtype, "seed": self.seed,
                "family": self.family, "passed": self.passed, "verdict": self.verdict, "note": self.note,
                "seconds": round(self.seconds, 2), "target_output": self.output}

    def __str__(self) -> str:
        head = (f"{self.target} [{self.kind}, {self.framework}, {self.dtype}, seed {self.seed}"
                f"{', as ' + self.family if self.family else ''}]: {self.verdict} ({self.seconds:.1f} s)")
        lines = [head] + ([f"  ({self.note})"] if self.note else [])
        for c in self.checks:
            fig = "" if c.figure is None or not math.isfinite(c.figure) else f" {c.figure:.3g}"
            thr = "" if c.threshold is None else f" (threshold {c.threshold:.3g})"
            lines.append(f"  {c.verdict:4s} {c.name:18s}{fig}{thr}: {c.detail}")
            if c.cause:
                lines.append(f"       likely cause: {c.cause}")
        if self.output:
            out = self.output.splitlines()
            lines += [f"target output (its stdout and stderr, captured; {len(out)} lines):"]
            lines += [f"  | {ln}" for ln in out]
        return "\n".join(lines)
