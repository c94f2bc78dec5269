"""The allocation bound: a request for more memory than a configurable limit fails before it allocates.

A size typo (``vocab_size=10**9``) in an input someone else wrote (a checkpoint, a paper's config) fails at
once, naming the argument and the size, not after minutes of swapping or with ``Unable to allocate 745 GiB``.

    >>> from refattn import limits
    >>> limits.get_max_bytes() == 4 * 2**30                  # the default: 4 GiB per request
    True
    >>> limits.check_nbytes(1024, "d_model * 8")             # within the bound: returns None
    >>> with limits.max_bytes(2**20) as n:                   # a scoped bound (thread- and task-local)
    ...     assert limits.get_max_bytes() == n
    ...     limits.check_nbytes(10**7, "vocab_size * d_model * 8")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    MemoryError: vocab_size * d_model * 8: this request needs 10000000 bytes (9.5 MiB), above ...

The bound is per request (one array or one structure allocated at once), not a budget over a process. It is a
``contextvars.ContextVar``: :func:`set_max_bytes` sets it for the current context, :func:`max_bytes` for a
``with`` block. The environment variable ``REFATTN_MAX_BYTES`` sets the default at import.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Iterator

from ._docs import fill_doc

__all__ = ["DEFAULT_MAX_BYTES", "get_max_bytes", "set_max_bytes", "max_bytes", "check_nbytes"]

#: The default bound of one request, 4 GiB (``REFATTN_MAX_BYTES`` overrides it at import).
DEFAULT_MAX_BYTES = 4 * 2**30

_N = """
n : int
    A bound in bytes: a positive integer (a string such as ``"0x100000"`` is parsed as an integer literal).
"""
_RAISES = """
ValueError
    If `n` is not a positive integer.
"""


def _parse(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value), 0) if isinstance(value, str) else value
        except ValueError:
            raise ValueError(f"{name}: expected a positive integer number of bytes; got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name}: expected a positive integer number of bytes; got {value!r}")
    return value


_DEFAULT = _parse(os.environ.get("REFATTN_MAX_BYTES", DEFAULT_MAX_BYTES), "REFATTN_MAX_BYTES")
_MAX: contextvars.ContextVar[int] = contextvars.ContextVar("refattn_max_bytes", default=_DEFAULT)  # noqa: B039


def _human(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2g} {unit}" if n / size < 10 else f"{n / size:.0f} {unit}"
    return f"{n} B"


def get_max_bytes() -> int:
    """The current bound in bytes (per allocation request).

    Returns
    -------
    int
        The bound of the current context: the innermost :func:`max_bytes` block, else the last
        :func:`set_max_bytes`, else ``REFATTN_MAX_BYTES`` or :data:`DEFAULT_MAX_BYTES` (4 GiB).
    """
    return _MAX.get()


@fill_doc(n=_N, raises=_RAISES)
def set_max_bytes(n: int) -> int:
    """Set the bound for the current context (thread or task) and return the previous one.

    Parameters
    ----------
    {n}

    Returns
    -------
    int
        The bound before the call (pass it back to restore it; :func:`max_bytes` does this for a block).

    Raises
    ------
    {raises}
    """
    previous = _MAX.get()
    _MAX.set(_parse(n, "n"))
    return previous


@contextlib.contextmanager
@fill_doc(n=_N, raises=_RAISES)
def max_bytes(n: int) -> Iterator[int]:
    """Context manager: the bound is `n` bytes inside the ``with`` block and restored after it.

    Parameters
    ----------
    {n}

    Yields
    ------
    int
        `n`.

    Raises
    ------
    {raises}
    """
    token = _MAX.set(_parse(n, "n"))
    try:
        yield n
    finally:
        _MAX.reset(token)


def check_nbytes(nbytes: int, what: str) -> None:
    """Raise ``MemoryError`` naming `what` when a request of `nbytes` exceeds the bound; otherwise return.

    Parameters
    ----------
    nbytes : int
        Size of the request in bytes (one array or structure allocated at once).
    what : str
        The argument(s) that set the size, as the user passed them (``"config['vocab_size']"``).

    Raises
    ------
    MemoryError
        If ``nbytes > get_max_bytes()``; the message gives the size, the bound and how to raise it (module
        docstring: an example).
    """
    limit = _MAX.get()
    if nbytes > limit:
        raise MemoryError(
            f"{what}: this request needs {int(nbytes)} bytes ({_human(int(nbytes))}), above refattn's bound "
            f"of {limit} bytes ({_human(limit)}); raise it with refattn.limits.set_max_bytes(n) or the "
            f"REFATTN_MAX_BYTES environment variable")
