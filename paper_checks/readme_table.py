"""Print the README's verdict table (markdown) from ``python -m paper_checks --json PATH`` output.

    python -m paper_checks --json results.json && python -m paper_checks.readme_table results.json

One line per claim: id, verdict (expected verdict in brackets where it differs), the check's one-line finding.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(records: list[dict]) -> str:
    lines = ["| claim | verdict | finding |", "| --- | --- | --- |"]
    for r in records:
        verdict = r["verdict"] if r["verdict"] in (r["expected"], "skipped") else f"{r['verdict']} (expected {r['expected']})"
        finding = r.get("summary") or ""
        if r["verdict"] == "erratum" and r.get("corrected") and not finding:
            finding = "corrected: " + r["corrected"]
        lines.append(f"| `{r['id']}` | {verdict} | {_cell(finding)} |")
    counts: dict[str, int] = {}
    for r in records:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m paper_checks.readme_table RESULTS.json", file=sys.stderr)
        return 2
    try:
        records = json.loads(Path(argv[0]).read_text())
    except (OSError, ValueError) as exc:
        print(f"paper_checks.readme_table: cannot read {argv[0]}: {exc}", file=sys.stderr)
        return 2
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
