"""The conformance report: rows through the validator, findings marked reproduced or not, absent sources
listed as not run, and the CLI's argument checks."""

import json

import numpy as np

from validation.__main__ import EXIT_USAGE, main
from validation.conformance.base import Finding, Implementation, Row
from validation.conformance.report import run, to_markdown


def exact_positive(x, omega):
    m = omega.shape[0]
    return np.exp(x @ omega.T - 0.5 * np.sum(x * x, -1, keepdims=True)) / np.sqrt(m)


def wrong_positive(x, omega):
    return exact_positive(x, omega) / np.sqrt(omega.shape[0])           # 1/m for 1/sqrt(m)


def toy(findings):
    rows = (Row("right", "features", "positive", "numpy", lambda s: exact_positive),
            Row("wrong", "features", "positive", "numpy", lambda s: wrong_positive))
    return Implementation("toy", "positive features", "here", None, "numpy", rows, findings)


def test_findings_are_marked_by_what_the_run_measured():
    impl = toy((Finding("right", "values", "pass", "pass", "it passes", "x::y"),
                Finding("wrong", "values", "FAIL", "defect", "1/m", "x::y", fix="1/sqrt(m)"),
                Finding("wrong", "kernel", "pass", "pass", "a wrong expectation", "x::y")))
    doc = run([impl], None, quick=True)
    f = doc["implementations"][0]["findings"]
    assert [x["reproduced"] for x in f] == [True, True, False]
    assert f[2]["measured"] == "FAIL"
    md = to_markdown(doc)
    assert "(NOT reproduced)" in md and "1/sqrt(m)" in md
    json.dumps(doc)


def test_absent_source_is_not_run(tmp_path):
    impl = Implementation("outside", "x", "git", "nowhere", None, (), ())
    doc = run([impl], str(tmp_path))
    assert doc["implementations"][0]["status"].startswith("not run: ")
    assert "not run" in to_markdown(doc)


def test_cli_rejects_a_missing_sources_dir(tmp_path, capsys):
    assert main(["conformance", "--sources", str(tmp_path / "absent")]) == EXIT_USAGE
    assert "--sources" in capsys.readouterr().err
