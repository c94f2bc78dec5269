"""What a cross-check returns: one :class:`CheckResult` per named check, gathered in a :class:`Report`."""

from __future__ import annotations

import dataclasses
import math

__all__ = ["CheckResult", "Report", "skip"]


@dataclasses.dataclass
class CheckResult:
    """One named check's outcome: ``passed`` (``None``: skipped), its figure, threshold and a detail."""

    name: str
    passed: bool | None        # None: skipped (detail says why)
    figure: float | None
    threshold: float | None
    detail: str

    def to_dict(self) -> dict:
        def num(v):
            return None if v is None or not math.isfinite(v) else float(v)
        return {"name": self.name, "passed": self.passed, "figure": num(self.figure),
                "threshold": num(self.threshold), "detail": self.detail}


def skip(name: str, why: str) -> CheckResult:
    """A skipped check (``passed is None``), with the reason."""
    return CheckResult(name, None, None, None, f"skipped: {why}")


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

    @property
    def passed(self) -> bool:
        """True when no check failed (skipped checks do not count)."""
        return all(c.passed is not False for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def __getitem__(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check named {name!r} in this report (checks: {[c.name for c in self.checks]})")

    def to_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind, "framework": self.framework,
                "checks": [c.to_dict() for c in self.checks], "dtype": self.dtype, "seed": self.seed,
                "family": self.family, "passed": self.passed, "note": self.note,
                "seconds": round(self.seconds, 2)}

    def __str__(self) -> str:
        head = (f"{self.target} [{self.kind}, {self.framework}, {self.dtype}, seed {self.seed}"
                f"{', as ' + self.family if self.family else ''}]: "
                f"{'PASS' if self.passed else 'FAIL'} ({self.seconds:.1f} s)")
        lines = [head] + ([f"  ({self.note})"] if self.note else [])
        for c in self.checks:
            verdict = "skip" if c.passed is None else ("pass" if c.passed else "FAIL")
            fig = "" if c.figure is None else f" {c.figure:.3g}"
            thr = "" if c.threshold is None else f" (threshold {c.threshold:.3g})"
            lines.append(f"  {verdict:4s} {c.name:18s}{fig}{thr}: {c.detail}")
        return "\n".join(lines)
