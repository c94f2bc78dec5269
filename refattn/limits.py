"""The allocation bound: a request for more memory than a documented, configurable limit fails before it
allocates.

A reference library is run on inputs people did not write themselves (a checkpoint from elsewhere, a config
from a paper's appendix). A size that is a typo (``vocab_size=10**9``) should fail at once with a message that
names the argument and the size, not after minutes of swapping or with NumPy's ``Unable to allocate 745 GiB``.

    >>> import refattn
    >>> refattn.limits.get_max_bytes() == 4 * 2**30          # the default: 4 GiB per request
    True
    >>> with refattn.limits.max_bytes(2**20):                # a scoped bound (thread- and task-local)
    ...     refattn.limits.check_nbytes(10**7, "vocab_size * d_model * 8")  # doctest: +ELLIPSIS
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

__all__ = ["DEFAULT_MAX_BYTES", "get_max_bytes", "set_max_bytes", "max_bytes", "check_nbytes"]

DEFAULT_MAX_BYTES = 4 * 2**30


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

    Examples
    --------
    >>> from refattn import limits
    >>> with limits.max_bytes(2**20):
    ...     limits.get_max_bytes()
    1048576
    """
    return _MAX.get()


def set_max_bytes(n: int) -> int:
    """Set the bound for the current context (thread or task) and return the previous one.

    Parameters
    ----------
    n : int
        The new bound in bytes: a positive integer (a string such as ``"0x100000"`` is parsed as Python
        integer literal).

    Returns
    -------
    int
        The bound before the call (pass it back to restore it; :func:`max_bytes` does this for a block).

    Raises
    ------
    ValueError
        If `n` is not a positive integer.

    Examples
    --------
    >>> from refattn import limits
    >>> previous = limits.set_max_bytes(2**20)
    >>> limits.get_max_bytes()
    1048576
    >>> _ = limits.set_max_bytes(previous)
    """
    previous = _MAX.get()
    _MAX.set(_parse(n, "n"))
    return previous


@contextlib.contextmanager
def max_bytes(n: int) -> Iterator[int]:
    """Context manager: the bound is `n` bytes inside the ``with`` block and restored after it.

    Parameters
    ----------
    n : int
        The bound in bytes inside the block: a positive integer.

    Yields
    ------
    int
        `n`.

    Raises
    ------
    ValueError
        If `n` is not a positive integer.

    Examples
    --------
    >>> from refattn import limits
    >>> with limits.max_bytes(2**20) as n:
    ...     limits.get_max_bytes() == n
    True
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
        Names the argument(s) that set the size, as the user passed them (``"config['vocab_size']"``); the
        message starts with it.

    Returns
    -------
    None
        Returns only when the request is within the bound.

    Raises
    ------
    MemoryError
        If ``nbytes > get_max_bytes()``; the message gives the size, the bound and how to raise it.

    Examples
    --------
    >>> from refattn import limits
    >>> limits.check_nbytes(1024, "d_model * 8")          # within the bound: returns None
    >>> with limits.max_bytes(2**20):
    ...     limits.check_nbytes(10**7, "vocab_size * d_model * 8")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    MemoryError: vocab_size * d_model * 8: this request needs 10000000 bytes (9.5 MiB), above ...
    """
    limit = _MAX.get()
    if nbytes > limit:
        raise MemoryError(
            f"{what}: this request needs {int(nbytes)} bytes ({_human(int(nbytes))}), above refattn's bound "
            f"of {limit} bytes ({_human(limit)}); raise it with refattn.limits.set_max_bytes(n) or the "
            f"REFATTN_MAX_BYTES environment variable")
