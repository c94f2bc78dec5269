"""Power by mutation: planted errors in what a claim's check consumes must move its verdict.

A claim module registers mutations of its own check with the :func:`mutation` decorator on a context-manager
factory that perturbs, while it is active, the refattn function or the formula the check consumes::

    from paper_checks.power import mutation, patched, scaled

    @mutation("kl.eq5-gmm-rks", "features x 2")
    def _features_x2():
        return scaled(spectra_mod, "gmm_rks_features", 2.0)      # the check looks the name up at call time

    @mutation("kl.eq5-gmm-rks", "Sigma = S^T S")
    @contextlib.contextmanager
    def _transpose():
        with patched(spectra_mod, "gmm_rks_features", lambda x, mu, s, *a, **k: orig(x, mu, s.T, *a, **k)):
            yield

``python -m paper_checks --power`` (size ``tiny`` unless a mutation asks for more, or ``--size``) runs each
claim once unmutated, then once under each mutation, and prints claim -> mutation -> verdict -> moved?. A
mutation whose verdict does not move is a finding (the check lacks power against that error): fix the check,
never delete the mutation. Mutations patch module attributes in this process, so power runs are serial
per claim.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable, ContextManager, Iterator

__all__ = ["Mutation", "MUTATIONS", "mutation", "patched", "scaled", "scaled_arg", "wrapped", "run_power",
           "power_table"]


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


def run_power(claims: list, *, seed: int = 0, size: str | None = None, default_size: str = "tiny",
              workers: int = 0) -> list[dict]:
    """Run every registered mutation of `claims`: one record per mutation with the baseline verdict, the
    mutated verdict (or the error it raised) and whether it moved. `size` overrides every mutation's own
    size. With `workers` > 0 the (claim, mutation) runs go to that many processes, each applying its own
    mutation (patches never cross processes); the records are the same and in the same order."""
    jobs = []                                   # (claim id, mutation name or None for the baseline, size)
    for c in claims:
        sizes = []
        for m in MUTATIONS.get(c.id, []):
            sz = size or m.size or default_size
            if sz not in sizes:
                sizes.append(sz)
                jobs.append((c.id, None, sz, seed))
            jobs.append((c.id, m.name, sz, seed))
    if workers > 0:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            verdicts = list(pool.map(_job, jobs))
    else:
        verdicts = [_job(j) for j in jobs]
    base = {(cid, sz): v for (cid, name, sz, _), v in zip(jobs, verdicts, strict=True) if name is None}
    return [{"claim": cid, "mutation": name, "size": sz, "baseline": base[cid, sz], "verdict": v,
             "moved": v != base[cid, sz]}
            for (cid, name, sz, _), v in zip(jobs, verdicts, strict=True) if name is not None]


def _job(job: tuple) -> str:
    """One power run (module-level: the worker of ``workers`` > 0): the claim's verdict under the named
    mutation (None: unmutated)."""
    from ._claims import Context, load_all, run_check

    cid, name, sz, seed = job
    c = load_all()[cid]
    m = None if name is None else next(m for m in MUTATIONS[cid] if m.name == name)
    return _verdict(c, Context(seed=seed, size=sz, claim_id=cid), m, run_check)


def _verdict(c: Any, ctx: Any, m: Mutation | None, run_check: Callable) -> str:
    """The check's verdict under mutation `m` (none: unmutated), or ``error: <type>`` when it raised (a raise
    counts as moved: the statement was not found to hold)."""
    try:
        with (m.apply() if m is not None else contextlib.nullcontext()):
            return run_check(c, ctx).verdict
    except Exception as exc:  # noqa: BLE001 - an error under a mutation is reported, not fatal
        return f"error: {type(exc).__name__}: {str(exc)[:80]}"


def power_table(rows: list[dict]) -> str:
    """The rows as a plain-text table (claim, mutation, size, baseline, verdict, moved)."""
    if not rows:
        return "no mutations registered for the selected claims"
    wc = max(len(r["claim"]) for r in rows)
    wm = max(len(r["mutation"]) for r in rows)
    lines = [f"{'claim':{wc}s}  {'mutation':{wm}s}  {'size':5s}  {'baseline':13s}  {'verdict':13s}  moved?"]
    for r in rows:
        lines.append(f"{r['claim']:{wc}s}  {r['mutation']:{wm}s}  {r['size']:5s}  {r['baseline']:13s}  "
                     f"{r['verdict']:13s}  {'yes' if r['moved'] else 'NO  <-- no power'}")
    moved = sum(r["moved"] for r in rows)
    lines.append(f"power: {moved}/{len(rows)} mutations moved their claim's verdict "
                 f"({len({r['claim'] for r in rows})} claims)")
    return "\n".join(lines)
