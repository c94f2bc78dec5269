"""``python -m validation`` in a subprocess: exit codes 0/1/2, the JSON schema, messages, not tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args, tmp_path=None):
    # the checkout first, then whatever the caller's PYTHONPATH holds (packages installed with --target)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
    return subprocess.run([sys.executable, "-m", "validation", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def _schema(doc):
    assert set(doc) >= {"target", "kind", "framework", "checks"}
    for c in doc["checks"]:
        assert set(c) >= {"name", "passed", "figure", "threshold", "detail"}
        assert c["passed"] in (True, False, None)
        assert c["figure"] is None or isinstance(c["figure"], (int, float))
        assert c["threshold"] is None or isinstance(c["threshold"], (int, float))
        assert isinstance(c["detail"], str) and c["detail"]


def test_exit_0_and_json_schema(tmp_path):
    out = tmp_path / "r.json"
    p = run("check", "refattn", "--kind", "attention", "--quick", "--json", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    _schema(doc)
    assert doc["target"] == "refattn" and doc["kind"] == "attention" and doc["framework"] == "numpy"
    from validation.checks.catalog import KIND_CHECKS
    assert [c["name"] for c in doc["checks"]] == list(KIND_CHECKS["attention"])
    assert "PASS" in p.stdout


def test_exit_1_for_a_planted_defect(tmp_path):
    out = tmp_path / "r.json"
    p = run("check", "tests/validation/planted.py:upcast_favor", "--kind", "attention", "--dtype", "float32",
            "--quick", "--json", str(out))
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    _schema(doc)
    failed = [c["name"] for c in doc["checks"] if c["passed"] is False]
    assert failed == ["dtype"]


@pytest.mark.parametrize("args, message", [
    (("check", "no_such_module_xyz:f", "--kind", "draw"), "importing 'no_such_module_xyz' failed"),
    (("check", "tests/validation/planted.py:wrong_signature", "--kind", "attention"), "does not fit the "
                                                                                      "attention"),
    (("check", "tests/validation/planted.py:wrong_shape_favor", "--kind", "attention"), "returned shape"),
    (("check", "refattn", "--kind", "kernels"), "invalid choice: 'kernels'"),
    (("check", "tests/validation/planted.py:upcast_favor", "--kind", "attention", "--framework", "mxnet"),
     "unknown framework 'mxnet'"),
])
def test_exit_2_with_a_message_not_a_traceback(args, message):
    p = run(*args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr
    assert "Traceback" not in p.stderr


def test_bad_output_paths_exit_2_before_running_and_create_nothing(tmp_path):
    missing = tmp_path / "no_such_dir" / "r.json"
    p = run("check", "refattn", "--kind", "attention", "--json", str(missing))
    assert p.returncode == 2 and "does not exist" in p.stderr and not missing.parent.exists()
    p = run("check", "refattn", "--kind", "attention", "--json", "/proc/x.json")
    assert p.returncode == 2 and "--json /proc/x.json: cannot be written" in p.stderr
    assert p.stdout == ""                                  # nothing ran
    p = run("report", "--out", str(tmp_path))
    assert p.returncode == 2 and "is a directory" in p.stderr


def test_every_bad_argument_gets_its_own_line():
    p = run("check", "refattn", "--kind", "features", "--as", "nope", "--seed", "-1", "--framework", "mx",
            "--json", "/proc/x.json")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert [ln.split()[1].rstrip(":") for ln in lines] == ["--seed", "--framework", "--as", "--json"], (
        p.stderr
    )


def test_help_lists_the_families_with_their_contracts():
    p = run("check", "--help")
    assert p.returncode == 0
    for fam in (
        "gmm-rks",
        "gmm-prf",
        "fastfood-rks",
        "fastfood-prf",
        "generative-rks",
        "generative-prf",
        "flt",
    ):
        assert fam in p.stdout
    assert "fn(x, noise, logits, mu, S)" in p.stdout and "fn(pos, xi, w) -> (N1, N2)" in p.stdout


def test_report_writes_the_table(monkeypatch):
    """``python -m validation report`` end to end on one small run."""
    from validation import findings as report

    monkeypatch.setattr(report, "RUNS", [("refattn", "features", None)])
    monkeypatch.setattr(report, "KNOWN", [])
    md = report.write_report(quick=True)
    assert "| refattn | features | `values` | pass |" in md
    assert "| refattn | features | `dtype` | pass |" in md
