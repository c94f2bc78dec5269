"""Mutations: planted errors in what a claim's check consumes, which must move its verdict (its power).

A claim module registers mutations of its own check with the :func:`mutation` decorator on a context-manager
factory that perturbs, while it is active, the refattn function or the formula the check consumes::

    from paper_checks.mutations import mutation, patched, scaled

    @mutation("kl.eq5-gmm-rks", "features x 2", kind="refattn")
    def _features_x2():
        return scaled(spectra_mod, "gmm_rks_features", 2.0)      # the check looks the name up at call time

    @mutation("kl.eq5-gmm-rks", "Sigma = S^T S", kind="refattn", bug="transpose")
    @contextlib.contextmanager
    def _transpose():
        with patched(spectra_mod, "gmm_rks_features", lambda x, mu, s, *a, **k: orig(x, mu, s.T, *a, **k)):
            yield

``python -m paper_checks --power`` (:mod:`paper_checks.power`) runs each claim once unmutated, then once under
each mutation. A mutation whose verdict does not move is a finding (the check lacks power against that error):
fix the check, never delete the mutation.

**Two kinds.** A mutation declares what it plants its error in: ``kind="refattn"`` when it patches one of
refattn's public functions (the power that counts: a bug in refattn that the claim would catch), or
``kind="target"`` when it patches the check's own target, formula, table or printed value (it tests the
claim's rule, not refattn). :func:`patched` logs what every active mutation replaces, so the declaration is
verified (``tests/paper_checks/test_power_kinds.py``): a ``refattn`` mutation replaces a callable defined in
refattn, a ``target`` mutation none. A mutation that plants a realistic bug -- not a pure rescaling of an
output -- names its class with ``bug=`` (one of :data:`BUG_CLASSES`). Every non-slow claim that calls refattn
carries at least two ``refattn`` mutations, one of them with a bug class.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable, ContextManager, Iterator

import numpy as np

__all__ = ["BUG_CLASSES", "KINDS", "Mutation", "MUTATIONS", "PATCH_LOG", "mutation", "negated_half",
           "patched", "scaled", "scaled_arg", "shifted_arg", "wrapped"]

#: What a mutation plants its error in: a refattn public function, or the check's own target/formula/table.
KINDS = ("refattn", "target")

#: Realistic bug classes (``bug=``): what an implementation gets wrong, as opposed to a rescaled output.
BUG_CLASSES = {
    "index": "an index, axis or coordinate read wrongly (positions, cells, grid axes)",
    "off-by-one": "a range, window or position off by one",
    "state-not-carried": "a prefix state not carried across a causal chunk or block",
    "transpose": "a matrix or pair order transposed",
    "sign": "a sign flipped",
    "normalisation": "a wrong normalisation constant (1/2 for 1, 2 pi for 1, sqrt m for m, a norm law)",
    "train-eval": "a training-mode path used at evaluation (or the reverse)",
    "stale-cache": "a cached value reused after its inputs changed",
}

#: ``(obj, attr, original)`` for every :func:`patched` replacement active now (read by the kind test).
PATCH_LOG: list[tuple[Any, str, Any]] = []


@dataclasses.dataclass(frozen=True)
class Mutation:
    """A planted error: `apply()` returns a context manager inside which the check consumes the wrong
    thing."""

    name: str
    apply: Callable[[], ContextManager]
    size: str | None = None     # the size this mutation needs for power (None: the run's size)
    kind: str = "target"        # "refattn": patches a refattn public function; "target": the check's own
    bug: str | None = None      # the realistic bug class planted (BUG_CLASSES), None for a pure rescaling

    @property
    def realistic(self) -> bool:
        """Whether it plants a realistic bug class (not a pure rescaling)."""
        return self.bug is not None


MUTATIONS: dict[str, list[Mutation]] = {}


def mutation(claim_id: str, name: str, *, kind: str, bug: str | None = None, size: str | None = None
             ) -> Callable[[Callable[[], ContextManager]], Callable[[], ContextManager]]:
    """Register the decorated context-manager factory as mutation `name` of claim `claim_id`.

    `kind` is ``"refattn"`` (it patches a refattn public function) or ``"target"`` (the check's own target,
    formula or table); `bug` names the realistic bug class it plants (a key of :data:`BUG_CLASSES`), None for
    a pure rescaling; `size` the size it needs for power (None: the run's size)."""
    if kind not in KINDS:
        raise ValueError(f"mutation {name!r} of {claim_id!r}: kind: expected one of {KINDS}; got {kind!r}")
    if bug is not None and bug not in BUG_CLASSES:
        raise ValueError(f"mutation {name!r} of {claim_id!r}: bug: expected None or one of "
                         f"{tuple(BUG_CLASSES)}; got {bug!r}")

    def deco(factory: Callable[[], ContextManager]) -> Callable[[], ContextManager]:
        lst = MUTATIONS.setdefault(claim_id, [])
        if any(m.name == name for m in lst):
            raise ValueError(f"mutation {name!r} of {claim_id!r} is registered twice")
        lst.append(Mutation(name, factory, size, kind, bug))
        return factory

    return deco


@contextlib.contextmanager
def patched(obj: Any, attr: str, new: Any) -> Iterator[None]:
    """Set ``obj.attr = new`` for the duration of the block (restored on exit, also on error)."""
    if not hasattr(obj, attr):
        raise AttributeError(f"patched: {obj!r} has no attribute {attr!r} to mutate")
    old = getattr(obj, attr)
    entry = (obj, attr, old)
    PATCH_LOG.append(entry)
    setattr(obj, attr, new)
    try:
        yield
    finally:
        setattr(obj, attr, old)
        del PATCH_LOG[next(i for i, e in enumerate(PATCH_LOG) if e is entry)]


def wrapped(obj: Any, attr: str, wrap: Callable[[Callable], Callable]) -> ContextManager:
    """Replace function ``obj.attr`` by ``wrap(original)`` for the duration of the block."""
    orig = getattr(obj, attr)
    new = wrap(orig)
    functools.update_wrapper(new, orig)
    return patched(obj, attr, new)


def scaled(obj: Any, attr: str, factor: float, *, output: int | None = None) -> ContextManager:
    """``obj.attr`` multiplied by `factor` for the duration of the block: a number, or a function's output
    (with `output`, only output number `output` of the tuple it returns)."""
    orig = getattr(obj, attr)
    if not callable(orig):
        return patched(obj, attr, orig * factor)

    def wrap(f: Callable) -> Callable:
        def g(*a: Any, **k: Any) -> Any:
            out = f(*a, **k)
            if output is None:
                return out * factor
            out = list(out)
            out[output] = out[output] * factor
            return tuple(out)
        return g
    return wrapped(obj, attr, wrap)


def scaled_arg(obj: Any, attr: str, position: int, factor: float) -> ContextManager:
    """Function ``obj.attr`` called with positional argument number `position` multiplied by `factor` (unit
    slips in positions and frequencies) for the duration of the block."""
    def wrap(f: Callable) -> Callable:
        def g(*a: Any, **k: Any) -> Any:
            a = list(a)
            a[position] = a[position] * factor
            return f(*a, **k)
        return g
    return wrapped(obj, attr, wrap)


def negated_half(obj: Any, attr: str, output: int) -> ContextManager:
    """Function ``obj.attr`` with the second half (last axis) of output number `output` negated: the sign
    slip ``[cos, -sin]`` for ``[cos, sin]`` in a real feature map, for the duration of the block."""
    def wrap(f: Callable) -> Callable:
        def g(*a: Any, **k: Any) -> Any:
            out = list(f(*a, **k))
            x = out[output]
            h = x.shape[-1] // 2
            out[output] = x * ((-1.0) ** (np.arange(x.shape[-1]) >= h))
            return tuple(out)
        return g
    return wrapped(obj, attr, wrap)


def shifted_arg(obj: Any, attr: str, position: int, offset: float, output: int) -> ContextManager:
    """Function ``obj.attr`` whose output number `output` comes from the call with positional argument
    `position` shifted by `offset` (the other outputs from the unshifted call): an off-by-one position on one
    side of a pair, for the duration of the block."""
    def wrap(f: Callable) -> Callable:
        def g(*a: Any, **k: Any) -> Any:
            out = list(f(*a, **k))
            b = list(a)
            b[position] = b[position] + offset
            out[output] = f(*b, **k)[output]
            return tuple(out)
        return g
    return wrapped(obj, attr, wrap)
