"""The base types every layer of :mod:`validation` shares: the usage error, the framework adapter, a target.

A candidate implementation takes and returns arrays of its own framework (NumPy, PyTorch or JAX). The checks
work in NumPy: a :class:`Framework` converts NumPy inputs to the candidate's arrays, its outputs back, and
(for autograd frameworks) computes vector-Jacobian products of the candidate. The adapters for optional
frameworks live in :mod:`validation.crosscheck`; when one is missing the adapter says so (``available() is
False``) instead of failing at import.
"""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Any, Callable, NamedTuple

import numpy as np

__all__ = ["UsageError", "TargetError", "Framework", "NumpyFramework", "Target", "dtype_name"]


class UsageError(ValueError):
    """A usage problem (unknown kind/framework/target, a module or attribute that does not exist, a candidate
    with the wrong signature or output shape): the CLI exits with status 2 and prints this message."""


class TargetError(RuntimeError):
    """The target could not be run: it exited (``sys.exit``, ``os._exit``), crashed (a signal), did not return
    within the timeout, or raised while its module was imported. The CLI exits with status 4.

    ``report`` holds the checks finished before it happened (a :class:`validation.Report`, or None) and
    ``output`` what the target wrote to stdout and stderr (captured in the worker process)."""

    def __init__(self, message: str, report: Any = None, output: str = ""):
        super().__init__(message)
        self.report, self.output = report, output


def dtype_name(dt: Any) -> str:
    """``'float32'`` / ``'float64'`` / ... from a NumPy, torch or JAX dtype."""
    return str(dt).split(".")[-1]


class Framework:
    """Conversion between NumPy and a candidate's arrays, and (``autograd``) its vector-Jacobian products."""

    name = "numpy"
    autograd = False
    module = "numpy"
    #: whether a candidate can change the framework's arrays in place (the input-modification check compares
    #: them before and after each call; an immutable array, e.g. JAX's, is never compared: inside ``jax.vjp``
    #: it is a tracer that cannot be read)
    mutable = True

    def available(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def asarray(self, a: np.ndarray) -> Any:
        return np.asarray(a)

    def session(self):
        """Context for a run of checks (torch: one intra-op thread, restored afterwards -- the checks make
        thousands of tiny calls, which thread hand-offs slow down on a busy machine)."""
        return contextlib.nullcontext()

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def copy(self, x: Any) -> Any:
        """A copy of the framework array `x` that the candidate may change in place without touching `x`
        (differentiable where the framework differentiates: torch ``clone``)."""
        return np.array(x, copy=True)

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


class Target(NamedTuple):
    """A built-in target: a candidate callable with the framework it takes and how it was adapted."""

    fn: Callable[..., Any]   # the candidate, in the contract of its kind
    framework: str           # the framework it takes
    family: str | None       # the refattn family it claims to implement (features/attention), or None
    note: str                # how the target was adapted (printed in reports)
