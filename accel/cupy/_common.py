"""The CuPy kernels' argument checks (:mod:`accel._checks` with CuPy's array type): CuPy arrays only,
supported dtypes only; a NumPy array is never moved to the device silently."""

from __future__ import annotations

from typing import Any

import cupy

from .._checks import check_array, check_same, flatten_leading

__all__ = ["as_cupy", "flatten", "check_same"]


def as_cupy(name: str, x: Any, dtypes: tuple[str, ...], *, kernel: str, like: Any = None) -> "cupy.ndarray":
    """`x` as a C-contiguous CuPy array, after checking its type and dtype (``TypeError`` otherwise)."""
    check_array(name, x, dtypes, kernel=kernel, like=like, array_type=cupy.ndarray, backend="CuPy",
                arrays="CuPy arrays", hint="Move it to the device explicitly (cupy.asarray), or leave "
                                           "accel.use('cupy') for this call")
    return cupy.ascontiguousarray(x)


def flatten(name: str, x: Any, core_ndim: int, dtypes, kernel: str, like: Any = None):
    """Check `x` and reshape its leading (batch) axes into one: returns ``(x_flat, leading_shape)``."""
    return flatten_leading(name, as_cupy(name, x, dtypes, kernel=kernel, like=like), core_ndim, kernel=kernel)
