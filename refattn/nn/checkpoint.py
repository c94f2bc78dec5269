"""NumPy-only edge: save and load transformer parameters to ``.npz`` with the
configuration, checked on load.

File layout: one array per parameter leaf under its path (``params/blocks/0/attn/q/W``), and the normalised
configuration as JSON in ``__config__`` (a 0-d unicode array; no pickling: ``np.load(allow_pickle=False)``).

:func:`load` rebuilds the parameter tree from the configuration (the structure of
``refattn.nn.init.init_transformer``) and fills it from the file; it raises ``ValueError`` when the file's
configuration differs from an expected one (naming the differing keys), when a parameter is missing or extra,
or when a shape or dtype differs from what the configuration implies.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..random import tree_as_xp, tree_to_numpy
from ..tree import tree_map_with_path, tree_paths
from .config import check_config
from .init import init_transformer

__all__ = ["save", "load", "flatten_tree"]

_CONFIG_KEY = "__config__"


def flatten_tree(tree: Any, prefix: str = "params") -> dict:
    """``{"prefix/a/b/0/W": leaf}`` for every array leaf (dict keys, list indices, NamedTuple field names).

    Static entries (a proposal's kind, a spline order) are implied by the configuration and not stored."""
    return dict(tree_paths(tree, prefix))


def _fill(template: Any, flat: dict, used: set) -> Any:
    """`template` (the configuration's parameter tree) with every array leaf replaced by the file's."""

    def take(path, leaf):
        if path not in flat:
            raise ValueError(f"checkpoint: parameter {path!r} is missing (the configuration implies it)")
        arr = flat[path]
        if arr.shape != leaf.shape or arr.dtype != leaf.dtype:
            raise ValueError(f"checkpoint: parameter {path!r} has shape {arr.shape} and dtype {arr.dtype}; the "
                             f"configuration implies shape {leaf.shape} and dtype {leaf.dtype}")
        used.add(path)
        return arr

    return tree_map_with_path(take, template, "params")


def save(path, params: dict, config: dict) -> None:
    """Write `params` (any namespace; converted to NumPy) and the normalised `config` to ``path`` (``.npz``)."""
    cfg = check_config(config)
    arrays = flatten_tree(tree_to_numpy(params), "params")
    arrays[_CONFIG_KEY] = np.asarray(json.dumps(cfg, sort_keys=True))
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def load(path, *, config: dict | None = None, like: Any = None):
    """Read a checkpoint written by :func:`save`; returns ``(params, config)``.

    Parameters
    ----------
    path : str or path-like
    config : dict, optional
        The configuration the caller expects; a file written for another configuration raises ``ValueError``
        naming the differing keys.
    like : array, optional
        Convert the parameters to `like`'s namespace and device (``refattn.random.tree_as_xp``); NumPy otherwise.
    """
    with np.load(path, allow_pickle=False) as data:
        flat = {k: data[k] for k in data.files}
    if _CONFIG_KEY not in flat:
        raise ValueError(f"checkpoint {path}: no configuration stored (not written by refattn.nn.checkpoint.save)")
    stored = json.loads(str(flat.pop(_CONFIG_KEY)))
    cfg = check_config(stored)
    if config is not None:
        want = check_config(config)
        diff = sorted(k for k in set(want) | set(cfg) if want.get(k) != cfg.get(k))
        if diff:
            detail = ", ".join(f"{k}: file {cfg.get(k)!r} vs expected {want.get(k)!r}" for k in diff)
            raise ValueError(f"checkpoint {path}: configuration mismatch ({detail})")
    template = init_transformer(np.random.default_rng(0), cfg)   # structure, shapes and dtypes only
    used: set = set()
    params = _fill(template, flat, used)
    extra = sorted(k for k in flat if k.startswith("params/") and k not in used)
    if extra:
        raise ValueError(f"checkpoint {path}: parameters not implied by the configuration: {extra[:5]}")
    if like is not None:
        params = tree_as_xp(params, like=like)
    return params, cfg
