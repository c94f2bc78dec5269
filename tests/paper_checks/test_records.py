"""The committed experiment records (``paper_checks/records/<group>/results.json``) follow from the code.

A record is the output of hours of training; it cannot be re-run in the suite, but what turns its evidence
into a verdict can: every stored verdict must equal the registered claim's decision rule re-applied to the
stored evidence, under the rule text stored with it. A changed rule, threshold or guard therefore fails here
until the record is re-run (or the change is reverted). The image records' aggregate numbers are also
recomputed from their per-seed values, so an aggregation that drifts from the per-run files is caught,
and the image collections (the ladder's and the ablation's) are collected again from their own runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from paper_checks.catalog import load_all

RECORDS = Path(__file__).resolve().parents[2] / "paper_checks" / "records"
FILES = sorted(RECORDS.glob("*/results.json"))
ROWS = [(f.parent.name, r) for f in FILES for r in json.loads(f.read_text())]
SLOW = [(g, r) for g, r in ROWS if r["evidence"].get("size") == "full"]


def test_records_exist_and_name_their_command():
    assert FILES, f"no committed records under {RECORDS}"
    for f in FILES:
        cmd = (f.parent / "command.txt").read_text()
        assert "python -m paper_checks" in cmd and "date:" in cmd, f"{f.parent}/command.txt"


#: (record group, claim id) -> why the registered rule's sentence differs from the record's, until the
#: record is re-run: the rule still decides the record's stored evidence as stored (checked below).
RULE_REWORDED: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("group,rec", SLOW, ids=[f"{g}:{r['id']}" for g, r in SLOW])
def test_stored_verdict_is_the_rule_applied_to_the_stored_evidence(group, rec):
    claim = load_all()[rec["id"]]
    if (group, rec["id"]) in RULE_REWORDED:
        assert rec["rule"] != claim.rule, f"{rec['id']}: the record has the current rule: remove it from " \
                                          "RULE_REWORDED"
    else:
        assert rec["rule"] == claim.rule, f"{rec['id']}: the rule changed since the record ({group})"
    assert claim.decide(rec["evidence"]) == rec["verdict"]


def _image_rows(claim_id):
    return [r for g, r in SLOW if g == "images-full" and r["id"] == claim_id]


@pytest.mark.parametrize("rec", _image_rows("horn.table1-ordering"), ids=lambda r: r["id"])
def test_image_gains_follow_from_the_per_seed_accuracies(rec):
    acc = rec["evidence"]["accuracy"]
    for m, a in acc.items():
        assert a["mean"] == pytest.approx(np.mean(a["per_seed"]), abs=1e-12), m
        assert a["sd"] == pytest.approx(np.std(a["per_seed"], ddof=1), abs=1e-12), m
    nopos = acc["no-pos"]["mean"]
    assert rec["evidence"]["gain_s1"] == pytest.approx(acc["s1"]["mean"] - nopos, abs=1e-12)
    assert rec["evidence"]["gain_s2"] == pytest.approx(acc["s2"]["mean"] - nopos, abs=1e-12)


def test_a_planted_record_change_is_caught():
    """The re-application can fail: the table-1 evidence with both gains moved across the rule's margin
    decides the other way (below the paper's compute a missing effect reads not-reproduced)."""
    rows = _image_rows("horn.table1-ordering")
    if not rows:
        pytest.skip("no images-full record")
    rec = rows[0]
    moved, want = {"holds": (0.0, "not-reproduced")}.get(rec["verdict"], (0.3, "holds"))
    ev = dict(rec["evidence"], gain_s1=moved, gain_s2=moved)
    assert load_all()[rec["id"]].decide(ev) == want != rec["verdict"]


def test_readme_trained_table_lists_only_full_size_rows(tmp_path, capsys):
    from paper_checks import readme_table

    full = {"id": "x.full", "verdict": "fails", "expected_full": "holds", "summary": "a | b",
            "seconds": 125.0,
            "evidence": {"size": "full", "data": {"name": "Fashion-MNIST"}, "data_stand_in": False,
                         "scale": {"L": 196, "d_model": 64, "steps": 1500, "seeds": 3}}}
    tiny = {"id": "x.tiny", "verdict": "not-checkable", "expected": "not-checkable", "summary": "",
            "seconds": 1.0, "evidence": {"size": "tiny"}}
    js = tmp_path / "r.json"
    js.write_text(json.dumps([full, tiny]))
    assert readme_table.main(["--trained", str(js), str(js)]) == 0
    out = capsys.readouterr().out
    row = ("| `x.full` | fails | holds | a \\| b | L 196, width 64, steps 1500, seeds 3 | 2 min | "
           "Fashion-MNIST |")
    assert out.count(row) == 2 and "x.tiny" not in out
    assert readme_table.main(["--trained"]) == 2


def test_runs_summary_is_generated_from_the_cached_runs(tmp_path, capsys):
    """``--runs DIR`` writes one line per cached run; each committed ``runs_summary.md`` is that output."""
    from paper_checks import readme_table

    runs = tmp_path / "experiments" / "sparse_task" / "runs"
    runs.mkdir(parents=True)
    (runs / "a.json").write_text(json.dumps({
        "method": "gmm-rks", "p": 0.1, "weight_decay": 0.0, "run_seed": 3, "steps_trained": 700,
        "final_val_acc": 0.9123, "steps_to_40": 350, "cpu_seconds_per_step": 0.0812,
        "train_cpu_seconds": 56.8, "training": {"skipped_steps": 2}}))
    assert readme_table.main(["--runs", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "| sparse_task | gmm-rks | p=0.1 wd=0.0 | 3 | 700 | 0.912 | 350 | 0.081 | 56.8 | 2 |")
    for summary in RECORDS.glob("*/runs_summary.md"):
        assert summary.read_text().strip() == readme_table.runs_table(summary.parent).strip(), summary


@pytest.mark.parametrize("group, module, files", [
    ("images-ablation", "images_ablation", ("ablation.json", "ablation.md")),
    ("images-ladder", "images_ladder", ("runs.json", "runs.md"))])
def test_an_image_collection_is_its_committed_runs_collected(tmp_path, group, module, files):
    """An image record written by ``--collect`` (``images-ablation/``, ``images-ladder/``) is what
    ``--collect`` writes from the record's own ``runs/`` (trained on Debian's Fashion-MNIST, whose path
    their cache keys hash): no number in it is edited by hand or left stale after a run is added."""
    import importlib

    from paper_checks.experiments.idx import DEFAULT_DATA_DIR

    rec = RECORDS / group
    mod = importlib.import_module(f"paper_checks.experiments.{module}")
    mod.collect(rec / "runs", tmp_path, "full", data_dir=str(DEFAULT_DATA_DIR))         # both: size full
    assert len(list((tmp_path / "runs").glob("*.json"))) == len(list((rec / "runs").glob("*.json"))) > 0
    assert json.loads((tmp_path / files[0]).read_text()) == json.loads((rec / files[0]).read_text())
    assert (tmp_path / files[1]).read_text() == (rec / files[1]).read_text()
