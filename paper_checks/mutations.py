"""Mutations: planted errors in what a claim's check consumes, which must move its verdict (its power).

A claim module registers mutations of its own check with the :func:`mutation` decorator on a context-manager
factory that perturbs, while it is active, the refattn function or the formula the check consumes::

    from paper_checks.mutations import mutation, patched, scaled

    @mutation("kl.eq5-gmm-rks", "features x 2")
    def _features_x2():
        return scaled(spectra_mod, "gmm_rks_features", 2.0)      # the check looks the name up at call time

    @mutation("kl.eq5-gmm-rks", "Sigma = S^T S")
    @contextlib.contextmanager
    def _transpose():
        with patched(spectra_mod, "gmm_rks_features", lambda x, mu, s, *a, **k: orig(x, mu, s.T, *a, **k)):
            yield

``python -m paper_checks --power`` (:mod:`paper_checks.power`) runs each claim once unmutated, then once under
each mutation. A mutation whose verdict does not move is a finding (the check lacks power against that error):
fix the check, never delete the mutation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable, ContextManager, Iterator

__all__ = ["Mutation", "MUTATIONS", "mutation", "patched", "scaled", "scaled_arg", "wrapped"]


@dataclasses.dataclass(frozen=True)
class Mutation:
    """A planted error: `apply()` returns a context manager inside which the check consumes the wrong
    thing."""

    name: str
    apply: Callable[[], ContextManager]
    size: str | None = None     # the size this mutation needs for power (None: the run's size)


MUTATIONS: dict[str, list[Mutation]] = {}


def mutation(claim_id: str, name: str, *, size: str | None = None
             ) -> Callable[[Callable[[], ContextManager]], Callable[[], ContextManager]]:
    """Register the decorated context-manager factory as mutation `name` of claim `claim_id`."""

    def deco(factory: Callable[[], ContextManager]) -> Callable[[], ContextManager]:
        lst = MUTATIONS.setdefault(claim_id, [])
        if any(m.name == name for m in lst):
            raise ValueError(f"mutation {name!r} of {claim_id!r} is registered twice")
        lst.append(Mutation(name, factory, size))
        return factory

    return deco


@contextlib.contextmanager
def patched(obj: Any, attr: str, new: Any) -> Iterator[None]:
    """Set ``obj.attr = new`` for the duration of the block (restored on exit, also on error)."""
    if not hasattr(obj, attr):
        raise AttributeError(f"patched: {obj!r} has no attribute {attr!r} to mutate")
    old = getattr(obj, attr)
    setattr(obj, attr, new)
    try:
        yield
    finally:
        setattr(obj, attr, old)


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
