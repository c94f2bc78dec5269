"""NumPy-only edge, shared by every ``refattn.random`` module: the ``rng`` and ``dtype`` argument checks, the
redraw policy as a pure function of the step, and explicit transfers of draws (single arrays or whole
parameter trees) to another array library and back.
"""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy as np

from .._xp import device_of, namespace
from ..tree import tree_map

__all__ = ["check_rng", "check_dtype_arg", "as_xp", "rng_for_step", "tree_as_xp", "tree_to_numpy"]


def check_rng(rng: Any, name: str = "rng") -> np.random.Generator:
    """Return `rng` if it is a ``numpy.random.Generator``; raise ``TypeError`` otherwise (``None``
    included)."""
    if not isinstance(rng, np.random.Generator):
        got = "None" if rng is None else type(rng).__name__
        raise TypeError(
            f"{name}: expected a numpy.random.Generator (e.g. numpy.random.default_rng(0)); got {got}. "
            "refattn never draws fresh entropy silently"
        )
    return rng


def check_dtype_arg(dtype: Any, name: str = "dtype") -> np.dtype:
    """Return `dtype` as a NumPy real floating dtype (float32 or float64); raise ``TypeError`` otherwise."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name}: expected float32 or float64; got {dtype!r}") from None
    if dt not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64; got {dt}")
    return dt


def as_xp(arr: Any, *, like: Any) -> Any:
    """`arr` (a NumPy draw) as an array of `like`'s namespace, device and dtype (an explicit transfer)."""
    xp = namespace(like, names=("like",))
    return xp.asarray(np.asarray(arr), dtype=like.dtype, device=device_of(like))


def rng_for_step(seed: int, step: int, every: int | None) -> np.random.Generator:
    """The generator for training step `step` under a redraw policy, a pure function of its arguments.

    ``every=None`` (fixed features): one draw for all steps; ``every=k``: a fresh draw every k steps
    (``every=1``: every step). Seeds ``[seed, step // every]`` so a rerun redraws the same arrays at the same
    steps.
    """
    if every is None:
        return np.random.default_rng([int(seed), 0, 0])
    if every <= 0:
        raise ValueError(f"every: expected a positive integer or None; got {every}")
    return np.random.default_rng([int(seed), 1, int(step) // int(every)])


def tree_as_xp(tree: Any, *, like: Any) -> Any:
    """Every floating NumPy leaf of `tree` as an array of `like`'s namespace, dtype and device (integer leaves
    keep their integer dtype); static entries (``None``, strings) unchanged."""
    xp = array_api_compat.array_namespace(like)

    def conv(a):
        a = np.asarray(a)
        if np.issubdtype(a.dtype, np.floating):
            return as_xp(a, like=like)
        return xp.asarray(a, device=array_api_compat.device(like))

    return tree_map(conv, tree)


def tree_to_numpy(tree: Any) -> Any:
    """Every array leaf of `tree` as a NumPy array (the inverse of :func:`tree_as_xp`, for saving)."""

    def conv(a):
        if isinstance(a, (np.ndarray, np.generic)):
            return np.array(a)
        if array_api_compat.is_cupy_array(a):
            return a.get()
        try:
            return np.array(np.asarray(a))
        except Exception:  # array_api_strict exposes its buffer through DLPack
            return np.array(np.from_dlpack(a))

    return tree_map(conv, tree)
