"""Files refattn writes: whole files replaced atomically, logs appended a flushed line at a time.

A reader (or a crash, a full disk, a Ctrl-C) never sees a half-written file: :func:`atomic_write` writes into
a temporary file ``.<name>.<random>.tmp`` in the destination's directory, flushes it and syncs it to disk
(``os.fsync``), then renames it over the destination (``os.replace``: atomic on POSIX and Windows within one
file system) and syncs the directory. If anything fails before the rename, the temporary file is removed and
the previous file is left exactly as it was.

    >>> import json, pathlib, tempfile
    >>> from refattn.files import atomic_write, write_text_atomic
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "out.json"
    >>> write_text_atomic(path, json.dumps({"a": 1}))
    >>> with atomic_write(path) as fh:        # a text stream; nothing replaces path until the block ends
    ...     json.dump({"a": 2}, fh)
    >>> path.read_text()
    '{"a": 2}'

:func:`append_jsonl` appends one JSON object per line and flushes it (non-finite numbers become the strings
``"nan"``, ``"inf"`` and ``"-inf"``, so every line is valid JSON); :func:`read_jsonl` reads such a log back,
dropping a torn last line (a crash in the middle of a write).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from typing import IO, Iterator

from ._docs import fill_doc

__all__ = ["atomic_write", "write_text_atomic", "write_bytes_atomic", "json_safe_floats", "append_jsonl",
           "read_jsonl"]


def _fsync_dir(directory: str) -> None:
    """Make the rename durable (POSIX); a platform without directory descriptors skips it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_PATH = """
path : str or path-like
    The destination; its directory must exist.
"""
_ENCODING = """
encoding : str
    The text encoding (text mode).
"""


@contextlib.contextmanager
@fill_doc(path=_PATH, encoding=_ENCODING)
def atomic_write(path, mode: str = "w", *, encoding: str = "utf-8") -> Iterator[IO]:
    """Context manager: a stream for `path`'s new content, which replaces `path` only when the block ends
    (the steps, and what an exception inside the block leaves: the module docstring).

    Parameters
    ----------
    {path}
    mode : {"w", "wb"}
        Text or binary.
    {encoding}

    Yields
    ------
    file object
        The temporary file, open for writing.

    Raises
    ------
    ValueError
        A `mode` other than ``"w"`` or ``"wb"``.
    OSError
        The directory does not exist or cannot be written (raised before anything is replaced).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode: expected 'w' or 'wb'; got {mode!r}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": encoding})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


@fill_doc(path=_PATH, encoding=_ENCODING)
def write_text_atomic(path, text: str, *, encoding: str = "utf-8") -> None:
    """Replace `path`'s content with `text` atomically (:func:`atomic_write`).

    Parameters
    ----------
    {path}
    text : str
        The new content.
    {encoding}
    """
    with atomic_write(path, "w", encoding=encoding) as fh:
        fh.write(text)


@fill_doc(path=_PATH)
def write_bytes_atomic(path, data: bytes) -> None:
    """Replace `path`'s content with `data` atomically (:func:`atomic_write`).

    Parameters
    ----------
    {path}
    data : bytes
        The new content.
    """
    with atomic_write(path, "wb") as fh:
        fh.write(data)


def json_safe_floats(obj):
    """`obj` with every non-finite float replaced by its string (module docstring), recursing into dicts,
    lists and tuples, so that ``json.dumps(..., allow_nan=False)`` gives valid JSON.

    Parameters
    ----------
    obj : object
        A JSON-like value.

    Returns
    -------
    object
        A copy (other values as they were).
    """
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: json_safe_floats(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe_floats(v) for v in obj]
    return obj


def append_jsonl(fh: IO, entry: dict) -> None:
    """Append `entry` as one line of JSON to the open text stream `fh` and flush it.

    Parameters
    ----------
    fh : text file object
        Open for appending.
    entry : dict
        JSON-serialisable up to non-finite floats (:func:`json_safe_floats`).
    """
    fh.write(json.dumps(json_safe_floats(entry), allow_nan=False) + "\n")
    fh.flush()


def read_jsonl(path) -> tuple[list, int]:
    """The complete lines of a JSON-lines log (a torn last line dropped), and the byte length they take.

    Parameters
    ----------
    path : str or path-like
        The log.

    Returns
    -------
    entries : list of dict
        One dict per complete line.
    length : int
        The byte offset just after the last complete line (truncate the file there to drop the torn tail).

    Raises
    ------
    ValueError
        A malformed line that is not the last, naming the file and the line number.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    entries, offset = [], 0
    lines = data.split(b"\n")
    for i, raw in enumerate(lines):
        last = i == len(lines) - 1
        if last:                       # after the final newline: empty, or a torn line without its newline
            break
        try:
            entry = json.loads(raw)
        except ValueError:
            if i == len(lines) - 2 and lines[-1] == b"":
                break                  # the last line is complete but garbled: torn by a crash
            raise ValueError(f"log {os.fspath(path)}: line {i + 1} is not valid JSON") from None
        entries.append(entry)
        offset += len(raw) + 1
    return entries, offset
