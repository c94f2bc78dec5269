"""Power by mutation: ``python -m paper_checks --power`` runs every claim's mutations and reports what moved.

Each selected claim runs once unmutated, then once under each of its mutations (:mod:`paper_checks.mutations`)
at size ``tiny`` unless a mutation asks for more (or ``--size``); the table gives claim -> mutation -> verdict
-> moved?, in two sections: mutations of refattn's public functions (the power that counts) and mutations of
the check's own target, formula or table (they test the claim's rule), each with its own count in the summary
line. Mutations patch module attributes in the process that runs the check, so each (claim, mutation) run
applies its own patch, serially or in its own worker process.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ProcessPoolExecutor

from .catalog import load_all
from .mutations import MUTATIONS, Mutation
from .registry import Claim, Context, Result
from .runner import run_check

__all__ = ["run_power", "outcome", "power_summary", "power_table"]


def run_power(claims: list, *, seed: int = 0, size: str | None = None, default_size: str = "tiny",
              workers: int = 0, outcome_of=None) -> list[dict]:
    """Run every registered mutation of `claims`: one record per mutation with the baseline verdict, the
    mutated verdict (or the error it raised) and whether it moved. `size` overrides every mutation's own
    size. With `workers` > 0 the (claim, mutation) runs go to that many processes, each applying its own
    mutation (patches never cross processes); the records are the same and in the same order.
    ``outcome_of(claim_id, mutation_name, size, seed)`` (mutation None: unmutated), when given, supplies
    each run's :func:`outcome` instead of running it here: for a caller that shares runs between its users
    (the test suite)."""
    jobs = []                                   # (claim id, mutation name or None for the baseline, size)
    for c in claims:
        sizes = []
        for m in MUTATIONS.get(c.id, []):
            sz = size or m.size or default_size
            if sz not in sizes:
                sizes.append(sz)
                jobs.append((c.id, None, sz, seed))
            jobs.append((c.id, m.name, sz, seed))
    if outcome_of is not None:
        verdicts = [_verdict_of(outcome_of(*j)) for j in jobs]
    elif workers > 0:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            verdicts = list(pool.map(_job, jobs))
    else:
        verdicts = [_job(j) for j in jobs]
    base = {(cid, sz): v for (cid, name, sz, _), v in zip(jobs, verdicts, strict=True) if name is None}
    muts = {(cid, m.name): m for cid in {j[0] for j in jobs} for m in MUTATIONS[cid]}
    return [{"claim": cid, "mutation": name, "kind": muts[cid, name].kind, "bug": muts[cid, name].bug,
             "size": sz, "baseline": base[cid, sz], "verdict": v, "moved": v != base[cid, sz]}
            for (cid, name, sz, _), v in zip(jobs, verdicts, strict=True) if name is not None]


def _job(job: tuple) -> str:
    """One power run (module-level: the worker of ``workers`` > 0): the claim's verdict under the named
    mutation (None: unmutated)."""
    cid, name, sz, seed = job
    c = load_all()[cid]
    m = None if name is None else next(m for m in MUTATIONS[cid] if m.name == name)
    return _verdict(c, Context(seed=seed, size=sz, claim_id=cid), m)


def _verdict(c: Claim, ctx: Context, m: Mutation | None) -> str:
    """The check's verdict under mutation `m` (none: unmutated), or ``error: <type>`` when it raised (a raise
    counts as moved: the statement was not found to hold)."""
    return _verdict_of(outcome(c, ctx, m))


def _verdict_of(out: Result | str) -> str:
    return out if isinstance(out, str) else out.verdict


def outcome(claim: Claim, ctx: Context, mutation: Mutation | None) -> Result | str:
    """What the check of `claim` gives under `mutation` (None: unmutated).

    Parameters
    ----------
    claim : Claim
        The registered claim.
    ctx : Context
        Its seed and size.
    mutation : Mutation or None
        One of the claim's registered mutations, applied for the run.

    Returns
    -------
    Result or str
        The check's result, or the line ``error: <type>: <message>`` when it raised.
    """
    try:
        with (mutation.apply() if mutation is not None else contextlib.nullcontext()):
            return run_check(claim, ctx)
    except Exception as exc:  # noqa: BLE001 - an error under a mutation is reported, not fatal
        return f"error: {type(exc).__name__}: {str(exc)[:80]}"


def power_summary(rows: list[dict]) -> str:
    """The summary line: refattn mutations (with how many plant a realistic bug class) and check-target
    mutations, each as moved / total."""
    ref = [r for r in rows if r["kind"] == "refattn"]
    tgt = [r for r in rows if r["kind"] != "refattn"]
    real = [r for r in ref if r["bug"]]
    return (f"refattn mutations: {sum(r['moved'] for r in ref)}/{len(ref)} moved "
            f"({sum(r['moved'] for r in real)}/{len(real)} realistic bug classes); "
            f"check-target mutations: {sum(r['moved'] for r in tgt)}/{len(tgt)} moved "
            f"({len({r['claim'] for r in rows})} claims)")


def power_table(rows: list[dict]) -> str:
    """The rows as a plain-text table (claim, mutation, bug class, size, baseline, verdict, moved) in two
    sections, refattn mutations then check-target mutations, and :func:`power_summary`."""
    if not rows:
        return "no mutations registered for the selected claims"
    wc = max(len(r["claim"]) for r in rows)
    wm = max(len(r["mutation"]) for r in rows)
    wb = max(len("bug class"), *(len(r["bug"] or "-") for r in rows))
    head = (f"{'claim':{wc}s}  {'mutation':{wm}s}  {'bug class':{wb}s}  {'size':5s}  {'baseline':13s}  "
            f"{'verdict':13s}  moved?")
    lines = []
    for kind, title in (("refattn", "mutations of refattn's public functions (the power that counts)"),
                        ("target", "mutations of the check's own target, formula or table (test the rule)")):
        sect = [r for r in rows if (r["kind"] == "refattn") == (kind == "refattn")]
        lines += [f"== {title}: {sum(r['moved'] for r in sect)}/{len(sect)} moved", head]
        for r in sect:
            moved = "yes" if r["moved"] else "NO  <-- no power"
            lines.append(f"{r['claim']:{wc}s}  {r['mutation']:{wm}s}  {r['bug'] or '-':{wb}s}  "
                         f"{r['size']:5s}  {r['baseline']:13s}  {r['verdict']:13s}  {moved}")
        lines.append("")
    lines.append("power: " + power_summary(rows))
    return "\n".join(lines)
