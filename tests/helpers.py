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


def count_host_syncs(monkeypatch) -> dict:
    """Count, under array_api_strict, the host syncs (``bool``/``float``/``int``/``index`` of an array, or a
    conversion to NumPy or DLPack) and the ids of the arrays passed to ``isfinite`` (the validate-once
    tests): returns the live ``{"syncs": int, "isfinite": [id, ...]}``."""
    import array_api_strict as xs
    from array_api_strict._array_object import Array

    counts = {"syncs": 0, "isfinite": []}
    for name in ("__bool__", "__float__", "__int__", "__index__", "__array__", "__dlpack__", "__buffer__"):
        real = getattr(Array, name, None)
        if real is None:
            continue

        def counted(self, *args, _real=real, **kwargs):
            counts["syncs"] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Array, name, counted)
    real_isfinite = xs.isfinite

    def isfinite(x):
        counts["isfinite"].append(id(x))
        return real_isfinite(x)

    monkeypatch.setattr(xs, "isfinite", isfinite)
    return counts
