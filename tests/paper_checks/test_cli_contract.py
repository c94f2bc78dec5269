"""The paper_checks CLI contract: every argument is validated before anything runs, one line
per bad argument on stderr, exit 2, and no directory is created that the user did not name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from paper_checks import __main__ as cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if a claim starts: a bad argument must be reported before any work."""
    def boom(*a, **k):
        raise AssertionError("a claim ran although an argument was invalid")

    monkeypatch.setattr(cli, "run_by_id", boom)
    monkeypatch.setattr(cli, "_power", boom)
    monkeypatch.setattr(cli, "_seeds", boom)


def _lines(capsys):
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


@pytest.mark.parametrize("args, needle", [
    (["--seed", "-1"], "--seed: expected a non-negative integer (0..4294967295); got -1"),
    (["--workers", "-3"], "--workers: expected a count >= 0 (at most 256); got -3"),
    (["--seeds", "4-x"], "--seeds: expected A-B"),
    (["--seeds=-1,2"], "--seeds: expected A-B"),
    (["--only", "no.such.claim*"], "no.such.claim*"),
    (["--json", "/proc/x.json"], "--json: cannot write in /proc"),
])
def test_one_bad_argument_is_one_line_and_exit_2(args, needle, nothing_runs, capsys):
    assert cli.main(["--only", "kl.eq1-softmax"] + args if args[0] != "--only" else args) == 2
    lines = _lines(capsys)
    assert len(lines) == 1 and needle in lines[0], lines


def test_every_bad_argument_gets_its_own_line(tmp_path, nothing_runs, capsys):
    missing = tmp_path / "no_such_dir"
    assert cli.main(["--seed", "-1", "--workers", "-2", "--only", "zz.none*", "--json",
                     str(missing / "x.json"), "--report", str(missing / "sub" / "rep")]) == 2
    lines = _lines(capsys)
    assert len(lines) == 5, lines
    for needle in ("--seed", "--workers", "zz.none*", "--json", "--report"):
        assert sum(needle in ln for ln in lines) == 1, (needle, lines)
    assert not missing.exists()                       # nothing created on the way


def test_missing_parent_directories_are_not_created(tmp_path, nothing_runs, capsys):
    target = tmp_path / "a" / "b"
    assert cli.main(["--only", "kl.eq1-softmax", "--json", str(target / "x.json")]) == 2
    assert cli.main(["--only", "kl.eq1-softmax", "--report", str(target / "rep")]) == 2
    assert not (tmp_path / "a").exists()
    lines = _lines(capsys)
    assert len(lines) == 2 and "does not exist" in lines[0] and "does not exist" in lines[1]


def test_json_must_not_be_a_directory_and_report_must_be_one(tmp_path, nothing_runs, capsys):
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    assert cli.main(["--only", "kl.eq1-softmax", "--json", str(tmp_path)]) == 2
    assert cli.main(["--only", "kl.eq1-softmax", "--report", str(a_file)]) == 2
    lines = _lines(capsys)
    assert "is a directory" in lines[0] and "not a directory" in lines[1]


def test_unwritable_directory_is_refused(tmp_path, nothing_runs, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_probe_dir", lambda d: "Permission denied")   # root ignores mode bits
    assert cli.main(["--only", "kl.eq1-softmax", "--json", str(tmp_path / "x.json")]) == 2
    assert "--json: cannot write in" in _lines(capsys)[0]


def test_report_dir_is_created_when_named_with_json_inside(tmp_path, capsys):
    rep = tmp_path / "rep"
    assert cli.main(["--only", "kl.eq1-softmax", "--size", "tiny", "--json", str(rep / "out.json"),
                     "--report", str(rep)]) == 0
    assert (rep / "out.json").is_file() and (rep / "report.md").is_file()


def test_seed_minus_one_in_a_subprocess_exits_2_with_one_line():
    out = subprocess.run([sys.executable, "-m", "paper_checks", "--seed", "-1", "--json", "/proc/x.json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout == ""
