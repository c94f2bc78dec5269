"""Shared checks of the CuPy kernels: CuPy arrays only, supported dtypes only, never a silent transfer.

A CuPy kernel is called from the core's dispatch point with the arrays the user gave. It takes ``cupy.ndarray``
of a dtype listed in its module's ``SUPPORTED`` table and raises ``TypeError`` for anything else (a NumPy
array, float16, ...): moving a NumPy array to the device here would be a silent transfer (style.md 2.5, SciPy's
rule), so it is refused.
"""

from __future__ import annotations

from typing import Any

import cupy

__all__ = ["as_cupy", "flatten", "type_name"]


def type_name(x: Any) -> str:
    t = type(x)
    return f"{t.__module__.split('.')[0]}.{t.__name__}"


def as_cupy(name: str, x: Any, dtypes: tuple[str, ...], *, kernel: str, like: Any = None) -> "cupy.ndarray":
    """`x` as a C-contiguous CuPy array, after checking its type and dtype (``TypeError`` otherwise)."""
    if not isinstance(x, cupy.ndarray):
        raise TypeError(f"{name}: CuPy kernels take CuPy arrays; got {type_name(x)} ({kernel}). Move it to the "
                        "device explicitly (cupy.asarray), or leave accel.use('cupy') for this call")
    if x.dtype.name not in dtypes:
        raise TypeError(f"{name}: the CuPy kernel {kernel} supports dtypes {', '.join(dtypes)}; got dtype "
                        f"{x.dtype.name}")
    if like is not None and x.dtype != like.dtype:
        raise TypeError(f"{name}: dtype {x.dtype.name} differs from {like.dtype.name} ({kernel}); "
                        "convert one of them explicitly")
    return cupy.ascontiguousarray(x)


def flatten(name: str, x: Any, core_ndim: int, dtypes, kernel: str, like: Any = None):
    """Check `x` and reshape its leading (batch) axes into one: returns ``(x_flat, leading_shape)``."""
    a = as_cupy(name, x, dtypes, kernel=kernel, like=like)
    if a.ndim < core_ndim:
        raise ValueError(f"{name}: expected at least {core_ndim} axes; got shape {tuple(a.shape)} ({kernel})")
    lead = tuple(a.shape[:a.ndim - core_ndim])
    n = 1
    for s in lead:
        n *= s
    return a.reshape((n,) + tuple(a.shape[a.ndim - core_ndim:])), lead
