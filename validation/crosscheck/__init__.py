"""Framework adapters (torch, JAX) and built-in targets for :func:`validation.check`; the names
``--framework`` and TARGET accept are in :mod:`validation.crosscheck.registry`."""

from ..base import Framework, NumpyFramework, Target, UsageError
from .registry import BUILTIN_TARGETS, FRAMEWORKS, builtin_target, get_framework

__all__ = ["Framework", "NumpyFramework", "get_framework", "FRAMEWORKS", "BUILTIN_TARGETS", "Target",
           "builtin_target", "UsageError"]
