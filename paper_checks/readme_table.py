"""Print the README's verdict table (markdown) from ``python -m paper_checks --json PATH`` output.

    python -m paper_checks --json results.json && python -m paper_checks.readme_table results.json
    python -m paper_checks --power --json power.json && python -m paper_checks.readme_table --power power.json
    python -m paper_checks --json results.json && python -m paper_checks.readme_table --summary results.json
    python -m paper_checks.readme_table --trained paper_checks/records/*/results.json
    python -m paper_checks.readme_table --runs paper_checks/records/kl-full > .../runs_summary.md

One line per claim: id, verdict (expected verdict in brackets where it differs), the check's one-line finding.
With ``--trained``: one line per claim run at size ``full`` in the given records (verdict, the paper's
expectation, finding, scale, wall time, data).
With ``--runs RECORD_DIR``: one line per training run cached under ``RECORD_DIR/experiments/*/runs/`` (method,
cell, seed, steps, final accuracy, steps to 40%, CPU cost, skipped steps): a record's ``runs_summary.md``.
With ``--power``: one line per claim with its planted mutations and the verdict each one produced.
With ``--summary``: one line per paper with its number of claims of each verdict (the README's table).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .report import totals_line, verdict_label


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(records: list[dict]) -> str:
    lines = ["| claim | verdict | finding |", "| --- | --- | --- |"]
    for r in records:
        ok = r["verdict"] in (r["expected"], "skipped")
        label = verdict_label(r["verdict"], r.get("slips") or r.get("evidence", {}).get("slips") or [])
        verdict = label if ok else f"{label} (expected {r['expected']})"
        finding = r.get("summary") or ""
        if r["verdict"] == "erratum" and r.get("corrected") and not finding:
            finding = "corrected: " + r["corrected"]
        lines.append(f"| `{r['id']}` | {verdict} | {_cell(finding)} |")
    lines += ["", "Totals: " + totals_line(records) + "."]
    return "\n".join(lines)


def power_table(rows: list[dict]) -> str:
    """Markdown summary of ``--power --json`` rows in two sections, as the console prints them: mutations of
    refattn's public functions (the power that counts; a [bug class] marks a realistic bug), then mutations of
    the check's own target, formula or table (they test the rule). Per claim, its mutations and the verdict
    each gives."""
    ref = [r for r in rows if r.get("kind", "refattn") == "refattn"]
    lines: list[str] = []
    for title, part in (("Mutations of refattn's public functions (the power that counts)", ref),
                        ("Mutations of the check's own target, formula or table (they test the rule)",
                         [r for r in rows if r.get("kind", "refattn") != "refattn"])):
        by_claim: dict[str, list[dict]] = {}
        for r in part:
            by_claim.setdefault(r["claim"], []).append(r)
        real = [r for r in part if r.get("bug")]
        lines += [f"**{title}:** {sum(r['moved'] for r in part)}/{len(part)} moved"
                  + (f" ({sum(r['moved'] for r in real)}/{len(real)} realistic bug classes)" if part is ref
                     else "") + ".", "",
                  "| claim | baseline | mutation -> verdict |", "| --- | --- | --- |"]
        for cid, rs in by_claim.items():
            muts = "; ".join(f"{r['mutation']}{' [' + r['bug'] + ']' if r.get('bug') else ''} -> "
                             f"{r['verdict']}{'' if r['moved'] else ' (NOT MOVED)'}" for r in rs)
            lines.append(f"| `{cid}` | {rs[0]['baseline']} | {_cell(muts)} |")
        lines.append("")
    moved = sum(r["moved"] for r in rows)
    claims = len({r["claim"] for r in rows})
    lines += [f"{moved} of {len(rows)} mutations over {claims} claims moved their claim's "
              f"verdict: refattn mutations {sum(r['moved'] for r in ref)}/{len(ref)}, check-target "
              f"mutations {moved - sum(r['moved'] for r in ref)}/{len(rows) - len(ref)} (a [bug class] marks "
              "a realistic bug)."]
    return "\n".join(lines)


#: Verdict columns of the summary, in reading order; a verdict outside this list gets a column after them.
SUMMARY_VERDICTS = ("holds", "erratum", "fails", "not-reproduced", "not-checkable", "skipped")


def summary_table(records: list[dict]) -> str:
    """Markdown table of verdict counts per paper (rows in first-seen order) plus a total row."""
    verdicts = list(SUMMARY_VERDICTS) + sorted({r["verdict"] for r in records} - set(SUMMARY_VERDICTS))
    by_paper: dict[str, dict[str, list[int]]] = {}
    for r in records:
        row = by_paper.setdefault(r["paper"], {})
        c = row.setdefault(r["verdict"], [0, 0])
        c[0] += 1
        c[1] += bool(r.get("slips") or r.get("evidence", {}).get("slips"))
    head = ["paper", "claims"] + [v if v != "skipped" else "skipped (slow)" for v in verdicts]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]

    def cell(c: list[int], bold: bool = False) -> str:
        n = f"**{c[0]}**" if bold else str(c[0])
        return n + (f" ({c[1]} with notation slips)" if c[1] else "")

    total: dict[str, list[int]] = {}
    for paper, row in by_paper.items():
        for v, (n, k) in row.items():
            t = total.setdefault(v, [0, 0])
            t[0], t[1] = t[0] + n, t[1] + k
        counts = " | ".join(cell(row.get(v, [0, 0])) for v in verdicts)
        lines.append(f"| {_cell(paper)} | {sum(c[0] for c in row.values())} | {counts} |")
    lines.append(f"| **all** | **{len(records)}** | "
                 + " | ".join(cell(total.get(v, [0, 0]), bold=True) for v in verdicts) + " |")
    return "\n".join(lines)


#: Evidence ``scale`` keys shown by :func:`trained_table`, in this order, with their column labels.
SCALE_KEYS = (("L", "L"), ("d_model", "width"), ("n_layers", "layers"), ("m", "m"), ("steps", "steps"),
              ("seeds", "seeds"))


def _scale(ev: dict) -> str:
    sc = ev.get("scale") if isinstance(ev.get("scale"), dict) else ev
    return ", ".join(f"{label} {sc[k]}" for k, label in SCALE_KEYS if k in sc)


def _data(ev: dict) -> str:
    d = ev.get("data")
    name = d.get("name", "") if isinstance(d, dict) else (d or ev.get("task", ""))
    return f"{name} (stand-in)" if ev.get("data_stand_in") else str(name)


def _wall(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def trained_table(records: list[dict]) -> str:
    """Markdown table of the claims run at size ``full`` among `records` (committed experiment records)."""
    rows = [r for r in records if isinstance(r.get("evidence"), dict) and r["evidence"].get("size") == "full"]
    lines = ["| claim | verdict | paper expects | finding | scale | wall | data |",
             "| --- | --- | --- | --- | --- | ---: | --- |"]
    for r in rows:
        expect = r.get("expected_full") or r.get("expected", "")
        lines.append(f"| `{r['id']}` | {r['verdict']} | {expect} | {_cell(r.get('summary') or '')} | "
                     f"{_cell(_scale(r['evidence']))} | {_wall(r.get('seconds', float('nan')))} | "
                     f"{_cell(_data(r['evidence']))} |")
    return "\n".join(lines)


def runs_table(record_dir: Path) -> str:
    """One markdown line per cached training run of a record directory (``experiments/*/runs/*.json``)."""
    lines = ["| experiment | method | cell | run seed | steps | final val/test acc | steps to 40% "
             "| CPU s/step | train CPU s | skipped non-finite steps |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for path in sorted(Path(record_dir).glob("experiments/*/runs/*.json")):
        r = json.loads(path.read_text())
        exp = path.parent.parent.name
        cell = f"p={r['p']} wd={r['weight_decay']}" if "p" in r else exp
        steps = r.get("steps_trained", (r.get("curve", {}).get("step") or [None])[-1])
        acc = r.get("final_val_acc", r.get("test_acc"))
        lines.append(f"| {exp} | {r['method']} | {cell} | {r['run_seed']} | {steps} | {acc:.3f} | "
                     f"{r.get('steps_to_40')} | {r['cpu_seconds_per_step']:.3f} | {r['train_cpu_seconds']} | "
                     f"{r.get('training', {}).get('skipped_steps', 0)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--runs" and len(argv) == 2:
        print(runs_table(Path(argv[1])))
        return 0
    mode = argv[0] if argv and argv[0] in ("--power", "--summary", "--trained") else None
    if mode:
        argv = argv[1:]
    if len(argv) != 1 and not (mode == "--trained" and argv):
        print("usage: python -m paper_checks.readme_table [--power | --summary] RESULTS.json\n"
              "       python -m paper_checks.readme_table --trained RESULTS.json [RESULTS.json ...]\n"
              "       python -m paper_checks.readme_table --runs RECORD_DIR",
              file=sys.stderr)
        return 2
    records = []
    for path in argv:
        try:
            records += json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            print(f"paper_checks.readme_table: cannot read {path}: {exc}", file=sys.stderr)
            return 2
    print({"--power": power_table, "--summary": summary_table, "--trained": trained_table}.get(mode, table)(
        records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
