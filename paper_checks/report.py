"""Writers for ``--json`` (a list of claim records) and ``--report`` (report.md with evidence and figures),
and the provenance every record carries (:func:`provenance`): refattn version and git commit, Python, NumPy
and SciPy versions, BLAS library and thread count, the command line, seed and size -- so that a quoted verdict
can be traced to what produced it."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["provenance", "blas_info", "json_safe", "record", "write_json", "write_report"]

_ROOT = Path(__file__).resolve().parents[1]


def _git_commit() -> str | None:
    """The checkout's commit (with ``+dirty`` when tracked files differ), or None outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=_ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def blas_info() -> list[dict]:
    """BLAS/OpenMP libraries loaded in this process with their thread counts (threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return [{"error": "threadpoolctl not installed"}]
    return [{k: info.get(k) for k in ("user_api", "internal_api", "version", "num_threads", "prefix")}
            for info in threadpool_info()]


def provenance(*, seed: int, size: str, argv: list[str] | None = None) -> dict:
    """What produced a run: versions, commit, BLAS and threads, command line, seed and size."""
    import refattn

    try:
        import scipy

        scipy_version = scipy.__version__
    except ImportError:  # pragma: no cover - scipy is a test dependency
        scipy_version = None
    return {"refattn": getattr(refattn, "__version__", None), "git_commit": _git_commit(),
            "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy_version,
            "blas": blas_info(), "platform": platform.platform(),
            "command": " ".join(["python -m paper_checks", *(sys.argv[1:] if argv is None else argv)]),
            "seed": int(seed), "size": size}


def json_safe(x: Any) -> Any:
    """JSON-safe copy of evidence values (NumPy scalars/arrays, non-finite floats as strings)."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return json_safe(x.tolist())
    if isinstance(x, np.generic):
        return json_safe(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def record(claim: Any, res: Any, seconds: float, prov: dict | None = None, size: str | None = None) -> dict:
    return {
        "id": claim.id,
        "paper": claim.paper,
        "section": claim.section,
        "statement": claim.statement,
        "expected": claim.expected_at(size) if size else claim.expected,
        "expected_full": claim.expected,
        "rule": getattr(claim, "rule", None),
        "verdict": "error" if res is None else res.verdict,
        "summary": "" if res is None else res.summary,
        "evidence": {} if res is None else json_safe(res.evidence),
        "corrected": None if res is None else res.corrected,
        "figures": [] if res is None else [str(f) for f in res.figures],
        "seconds": round(float(seconds), 3),
        "provenance": prov,
    }


def write_json(path: Path, rows: list, prov: dict | None = None) -> None:
    size = None if prov is None else prov.get("size")
    path.write_text(json.dumps([record(c, r, s, prov, size) for c, r, s in rows], indent=2))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(json_safe(v))


def write_report(out_dir: Path, rows: list, *, seed: int, size: str, prov: dict | None = None) -> None:
    """``report.md``: provenance, the verdict table, then one section per claim with statement, derivation,
    decision rule, evidence, correction and figures (linked relative to the report)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    prov = provenance(seed=seed, size=size) if prov is None else prov
    lines = ["# refattn paper checks", "", f"Seed {seed}, size `{size}`.", "",
             "| provenance | |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in prov.items()]
    lines += ["", "| claim | verdict | expected | seconds | summary |", "|---|---|---|---|---|"]
    for c, res, secs in rows:
        v = "error" if res is None else res.verdict
        lines.append(f"| [{c.id}](#{c.id.replace('.', '')}) | {v} | {c.expected_at(size)} | {secs:.1f} | "
                     f"{'' if res is None else res.summary} |")
    for c, res, _ in rows:
        lines += ["", f"## {c.id}", "", f"*{c.paper}*, {c.section}.", "", f"**Statement.** {c.statement}", "",
                  f"**Expected verdict: {c.expected_at(size)}.** {c.derivation}", ""]
        if getattr(c, "rule", None):
            lines += [f"**Decision rule.** {c.rule}", ""]
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
