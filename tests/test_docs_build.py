"""The documentation build's machinery (docs/_ext, docs/_tools), without building the site: MathML rendering,
the offline check of built pages, the executed pages' input hash and the fast claims' record."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS / "_tools"))


# --- equations: MathML at build time

def test_latex_becomes_mathml_and_unknown_commands_are_errors():
    mathml = pytest.importorskip("mathml")
    pytest.importorskip("latex2mathml")
    out = mathml.to_mathml(r"\exp(\mathbf{q}^\top \mathbf{k} / \sqrt{d})", display=False)
    assert out.startswith("<math ") and "<msqrt>" in out and 'alttext="\\exp' in out
    with pytest.raises(ValueError, match=r"\\frobnicate"):
        mathml.to_mathml(r"x = \frobnicate{y}", display=True)


def test_tag_inside_a_multi_row_equation_becomes_its_number():
    mathml = pytest.importorskip("mathml")
    pytest.importorskip("latex2mathml")
    latex = "a &= b \\\\\n  &= c \\tag{42}"          # KL's Eq. (42) shape: rows, alignment, a tag at the end
    body, tags = mathml.split_tags(latex)
    assert tags == ["42"] and "\\tag" not in body
    out = mathml.to_mathml(body, display=True)
    assert "<mtable" in out and "42" not in out          # the number is shown beside it, not inside
    assert mathml.split_tags(r"x \tag{11, 18}")[1] == ["11, 18"]


# --- every page's math offline

def _site(tmp_path: Path, body: str, head: str = "") -> Path:
    (tmp_path / "_static").mkdir(exist_ok=True)
    (tmp_path / "_static" / "site.css").write_text("")
    (tmp_path / "page.html").write_text(
        '<html><head><link rel="stylesheet" href="_static/site.css"/>'
        f"{head}</head><body>{body}</body></html>")
    return tmp_path


def test_offline_check_passes_a_page_with_mathml(tmp_path):
    check_offline = pytest.importorskip("check_offline")
    site = _site(tmp_path, '<span class="math"><math><mi>x</mi></math></span>'
                           '<a href="https://example.org/paper">a link is not a load</a>')
    assert check_offline.site_problems(site) == (1, [])


@pytest.mark.parametrize("head, body, expected", [
    ('<script src="https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js"></script>',
     '<span class="math"><math><mi>x</mi></math></span>', "from the network"),
    ('<script src="_static/mathjax/MathJax.js"></script>', "", "not in the build"),
    ('<link rel="stylesheet" href="_static/missing.css"/>', "", "not in the build"),
    ("", '<span class="math">\\(x^2\\)</span>', "no <math>"),
    ("", '<span class="math"><math></math></span><div class="math">\\[x^2\\]</div>', "LaTeX left"),
])
def test_offline_check_finds_network_loads_missing_files_and_unrendered_math(tmp_path, head, body, expected):
    check_offline = pytest.importorskip("check_offline")
    n, problems = check_offline.site_problems(_site(tmp_path, body, head))
    assert n == 1 and any(expected in p for p in problems), problems


def test_offline_check_follows_the_fonts_a_stylesheet_loads(tmp_path):
    check_offline = pytest.importorskip("check_offline")
    site = _site(tmp_path, '<span class="math"><math><mi>x</mi></math></span>')
    css = tmp_path / "_static" / "site.css"
    css.write_text('@font-face { src: url("fonts/STIXTwoMath-Regular.ttf"); }')
    assert any("not in the build" in p for p in check_offline.site_problems(site)[1])
    (tmp_path / "_static" / "fonts").mkdir()
    (tmp_path / "_static" / "fonts" / "STIXTwoMath-Regular.ttf").write_bytes(b"font")
    assert check_offline.site_problems(site) == (1, [])
    css.write_text('@import url("https://fonts.googleapis.com/css?family=X");')
    assert any("from the network" in p for p in check_offline.site_problems(site)[1])


# --- executed pages: re-run when an input changes

def test_input_key_changes_with_the_page_the_sources_and_the_environment(tmp_path):
    executed = pytest.importorskip("executed")
    (tmp_path / "refattn").mkdir()
    mod = tmp_path / "refattn" / "core.py"
    mod.write_text("A = 1\n")
    src0 = executed.sources_digest(tmp_path, ("refattn",))
    base = executed.input_key("page", src0, "numpy==2.0")
    assert base == executed.input_key("page", src0, "numpy==2.0")            # deterministic
    mod.write_text("A = 2\n")
    src1 = executed.sources_digest(tmp_path, ("refattn",))
    assert src1 != src0
    assert len({base, executed.input_key("page!", src0, "numpy==2.0"),
                executed.input_key("page", src1, "numpy==2.0"),
                executed.input_key("page", src0, "numpy==2.1")}) == 4
    assert "numpy==" in executed.environment_fingerprint() or "numpy" not in sys.modules


# --- the fast claims' record

def test_the_docs_record_has_every_fast_paper_claim():
    pytest.importorskip("matplotlib")
    from paper_checks.catalog import load_all
    from paper_checks.registry import REGISTRY

    load_all()
    record = Path(__file__).resolve().parents[1] / "paper_checks" / "records" / "docs-tiny"
    rows = {r["id"]: r for r in json.loads((record / "results.json").read_text())}
    fast = {c for c, claim in REGISTRY.items() if c.startswith(("horn.", "kl.", "flt.")) and not claim.slow}
    missing = sorted(fast - set(rows))
    assert not missing, f"not in {record}: {missing}; run python docs/_tools/record_checks.py"
    stale = "the registered claim changed since the record: run python docs/_tools/record_checks.py"
    for cid in fast:
        row, claim = rows[cid], REGISTRY[cid]
        assert row["verdict"] not in ("skipped", "error"), (cid, row["verdict"])
        assert (row["statement"], row["rule"]) == (claim.statement, claim.rule), f"{cid}: {stale}"
        assert claim.decide(row["evidence"]) == row["verdict"], f"{cid}: {stale}"
        for fig in rows[cid].get("figures") or []:
            assert (record / fig).is_file(), f"{cid}: {fig} is not in the record"


# --- each paper equation beside the code that computes it

_CODE_OF = re.compile(r"^\.\. code-of:: (\S+)\n((?:   :\w+:.*\n)*)", re.M)


def _excerpts() -> list[tuple[str, str, dict]]:
    out = []
    for page in sorted((DOCS / "papers").glob("*.rst")):
        for target, opts in _CODE_OF.findall(page.read_text()):
            options = dict(re.findall(r"^   :(\w+):\s*(.*)$", opts, re.M))
            out.append((page.name, target, options))
    return out


def test_every_paper_excerpt_computes_and_links_its_public_function():
    paperclaims = pytest.importorskip("paperclaims")
    pytest.importorskip("matplotlib")
    excerpts = _excerpts()
    assert len(excerpts) >= 20
    for page, target, options in excerpts:
        modname, name = target.rsplit(".", 1)
        source = textwrap.dedent(inspect.getsource(getattr(importlib.import_module(modname), name)))
        problem = paperclaims.excerpt_problem(source, options.get("composition"))
        assert problem is None, f"{page}: {target}: {problem}"
        if not modname.startswith("paper_checks"):
            assert paperclaims.public_of(target, options.get("public")), f"{page}: {target}: no public link"


CHECKED_WRAPPER = '''
def favor_features(x, omega):
    """Checked."""
    xp, m = check_x_omega(x, omega)
    check_finite("x", x, xp=xp)
    return _raw_core(x, omega, m, xp=xp)
'''


def test_a_checked_wrapper_is_not_an_excerpt():
    paperclaims = pytest.importorskip("paperclaims")
    assert paperclaims.arithmetic_lines(CHECKED_WRAPPER) == []
    assert "no arithmetic line" in paperclaims.excerpt_problem(CHECKED_WRAPPER, None)
    assert "composition" in paperclaims.excerpt_problem(CHECKED_WRAPPER, "layers")   # a check, one core
    core = CHECKED_WRAPPER.replace("return _raw_core(x, omega, m, xp=xp)",
                                   "u = x @ omega.T\n    return xp.exp(u - 0.5 * m)")
    assert paperclaims.excerpt_problem(core, None) is None
    assert paperclaims.arithmetic_lines(core) == [6, 7]


# --- cross-references: every import path to the object's one page

def test_references_by_any_import_path_resolve_to_the_documented_page():
    xrefs = pytest.importorskip("xrefs")
    pytest.importorskip("matplotlib")
    documented = "refattn.features.positive_features"
    assert xrefs.resolve_name("refattn.features.positive.positive_features", None) == documented
    assert xrefs.resolve_name("refattn.positive_features", None) == documented         # a re-export
    assert xrefs.resolve_name("positive_features", "refattn.features.positive") == documented  # bare name
    assert xrefs.resolve_name("refattn.rpe.spectra", None) == "refattn.rpe"             # a submodule
    assert xrefs.resolve_name("refattn.features.positive.no_such_name", None) is None
    # no API page: the definition in the source listing, found without importing (dask may be absent)
    assert xrefs.source_target("paper_checks.scale.DaskMap") == ("paper_checks.scale", "tag", "DaskMap")
    assert xrefs.source_target("validation.runner.DEFAULT_TIMEOUT") == ("validation.worker", "data", None)
    assert xrefs.source_target("numpy.ndarray") is None                                # not this project
    assert xrefs.source_target("refattn.attention") is None      # 'from . import attention': no loop


@pytest.mark.slow
def test_an_executed_page_reruns_after_a_failure_and_when_the_sources_change(tmp_path):
    """A mini site with one executed cell, built incrementally four times: a failed cell leaves no stale page
    (the page is re-run once its dependency appears), and a change of the package sources re-runs it."""
    pytest.importorskip("sphinx")
    pytest.importorskip("matplotlib")
    import subprocess

    root, lib = tmp_path / "root", tmp_path / "lib"
    (root / "docs").mkdir(parents=True)
    (root / "refattn").mkdir()
    lib.mkdir()
    (root / "refattn" / "__init__.py").write_text("A = 1\n")
    (root / "docs" / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\nextensions = ['executed']\n")
    (root / "docs" / "index.rst").write_text(
        "Page\n====\n\n.. executed::\n\n   import planted_dep\n   print('value', planted_dep.VALUE)\n")
    out = root / "_build" / "html"

    def build() -> tuple[int, str]:
        env = {**__import__("os").environ, "PYTHONPATH": str(lib)}
        proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "docs", str(out)],
                              cwd=root, env=env, capture_output=True, text=True)
        page = out / "index.html"
        return proc.returncode, page.read_text() if page.exists() else ""

    rc, html = build()
    assert rc != 0 and "value 1" not in html                     # the cell raised: the build fails
    (lib / "planted_dep.py").write_text("VALUE = 1\n")
    rc, html = build()
    assert rc == 0 and "value 1" in html                         # re-run, not a stale empty page
    (lib / "planted_dep.py").write_text("VALUE = 2\n")           # outside the hashed inputs: kept
    rc, html = build()
    assert rc == 0 and "value 1" in html
    (root / "refattn" / "__init__.py").write_text("A = 2\n")     # a package source changed: re-run
    rc, html = build()
    assert rc == 0 and "value 2" in html
