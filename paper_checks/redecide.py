"""Re-decide committed trained records under the current decision rules, without re-training.

``python -m paper_checks.redecide paper_checks/records/images-full paper_checks/records/kl-full``
rewrites each record's ``results.json`` (and regenerates its ``report.md``): for every trained claim it
adds the numbers the current rule reads, derived from what the record already holds -- the image claims'
gains, standard errors, worse-direction retentions (from the runs of the whole size) and budget ladder (one
rung per ladder fraction whose runs are all there) from the committed per-run files
(``experiments/images/runs/*.json``), every claim's compute against the paper's (``budget_fraction``, from
the size the record was run at) -- and stores the current rule's text and verdict. The runs themselves are
unchanged: the evidence says which settings trained them (``evidence["redecided"]``). A line is appended to
the record's ``command.txt``.

It sits in the catalog layer of ``paper_checks`` (above the per-paper claims: it reads the registered trained
claims of all three papers).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from refattn.files import write_text_atomic

from .choromanski import experiments as _flt_claims  # noqa: F401 (registers flt.image-classification)
from .chowdhury import experiments as _kl_claims  # noqa: F401 (registers the KL trained claims)
from .experiments import eigenvalues, images, images_rules, listops, sparse_task, variance_metrics
from .registry import REGISTRY, Result
from .report import json_safe, write_report
from .horn import experiments as _horn_claims  # noqa: F401 (registers Horn's trained claims)

__all__ = ["IMAGE_CLAIMS", "KL_BUDGET", "redecide_rows", "main"]

#: the image claims and their key in :mod:`.images`
IMAGE_CLAIMS = {"horn.table1-ordering": "table1", "horn.shift-robustness": "shift",
                "flt.image-classification": "flt"}
#: the KL claims and the budget of the grid they read
KL_BUDGET = {"kl.sec4.2-sparsity": sparse_task.budget, "kl.lra-listops": listops.budget,
             "kl.sec4.1-variance-metrics": variance_metrics.budget,
             "kl.table4-eigenvalues": eigenvalues.budget}
#: the settings the committed image runs were trained with (before :data:`images.SETTINGS`)
PREVIOUS_IMAGE_SETTINGS = images.PREVIOUS_SETTINGS


def _image_runs(record_dir: Path) -> list[dict]:
    runs = sorted((record_dir / "experiments" / "images" / "runs").glob("*.json"))
    return [json.loads(p.read_text()) for p in runs]


def redecide_rows(rows: list[dict], record_dir: Path) -> tuple[list[dict], list[str]]:
    """The record's rows with every trained claim re-decided (module docstring), and one line per change."""
    reg = REGISTRY
    runs = None
    out, changes = [], []
    for rec in rows:
        cid, ev = rec["id"], dict(rec["evidence"])
        if ev.get("size") != "full" or (cid not in IMAGE_CLAIMS and cid not in KL_BUDGET):
            out.append(rec)
            continue
        if cid in IMAGE_CLAIMS:
            which = IMAGE_CLAIMS[cid]
            runs = _image_runs(record_dir) if runs is None else runs
            mine = [r for r in images.at_rung(runs, "1") if r["method"] in images_rules.CLAIM_METHODS[which]]
            ev.update(images.budget(ev["size"]))
            ev.update(images_rules.decision_numbers(which, mine, ev))
            ev["ladder"] = images.ladder(which, runs, ev["size"]) or ev["ladder"]
            summary = f"[{ev['size']}] {images.summary(which, ev)}"
            settings = PREVIOUS_IMAGE_SETTINGS
        else:
            ev.update(KL_BUDGET[cid](ev["size"]))
            summary = rec["summary"]
            settings = "as the record's scale and criterion state"
        ev["redecided"] = {"rule": "the current rule applied to the stored evidence (runs not retrained)",
                           "settings_of_the_runs": settings}
        claim = reg[cid]
        verdict = claim.decide(ev)
        if verdict != rec["verdict"]:
            changes.append(f"{cid}: {rec['verdict']} -> {verdict}")
            if cid not in IMAGE_CLAIMS:                     # (the image summary states its compute itself)
                summary = f"{verdict} (budget {ev['budget_fraction']:.2g} of the paper's): {summary}"
        out.append({**rec, "rule": claim.rule, "verdict": verdict, "summary": summary,
                    "evidence": json_safe(ev)})
    return out, changes


def _section(text: str, cid: str) -> tuple[int, int]:
    """(start, end) of claim `cid`'s section ``## cid`` in a report (to the next ``## `` or the end)."""
    start = text.index(f"\n## {cid}\n")
    nxt = text.find("\n## ", start + 1)
    return start, len(text) if nxt < 0 else nxt


def _row(text: str, cid: str) -> tuple[int, int]:
    start = text.index(f"| [{cid}](#")
    return start, text.index("\n", start)


def _report(record_dir: Path, rows: list[dict], ids: list[str]) -> None:
    """Regenerate the verdict-table rows and sections of the claims `ids` in the record's ``report.md`` (the
    other claims' parts are left as they were written with the record)."""
    import tempfile

    reg = REGISTRY
    prov = rows[0].get("provenance") or {}
    with tempfile.TemporaryDirectory() as tmp:
        items = []
        for r in (r for r in rows if r["id"] in ids):   # figures named as the record has them
            figs = [str(Path(tmp) / "figures" / Path(f).name) for f in r.get("figures", [])]
            res = Result(r["verdict"], r["evidence"], corrected=r.get("corrected"), figures=figs,
                         summary=r["summary"])
            items.append((reg[r["id"]], res, float(r.get("seconds", 0.0))))
        write_report(Path(tmp), items, seed=int(prov.get("seed", 0)), size=str(prov.get("size", "full")),
                     prov=prov)
        fresh = (Path(tmp) / "report.md").read_text()
    old = (record_dir / "report.md").read_text()
    for cid in ids:
        a, b = _row(old, cid)
        c, d = _row(fresh, cid)
        old = old[:a] + fresh[c:d] + old[b:]
        a, b = _section(old, cid)
        c, d = _section(fresh, cid)
        old = old[:a] + fresh[c:d] + old[b:]
    write_text_atomic(record_dir / "report.md", old)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_checks.redecide", description=__doc__)
    ap.add_argument("records", nargs="+", type=Path, help="record directories (each with results.json)")
    args = ap.parse_args(argv)
    for d in args.records:
        rows = json.loads((d / "results.json").read_text())
        new, changes = redecide_rows(rows, d)
        write_text_atomic(d / "results.json", json.dumps(json_safe(new), indent=2))
        _report(d, new, [r["id"] for r in new if "redecided" in r["evidence"]])
        day = datetime.date.today().isoformat()
        note = (f"re-decided: {day}, python -m paper_checks.redecide {d} (the current rules on "
                f"the stored evidence, runs not retrained): " + ("; ".join(changes) or "no verdict changed"))
        old = (d / "command.txt").read_text().rstrip("\n")
        write_text_atomic(d / "command.txt", old + "\n" + note + "\n")
        print(f"{d}: " + ("; ".join(changes) or "no verdict changed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
