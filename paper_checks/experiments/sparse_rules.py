"""The KL sparse-task claims along the budget ladder: each rung's effect, signed so that the paper's claim is
``effect > 0``, with its standard error, and the claims' rules under the verdict taxonomy.

The claims' pre-registered criteria (:data:`sparse_task.CRITERION`, :data:`eigenvalues.CRITERION`,
:data:`variance_metrics.CRITERION`) decide at one budget, the ladder's largest rung; their ``fails`` stands
only at the paper's compute or when the ladder shows the effect reversed on every rung and not shrinking with
the budget (:func:`paper_checks.rules.trained` and :func:`paper_checks.rules.budget_ladder`, ``n_se`` =
:data:`N_SE`); otherwise it reads ``not-reproduced``. This module turns one rung's numbers into that rung's
``{"effect", "se"}``; the experiments put the rungs into their criterion values
(``criterion_values["ladder"]``, one entry per rung with its compute against the paper's) and
:func:`ladder_rule` reads them there.

A claim with two parts (the sparsity claim's gradient part A and convergence part B; the variance claim's
correlations and its PI ordering) holds only if both do, so its rung is its weaker part. The parts are in
different units, so each is put in units of its own standard error (``z = effect / se``) and the rung's
effect is the smallest ``z`` with ``se = 1``; the parts' own effects and SEs are kept beside it. A part that
cannot be measured at a rung (a censored convergence time, one seed) has no ``z``: the rung is then the
other part's only when that part already contradicts the claim (``z < 0``; one contradicted part contradicts
a conjunction), else NaN (inconclusive: no rung with NaN counts as a reversal). Pure functions of numbers.
"""

from __future__ import annotations

import math

import numpy as np

from ..rules import value, with_rule
from .harness import experiment_rule

__all__ = ["N_SE", "A_FRACTION", "spearman_se", "weakest", "sparsity_rung", "eigen_rung", "variance_rung",
           "ladder_text", "ladder_rule"]

#: An effect counts, and a reversal counts, beyond this many standard errors (one-sided, ~2.3 % false alarms
#: per comparison for a normal estimate; the value :func:`paper_checks.rules.trained` uses by default).
N_SE = 2.0
#: Part A of the sparsity criterion: the share of (p, checkpoint) cells with std(PRF)/std(RKS) > 1 it needs.
A_FRACTION = 0.75


def spearman_se(rho: float, n: int) -> float:
    """Standard error of Spearman's rho over `n` points: Bonett and Wright's (2000) ``var(atanh rho) ~
    (1 + rho^2 / 2) / (n - 3)`` carried to the rho scale by the delta method (``d rho = (1 - rho^2) d
    atanh rho``); NaN below 4 points. Fieller et al.'s constant 1.06 / (n - 3) is too small for the strong
    correlations measured here (simulated at n = 14, rho ~ 0.93: SD of atanh rho 0.35; this formula 0.36,
    Fieller's 0.31; ``tests/paper_checks/test_sparse_ladder.py`` keeps the comparison)."""
    if n < 4:
        return float("nan")
    return (1 - rho ** 2) * math.sqrt((1 + rho ** 2 / 2) / (n - 3))


def _z(effect: float, se: float) -> float:
    return effect / se if np.isfinite(effect) and np.isfinite(se) and se > 0 else float("nan")


def weakest(parts: dict) -> dict:
    """The rung of a claim that needs every one of `parts` (``{name: {"effect", "se"}}``): the part with the
    smallest ``z = effect / se`` as ``{"effect": z, "se": 1.0, "part": name, "parts": parts}`` when every
    part has a ``z``, or when the smallest available ``z`` is negative (that part alone contradicts the
    claim); else ``effect`` NaN (a part not measured could still fail it)."""
    zs = {k: _z(float(v["effect"]), float(v["se"])) for k, v in parts.items()}
    known = {k: z for k, z in zs.items() if np.isfinite(z)}
    if known:
        name = min(known, key=known.get)
        if len(known) == len(zs) or known[name] < 0:
            return {"effect": known[name], "se": 1.0, "part": name, "parts": parts}
    return {"effect": float("nan"), "se": 1.0, "part": None, "parts": parts}


def sparsity_rung(cells: list[dict], log_t: dict) -> dict:
    """The sparsity claim's rung from its (p, checkpoint) `cells` (each with ``std_prf_over_rks``) and
    ``log_t = {(method, "lo" | "hi"): [log T per seed]}`` (T: steps to 40% validation accuracy at the
    smallest and largest p; a censored seed makes its cell None).

    Part A: ``f - 0.75`` with ``f`` the share of cells with ratio > 1; SE ``sqrt(0.75 * 0.25 / n)``, the
    spread of the share of ``n`` independent cells each above 1 with probability 0.75 (the criterion's
    boundary): a reversal by 2 SE is a share below ``0.75 - 2 sqrt(0.1875 / n)`` (0.5 with 12 cells).
    Part B: ``log(T_PRF(hi) / T_PRF(lo)) - log(T_RKS(hi) / T_RKS(lo))`` with each T the geometric seed mean
    (the criterion compares the two slowdowns' ratio with 1: this is its log); SE the root of the sum over the
    four cells of (seed variance of log T) / seeds (NaN with one seed: no spread to measure)."""
    n = len(cells)
    if n:
        f = float(np.mean([c["std_prf_over_rks"] > 1 for c in cells]))
        a = {"effect": f - A_FRACTION, "se": math.sqrt(A_FRACTION * (1 - A_FRACTION) / n), "cells": n}
    else:
        a = {"effect": float("nan"), "se": float("nan"), "cells": 0}
    cells_t = (("gmm-prf", "hi"), ("gmm-prf", "lo"), ("gmm-rks", "hi"), ("gmm-rks", "lo"))
    groups = [log_t.get(k) for k in cells_t]
    if any(g is None or len(g) == 0 for g in groups):
        b = {"effect": float("nan"), "se": float("nan"), "censored": True}
    else:
        m = [float(np.mean(g)) for g in groups]
        var = [float(np.var(g, ddof=1)) / len(g) if len(g) > 1 else float("nan") for g in groups]
        b = {"effect": (m[0] - m[1]) - (m[2] - m[3]), "se": math.sqrt(sum(var)), "censored": False}
    return weakest({"A": a, "B": b})


def eigen_rung(per_seed: dict) -> dict:
    """The eigenvalue claim's rung from ``per_seed = {method: [(relative mean, relative max) per seed]}``
    (the weight-decay-0.1 runs; eigenvalues over their initial value). Its four terms ``0.9 - mean`` and
    ``1 - max`` of each model, in one unit (a relative eigenvalue), each as the criterion aggregates (mean
    of the seeds' means, max of their maxima); the effect is the smallest term, its SE that term's seed SD /
    sqrt(seeds) (NaN with one seed)."""
    terms = {}
    for m, rows in per_seed.items():
        means = np.array([r[0] for r in rows], dtype=float)
        maxes = np.array([r[1] for r in rows], dtype=float)
        terms[f"{m} mean"] = (0.9 - float(means.mean()), 0.9 - means)
        terms[f"{m} max"] = (1.0 - float(maxes.max()), 1.0 - maxes)
    name = min(terms, key=lambda k: terms[k][0])
    effect, seeds = terms[name]
    se = float(seeds.std(ddof=1) / math.sqrt(seeds.size)) if seeds.size > 1 else float("nan")
    return {"effect": effect, "se": se, "part": name}


def variance_rung(spearman: dict, n_points: int, pi_rks: list, pi_prf: list) -> dict:
    """The variance-metrics claim's rung: the correlations' part ``min rho - 0.5`` over the three pairs
    (``spearman = {pair: rho}`` over `n_points` points), SE :func:`spearman_se` of the smallest rho, and
    the ordering part ``mean PI(GMM-PRF) - mean PI(GMM-RKS)`` over the learned points of each (`pi_prf`,
    `pi_rks`), SE ``sqrt(var_prf / n_prf + var_rks / n_rks)`` (NaN for an arm of one point); the rung is
    the weaker (:func:`weakest`)."""
    if spearman and n_points > 3 and all(np.isfinite(v) for v in spearman.values()):
        rho = min(spearman.values())
        c = {"effect": rho - 0.5, "se": spearman_se(rho, n_points)}
    else:
        c = {"effect": float("nan"), "se": float("nan")}
    if pi_rks and pi_prf:
        a, b = np.asarray(pi_rks, dtype=float), np.asarray(pi_prf, dtype=float)
        var = [x.var(ddof=1) / x.size if x.size > 1 else float("nan") for x in (a, b)]
        o = {"effect": float(b.mean() - a.mean()), "se": float(math.sqrt(sum(var)))}
    else:
        o = {"effect": float("nan"), "se": float("nan")}
    return weakest({"correlations": c, "pi_order": o})


def ladder_text(rungs: list[dict]) -> str:
    """'; ladder effect (SE) at 1/4 (f of the paper's) e (s) [part], ...' for a summary (empty without
    rungs)."""
    if not rungs:
        return ""
    return "; ladder effect (SE) at " + ", ".join(
        f"{r['rung']} ({value(r, 'budget_fraction'):.2g} of the paper's) {value(r, 'effect'):+.3f} "
        f"({value(r, 'se'):.3f})"
        + (f" [{r['part']}]" if r.get("part") else "") for r in rungs)


def ladder_rule(exp_decide, criterion: str):
    """The claim's rule: :func:`harness.experiment_rule` (the criterion at the largest rung, under the
    taxonomy) with the ladder read from ``evidence["criterion_values"]["ladder"]`` (the experiment's record
    carries it there; an evidence without one, such as a record from before the ladder, is decided as
    before). Its sentence is the inner rule's, whose taxonomy part names the ladder."""
    inner = experiment_rule(exp_decide, criterion)

    def decide(ev: dict) -> str:
        rungs = (ev.get("criterion_values") or {}).get("ladder") or []
        return inner({**ev, "ladder": rungs})

    return with_rule(decide, inner.rule)          # the same sentence: the committed records quote it
