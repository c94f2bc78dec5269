"""Test-only conveniences (the shared assertions live in ``validation``)."""

from __future__ import annotations

import numpy as np

from tests.conftest import asxp, get_namespace  # noqa: F401
from validation.assertions import to_numpy  # noqa: F401


def randn(rng: np.random.Generator, xp, *shape, dtype=None, scale=1.0):
    """Standard normal draws of `shape` as an `xp` array."""
    return asxp(xp, scale * rng.standard_normal(shape), dtype)
