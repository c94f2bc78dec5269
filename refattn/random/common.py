"""NumPy-only edge shared by ``refattn.random``: rng/dtype checks, the redraw policy, transfers of draws."""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy as np

from .._docs import fill_doc
from .._xp import check_nonneg_int, device_of, namespace
from ..tree import tree_map

__all__ = ["check_rng", "check_dtype_arg", "as_xp", "rng_for_step", "tree_as_xp", "tree_to_numpy"]

_NAME = """
name : str
    The argument's name in the error message.
"""
_LIKE = """
like : array
    An array of the target namespace (NumPy, array_api_strict, CuPy, ...); its dtype and device are used.
    ``TypeError`` if it is not a real floating array of a supported namespace.
"""


@fill_doc(name=_NAME)
def check_rng(rng: Any, name: str = "rng") -> np.random.Generator:
    r"""Return `rng` if it is a ``numpy.random.Generator``; raise ``TypeError`` otherwise (``None`` included).

    Parameters
    ----------
    rng : numpy.random.Generator
        The generator to check (refattn never draws fresh entropy silently).
    {name}

    Returns
    -------
    numpy.random.Generator
    """
    if not isinstance(rng, np.random.Generator):
        got = "None" if rng is None else type(rng).__name__
        raise TypeError(
            f"{name}: expected a numpy.random.Generator (e.g. numpy.random.default_rng(0)); got {got}. "
            "refattn never draws fresh entropy silently"
        )
    return rng


@fill_doc(name=_NAME)
def check_dtype_arg(dtype: Any, name: str = "dtype") -> np.dtype:
    r"""Return `dtype` as a NumPy real floating dtype (float32 or float64); raise ``TypeError`` otherwise.

    Parameters
    ----------
    dtype : dtype-like
        ``numpy.float32``, ``numpy.float64`` or anything ``numpy.dtype`` maps to them (``"float32"``).
    {name}

    Returns
    -------
    numpy.dtype
    """
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name}: expected float32 or float64; got {dtype!r}") from None
    if dt not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64; got {dt}")
    return dt


@fill_doc(like=_LIKE)
def as_xp(arr: Any, *, like: Any) -> Any:
    r"""`arr` (a NumPy draw) as an array of `like`'s namespace, device and dtype (an explicit transfer).

    Parameters
    ----------
    arr : array_like
        A real NumPy array (a draw); complex or bool raise ``TypeError`` (the cast would lose information).
    {like}

    Returns
    -------
    array

    Examples
    --------
    >>> import numpy as np, array_api_strict as xp
    >>> from refattn.random import as_xp
    >>> as_xp(np.ones((8, 4)), like=xp.ones(3, dtype=xp.float32)).dtype == xp.float32
    True
    """
    xp = namespace(like, names=("like",))
    a = check_real_draw(arr, "arr")
    return xp.asarray(a, dtype=like.dtype, device=device_of(like))


def check_real_draw(arr: Any, name: str, *, integer: bool = False) -> np.ndarray:
    """`arr` as NumPy if real (integer only with `integer`), else ``TypeError`` naming `name`."""
    a = np.asarray(arr)
    ok = np.issubdtype(a.dtype, np.integer) or (not integer and np.issubdtype(a.dtype, np.floating))
    if not ok or a.dtype == np.bool_:
        want = "an integer" if integer else "a real (floating or integer)"
        raise TypeError(f"{name}: expected {want} NumPy array; got dtype {a.dtype}")
    return a


def rng_for_step(seed: int, step: int, every: int | None) -> np.random.Generator:
    r"""The generator for training step `step` under a redraw policy, a pure function of its arguments.

    Parameters
    ----------
    seed, step : int
        The run's seed and the training step (`step` is ignored when `every` is None).
    every : int or None
        Redraw period k >= 1 (a fresh draw every k steps, the same in a rerun), or None: one draw.

    Returns
    -------
    numpy.random.Generator
        A fresh generator seeded ``[seed, 0, 0]`` (fixed) or ``[seed, 1, step // every]``.

    Raises
    ------
    TypeError, ValueError
        `seed` or `step` not a non-negative integer, or `every` not a positive integer (or None).

    Examples
    --------
    >>> from refattn.random import rng_for_step
    >>> a, b, c = (rng_for_step(0, s, 2).integers(100) for s in (4, 5, 6))
    >>> bool(a == b), bool(b == c)                  # steps 4 and 5 share a draw, step 6 redraws
    (True, False)
    """
    seed, step = check_nonneg_int(seed, "seed"), check_nonneg_int(step, "step")
    if every is None:
        return np.random.default_rng([seed, 0, 0])
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every <= 0:
        raise ValueError(f"every: expected a positive integer or None; got {every!r}")
    return np.random.default_rng([seed, 1, step // int(every)])


@fill_doc(like=_LIKE)
def tree_as_xp(tree: Any, *, like: Any) -> Any:
    r"""`tree` with its NumPy leaves in `like`'s namespace and device (floating leaves also take its dtype).

    Parameters
    ----------
    tree : tree
        Nested dicts / lists / NamedTuples of NumPy arrays (e.g. from :func:`refattn.nn.init_transformer`).
    {like}

    Returns
    -------
    tree
    """
    xp = array_api_compat.array_namespace(like)

    def conv(a):
        a = np.asarray(a)
        if np.issubdtype(a.dtype, np.floating):
            return as_xp(a, like=like)
        return xp.asarray(a, device=array_api_compat.device(like))

    return tree_map(conv, tree)


def tree_to_numpy(tree: Any) -> Any:
    r"""Every array leaf of `tree` as a NumPy array copy (the inverse of :func:`tree_as_xp`, for saving).

    Parameters
    ----------
    tree : tree
        Nested dicts / lists / NamedTuples of arrays of any supported namespace (CuPy: copied to the host).

    Returns
    -------
    tree
    """

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
