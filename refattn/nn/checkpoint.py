"""NumPy-only edge: save and load transformer parameters to ``.npz`` with the
configuration, checked on load.

File layout: one array per parameter leaf under its path (``params/blocks/0/attn/q/W``), and the normalised
configuration as JSON in ``__config__`` (a 0-d unicode array; no pickling: ``np.load(allow_pickle=False)``).

:func:`load` rebuilds the parameter tree from the configuration (the structure of
``refattn.nn.init.init_transformer``) and fills it from the file; it raises :class:`CheckpointError` when the
file's configuration differs from an expected one (naming the differing keys), when a parameter is missing or
extra, or when a shape or dtype differs from what the configuration implies.

A checkpoint is untrusted input. :func:`load` reads the zip directory and every ``.npy`` header first and
validates, in this order and before any parameter array is allocated: the archive itself (truncated or random
files), no object (pickled) entries, each entry's declared size against its stored size, the stored
configuration (types and bounds through :func:`refattn.nn.config.check_config`), the parameter bytes that
configuration implies against what the file holds and against :mod:`refattn.limits` (so a 2 KB file claiming
``vocab_size = 10**9`` fails at once), then every entry's shape and dtype against the configuration; only
then are the arrays read, and non-finite parameters are rejected. Every failure is one
:class:`CheckpointError` (a ``ValueError``) naming the file and the entry.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from typing import Any

import numpy as np

from ..limits import check_nbytes
from ..random import tree_as_xp, tree_to_numpy
from ..tree import tree_map_with_path, tree_paths
from .config import check_config, implied_param_count
from .init import init_transformer

__all__ = ["save", "load", "flatten_tree", "CheckpointError"]

_CONFIG_KEY = "__config__"
_MAX_CONFIG_BYTES = 1 << 20          # a configuration is a small JSON document
# the template allocated before the per-entry checks exceeds the file's own parameter bytes by at most this
_SLACK_BYTES = 1 << 20


class CheckpointError(ValueError):
    """A checkpoint file that cannot be trusted: unreadable, pickled, inconsistent or non-finite.

    The message names the file and the entry (``params/blocks/0/attn/q/W`` or ``__config__``)."""


def flatten_tree(tree: Any, prefix: str = "params") -> dict:
    r"""``{"prefix/a/b/0/W": leaf}`` for every array leaf (dict keys, list indices, NamedTuple field names).

    Static entries (a proposal's kind, a spline order) are implied by the configuration and not stored.

    Parameters
    ----------
    tree : tree
        Nested dicts / lists / NamedTuples of arrays.
    prefix : str
        The first path component.

    Returns
    -------
    dict
        ``{path: leaf}``, in traversal order.
    """
    return dict(tree_paths(tree, prefix))


def _fill(template: Any, headers: dict, path) -> list:
    """Check every parameter the configuration implies against the file's headers; return the paths in
    order."""
    wanted: list = []

    def want(p, leaf):
        if p not in headers:
            raise CheckpointError(f"checkpoint {path}: entry {p!r} is missing (the configuration implies it)")
        shape, dtype = headers[p]
        if tuple(shape) != tuple(leaf.shape) or dtype != leaf.dtype:
            raise CheckpointError(f"checkpoint {path}: entry {p!r} has shape {tuple(shape)} and dtype "
                                  f"{dtype}; the configuration implies shape {tuple(leaf.shape)} and dtype "
                                  f"{leaf.dtype}")
        wanted.append(p)
        return leaf

    tree_map_with_path(want, template, "params")
    return wanted


def _entry_name(member: str) -> str:
    return member[:-4] if member.endswith(".npy") else member


def _read_headers(zf: zipfile.ZipFile, path) -> dict:
    """``{entry: (shape, dtype)}`` from the ``.npy`` headers alone (no array data read)."""
    headers = {}
    for info in zf.infolist():
        name = _entry_name(info.filename)
        try:
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
                header_bytes = fh.tell()
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"checkpoint {path}: entry {name!r} is not a readable .npy array "
                                  f"({exc})") from None
        if dtype.hasobject:
            raise CheckpointError(f"checkpoint {path}: entry {name!r} holds Python objects (pickled data); "
                                  f"refattn checkpoints hold numeric arrays only and are never unpickled")
        declared = math.prod(shape) * dtype.itemsize
        if declared != info.file_size - header_bytes:
            raise CheckpointError(f"checkpoint {path}: entry {name!r} declares shape {tuple(shape)} of "
                                  f"{dtype} ({declared} bytes) but stores {info.file_size - header_bytes} "
                                  f"bytes")
        headers[name] = (tuple(shape), dtype)
    return headers


def _read_config(zf: zipfile.ZipFile, headers: dict, path) -> dict:
    if _CONFIG_KEY not in headers:
        raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} is missing (not written by "
                              f"refattn.nn.checkpoint.save)")
    shape, dtype = headers[_CONFIG_KEY]
    if shape != () or dtype.kind != "U" or dtype.itemsize > _MAX_CONFIG_BYTES:
        raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} must be a 0-d unicode string of at "
                              f"most {_MAX_CONFIG_BYTES} bytes; got shape {shape}, dtype {dtype}")
    with zf.open(_CONFIG_KEY + ".npy") as fh:
        text = str(np.lib.format.read_array(fh, allow_pickle=False))
    try:
        stored = json.loads(text)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} is not valid JSON ({exc})") from None
    if not isinstance(stored, dict):
        raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} must be a JSON object; got "
                              f"{type(stored).__name__}")
    try:
        return check_config(stored)
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} is not a valid configuration: {exc}"
                              ) from None


def save(path, params: dict, config: dict) -> None:
    r"""Write `params` (any namespace; converted to NumPy) and the normalised `config` to ``path`` (``.npz``).

    Parameters
    ----------
    path : str or path-like
        Destination file.
    params : dict
        Parameter tree of the model of `config`.
    config : dict
        Model configuration (normalised with :func:`refattn.nn.config.check_config` before it is stored).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        A bad configuration.
    """
    cfg = check_config(config)
    arrays = flatten_tree(tree_to_numpy(params), "params")
    arrays[_CONFIG_KEY] = np.asarray(json.dumps(cfg, sort_keys=True))
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def load(path, *, config: dict | None = None, like: Any = None):
    r"""Read a checkpoint written by :func:`save`; returns ``(params, config)``.

    Parameters
    ----------
    path : str or path-like
        An ``.npz`` file written by :func:`save`. It is treated as untrusted (see the module docstring).
    config : dict, optional
        The configuration the caller expects; a file written for another configuration raises
        :class:`CheckpointError` naming the differing keys.
    like : array, optional
        Convert the parameters to `like`'s namespace and device (``refattn.random.tree_as_xp``); NumPy
        otherwise.

    Returns
    -------
    params : dict
        The parameter tree.
    config : dict
        The normalised configuration stored in the file.

    Raises
    ------
    CheckpointError
        (a ``ValueError``) naming the file and the entry, for anything but a valid refattn checkpoint.
    MemoryError
        When the configuration implies more parameter bytes than :func:`refattn.limits.get_max_bytes`.
    FileNotFoundError
        When `path` does not exist.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path}: no such file")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path}: not a refattn checkpoint (an .npz zip archive): "
                              f"{exc}") from None
    with zf:
        headers = _read_headers(zf, path)
        cfg = _read_config(zf, headers, path)
        if config is not None:
            want = check_config(config)
            diff = sorted(k for k in set(want) | set(cfg) if want.get(k) != cfg.get(k))
            if diff:
                detail = ", ".join(f"{k}: file {cfg.get(k)!r} vs expected {want.get(k)!r}" for k in diff)
                raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r}: configuration mismatch "
                                      f"({detail})")
        itemsize = np.dtype(cfg["dtype"]).itemsize
        implied = implied_param_count(cfg) * itemsize
        held = sum(math.prod(s) * d.itemsize for k, (s, d) in headers.items() if k.startswith("params/"))
        check_nbytes(implied, f"checkpoint {path}: the parameters its configuration implies")
        # within the slack, the per-entry check below names the entry that differs
        if implied > held + _SLACK_BYTES:
            raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} implies at least {implied} "
                                  f"bytes of parameters, but the file holds {held}")
        template = init_transformer(np.random.default_rng(0), cfg)   # structure, shapes, dtypes only
        wanted = _fill(template, headers, path)
        implied_entries = set(wanted)
        extra = sorted(k for k in headers if k != _CONFIG_KEY and k not in implied_entries)
        if extra:
            raise CheckpointError(f"checkpoint {path}: entries not implied by the configuration: {extra[:5]}")
        flat = {}
        for name in wanted:
            try:
                with zf.open(name + ".npy") as fh:
                    arr = np.lib.format.read_array(fh, allow_pickle=False)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise CheckpointError(f"checkpoint {path}: entry {name!r} cannot be read ({exc})") from None
            if not np.all(np.isfinite(arr)):
                raise CheckpointError(f"checkpoint {path}: entry {name!r} holds non-finite values "
                                      f"({int(np.sum(~np.isfinite(arr)))} of {arr.size})")
            flat[name] = arr
    params = tree_map_with_path(lambda p, _leaf: flat[p], template, "params")
    if like is not None:
        params = tree_as_xp(params, like=like)
    return params, cfg
