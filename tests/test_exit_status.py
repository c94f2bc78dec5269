"""One exit-status table for both CLIs: docs/guide/reliability.md, section "Exit statuses", parsed here and
pinned against the named constants of ``python -m paper_checks`` and ``python -m validation``, with a real
``paper_checks`` run producing each of its statuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "guide" / "reliability.md"

#: The agreed table (docs/guide/reliability.md): status -> (paper_checks, validation).
AGREED = {
    0: ("every claim's verdict equals its `expected`", "every check passed"),
    1: ("a verdict differs from `expected`, or a claim raised",
        'a check FAILED (includes "the target modified q")'),
    2: ("usage error: bad or incompatible arguments, bad data directory / IDX files, unreachable scheduler",
        "usage error: bad arguments, unknown family/target"),
    3: ("(unused)", "inconclusive: no failure, but some check could not decide (e.g. a kernel matching "
                    "none of the known ones)"),
    4: ("(unused)", "the target could not be run: it exited, crashed, timed out, or failed to import"),
    130: ("interrupted (Ctrl-C); results written so far are marked incomplete", "interrupted (Ctrl-C)"),
}


def doc_table() -> dict[int, tuple[str, str]]:
    """The rows of the "Exit statuses" table: status -> (paper_checks cell, validation cell)."""
    text = DOC.read_text()
    m = re.search(r"^## Exit statuses\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert m, f"{DOC}: no section '## Exit statuses'"
    lines = [ln for ln in m.group(1).splitlines() if ln.startswith("|")]
    assert [c.strip() for c in lines[0].strip("|").split("|")] == ["status", "paper_checks", "validation"]
    rows = {}
    for ln in lines[2:]:
        status, pc, val = (c.strip() for c in ln.strip().strip("|").split("|"))
        assert int(status) not in rows, f"status {status} twice"
        rows[int(status)] = (pc, val)
    return rows


def test_the_docs_table_is_the_agreed_one():
    assert doc_table() == AGREED


def test_paper_checks_constants_match_the_table():
    from paper_checks import __main__ as cli

    named = {name: getattr(cli, name) for name in dir(cli) if name.startswith("EXIT_")}
    assert named == {"EXIT_OK": 0, "EXIT_DIFFERS": 1, "EXIT_USAGE": 2, "EXIT_INTERRUPTED": 130}
    used = {s for s, (pc, _) in doc_table().items() if pc != "(unused)"}
    assert set(named.values()) == used


def test_validation_constants_match_the_table():
    from validation import __main__ as vcli

    named = {name: getattr(vcli, name) for name in dir(vcli) if name.startswith("EXIT_")}
    assert named == {"EXIT_PASSED": 0, "EXIT_FAILED": 1, "EXIT_USAGE": 2, "EXIT_INCONCLUSIVE": 3,
                     "EXIT_TARGET_ERROR": 4, "EXIT_INTERRUPTED": 130}
    assert set(named.values()) == set(doc_table())


@pytest.fixture
def planted(monkeypatch):
    """Register claims under zz.*: one that holds, one whose verdict differs from its expected one, one that
    raises, one interrupted by Ctrl-C."""
    from paper_checks import REGISTRY, Result, load_all
    from paper_checks.registry import Claim

    load_all()

    def claim(cid, check):
        monkeypatch.setitem(REGISTRY, cid, Claim(cid, "P", "S", "st", "holds", "d", check))

    def interrupt(ctx):
        raise KeyboardInterrupt

    def boom(ctx):
        raise RuntimeError("planted")

    claim("zz.holds", lambda ctx: Result("holds", {"x": 1}))
    claim("zz.differs", lambda ctx: Result("fails", {"x": 1}))
    claim("zz.raises", boom)
    claim("zz.interrupted", interrupt)


@pytest.mark.parametrize("args, status", [
    (["--only", "zz.holds"], 0),
    (["--only", "kl.eq1-softmax", "--size", "tiny"], 0),
    (["--only", "zz.holds", "--only", "zz.differs"], 1),
    (["--only", "zz.raises"], 1),
    (["--only", "zz.holds", "--seeds", "5-2"], 2),
    (["--only", "zz.holds", "--list", "--json", "x.json"], 2),
    (["--only", "zz.holds", "--only", "zz.interrupted"], 130),
])
def test_a_real_run_for_each_paper_checks_status(args, status, planted, capsys, tmp_path, monkeypatch):
    from paper_checks import __main__ as cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(args) == status
    assert status in doc_table()
    err = capsys.readouterr().err
    if "zz.raises" in args:           # the claim's own traceback is reported, under its name
        assert "claim zz.raises raised RuntimeError: planted" in err
    else:
        assert "Traceback" not in err
