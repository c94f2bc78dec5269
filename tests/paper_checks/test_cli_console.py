"""The console of ``python -m paper_checks``: the columns line, the closing line on the evidence, --help."""

from __future__ import annotations

import json

from paper_checks.__main__ import COLUMNS_LINE, VERDICT_HELP, main
from paper_checks.registry import VERDICTS


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.rstrip("\n").split("\n")


def test_help_explains_every_verdict_slips_and_expected(capsys):
    assert set(VERDICT_HELP) == set(VERDICTS)       # a new verdict needs its line in --help
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the epilog is wrapped at 96 columns: compare words
    for verdict, text in VERDICT_HELP.items():
        assert f"{verdict} {' '.join(text.split())}" in out, verdict
    assert "slips: a notation-only slip" in out and "counts such claims apart" in out
    assert "the table's expected column: the verdict each claim is registered to give at this --size" in out
    assert "--report DIR writes report.md" in out and "--json PATH every record" in out


def test_run_without_outputs_says_nothing_was_written_and_how(capsys):
    assert main(["--only", "kl.eq1-*", "--size", "tiny"]) == 0
    lines = _lines(capsys)
    header = next(i for i, line in enumerate(lines) if line.startswith("claim "))
    assert lines[header - 1] == COLUMNS_LINE
    assert "expected: the verdict registered before the run" in COLUMNS_LINE
    assert lines[-1].startswith("nothing written: ")
    assert "--report DIR" in lines[-1] and "--json PATH" in lines[-1]


def test_run_with_outputs_names_what_was_written(tmp_path, capsys):
    js, rep = tmp_path / "out.json", tmp_path / "rep"
    assert main(["--only", "kl.eq1-*", "--size", "tiny", "--json", str(js), "--report", str(rep)]) == 0
    last = _lines(capsys)[-1]
    assert last == (f"written: {js} (1 claim record(s) with provenance); {rep / 'report.md'} (1 claim(s), "
                    f"0 figure(s) in {rep})")
    assert len(json.loads(js.read_text())) == 1 and (rep / "report.md").is_file()
    assert "nothing written" not in last


def test_only_json_is_named_alone(tmp_path, capsys):
    js = tmp_path / "out.json"
    assert main(["--only", "kl.eq1-*", "--size", "tiny", "--json", str(js)]) == 0
    last = _lines(capsys)[-1]
    assert last == f"written: {js} (1 claim record(s) with provenance)"
