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

from refattn.files import write_text_atomic

__all__ = ["provenance", "blas_info", "json_safe", "record", "write_json", "write_report", "totals_line",
           "verdict_label"]

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
    """BLAS/OpenMP libraries loaded in this process (threadpoolctl) with their thread counts and, for
    OpenBLAS, the kernels it chose for this CPU (``architecture``: rounding-level figures differ between
    kernels)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return [{"error": "threadpoolctl not installed"}]
    return [{k: info.get(k) for k in ("user_api", "internal_api", "version", "num_threads", "architecture",
                                      "prefix")}
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


def _slips_of(rec: Any) -> list:
    """The notation slips of a Result or a JSON record (empty when none)."""
    if isinstance(rec, dict):
        slips = rec.get("slips")
        if slips is None and isinstance(rec.get("evidence"), dict):
            slips = rec["evidence"].get("slips")
        return list(slips or [])
    return [] if rec is None else list(getattr(rec, "slips", []))


def verdict_label(verdict: str, slips: list) -> str:
    """``holds`` or ``holds (2 notation slips)``: the verdict with its slips counted."""
    n = len(slips)
    return verdict if not n else f"{verdict} ({n} notation slip{'s' if n > 1 else ''})"


def totals_line(items: list) -> str:
    """``holds 20 (4 with notation slips), erratum 13, ...``: verdict counts in the order of
    :data:`~paper_checks.registry.VERDICTS` (then any other label, such as ``error``), each verdict's claims
    with notation slips counted apart. `items` are JSON records (dicts with ``verdict`` and ``slips`` or
    ``evidence["slips"]``) or ``(verdict, result)`` pairs (a result may be None)."""
    from .registry import VERDICTS

    counts: dict[str, list[int]] = {}
    for it in items:
        verdict, rec = (it["verdict"], it) if isinstance(it, dict) else it
        c = counts.setdefault(verdict, [0, 0])
        c[0] += 1
        c[1] += bool(_slips_of(rec))
    order = [v for v in VERDICTS if v in counts] + sorted(set(counts) - set(VERDICTS))
    return ", ".join(f"{v} {counts[v][0]}"
                     + (f" ({counts[v][1]} with notation slips)" if counts[v][1] else "") for v in order)


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
        "slips": [] if res is None else json_safe(res.slips),
        "figures": [] if res is None else [str(f) for f in res.figures],
        "seconds": round(float(seconds), 3),
        "provenance": prov,
    }


def write_json(path: Path, rows: list, prov: dict | None = None) -> None:
    size = None if prov is None else prov.get("size")
    write_text_atomic(path, json.dumps([record(c, r, s, prov, size) for c, r, s in rows], indent=2))


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
        v = "error" if res is None else verdict_label(res.verdict, res.slips)
        lines.append(f"| [{c.id}](#{c.id.replace('.', '')}) | {v} | {c.expected_at(size)} | {secs:.1f} | "
                     f"{'' if res is None else res.summary} |")
    lines += ["", "Totals: " + totals_line([("error" if r is None else r.verdict, r) for _, r, _ in rows])
              + "."]
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
        for sl in res.slips:
            lines += ["", f"**Notation slip.** Printed: {sl['printed']}. Corrected: {sl['corrected']}. "
                          f"Why notation only: {sl['why']}. Check: {_fmt(sl['check'])}."]
        if res.evidence:
            lines += ["", "| evidence | value |", "|---|---|"]
            lines += [f"| {k} | {_fmt(v)} |" for k, v in res.evidence.items()]
        for f in res.figures:
            rel = os.path.relpath(Path(f), out_dir)
            lines += ["", f"![{Path(f).stem}]({rel})"]
    write_text_atomic(out_dir / "report.md", "\n".join(lines) + "\n")
