"""The families a candidate can claim with ``--as``: each says what the candidate receives, in which
convention, and how refattn computes the same thing (values, gradients, the closed-form kernel).

:mod:`validation.families.favor` holds the omega contract's FAVOR-type families (``fn(x, omega)``).
:data:`FAMILIES` holds the papers' families, each with its own contract.
"""

from __future__ import annotations

__all__ = ["FAMILIES"]

from . import fastfood, flt, generative, gmm, s1, s2

#: family name -> spec (see validation.families.base.Family)
FAMILIES: dict = {
    **gmm.FAMILIES,
    **fastfood.FAMILIES,
    **generative.FAMILIES,
    **flt.FAMILIES,
    **s1.FAMILIES,
    **s2.FAMILIES,
}
