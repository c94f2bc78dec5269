"""Shared checks of the numba kernels: NumPy arrays only, supported dtypes only, never a silent fallback.

A numba kernel is called from the core's dispatch point with the arrays the user gave. It takes NumPy arrays
of a dtype listed in its module's ``SUPPORTED`` table and raises ``TypeError`` for anything else (a CuPy or
array_api_strict array, float16, ...): converting to NumPy here would be a silent device transfer or cast
(style.md 2.5, SciPy's rule), so it is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FASTMATH", "as_numpy", "type_name"]

#: LLVM fast-math flags for the kernels: reassociation (so that reductions vectorise) and fused multiply-add
#: contraction. No ``nnan``/``ninf``: the kernels must not assume finite values they are not given.
FASTMATH = {"reassoc", "contract", "nsz"}


def type_name(x: Any) -> str:
    t = type(x)
    return f"{t.__module__.split('.')[0]}.{t.__name__}"


def as_numpy(name: str, x: Any, dtypes: tuple[str, ...], *, kernel: str, like: Any = None) -> np.ndarray:
    """`x` as a C-contiguous NumPy array, after checking its type and dtype (``TypeError`` otherwise).

    `like`, when given, is an array `x` must share its dtype with (no mixed float32/float64).
    """
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: numba kernels take NumPy arrays; got {type_name(x)} ({kernel}). Convert "
                        "explicitly, or leave accel.use('numba') for this call")
    if x.dtype.name not in dtypes:
        raise TypeError(f"{name}: the numba kernel {kernel} supports dtypes {', '.join(dtypes)}; got dtype "
                        f"{x.dtype.name}")
    if like is not None and x.dtype != like.dtype:
        raise TypeError(f"{name}: dtype {x.dtype.name} differs from {like.dtype.name} ({kernel}); "
                        "convert one of them explicitly")
    return np.ascontiguousarray(x)
