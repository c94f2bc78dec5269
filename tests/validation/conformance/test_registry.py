"""The registry's declarations hold together: every finding names a row of its implementation, a known
judgement, a defect its fix, and a confirming test that exists; the committed record reproduced them all."""

import ast
import json
import pathlib

import pytest

from validation.conformance import IMPLEMENTATIONS
from validation.conformance.base import JUDGEMENTS
from validation.conformance.report import to_markdown

ROOT = pathlib.Path(__file__).resolve().parents[3]
RECORD = ROOT / "validation" / "records" / "conformance.json"


def test_at_least_six_implementations_with_rows():
    assert len(IMPLEMENTATIONS) >= 6
    assert all(impl.rows for impl in IMPLEMENTATIONS)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda i: i.name)
def test_findings_are_well_formed(impl):
    labels = [r.label for r in impl.rows]
    assert len(set(labels)) == len(labels), "row labels must be unique"
    assert {f.row for f in impl.findings} == set(labels), "every row carries at least one finding"
    for f in impl.findings:
        assert f.row in labels, f
        assert f.judgement in JUDGEMENTS, f
        assert f.verdict in ("FAIL", "pass"), f
        assert (f.judgement == "defect") == bool(f.fix), f"a defect, and only a defect, names its fix: {f}"
        path, name = f.confirmed_by.split("::")
        tree = ast.parse((ROOT / path).read_text())
        assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, f.confirmed_by


def test_record_reproduced_every_finding_and_names_versions():
    doc = json.loads(RECORD.read_text())
    names = {i.name for i in IMPLEMENTATIONS}
    assert {i["name"] for i in doc["implementations"]} == names
    for impl in doc["implementations"]:
        assert impl["status"] == "run" and impl["version"] not in (None, "unknown commit"), impl["name"]
        assert all(f["reproduced"] for f in impl["findings"]), impl["name"]
    declared = {(i.name, f.row, f.check): (f.sentence, f.judgement, f.confirmed_by, f.fix)
                for i in IMPLEMENTATIONS for f in i.findings}
    recorded = {(i["name"], f["row"], f["check"]):
                (f["sentence"], f["judgement"], f["confirmed_by"], f["fix"])
                for i in doc["implementations"] for f in i["findings"]}
    assert declared == recorded
    assert to_markdown(doc) == RECORD.with_suffix(".md").read_text()      # the markdown is the JSON's


def test_docs_page_quotes_the_record():
    page = (ROOT / "docs" / "guide" / "conformance.md").read_text()
    begin = "<!-- conformance: begin (validation/records/conformance.md, pasted verbatim; "
    start = page.index(begin)
    body = page[page.index("\n", start) + 1:page.index("<!-- conformance: end -->")]
    assert body == (ROOT / "validation" / "records" / "conformance.md").read_text()
    assert "conformance" in (ROOT / "docs" / "guide" / "index.md").read_text().split()


def test_every_failing_check_of_the_record_has_a_judgement():
    doc = json.loads(RECORD.read_text())
    unjudged = [(i["name"], r["label"], c["name"]) for i in doc["implementations"] for r in i["rows"]
                for c in r["checks"] if c["verdict"] in ("FAIL", "inconclusive")
                and (r["label"], c["name"]) not in {(f["row"], f["check"]) for f in i["findings"]}]
    assert not unjudged, unjudged
