"""NumPy-only edge: save and load transformer parameters (and, for resuming, the whole training state) to
``.npz`` with the configuration, checked on load.

File layout (a zip of ``.npy`` entries, stored uncompressed, no pickling): one array per parameter leaf under
its path (``params/blocks/0/attn/q/W``) and the normalised configuration as JSON in ``__config__`` (a 0-d
unicode array). A training checkpoint (:func:`save` with ``train_state``, written by
:func:`refattn.nn.train.train`) adds the optimiser's moments (``opt/velocity/...`` for SGD, ``opt/m/...`` and
``opt/v/...`` for Adam/AdamW, one per floating parameter), the current draw of the attention features
(``features/<layer>/<name>``) and ``__train__``: JSON with the step, the step the features were drawn for
(their redraw position), the redraw period and the run's settings (:class:`TrainState`).

A checkpoint is untrusted input. :func:`load` refuses, before any array is allocated: a path that is not a
regular file (a device such as ``/dev/zero``, a FIFO, a directory: it is opened non-blocking and checked with
``fstat``); an archive that is not a zip; an entry that is encrypted, compressed with another method than
stored/deflate, compressed more than :data:`MAX_COMPRESSION_RATIO` to 1 (a zip bomb), duplicated or not an
``.npy``; a configuration entry over 1 MiB, nested deeper than :data:`MAX_CONFIG_DEPTH` or invalid
(:func:`refattn.nn.config.check_config`); a configuration whose cost -- the parameters, the drawn attention
arrays and, for a training checkpoint, the optimiser's moments, every attention kind's own tables included
(:func:`refattn.nn.init.model_nbytes`) -- exceeds :mod:`refattn.limits`' bound (4 GiB per request by default;
a :class:`CheckpointTooLargeError`, both a ``CheckpointError`` and a ``MemoryError``); an archive directory
whose declared sizes do not add up to what the configuration implies (so the template built next is no
larger than what the file really holds). Then every entry's size in the archive directory and its ``.npy``
header are checked against the shape and dtype the configuration implies, the data is read into the
template's own buffer, and non-finite values are rejected. Every failure is one :class:`CheckpointError` (a
``ValueError``) naming the file and the entry; no ``RuntimeError``, ``NotImplementedError``,
``RecursionError`` or ``zlib.error`` escapes from damaged bytes.
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct
import zipfile
import zlib
from typing import Any, NamedTuple

import numpy as np

from ..files import atomic_write
from ..limits import check_nbytes
from ..random import tree_as_xp, tree_to_numpy
from ..tree import tree_map_with_path, tree_paths
from .config import check_config
from .init import draw_attention_features, init_transformer, model_nbytes
from .optim import AdamState, SGDState

__all__ = ["save", "load", "load_train_state", "flatten_tree", "TrainState", "CheckpointError",
           "CheckpointTooLargeError", "MAX_COMPRESSION_RATIO", "MAX_CONFIG_DEPTH"]

_CONFIG_KEY = "__config__"
_TRAIN_KEY = "__train__"
_MAX_CONFIG_BYTES = 1 << 20          # a configuration is a small JSON document
_MAX_HEADER = 1 << 16                # an .npy header (magic, length, dict, padding) is far below this
#: an entry may hold at most this many times its compressed size (plus 1 MiB): refattn writes entries
#: uncompressed (ratio 1), zlib's best on zeros is about 1000
MAX_COMPRESSION_RATIO = 20
_RATIO_GRACE = 1 << 20
#: the deepest nesting of brackets a stored configuration may have (a real one has 3)
MAX_CONFIG_DEPTH = 16
FORMAT_VERSION = 1
#: what damaged zip or .npy bytes can raise inside zipfile / zlib / numpy's format reader
_DAMAGED = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError,
            struct.error, OverflowError, KeyError, UnicodeDecodeError, IndexError, TypeError, RecursionError)


class CheckpointError(ValueError):
    """A checkpoint file that cannot be trusted: unreadable, pickled, inconsistent or non-finite.

    The message names the file and the entry (``params/blocks/0/attn/q/W`` or ``__config__``)."""


class CheckpointTooLargeError(CheckpointError, MemoryError):
    """A checkpoint whose configuration implies more bytes than :mod:`refattn.limits` allows (raised before
    anything is allocated; both a :class:`CheckpointError` and a ``MemoryError``)."""


class TrainState(NamedTuple):
    r"""The state :func:`refattn.nn.train.train` needs to continue a run bit for bit.

    Every random draw of step t is a pure function of ``(seed, t)`` (module docstring of
    :mod:`refattn.nn.train`), so the RNG state and the position in the data order are ``settings["seed"]``
    and `step`."""

    step: int            # steps completed: the next step to run (its batch, dropout masks and learning rate)
    opt_state: Any       # SGDState or AdamState (NumPy)
    features: Any        # the current draw of the attention features (one entry per layer; None: none)
    features_step: int   # the step the current draw was made for (the start of its redraw window)
    redraw_every: Any    # the redraw period (config["attention"]["redraw_every"]): None or k
    settings: dict       # the run's settings (seed, optimizer, lr, schedule, ...), JSON


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


def _opt_groups(opt_state) -> dict:
    if isinstance(opt_state, SGDState):
        return {"velocity": opt_state.velocity}
    if isinstance(opt_state, AdamState):
        return {"m": opt_state.m, "v": opt_state.v}
    raise TypeError(f"train_state.opt_state: expected SGDState or AdamState; got {type(opt_state).__name__}")


def save(path, params: dict, config: dict, *, train_state: TrainState | None = None) -> None:
    r"""Write `params` (any namespace; converted to NumPy), the normalised `config` and optionally the
    training state to ``path`` (``.npz``), atomically.

    The file is written to a temporary file in the same directory and renamed over `path` only when
    complete (:func:`refattn.files.atomic_write`): a failure part-way leaves the previous checkpoint intact.

    Parameters
    ----------
    path : str or path-like
        Destination file.
    params : dict
        Parameter tree of the model of `config`.
    config : dict
        Model configuration (normalised with :func:`refattn.nn.config.check_config` before it is stored).
    train_state : TrainState, optional
        The optimiser state, step, feature draw and run settings (module docstring), for resuming with
        ``train(..., resume=path)``.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        A bad configuration.
    TypeError
        A `train_state` of the wrong type.
    """
    cfg = check_config(config)
    arrays = flatten_tree(tree_to_numpy(params), "params")
    arrays[_CONFIG_KEY] = np.asarray(json.dumps(cfg, sort_keys=True))
    if train_state is not None:
        if not isinstance(train_state, TrainState):
            raise TypeError(f"train_state: expected TrainState; got {type(train_state).__name__}")
        for name, tree in _opt_groups(train_state.opt_state).items():
            arrays.update(flatten_tree(tree_to_numpy(tree), f"opt/{name}"))
        if train_state.features is not None:
            arrays.update(flatten_tree(tree_to_numpy(list(train_state.features)), "features"))
        meta = {"format": FORMAT_VERSION, "step": int(train_state.step),
                "opt_step": int(train_state.opt_state.step),
                "optimizer_state": type(train_state.opt_state).__name__,
                "features_step": int(train_state.features_step), "redraw_every": train_state.redraw_every,
                "settings": train_state.settings}
        arrays[_TRAIN_KEY] = np.asarray(json.dumps(meta, sort_keys=True, allow_nan=False))
    with atomic_write(path, "wb") as fh:
        np.savez(fh, **arrays)


# ---- reading -----------------------------------------------------------------------------------------------
def _open_regular(path):
    """A binary file object on `path`, refused unless it is a regular file (opened non-blocking: a FIFO
    does not block, a device is not read)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint {path}: no such file") from None
    except OSError as exc:
        raise CheckpointError(f"checkpoint {path}: cannot be opened ({exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket or special file")
        raise CheckpointError(f"checkpoint {path}: not a regular file ({what}); refattn reads checkpoints "
                              f"from regular files only")
    return os.fdopen(fd, "rb")


def _check_directory(zf: zipfile.ZipFile, path) -> dict:
    """``{entry: ZipInfo}`` after the archive-directory checks (no entry data read)."""
    infos = {}
    for info in zf.infolist():
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        where = f"checkpoint {path}: entry {name!r}"
        if not info.filename.endswith(".npy"):
            raise CheckpointError(f"{where} is not an .npy array")
        if name in infos:
            raise CheckpointError(f"{where} appears twice in the archive")
        if info.flag_bits & 0x1:
            raise CheckpointError(f"{where} is encrypted; refattn checkpoints are not")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise CheckpointError(f"{where} uses compression method {info.compress_type}; refattn reads "
                                  f"stored or deflated entries only")
        if info.file_size > MAX_COMPRESSION_RATIO * info.compress_size + _RATIO_GRACE:
            raise CheckpointError(f"{where} declares {info.file_size} bytes compressed into "
                                  f"{info.compress_size}: more than {MAX_COMPRESSION_RATIO} to 1 (a zip "
                                  f"bomb?); refattn writes entries uncompressed")
        infos[name] = info
    return infos


def _read_header(fh, where):
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    if dtype.hasobject:
        raise CheckpointError(f"{where} holds Python objects (pickled data); refattn checkpoints hold "
                              f"numeric arrays only and are never unpickled")
    return tuple(shape), fortran, dtype


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text, strings skipped (vectorised, no recursion)."""
    codes = np.frombuffer(_JSON_STRING.sub('""', text).encode("utf-32-le"), dtype="<u4")
    steps = np.isin(codes, (91, 123)).astype(np.int64) - np.isin(codes, (93, 125))     # [ {  minus  ] }
    return int(np.cumsum(steps).max(initial=0))


def _read_json(zf, infos, key, path) -> dict:
    where = f"checkpoint {path}: entry {key!r}"
    info = infos[key]
    if info.file_size > 4 * _MAX_CONFIG_BYTES + _MAX_HEADER:
        raise CheckpointError(f"{where} declares {info.file_size} bytes; at most {_MAX_CONFIG_BYTES} "
                              f"characters of JSON are accepted")
    try:
        with zf.open(info) as fh:
            shape, _, dtype = _read_header(fh, where)
            if shape != () or dtype.kind != "U" or dtype.itemsize > 4 * _MAX_CONFIG_BYTES:
                raise CheckpointError(f"{where} must be a 0-d unicode string of at most {_MAX_CONFIG_BYTES} "
                                      f"characters; got shape {shape}, dtype {dtype}")
            data = fh.read(dtype.itemsize)
            if len(data) != dtype.itemsize:
                raise CheckpointError(f"{where} is truncated ({len(data)} of {dtype.itemsize} bytes)")
            text = str(np.frombuffer(data, dtype=dtype)[0])
    except CheckpointError:
        raise
    except _DAMAGED as exc:
        raise CheckpointError(f"{where} cannot be read ({type(exc).__name__}: {exc})") from None
    if _nesting_depth(text) > MAX_CONFIG_DEPTH:
        raise CheckpointError(f"{where} nests deeper than {MAX_CONFIG_DEPTH} levels; a configuration is a "
                              f"shallow JSON object")
    try:
        stored = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(stored, dict):
        raise CheckpointError(f"{where} must be a JSON object; got {type(stored).__name__}")
    return stored


def _read_config(zf, infos, path) -> dict:
    if _CONFIG_KEY not in infos:
        raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} is missing (not written by "
                              f"refattn.nn.checkpoint.save)")
    stored = _read_json(zf, infos, _CONFIG_KEY, path)
    try:
        return check_config(stored)
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} is not a valid configuration: {exc}"
                              ) from None


def _read_train_meta(zf, infos, path) -> dict:
    meta = _read_json(zf, infos, _TRAIN_KEY, path)
    where = f"checkpoint {path}: entry {_TRAIN_KEY!r}"
    want = {"format": int, "step": int, "opt_step": int, "optimizer_state": str, "features_step": int,
            "settings": dict}
    for key, typ in want.items():
        if isinstance(meta.get(key), bool) or not isinstance(meta.get(key), typ):
            raise CheckpointError(f"{where}: {key!r} must be a {typ.__name__}; got {meta.get(key)!r}")
    if meta["format"] != FORMAT_VERSION:
        raise CheckpointError(f"{where}: format {meta['format']} is not {FORMAT_VERSION}")
    if meta["optimizer_state"] not in ("SGDState", "AdamState"):
        raise CheckpointError(f"{where}: optimizer_state must be 'SGDState' or 'AdamState'; got "
                              f"{meta['optimizer_state']!r}")
    if not 0 <= meta["features_step"] <= meta["step"] or meta["opt_step"] < 0:
        raise CheckpointError(f"{where}: expected 0 <= features_step <= step and opt_step >= 0; got "
                              f"{meta['features_step']}, {meta['step']}, {meta['opt_step']}")
    return meta


def _float_nbytes(template) -> int:
    return sum(leaf.nbytes for _, leaf in tree_paths(template) if leaf.dtype.kind == "f")


def _check_sizes(infos, groups, cfg, path):
    """The archive directory's declared sizes, per group of entries, against what the configuration implies:
    each group's bytes within [implied, implied + one header per entry]."""
    for prefix, implied in groups.items():
        names = [k for k in infos if k.startswith(prefix + "/")]
        declared = sum(infos[k].file_size for k in names)
        if not implied <= declared <= implied + _MAX_HEADER * max(len(names), 1):
            raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r} implies {implied} bytes of "
                                  f"'{prefix}/' arrays, but the archive directory declares {declared} "
                                  f"bytes in {len(names)} entries")


def _read_into(zf, info, leaf, name, path):
    """Read entry `name` into a copy of the template's `leaf` (same buffer when it is C-contiguous), after
    checking its declared size and header against the leaf."""
    where = f"checkpoint {path}: entry {name!r}"
    extra = info.file_size - leaf.nbytes
    if not 0 < extra <= _MAX_HEADER:
        raise CheckpointError(f"{where} declares {info.file_size} bytes in the archive directory; the "
                              f"configuration implies shape {tuple(leaf.shape)} and dtype {leaf.dtype} "
                              f"({leaf.nbytes} bytes and a header)")
    try:
        with zf.open(info) as fh:
            shape, fortran, dtype = _read_header(fh, where)
            if shape != tuple(leaf.shape) or dtype != leaf.dtype:
                raise CheckpointError(f"{where} has shape {shape} and dtype {dtype}; the configuration "
                                      f"implies shape {tuple(leaf.shape)} and dtype {leaf.dtype}")
            if fh.tell() + leaf.nbytes != info.file_size:
                raise CheckpointError(f"{where} declares shape {shape} of {dtype} ({leaf.nbytes} bytes) but "
                                      f"stores {info.file_size - fh.tell()} bytes")
            own = leaf.flags.c_contiguous and leaf.flags.writeable
            out = leaf if own else np.empty(leaf.shape, leaf.dtype)
            target = np.empty(shape[::-1], dtype=dtype) if fortran else out   # Fortran: out.T
            view = memoryview(target.reshape(-1).view(np.uint8))
            got = 0
            while got < leaf.nbytes:
                n = fh.readinto(view[got:])
                if not n:
                    raise CheckpointError(f"{where} is truncated ({got} of {leaf.nbytes} bytes)")
                got += n
            if fortran:
                out[...] = target.T
    except CheckpointError:
        raise
    except _DAMAGED as exc:
        raise CheckpointError(f"{where} cannot be read ({type(exc).__name__}: {exc})") from None
    if out.dtype.kind == "f" and not np.all(np.isfinite(out)):
        raise CheckpointError(f"{where} holds non-finite values ({int(np.sum(~np.isfinite(out)))} of "
                              f"{out.size})")
    return out


def _fill(zf, infos, template, prefix, path, only_float=False):
    def one(p, leaf):
        if only_float and leaf.dtype.kind != "f":
            return None
        name = prefix + p[len("x"):]
        if name not in infos:
            raise CheckpointError(f"checkpoint {path}: entry {name!r} is missing (the configuration implies "
                                  f"it)")
        used.add(name)
        return _read_into(zf, infos[name], leaf.copy() if only_float else leaf, name, path)

    used: set = set()
    return tree_map_with_path(one, template, "x"), used


def _load(path, config, want_state: bool):
    fh = _open_regular(path)
    with fh:
        try:
            zf = zipfile.ZipFile(fh)
        except _DAMAGED as exc:
            raise CheckpointError(f"checkpoint {path}: not a refattn checkpoint (an .npz zip archive): "
                                  f"{exc}") from None
        with zf:
            infos = _check_directory(zf, path)
            cfg = _read_config(zf, infos, path)
            if config is not None:
                want = check_config(config)
                diff = sorted(k for k in set(want) | set(cfg) if want.get(k) != cfg.get(k))
                if diff:
                    detail = ", ".join(f"{k}: file {cfg.get(k)!r} vs expected {want.get(k)!r}" for k in diff)
                    raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r}: configuration mismatch "
                                          f"({detail})")
            meta = _read_train_meta(zf, infos, path) if _TRAIN_KEY in infos else None
            if want_state and meta is None:
                raise CheckpointError(f"checkpoint {path}: holds the parameters only (no {_TRAIN_KEY!r} "
                                      f"entry); resuming needs the whole training state (optimiser moments, "
                                      f"step, feature draw): write it with train(..., checkpoint=path), or "
                                      f"start a new run from these parameters with train(..., params=...)")
            try:
                p_bytes, f_bytes = model_nbytes(cfg)
            except (ValueError, TypeError) as exc:
                raise CheckpointError(f"checkpoint {path}: entry {_CONFIG_KEY!r}: {exc}") from None
            n_moments = 0 if meta is None else (1 if meta["optimizer_state"] == "SGDState" else 2)
            total = p_bytes + (0 if meta is None else f_bytes + n_moments * p_bytes)
            try:
                check_nbytes(total, f"checkpoint {path}: entry {_CONFIG_KEY!r}: the parameters"
                             + ("" if meta is None else ", optimiser moments and drawn features")
                             + " its configuration implies")
            except MemoryError as exc:
                raise CheckpointTooLargeError(str(exc)) from None
            unknown = sorted(k for k in infos if k not in (_CONFIG_KEY, _TRAIN_KEY)
                             and k.split("/")[0] not in ("params", "opt", "features"))
            if unknown or (meta is None and any(k.split("/")[0] in ("opt", "features") for k in infos)):
                extra = unknown or sorted(k for k in infos if k.split("/")[0] in ("opt", "features"))
                raise CheckpointError(f"checkpoint {path}: entries not implied by the configuration: "
                                      f"{extra[:5]}")
            # parameter bytes within what the directory declares: the template is no larger than the file
            _check_sizes(infos, {"params": p_bytes}, cfg, path)
            template = init_transformer(np.random.default_rng(0), cfg)    # structure, shapes, dtypes
            float_bytes = _float_nbytes(template)
            groups = {}
            if meta is not None:
                names = ["velocity"] if meta["optimizer_state"] == "SGDState" else ["m", "v"]
                groups = {f"opt/{n}": float_bytes for n in names}
                feats_template = draw_attention_features(np.random.default_rng(0), cfg)
                groups["features"] = sum(leaf.nbytes for _, leaf in tree_paths(feats_template))
                _check_sizes(infos, groups, cfg, path)
            params, used = _fill(zf, infos, template, "params", path)
            state = None
            if meta is not None:
                moments = {}
                for n in names:
                    moments[n], u = _fill(zf, infos, template, f"opt/{n}", path, only_float=True)
                    used |= u
                features, u = _fill(zf, infos, feats_template, "features", path)
                used |= u
                opt_state = (SGDState(step=meta["opt_step"], velocity=moments["velocity"])
                             if names == ["velocity"] else
                             AdamState(step=meta["opt_step"], m=moments["m"], v=moments["v"]))
                redraw = meta.get("redraw_every")
                if redraw != cfg["attention"]["redraw_every"]:
                    raise CheckpointError(f"checkpoint {path}: entry {_TRAIN_KEY!r}: redraw_every {redraw!r} "
                                          f"differs from the configuration's "
                                          f"{cfg['attention']['redraw_every']!r}")
                state = TrainState(step=meta["step"], opt_state=opt_state, features=features,
                                   features_step=meta["features_step"], redraw_every=redraw,
                                   settings=meta["settings"])
            extra = sorted(k for k in infos if k not in (_CONFIG_KEY, _TRAIN_KEY) and k not in used)
            if extra:
                raise CheckpointError(f"checkpoint {path}: entries not implied by the configuration: "
                                      f"{extra[:5]}")
    return params, cfg, state


def load(path, *, config: dict | None = None, like: Any = None):
    r"""Read a checkpoint written by :func:`save`; returns ``(params, config)``.

    A training checkpoint is read whole (its state is checked too) and its parameters returned; use
    :func:`load_train_state` for the state.

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
        (a ``ValueError``) naming the file and the entry, for anything but a valid refattn checkpoint (module
        docstring: what is checked, in which order).
    CheckpointTooLargeError
        (a ``CheckpointError`` and a ``MemoryError``) when the configuration implies more bytes than
        :func:`refattn.limits.get_max_bytes`, before anything is allocated.
    FileNotFoundError
        When `path` does not exist.
    """
    params, cfg, _ = _load(path, config, False)
    if like is not None:
        params = tree_as_xp(params, like=like)
    return params, cfg


def load_train_state(path, *, config: dict | None = None):
    r"""Read a training checkpoint (written by ``train(..., checkpoint=path)``); returns
    ``(params, config, state)``, NumPy.

    Parameters
    ----------
    path : str or path-like
        An ``.npz`` file written by :func:`save` with a ``train_state``; untrusted (module docstring).
    config : dict, optional
        The configuration the caller expects (a mismatch raises :class:`CheckpointError`).

    Returns
    -------
    params : dict
        The parameter tree.
    config : dict
        The normalised configuration.
    state : TrainState
        The optimiser state, step, current feature draw and its redraw position, and the run's settings.

    Raises
    ------
    CheckpointError
        As :func:`load`, and for a checkpoint that holds the parameters only (it cannot be resumed).
    CheckpointTooLargeError
        As :func:`load`.
    FileNotFoundError
        When `path` does not exist.
    """
    return _load(path, config, True)
