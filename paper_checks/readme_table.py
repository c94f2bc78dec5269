"""Print the README's verdict table (markdown) from ``python -m paper_checks --json PATH`` output.

    python -m paper_checks --json results.json && python -m paper_checks.readme_table results.json
    python -m paper_checks --power --json power.json && python -m paper_checks.readme_table --power power.json

One line per claim: id, verdict (expected verdict in brackets where it differs), the check's one-line finding.
With ``--power``: one line per claim with its planted mutations and the verdict each one produced.
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
        ok = r["verdict"] in (r["expected"], "skipped")
        verdict = r["verdict"] if ok else f"{r['verdict']} (expected {r['expected']})"
        finding = r.get("summary") or ""
        if r["verdict"] == "erratum" and r.get("corrected") and not finding:
            finding = "corrected: " + r["corrected"]
        lines.append(f"| `{r['id']}` | {verdict} | {_cell(finding)} |")
    counts: dict[str, int] = {}
    for r in records:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "."]
    return "\n".join(lines)


def power_table(rows: list[dict]) -> str:
    """Markdown summary of ``--power --json`` rows: per claim, its mutations and the verdict each gives."""
    by_claim: dict[str, list[dict]] = {}
    for r in rows:
        by_claim.setdefault(r["claim"], []).append(r)
    lines = ["| claim | baseline | mutation -> verdict |", "| --- | --- | --- |"]
    for cid, rs in by_claim.items():
        muts = "; ".join(f"{r['mutation']} -> {r['verdict']}{'' if r['moved'] else ' (NOT MOVED)'}"
                         for r in rs)
        lines.append(f"| `{cid}` | {rs[0]['baseline']} | {_cell(muts)} |")
    moved = sum(r["moved"] for r in rows)
    lines += ["", f"{moved} of {len(rows)} mutations over {len(by_claim)} claims moved their claim's "
                  "verdict."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    power = bool(argv) and argv[0] == "--power"
    if power:
        argv = argv[1:]
    if len(argv) != 1:
        print("usage: python -m paper_checks.readme_table [--power] RESULTS.json", file=sys.stderr)
        return 2
    try:
        records = json.loads(Path(argv[0]).read_text())
    except (OSError, ValueError) as exc:
        print(f"paper_checks.readme_table: cannot read {argv[0]}: {exc}", file=sys.stderr)
        return 2
    print(power_table(records) if power else table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
