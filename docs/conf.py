"""Sphinx configuration of the refattn site. Build (offline, warnings as errors)::

    python -m sphinx -W -b html docs docs/_build/html

The API reference is generated from each module's ``__all__`` (``_ext/apigen.py``); the paper pages' verdicts
and evidence are generated at build time by running ``python -m paper_checks --size tiny --json`` on the
non-slow claims (``_ext/paperclaims.py``), never typed by hand.
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
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "apigen",
    "paperclaims",
    "docstring_debt",
]

# Offline build: no intersphinx (it would fetch inventories from the network), MathJax from its CDN only at
# view time in the reader's browser (the build itself reaches nothing).
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"          # numpydoc's Parameters carry the types and shapes
numpydoc_show_class_members = False  # NamedTuple fields would each become a stub page
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# numpydoc validation as build errors stays OFF until every public function has Parameters/Returns:
# `python docs/_tools/audit_docstrings.py` counted 222 of 263 public functions lacking them (2026-11-24).
# When that count reaches 0, turn it on:
#   numpydoc_validation_checks = {"PR01", "RT01", "SS01"}
numpydoc_validation_checks: set[str] = set()

templates_path = ["_templates"]
exclude_patterns = ["_build", "_tools", "Thumbs.db", ".DS_Store"]
html_theme = "pydata_sphinx_theme"
html_title = f"refattn {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "icon_links": [],
}
html_static_path: list[str] = []
suppress_warnings: list[str] = []
