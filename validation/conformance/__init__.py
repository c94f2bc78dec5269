"""Conformance of outside implementations: refattn's validator run on the public code of the
three papers' methods.

``python -m validation conformance --sources DIR [--out PATH] [--json PATH]`` runs every adapter's rows
(:mod:`validation.conformance.report`) on the implementations found in DIR (source checkouts, laid out by
:mod:`validation.conformance.layout`) or installed (performer-pytorch, scikit-learn). One adapter module per
implementation states the conventions it bridges; none fixes a defect. Outside code is imported from DIR,
never copied here.
"""

from .base import Finding, Implementation, Row
from .registry import IMPLEMENTATIONS

__all__ = ["IMPLEMENTATIONS", "Implementation", "Row", "Finding"]
