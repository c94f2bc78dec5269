"""Write the paper pages' record of the fast claims: ``paper_checks/records/docs-tiny/``.

The site renders the fast (non-slow) claims' verdicts, evidence and figures from this committed record
rather than running ``python -m paper_checks`` at every build (``docs/_ext/paperclaims.py``). Run it from the
checkout after a change to a claim or to the code it checks::

    python docs/_tools/record_checks.py

It runs ``python -m paper_checks --size tiny --seed 0 --json ... --report ...`` into a temporary directory and
replaces the record's ``results.json``, ``figures/*.png`` and ``command.txt`` (the command, the date, the git
commit and whether the tree had uncommitted changes). The build warns (an error under ``-W``) when a
registered fast claim has no row in the record, so a new claim cannot be left out of it silently.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "paper_checks" / "records" / "docs-tiny"
ARGS = ["--size", "tiny", "--seed", "0"]


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "?"


def main() -> int:
    sys.path.insert(0, str(REPO))
    from refattn.files import write_text_atomic

    with tempfile.TemporaryDirectory() as tmp:
        results, report = Path(tmp) / "results.json", Path(tmp) / "report"
        cmd = [sys.executable, "-m", "paper_checks", *ARGS, "--json", str(results), "--report", str(report)]
        start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO)
        secs = time.perf_counter() - t0
        if proc.returncode not in (0, 1) or not results.exists():
            print(f"record_checks: python -m paper_checks exited {proc.returncode}; the record is unchanged",
                  file=sys.stderr)
            return 1
        rows = json.loads(results.read_text())
        figures = RECORD / "figures"
        new_figures = RECORD / "figures.new"
        shutil.rmtree(new_figures, ignore_errors=True)
        new_figures.mkdir(parents=True)
        for png in sorted((report / "figures").glob("*.png")) if (report / "figures").is_dir() else []:
            shutil.copy2(png, new_figures / png.name)
        for row in rows:                                 # figure paths relative to the record
            row["figures"] = [f"figures/{Path(f).name}" for f in row.get("figures") or []]
        shutil.rmtree(figures, ignore_errors=True)
        os.replace(new_figures, figures)
        write_text_atomic(RECORD / "results.json", json.dumps(rows, indent=1) + "\n")
        dirty = _git("status", "--porcelain", "--", "refattn", "paper_checks", "validation")
        text = "\n".join([
            "command: python -m paper_checks " + " ".join(ARGS) + " --json results.json --report report",
            f"date: {start}",
            f"git: {_git('rev-parse', 'HEAD')}"
            + (" + uncommitted changes under refattn/, paper_checks/ or validation/" if dirty else ""),
            f"exit status: {proc.returncode}",
            f"wall seconds: {secs:.0f}",
            "written by: python docs/_tools/record_checks.py (the fast claims shown on the paper pages)",
        ])
        write_text_atomic(RECORD / "command.txt", text + "\n")
    print(f"record_checks: {len(rows)} claims in {RECORD.relative_to(REPO)} ({secs:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
