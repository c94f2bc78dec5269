"""The documentation site's generators (docs/_ext), without building the site (the build is
``python -m sphinx -W -b html docs docs/_build/html``, 1-3 min)."""

from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

apigen = pytest.importorskip("apigen")


def test_every_exported_object_is_documented_exactly_once():
    canon = apigen.canonical_objects()
    documented = [id(getattr(importlib.import_module(m), n)) for m, names in canon.items() for n in names]
    assert len(documented) == len(set(documented)), "an object has two generated pages"
    exported = set()
    for m in apigen.MODULES:
        mod = importlib.import_module(m)
        objs = [getattr(mod, n) for n in mod.__all__]
        exported |= {id(o) for o in objs if not isinstance(o, types.ModuleType)}
    missing = exported - set(documented)
    assert not missing, f"{len(missing)} exported objects have no API page"


def test_home_module_is_the_most_specific_listed_module():
    from refattn.rpe import s1_attention

    assert apigen._home(s1_attention, "refattn") == "refattn.rpe"
    assert apigen._home(len, "refattn.tree") == "refattn.tree"   # builtins: the module that lists them


def test_every_exported_data_object_has_its_doc_comment_on_the_page(monkeypatch):
    """Data re-exported by a package (``refattn.rpe.DEFAULT_CLIP``, assigned in ``refattn.rpe.s2_clipped``)
    shows the ``#:`` comment where it is assigned, not its type's docstring (``int([x]) -> integer``)."""
    pytest.importorskip("sphinx")                        # apigen reads the comments with sphinx's analyser
    canon = apigen.canonical_objects()
    data = [(m, n) for m, names in canon.items() for n in names
            if apigen._kind(getattr(importlib.import_module(m), n)) == "data"]
    assert ("refattn.rpe", "DEFAULT_CLIP") in data
    for m, n in data:
        text = "\n".join(apigen.data_entry(m, n))
        assert text.startswith(f".. py:data:: {n}\n   :module: {m}"), text
        assert "int([x])" not in text and "Built-in" not in text, text
    assert "clipping distance" in "\n".join(apigen.data_entry("refattn.rpe", "DEFAULT_CLIP"))
    # a constant without a '#:' comment is refused, naming it
    import refattn.rpe

    monkeypatch.setattr(refattn.rpe, "UNDOCUMENTED", 7, raising=False)
    with pytest.raises(ValueError, match=r"refattn\.rpe\.UNDOCUMENTED: exported data needs a '#:' doc"):
        apigen.data_entry("refattn.rpe", "UNDOCUMENTED")


def test_write_pages_removes_orphaned_stub_pages(tmp_path):
    """A stub of an object that moved to another page (or of data, which has none) would be an orphan page
    and a duplicate object description in an incremental build: write_pages removes it, keeps the others."""
    pytest.importorskip("sphinx")
    gen = tmp_path / "generated"
    gen.mkdir()
    kept, stale = gen / "validation.montecarlo.mean_test.rst", gen / "validation.mean_test.rst"
    data_stub = gen / "refattn.rpe.DEFAULT_CLIP.rst"
    for p in (kept, stale, data_stub):
        p.write_text("stub")
    apigen.write_pages(tmp_path)
    assert kept.exists() and not stale.exists() and not data_stub.exists()
    assert "mean_test" in (tmp_path / "validation.montecarlo.rst").read_text()


def claims_on_pages(texts: list[str]) -> set[str]:
    return {m for t in texts for m in re.findall(r"^\.\. paper-claim:: (\S+)\s*$", t, re.M)}


def test_every_paper_claim_is_on_a_page():
    from paper_checks.catalog import load_all
    from paper_checks.registry import REGISTRY

    load_all()
    texts = [p.read_text() for p in sorted((DOCS / "papers").glob("*.rst"))]
    shown = claims_on_pages(texts)
    registered = {c for c in REGISTRY if c.startswith(("horn.", "kl.", "flt."))}
    assert registered - shown == set(), f"claims on no page: {sorted(registered - shown)}"
    # the same check rejects a page set that lost one claim
    dropped = sorted(registered)[0]
    lost = [re.sub(rf"^\.\. paper-claim:: {re.escape(dropped)}\s*$", "", t, flags=re.M) for t in texts]
    assert dropped in registered - claims_on_pages(lost)


def test_readme_tour_is_extracted_from_the_readme():
    executed = pytest.importorskip("executed")
    code = executed.readme_tour(DOCS.parent / "README.md")
    assert "import refattn" in code and "favor_attention" in code
    compile(code, "tour", "exec")


def test_docstring_audit_runs_and_counts():
    pytest.importorskip("numpydoc")
    sys.path.insert(0, str(DOCS / "_tools"))
    audit = importlib.import_module("audit_docstrings")
    lines, total = audit.audit()
    assert 0 < total and len(lines) <= total
    assert all(": missing " in line for line in lines)

    def documented(x):
        """One line.

        Parameters
        ----------
        x : int
            A value.

        Returns
        -------
        int
            The value.
        """
        return x

    def undocumented(x):
        """One line only."""
        return x

    assert audit.missing_sections(documented) == []
    assert audit.missing_sections(undocumented) == ["Parameters", "Returns"]


def _fake_record(root: Path, group: str, date: str, verdict: str, with_figure: bool) -> None:
    """A small record in the committed layout (results.json, command.txt, figures/), written to tmp only."""
    d = root / group
    (d / "figures").mkdir(parents=True)
    fig = d / "figures" / "horn.table1-ordering--accuracy.png"
    if with_figure:
        fig.write_bytes(b"\x89PNG\r\n\x1a\n")
    rows = [{"id": "horn.table1-ordering", "section": "Sec. 3, Table 1", "statement": "S1, S2 beat No-Pos.",
             "expected": "holds", "rule": "holds iff gain >= 0.10", "verdict": verdict,
             "summary": f"gain(S1) from {group}", "evidence": {"gain_S1": 0.2, "n": 3},
             "corrected": None, "figures": [f"/elsewhere/{fig.name}"], "provenance": {"size": "full"}},
            {"id": "horn.shift-robustness", "section": "Fig. 1", "statement": "robust", "expected": "holds",
             "verdict": "skipped", "summary": "", "evidence": {}, "figures": [],
             "provenance": {"size": "full"}}]
    (d / "results.json").write_text(__import__("json").dumps(rows))
    (d / "command.txt").write_text(f"python -m paper_checks --all --size full --only 'horn.*'\n"
                                   f"date: {date}\nload: 2.0\nwall: 3 h\n")


def test_slow_claims_render_from_the_newest_record(tmp_path):
    paperclaims = pytest.importorskip("paperclaims")
    _fake_record(tmp_path, "images-full", "2026-11-24T15:40Z", "holds", with_figure=True)
    _fake_record(tmp_path, "older", "2026-11-20 09:00 UTC", "fails", with_figure=False)
    records = paperclaims.load_records(tmp_path)
    assert set(records) == {"horn.table1-ordering"}, "a skipped row in a record is not a result"
    rec = records["horn.table1-ordering"]
    assert rec["_record"]["group"] == "images-full" and rec["verdict"] == "holds", rec["_record"]
    assert rec["_record"]["date"] == "2026-11-24 15:40 UTC"
    assert [Path(f).name for f in rec["_record"]["figures"]] == ["horn.table1-ordering--accuracy.png"]
    assert rec["_record"]["commit"] == "", "tmp is no git checkout: the record is not committed"

    skipped = {"id": "horn.table1-ordering", "verdict": "skipped"}
    text = "\n".join(paperclaims.claim_lines("horn.table1-ordering", skipped, rec, tmp_path))
    assert "From the committed record of 2026-11-24 15:40 UTC, size full" in text
    assert "measured verdict **holds**" in text and "gain(S1) from images-full" in text
    assert "--all --size full --only 'horn.*'" in text and "not committed yet" in text
    assert ".. figure:: /images-full/figures/horn.table1-ordering--accuracy.png" in text
    assert "**holds** (record 2026-11-24 15:40 UTC, size full)" == paperclaims.measured_cell(
        "horn.table1-ordering", skipped, rec, True)

    # a claim measured in this build wins over a record; a slow claim without a record says so
    built = {**rec, "verdict": "fails", "summary": "this build", "figures": []}
    assert "this build" in "\n".join(paperclaims.claim_lines("horn.table1-ordering", built, rec, tmp_path))
    none = "\n".join(paperclaims.claim_lines("horn.shift-robustness", {"verdict": "skipped"}, None,
                                             tmp_path))
    assert "no committed record yet" in none and "--only 'horn.shift-robustness'" in none
    cell = paperclaims.measured_cell("horn.shift-robustness", None, None, True)
    assert cell == "no committed record yet (slow)"


def test_records_reject_a_broken_results_json(tmp_path):
    paperclaims = pytest.importorskip("paperclaims")
    (tmp_path / "kl-full").mkdir()
    (tmp_path / "kl-full" / "results.json").write_text("[{")
    with pytest.raises(ValueError, match=r"kl-full/results.json: not valid JSON"):
        paperclaims.load_records(tmp_path)
    assert paperclaims.load_records(tmp_path / "absent") == {}
    assert paperclaims.record_date("wall 3 h, no date") is None
    assert paperclaims.record_date("date: 2026-11-24, started 14:16 UTC, finished 15:33 UTC (77 min)") == (
        "2026-11-24 15:33 UTC")
    assert paperclaims.record_date("date: 2026-11-24\n") == "2026-11-24"


def test_executed_cells_share_a_page_namespace_and_save_figures(tmp_path):
    executed = pytest.importorskip("executed")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = {"__name__": "__main__"}
    assert executed.run_code("x = 2\nprint(x)", "cell 1", ns)[0] == "2\n"
    assert executed.run_code("print(3 * x)", "cell 2", ns)[0] == "6\n"      # the page's namespace persists
    with pytest.raises(NameError):
        executed.run_code("print(x)", "fresh", None)          # a fresh namespace does not see it
    plt.figure()
    plt.plot([1, 2], [3, 4])
    paths = executed.save_open_figures(tmp_path, "page-cell2")
    assert [p.name for p in paths] == ["page-cell2-0.png"] and paths[0].stat().st_size > 0
    assert plt.get_fignums() == [], "figures are closed after saving"
    assert executed.save_open_figures(tmp_path, "none") == []


def test_tutorial_cells_compile():
    pages = sorted((DOCS / "tutorials").glob("*.rst"))
    assert len(pages) >= 3
    for page in pages:
        cell = r"^\.\. executed::\n(?:   :[^\n]*\n)*\n((?:   [^\n]*\n|\n)+)"
        cells = re.findall(cell, page.read_text(), re.M)
        assert cells, f"{page.name}: no executed cells"
        code = "\n".join("\n".join(ln[3:] for ln in c.splitlines()) for c in cells)
        compile(code, str(page), "exec")


def test_numpydoc_once_renders_what_numpydoc_renders_with_one_template():
    docscrape_sphinx = pytest.importorskip("numpydoc.docscrape_sphinx")
    numpydoc_once = importlib.import_module("numpydoc_once")
    from refattn import attention, rpe

    numpydoc_once._TEMPLATES.clear()
    objs = [attention.favor_attention, attention.LinearAttentionCache, rpe.GaussianMixture, rpe.rpe_mask]
    for obj in objs:
        assert str(numpydoc_once.get_doc_object(obj)) == str(docscrape_sphinx.get_doc_object(obj)), obj
    configs = [{} for _ in objs]
    for obj, cfg in zip(objs, configs, strict=True):
        numpydoc_once.get_doc_object(obj, config=cfg)
    assert len({id(c["template"]) for c in configs}) == 1, "the template was compiled more than once"
