"""The named framework adapters (``--framework``) and built-in targets (``python -m validation check
NAME``).

The adapters (:class:`~validation.base.Framework` subclasses) convert NumPy inputs to a candidate's arrays and
its outputs back: :mod:`~validation.crosscheck.torch`, :mod:`~validation.crosscheck.jax` (optional frameworks,
imported only when asked for). Built-in targets (``python -m validation check NAME``): ``refattn`` (the
self-check, every kind; :mod:`~validation.crosscheck.refattn_targets`), ``performer-pytorch``
(:mod:`~validation.crosscheck.performer_pytorch`), ``sklearn-rbf`` (:mod:`~validation.crosscheck.sklearn`).
"""

from __future__ import annotations

from typing import Callable

from ..base import Framework, NumpyFramework, Target, UsageError
from . import performer_pytorch, refattn_targets, sklearn
from .jax import JaxFramework
from .torch import TorchFramework

__all__ = ["FRAMEWORKS", "get_framework", "BUILTIN_TARGETS", "builtin_target"]

#: framework name -> its adapter class (an optional framework's adapter imports it only when used)
FRAMEWORKS: dict[str, Callable[[], Framework]] = {"numpy": NumpyFramework, "torch": TorchFramework,
                                                  "jax": JaxFramework}


def get_framework(name: str) -> Framework:
    """The adapter for `name` (``numpy``, ``torch``, ``jax``); UsageError if unknown or not installed."""
    if name not in FRAMEWORKS:
        raise UsageError(f"framework: unknown framework {name!r}; expected one of {sorted(FRAMEWORKS)}")
    fw = FRAMEWORKS[name]()
    if not fw.available():
        raise UsageError(f"framework {name!r}: the package {fw.module!r} is not installed "
                         f"(pip install {fw.module}, or refattn[crosscheck] for torch)")
    return fw


#: target name -> ``target(kind, framework)`` (``refattn`` also takes a family)
BUILTIN_TARGETS: dict[str, Callable[..., Target]] = {
    "refattn": refattn_targets.target,
    "performer-pytorch": performer_pytorch.target,
    "sklearn-rbf": sklearn.target,
}


def builtin_target(name: str, kind: str, framework: str | None, family: str | None = None) -> Target:
    """The built-in target `name` for `kind` (framework None: the target's own); `family` selects one of the
    papers' families where the target has it (``refattn``)."""
    if family is not None and name == "refattn":
        return BUILTIN_TARGETS[name](kind, framework, family)
    return BUILTIN_TARGETS[name](kind, framework)
