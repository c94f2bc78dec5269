"""Test-only conveniences (the shared assertions live in ``validation``)."""

from __future__ import annotations

import numpy as np

from tests.conftest import asxp, get_namespace  # noqa: F401
from validation.assertions import to_numpy  # noqa: F401


def randn(rng: np.random.Generator, xp, *shape, dtype=None, scale=1.0):
    """Standard normal draws of `shape` as an `xp` array."""
    return asxp(xp, scale * rng.standard_normal(shape), dtype)


def out_tol(xp, dtype) -> dict:
    """Tolerances for attention outputs (convex combinations of O(1) values): rounding there is absolute,
    about L eps |v|, so an absolute term is needed next to the relative one for entries near zero."""
    if dtype == xp.float32:
        return dict(rtol=1e-5, atol=1e-5)
    return dict(rtol=1e-10, atol=1e-12)
