"""Sphinx configuration of the refattn site. Build (offline, warnings as errors, the docs extra alone)::

    python -m sphinx -W -q -b html docs docs/_build/html

The API reference is generated from each module's ``__all__`` (``_ext/apigen.py``); the paper pages' verdicts
and evidence are rendered from the committed records under ``paper_checks/records/`` (``_ext/paperclaims.py``:
the fast claims from ``docs-tiny``, written by ``python docs/_tools/record_checks.py``), never typed by hand;
equations become MathML at build time (``_ext/mathml.py``). How each part works: ``docs/README.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import refattn  # noqa: E402

project = "refattn"
author = "refattn contributors"
release = refattn.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "mathml",        # equations -> MathML at build time (_ext/mathml.py): no script, no network
    "sphinx.ext.viewcode",
    "numpydoc_once",  # numpydoc, its docstring template compiled once per build (_ext/numpydoc_once.py)
    "apigen",
    "paperclaims",
    "executed",
    "xrefs",         # a reference by any import path resolves to the object's one API page (_ext/xrefs.py)
    "myst_parser",   # docs/guide/*.md: the guide pages (the README's detail sections)
]

# Offline build: no intersphinx (it would fetch inventories from the network). Equations are converted to
# MathML while the site is built (_ext/mathml.py, latex2mathml from the docs extra): the pages load no script
# and reach no network to show them; docs/README.md compares this with the alternatives.
html_math_renderer = "mathml"
# Every cross-reference must resolve (with -W an unresolved one fails the build; _ext/xrefs.py resolves a
# reference by any import path). A name outside this project has no target without intersphinx (offline) and
# would be listed in nitpick_ignore with its reason; none is needed: numpydoc's type fields are plain text
# (numpydoc_xref_param_type = False) and no docstring links an outside name.
nitpicky = True
# the guide's Markdown pages link sections as GitHub renders them (paper-checks.md#the-criterion, also from
# README.md): MyST makes the same slugs for headings down to level 3
myst_heading_anchors = 3
nitpick_ignore: list[tuple[str, str]] = []
autosummary_generate = True
# autosummary's table shows a docstring's first sentence, cut at the first ". " that does not end a known
# abbreviation; docstrings cite "Eq. (3)", "Eqs. 3-5", "Sec. 2.1" in their summaries, so those are added
# (otherwise the summary reads "... (Chowdhury et al. Eq.").
import sphinx.ext.autosummary as _autosummary  # noqa: E402

_autosummary.WELL_KNOWN_ABBREVIATIONS = (*_autosummary.WELL_KNOWN_ABBREVIATIONS, "Eq.", "Eqs.", "Sec.")
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"          # numpydoc's Parameters carry the types and shapes
numpydoc_show_class_members = False  # NamedTuple fields would each become a stub page
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# numpydoc validation as build errors (with -W): every documented parameter present (PR01), a Returns
# section (RT01), a summary (SS01). `python docs/_tools/audit_docstrings.py` counted 222 of 263 public
# functions lacking Parameters/Returns at the start of 2026-11-24 and 0 at its end.
numpydoc_validation_checks = {"PR01", "RT01", "SS01"}
# Functions are validated; classes are not: the exported classes are NamedTuple/dataclass containers (caches,
# gradients, parameters) whose fields the function returning them documents, and their tuple methods
# (count, index, __init__) are Python's. Names whose last component, or the one before it, starts with a
# capital are classes, their members, or constants.
numpydoc_validation_exclude = {r"\.[A-Z]\w*$", r"\.[A-Z]\w*\.\w+$"}

templates_path = ["_templates"]
exclude_patterns = ["_build", "_tools", "Thumbs.db", ".DS_Store", "README.md"]  # README.md: notes, not a page
html_theme = "pydata_sphinx_theme"
html_title = f"refattn {release}"
html_theme_options = {
    "navigation_with_keys": False,
    # the API pages (one per object) make a long navigation tree. Not collapsed: the theme then renders the
    # tree once per directory and section and moves the "current" marks for each page (its sidebar cache),
    # where a collapsed tree is rendered anew on each of the ~470 pages (a clean build 80 -> 72 user CPU-s);
    # the branches other than the open page's stay folded (<details>) in either case
    "collapse_navigation": False,
    "show_toc_level": 2,
    "icon_links": [],
}
# the paper pages and tutorials are single long pages: no left "Section Navigation" column, so equations and
# code blocks get the width; nor the one-object API pages (reached from their module's page, which lists its
# objects, and its breadcrumb): their column would be the whole API tree, which the theme re-parses and
# re-serialises for every page (about a fifth of a clean build for ~390 pages)
html_sidebars = {"papers/*": [], "tutorials/*": [], "tour": [], "api/generated/*": []}
html_static_path = ["_static"]
html_css_files = ["refattn.css"]
suppress_warnings: list[str] = []
