r"""Numba kernel for the fast Walsh-Hadamard transform (FastFood; CPU).

Supported (read by ``tests/accel/test_fwht.py``):

===========  ============  ================  ============================
primitive    backend       dtypes            registered as
===========  ============  ================  ============================
``fwht``     NumPy (CPU)   float32, float64  ``"fwht"``
===========  ============  ================  ============================

Same signature and result as the core's hot primitive (``refattn.features.fastfood``: ``kernel(x)``):
``x: (..., D) -> x H`` with H the unnormalised Sylvester Hadamard matrix (D a power of two), along the last
axis, ``H_2h = [[H_h, H_h], [H_h, -H_h]]`` (``refattn.features.fwht``). The butterflies are the reference's,
done in place in one copy of each row (parallel over rows): the same additions in the same order, so the
result is bit-for-bit the reference's. Cost O(D log D) per row against O(D^2) for a dense product with H
(benchmarks/accel.py measures where each wins).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._common import as_numpy

__all__ = ["SUPPORTED", "fwht"]

SUPPORTED = {"fwht": {"backends": ("numpy",), "dtypes": ("float32", "float64"), "primitive": "fwht"}}


@njit(parallel=True, cache=True)
def _fwht_rows(y):  # pragma: no cover - compiled
    """In place, each row: ``y[n] <- y[n] H`` (Sylvester order)."""
    N, D = y.shape
    for n in prange(N):
        r = y[n]                                                         # (D,)
        h = 1
        while h < D:
            for i in range(0, D, 2 * h):  # blocks of 2h: [a, b] -> [a + b, a - b]
                for j in range(i, i + h):
                    a = r[j]
                    b = r[j + h]
                    r[j] = a + b
                    r[j + h] = a - b
            h *= 2


def fwht(x):
    """``x H`` along the last axis (unnormalised Sylvester Hadamard; ``D = x.shape[-1]`` a power of two).

    Parameters
    ----------
    x : (..., D) ndarray

    Returns
    -------
    (..., D) ndarray
    """
    x = as_numpy("x", x, SUPPORTED["fwht"]["dtypes"], kernel="fwht")
    D = x.shape[-1] if x.ndim else 0
    if D < 1 or D & (D - 1):
        raise ValueError(f"x: the FWHT needs a last axis of power-of-two length (1, 2, 4, ...); got shape "
                         f"{x.shape}")
    y = np.array(x, dtype=x.dtype, copy=True, order="C")                 # (..., D) the one copy
    _fwht_rows(y.reshape(-1, D))
    return y
