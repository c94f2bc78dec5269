"""NumPy-only edge: ``assert_close``, which checks namespace, shape, dtype and device before the values."""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy as np

__all__ = ["assert_close", "default_rtol", "to_numpy"]


def to_numpy(x: Any) -> np.ndarray:
    """Return a NumPy array holding the values of an array from any array-API library.

    Parameters
    ----------
    x : array
        A NumPy, CuPy (copied to the host with ``.get()``), torch (detached, on the CPU) or any other
        array-API array (through ``np.asarray`` or DLPack).

    Returns
    -------
    numpy.ndarray
        `x` itself when it is a NumPy array, else a host copy (or a view sharing the buffer).
    """
    if isinstance(x, np.ndarray):
        return x
    if array_api_compat.is_cupy_array(x):
        return x.get()
    if array_api_compat.is_torch_array(x):
        return x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except Exception:  # array_api_strict arrays expose the buffer protocol through __dlpack__
        return np.from_dlpack(x)


def default_rtol(dtype: Any) -> float:
    """Return the default relative tolerance of :func:`assert_close` for `dtype`, ``4 * sqrt(eps(dtype))``.

    Parameters
    ----------
    dtype : dtype or str
        A floating dtype of any array library (its name is read: ``float64``, ``torch.float32``).

    Returns
    -------
    float
        About 6e-8 for float64, 1.4e-3 for float32.
    """
    return 4.0 * float(np.sqrt(np.finfo(np.dtype(str(dtype).split(".")[-1])).eps))


def assert_close(actual: Any, expected: Any, *, rtol: float | None = None, atol: float = 0.0,
                 label: str = "", check_dtype: bool = True) -> None:
    """Assert that two arrays agree: same namespace, shape, dtype and device, then values within tolerance.

    ``|actual - expected| <= atol + rtol * |expected|`` elementwise, with ``rtol = 4 sqrt(eps(dtype))`` unless
    given. `atol` must be given explicitly where exact zeros are expected. The message carries the largest
    error, where it is and both values there.

    Parameters
    ----------
    actual : (...) array
        The array under test, of any array-API library.
    expected : (...) array
        The reference: same namespace, shape, device and (unless ``check_dtype=False``) dtype. Non-finite
        entries must sit at the same places in both.
    rtol : float, optional
        Relative tolerance; default ``4 * sqrt(eps)`` of `actual`'s dtype (6e-8 for float64, 1.4e-3 for
        float32).
    atol : float, default 0.0
        Absolute tolerance (give it where exact zeros are expected).
    label : str, default ""
        Prefix of the failure message (what is being compared).
    check_dtype : bool, default True
        Whether the dtypes must be equal.

    Returns
    -------
    None
        Returns only when the arrays agree.

    Raises
    ------
    AssertionError
        Namespaces, shapes, dtypes, devices or the places of non-finite entries differ, or some entries differ
        beyond the tolerance (the message gives their count, the worst entry, both values there and the
        largest absolute and relative errors).

    Examples
    --------
    >>> import numpy as np
    >>> from validation import assert_close
    >>> assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]))     # within 4 sqrt(eps): passes
    >>> assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.1]), label="y")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: y: 1 of 2 entries differ beyond atol=0.0e+00, rtol=6.0e-08; worst at (1,): ...
    >>> assert_close(np.array([1.0], dtype=np.float32), np.array([1.0]))
    Traceback (most recent call last):
    ...
    AssertionError: dtypes differ: float32 vs float64
    """
    tag = f"{label}: " if label else ""
    na, ne = array_api_compat.array_namespace(actual), array_api_compat.array_namespace(expected)
    if na.__name__ != ne.__name__:
        raise AssertionError(f"{tag}namespaces differ: {na.__name__} vs {ne.__name__}")
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(f"{tag}shapes differ: {tuple(actual.shape)} vs {tuple(expected.shape)}")
    if check_dtype and actual.dtype != expected.dtype:
        raise AssertionError(f"{tag}dtypes differ: {actual.dtype} vs {expected.dtype}")
    if array_api_compat.device(actual) != array_api_compat.device(expected):
        raise AssertionError(f"{tag}devices differ")
    a, e = to_numpy(actual), to_numpy(expected)
    if rtol is None:
        rtol = default_rtol(a.dtype)
    if not np.array_equal(np.isfinite(a), np.isfinite(e)):
        raise AssertionError(f"{tag}non-finite entries differ: {np.sum(~np.isfinite(a))} vs "
                             f"{np.sum(~np.isfinite(e))}")
    fin = np.isfinite(e)
    err = np.where(fin, np.abs(a - e), 0.0)
    tol = atol + rtol * np.abs(np.where(fin, e, 0.0))
    if np.any(err > tol):
        idx = np.unravel_index(np.argmax(err - tol), err.shape) if err.ndim else ()
        n_bad = int(np.sum(err > tol))
        rel = float(np.max(err / np.maximum(np.abs(e), np.finfo(np.float64).tiny)))
        raise AssertionError(
            f"{tag}{n_bad} of {err.size} entries differ beyond atol={atol:.1e}, rtol={rtol:.1e}; "
            f"worst at {tuple(int(i) for i in idx)}: actual {a[idx]!r}, expected {e[idx]!r} "
            f"(max abs err {float(err.max()):.3e}, max rel err {rel:.3e})"
        )
