"""Writers for ``--json`` (a list of claim records) and ``--report`` (report.md with evidence and figures)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np


def _plain(x: Any) -> Any:
    """JSON-safe copy of evidence values (NumPy scalars/arrays, non-finite floats as strings)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        return _plain(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def record(claim: Any, res: Any, seconds: float) -> dict:
    return {
        "id": claim.id,
        "paper": claim.paper,
        "section": claim.section,
        "statement": claim.statement,
        "expected": claim.expected,
        "verdict": "error" if res is None else res.verdict,
        "summary": "" if res is None else res.summary,
        "evidence": {} if res is None else _plain(res.evidence),
        "corrected": None if res is None else res.corrected,
        "figures": [] if res is None else [str(f) for f in res.figures],
        "seconds": round(float(seconds), 3),
    }


def write_json(path: Path, rows: list) -> None:
    path.write_text(json.dumps([record(c, r, s) for c, r, s in rows], indent=2))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(_plain(v))


def write_report(out_dir: Path, rows: list, *, seed: int, size: str) -> None:
    """``report.md``: the verdict table, then one section per claim with statement, derivation, evidence,
    correction and figures (linked relative to the report)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# refattn paper checks", "", f"Seed {seed}, size `{size}`.", "",
             "| claim | verdict | expected | seconds | summary |", "|---|---|---|---|---|"]
    for c, res, secs in rows:
        v = "error" if res is None else res.verdict
        lines.append(f"| [{c.id}](#{c.id.replace('.', '')}) | {v} | {c.expected} | {secs:.1f} | "
                     f"{'' if res is None else res.summary} |")
    for c, res, _ in rows:
        lines += ["", f"## {c.id}", "", f"*{c.paper}*, {c.section}.", "", f"**Statement.** {c.statement}", "",
                  f"**Expected verdict: {c.expected}.** {c.derivation}", ""]
        if res is None:
            lines.append("**The check raised an error** (see the console output).")
            continue
        lines.append(f"**Verdict: {res.verdict}.** {res.summary}")
        if res.corrected:
            lines += ["", f"**Corrected statement.** {res.corrected}"]
        if res.evidence:
            lines += ["", "| evidence | value |", "|---|---|"]
            lines += [f"| {k} | {_fmt(v)} |" for k, v in res.evidence.items()]
        for f in res.figures:
            rel = os.path.relpath(Path(f), out_dir)
            lines += ["", f"![{Path(f).stem}]({rel})"]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
