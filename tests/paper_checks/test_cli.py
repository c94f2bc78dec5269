"""The paper_checks CLI: --list, --only, --json schema, --report files, and the exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from paper_checks import REGISTRY, Result, load_all
from paper_checks import readme_table
from paper_checks.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def test_list_runs_in_a_subprocess():
    out = subprocess.run([sys.executable, "-m", "paper_checks", "--list"], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert "kl.eq1-softmax" in out.stdout


def test_only_json_and_report(tmp_path, capsys):
    js, rep = tmp_path / "out.json", tmp_path / "rep"
    assert main(["--only", "kl.eq1-*", "--json", str(js), "--report", str(rep), "--size", "tiny"]) == 0
    records = json.loads(js.read_text())
    assert [r["id"] for r in records] == ["kl.eq1-softmax"]
    assert set(records[0]) == {"id", "paper", "section", "statement", "expected", "expected_full", "rule",
                               "verdict", "summary", "evidence", "corrected", "slips", "figures", "seconds",
                               "provenance"}
    prov = records[0]["provenance"]
    keys = {"refattn", "git_commit", "python", "numpy", "scipy", "blas", "command", "seed", "size"}
    assert keys <= set(prov)
    assert prov["size"] == "tiny" and prov["seed"] == 0 and "--only" in prov["command"]
    assert prov["blas"] and all("num_threads" in b and "architecture" in b for b in prov["blas"])
    table = readme_table.table(records)
    assert "| `kl.eq1-softmax` | holds |" in table and "Totals: holds 1." in table
    assert records[0]["verdict"] == "holds"
    md = (rep / "report.md").read_text()
    assert "kl.eq1-softmax" in md
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert (rep / link).exists(), link
    assert "totals" in capsys.readouterr().out


def test_report_links_existing_pngs(tmp_path, monkeypatch):
    load_all()

    def with_fig(ctx):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path = ctx.figure_path("line")
        plt.figure()
        plt.plot([0, 1], [0, 1])
        plt.savefig(path)
        plt.close()
        return Result("holds", {"x": 1}, figures=[str(path)], summary="fig")

    from paper_checks.registry import Claim

    monkeypatch.setitem(REGISTRY, "zz.fig", Claim("zz.fig", "P", "S", "st", "holds", "d", with_fig))
    rep = tmp_path / "rep"
    assert main(["--only", "zz.fig", "--report", str(rep)]) == 0
    links = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", (rep / "report.md").read_text())
    assert links and all((rep / link).exists() for link in links)


def test_exit_codes(tmp_path, monkeypatch, capsys):
    load_all()
    assert main(["--only", "no.such.claim*"]) == 2
    assert "matches no claim" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["--only", "kl.eq1-*", "--json", str(blocker / "sub" / "out.json")]) == 2
    assert main(["--bogus"]) == 2

    def boom(ctx):
        raise RuntimeError("planted failure")

    from paper_checks.registry import Claim

    monkeypatch.setitem(REGISTRY, "zz.boom", Claim("zz.boom", "P", "S", "st", "holds", "d", boom))
    assert main(["--only", "zz.boom"]) == 1
    assert "claim zz.boom raised RuntimeError: planted failure" in capsys.readouterr().err


def test_slow_claims_are_skipped_with_command(monkeypatch, capsys):
    load_all()
    from paper_checks.registry import Claim

    monkeypatch.setitem(REGISTRY, "zz.slow", Claim("zz.slow", "P", "S", "st", "holds", "d",
                                                   lambda ctx: pytest.fail("must not run"), slow=True))
    assert main(["--only", "zz.slow"]) == 0
    assert "--all --only 'zz.slow'" in capsys.readouterr().out


def test_erratum_needs_correction():
    with pytest.raises(ValueError, match="corrected statement"):
        Result("erratum", {})
    with pytest.raises(ValueError, match="verdict: expected one of"):
        Result("maybe", {})


def test_workers_give_the_same_verdicts(tmp_path):
    """--workers runs claims in parallel processes; every claim seeds itself from --seed and its id."""
    serial, parallel = tmp_path / "s.json", tmp_path / "p.json"
    args = ["--only", "kl.eq3-*", "--only", "kl.eq1-*", "--size", "tiny"]
    assert main(args + ["--json", str(serial)]) == 0
    assert main(args + ["--json", str(parallel), "--workers", "2"]) == 0
    s, p = json.loads(serial.read_text()), json.loads(parallel.read_text())
    assert [r["id"] for r in s] == [r["id"] for r in p]
    assert [(r["verdict"], r["evidence"]) for r in s] == [(r["verdict"], r["evidence"]) for r in p]
    assert main(["--workers", "-1"]) == 2


def test_readme_table_cli(tmp_path, capsys):
    js = tmp_path / "r.json"
    js.write_text(json.dumps([{"id": "a.b", "verdict": "fails", "expected": "holds", "summary": "x | y",
                               "corrected": None}]))
    assert readme_table.main([str(js)]) == 0
    out = capsys.readouterr().out
    assert "| `a.b` | fails (expected holds) | x \\| y |" in out
    assert readme_table.main([str(tmp_path / "missing.json")]) == 2


def test_readme_summary_table_counts_verdicts_per_paper(tmp_path, capsys):
    rows = [("P1", "holds"), ("P1", "erratum"), ("P1", "holds"), ("P2", "skipped"), ("P2", "odd")]
    js = tmp_path / "r.json"
    js.write_text(json.dumps([{"id": f"c{i}", "paper": p, "verdict": v} for i, (p, v) in enumerate(rows)]))
    assert readme_table.main(["--summary", str(js)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("| paper | claims | holds | erratum | fails | not-reproduced | not-checkable "
                        "| skipped (slow) | odd |")
    assert lines[2] == "| P1 | 3 | 2 | 1 | 0 | 0 | 0 | 0 | 0 |"
    assert lines[3] == "| P2 | 2 | 0 | 0 | 0 | 0 | 0 | 1 | 1 |"
    assert lines[4] == "| **all** | **5** | **2** | **1** | **0** | **0** | **0** | **1** | **1** |"
