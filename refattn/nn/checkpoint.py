"""NumPy-only edge: save and load transformer parameters to ``.npz`` with the
configuration, checked on load.

File layout: one array per parameter leaf under its path (``params/blocks/0/attn/q/W``), and the normalised
configuration as JSON in ``__config__`` (a 0-d unicode array; no pickling: ``np.load(allow_pickle=False)``).

:func:`load` rebuilds the parameter tree from the configuration (the structure of
``refattn.random.init_transformer``) and fills it from the file; it raises ``ValueError`` when the file's
configuration differs from an expected one (naming the differing keys), when a parameter is missing or extra,
or when a shape or dtype differs from what the configuration implies.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..random.nn import init_transformer, tree_as_xp, tree_to_numpy
from .transformer import check_config

__all__ = ["save", "load", "flatten_tree"]

_CONFIG_KEY = "__config__"


def flatten_tree(tree: Any, prefix: str = "params") -> dict:
    """``{"prefix/a/b/0/W": leaf}`` for every array leaf (dict keys, list indices, NamedTuple field names)."""
    out: dict = {}
    if tree is None:
        return out
    if isinstance(tree, dict):
        for k, v in tree.items():
            if "/" in str(k):
                raise ValueError(f"params: key {k!r} contains '/', which the checkpoint format reserves")
            out.update(flatten_tree(v, f"{prefix}/{k}"))
    elif isinstance(tree, tuple) and hasattr(tree, "_fields"):
        for k, v in zip(tree._fields, tree):
            out.update(flatten_tree(v, f"{prefix}/{k}"))
    elif isinstance(tree, (tuple, list)):
        for i, v in enumerate(tree):
            out.update(flatten_tree(v, f"{prefix}/{i}"))
    elif hasattr(tree, "shape"):
        out[prefix] = tree
    # static leaves (a proposal's kind, a spline order) are implied by the configuration: not stored
    return out


def _fill(template: Any, flat: dict, prefix: str, used: set) -> Any:
    if template is None:
        return None
    if isinstance(template, dict):
        return {k: _fill(v, flat, f"{prefix}/{k}", used) for k, v in template.items()}
    if isinstance(template, tuple) and hasattr(template, "_fields"):
        return type(template)(*(_fill(v, flat, f"{prefix}/{k}", used) for k, v in zip(template._fields, template)))
    if isinstance(template, (tuple, list)):
        items = [_fill(v, flat, f"{prefix}/{i}", used) for i, v in enumerate(template)]
        return type(template)(items) if isinstance(template, tuple) else items
    if not hasattr(template, "shape"):
        return template                      # static leaf, rebuilt from the configuration
    if prefix not in flat:
        raise ValueError(f"checkpoint: parameter {prefix!r} is missing (the configuration implies it)")
    arr = flat[prefix]
    if arr.shape != template.shape or arr.dtype != template.dtype:
        raise ValueError(f"checkpoint: parameter {prefix!r} has shape {arr.shape} and dtype {arr.dtype}; the "
                         f"configuration implies shape {template.shape} and dtype {template.dtype}")
    used.add(prefix)
    return arr


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
    params = _fill(template, flat, "params", used)
    extra = sorted(k for k in flat if k.startswith("params/") and k not in used)
    if extra:
        raise ValueError(f"checkpoint {path}: parameters not implied by the configuration: {extra[:5]}")
    if like is not None:
        params = tree_as_xp(params, like=like)
    return params, cfg
