"""NumPy-only edge: framework adapters and built-in targets for :func:`validation.check`.

A candidate implementation takes and returns arrays of its own framework (NumPy, PyTorch or JAX). The checks
work in NumPy: a :class:`Framework` converts NumPy inputs to the candidate's arrays, its outputs back, and
(for autograd frameworks) computes vector-Jacobian products of the candidate. Optional frameworks are
imported only when asked for; when one is missing the adapter says so (``available() is False``) instead of
failing at import.

Built-in targets (``python -m validation check NAME``): ``refattn`` (the self-check, every kind),
``performer-pytorch`` (:mod:`validation.crosscheck.performer_pytorch`), ``sklearn-rbf``
(:mod:`validation.crosscheck.sklearn`).
"""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Any, Callable, NamedTuple

import numpy as np

__all__ = ["Framework", "NumpyFramework", "get_framework", "FRAMEWORKS", "BUILTIN_TARGETS", "Target",
           "builtin_target", "UsageError"]


class UsageError(ValueError):
    """A usage problem (unknown kind/framework/target, a target that does not import, a candidate with the
    wrong signature or output shape): the CLI exits with status 2 and prints this message."""


def dtype_name(dt: Any) -> str:
    """``'float32'`` / ``'float64'`` / ... from a NumPy, torch or JAX dtype."""
    return str(dt).split(".")[-1]


class Framework:
    """Conversion between NumPy and a candidate's arrays, and (``autograd``) its vector-Jacobian products."""

    name = "numpy"
    autograd = False
    module = "numpy"

    def available(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def asarray(self, a: np.ndarray) -> Any:
        return np.asarray(a)

    def session(self):
        """Context for a run of checks (torch: one intra-op thread -- the checks make thousands of tiny calls,
        which thread hand-offs slow down 100-fold on a busy machine; restored afterwards)."""
        return contextlib.nullcontext()

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def is_array(self, x: Any) -> bool:
        return isinstance(x, np.ndarray)

    def dtype(self, x: Any) -> str:
        return dtype_name(x.dtype)

    def vjp(self, fn: Callable[..., Any], args: list[np.ndarray], cotangent: np.ndarray,
            *extra: Any) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """``(fn(*args, *extra), [d <cotangent, fn> / d arg for each arg])`` in NumPy (None: no gradient);
        `extra` are non-differentiated arguments (e.g. ``causal``)."""
        raise NotImplementedError(f"{self.name} has no automatic differentiation")


class NumpyFramework(Framework):
    pass


def _torch():
    from . import torch as _t
    return _t.TorchFramework()


def _jax():
    from . import jax as _j
    return _j.JaxFramework()


FRAMEWORKS: dict[str, Callable[[], Framework]] = {"numpy": NumpyFramework, "torch": _torch, "jax": _jax}


def get_framework(name: str) -> Framework:
    """The adapter for `name` (``numpy``, ``torch``, ``jax``); UsageError if unknown or not installed."""
    if name not in FRAMEWORKS:
        raise UsageError(f"framework: unknown framework {name!r}; expected one of {sorted(FRAMEWORKS)}")
    fw = FRAMEWORKS[name]()
    if not fw.available():
        raise UsageError(f"framework {name!r}: the package {fw.module!r} is not installed "
                         f"(pip install {fw.module}, or refattn[crosscheck] for torch)")
    return fw


class Target(NamedTuple):
    fn: Callable[..., Any]   # the candidate, in the contract of its kind
    framework: str           # the framework it takes
    family: str | None       # the refattn family it claims to implement (features/attention), or None
    note: str                # how the target was adapted (printed in reports)


def _refattn(kind: str, framework: str, family: str | None = None) -> Target:
    from . import refattn_targets
    return refattn_targets.target(kind, framework, family)


def _performer(kind: str, framework: str, family: str | None = None) -> Target:
    from . import performer_pytorch
    return performer_pytorch.target(kind, framework)


def _sklearn(kind: str, framework: str, family: str | None = None) -> Target:
    from . import sklearn
    return sklearn.target(kind, framework)


BUILTIN_TARGETS: dict[str, Callable[..., Target]] = {
    "refattn": _refattn, "performer-pytorch": _performer, "sklearn-rbf": _sklearn,
}


def builtin_target(name: str, kind: str, framework: str | None, family: str | None = None) -> Target:
    """The built-in target `name` for `kind` (framework None: the target's own); `family` selects one of the
    papers' families where the target has it (``refattn``)."""
    if family is not None and name == "refattn":
        return BUILTIN_TARGETS[name](kind, framework, family)
    return BUILTIN_TARGETS[name](kind, framework)
