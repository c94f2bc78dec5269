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


def claims_on_pages(texts: list[str]) -> set[str]:
    return {m for t in texts for m in re.findall(r"^\.\. paper-claim:: (\S+)\s*$", t, re.M)}


def test_every_paper_claim_is_on_a_page():
    from paper_checks._claims import REGISTRY, load_all

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
