"""The papers' families by name (``--as``): each module's ``FAMILIES`` merged into one table.

The families a candidate can claim with ``--as``: each says what the candidate receives, in which
convention, and how refattn computes the same thing (values, gradients, the closed-form kernel).

:mod:`validation.checks.favor` holds the omega contract's FAVOR-type families (``fn(x, omega)``).
:data:`FAMILIES` holds the papers' families, each with its own contract (one module per method:
:mod:`~validation.families.gmm`, :mod:`~validation.families.fastfood`, :mod:`~validation.families.generative`,
:mod:`~validation.families.flt`, :mod:`~validation.families.s1`, :mod:`~validation.families.s2`; the shared
feature and attention contracts in :mod:`~validation.families.base` and
:mod:`~validation.families.attention`).
"""

from __future__ import annotations

from . import fastfood, flt, generative, gmm, s1, s2
from .base import Family

__all__ = ["FAMILIES"]

#: family name -> spec (see validation.families.base.Family)
FAMILIES: dict[str, Family] = {
    **gmm.FAMILIES,
    **fastfood.FAMILIES,
    **generative.FAMILIES,
    **flt.FAMILIES,
    **s1.FAMILIES,
    **s2.FAMILIES,
}
