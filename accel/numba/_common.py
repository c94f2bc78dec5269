"""Shared checks of the numba kernels: NumPy arrays only, supported dtypes only, never a silent fallback.

A numba kernel is called from the core's dispatch point with the arrays the user gave. It takes NumPy arrays
of a dtype listed in its module's ``SUPPORTED`` table and raises ``TypeError`` for anything else (a CuPy or
array_api_strict array, float16, ...): converting to NumPy here would be a silent device transfer or cast
(style.md 2.5, SciPy's rule), so it is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._checks import check_array

__all__ = ["FASTMATH", "as_numpy"]

#: LLVM fast-math flags for the kernels: reassociation (so that reductions vectorise) and fused multiply-add
#: contraction. No ``nnan``/``ninf``: the kernels must not assume finite values they are not given.
FASTMATH = {"reassoc", "contract", "nsz"}


def as_numpy(name: str, x: Any, dtypes: tuple[str, ...], *, kernel: str, like: Any = None) -> np.ndarray:
    """`x` as a C-contiguous NumPy array, after checking its type and dtype (``TypeError`` otherwise).

    `like`, when given, is an array `x` must share its dtype with (no mixed float32/float64).
    """
    check_array(name, x, dtypes, kernel=kernel, like=like, array_type=np.ndarray, backend="numba",
                arrays="NumPy arrays", hint="Convert explicitly, or leave accel.use('numba') for this call")
    return np.ascontiguousarray(x)
