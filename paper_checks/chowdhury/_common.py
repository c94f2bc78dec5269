"""Helpers shared by the Chowdhury et al. claim modules: replicate reshaping, SPD draws, batched Monte Carlo
through ``ctx.map``, the MSE-vs-M figure and the reproducibility of scalar z statistics.

Monte Carlo statistics come from :mod:`validation.montecarlo` only (``mean_test``, ``scalar_z``); nothing here
computes a standard error by hand.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from validation.montecarlo import mean_test, scalar_z

from ..figures import new_figure, save_figure
from ..registry import Context

N_SE = 5.0          # every Monte Carlo decision in these modules: 5 standard errors
BATCHES = 4         # fixed replicate batches of the heavy Monte Carlo loops (never the worker count)

__all__ = ["N_SE", "BATCHES", "replicates", "spd", "zscore", "batched", "mse_figure", "max_abs_z"]


def replicates(phi_q: np.ndarray, phi_k: np.ndarray, parts: int, groups: int, n: int) -> np.ndarray:
    """Per-replicate estimates phi_q . phi_k, (n, Lq, Lk), from features whose columns are
    (parts, groups, n, per): `parts` 2 for RKS [cos, sin], 1 for PRF; `groups` mixture components."""
    per = phi_q.shape[-1] // (parts * groups * n)
    a = phi_q.reshape(phi_q.shape[0], parts, groups, n, per)
    b = phi_k.reshape(phi_k.shape[0], parts, groups, n, per)
    return np.einsum("ipgrj,kpgrj->rik", a, b) * n


def spd(rng: np.random.Generator, d: int, lo: float, hi: float) -> np.ndarray:
    """A random SPD matrix with eigenvalues uniform in [lo, hi] (not idempotent unless lo = hi = 1)."""
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (Q * rng.uniform(lo, hi, d)) @ Q.T


def zscore(samples: Any, expected: float) -> tuple[float, float, float]:
    """(mean, se, |z|) of scalar replicates against `expected` (``validation.montecarlo.scalar_z``)."""
    m, se, z = scalar_z(samples, expected)
    return m, se, abs(z)


def max_abs_z(samples: np.ndarray, expected: Any) -> tuple[float, float]:
    """(max |z| over entries with positive SE, detectable = max 5 SE) of (n, ...) replicates against
    `expected` (``validation.montecarlo.mean_test``; zero-SE entries are compared exactly: a mismatch there
    returns z = inf)."""
    r = mean_test(samples, expected, n_se=N_SE)
    z = r.z if r.zero_se_max_dev == 0.0 else float("inf")
    return z, r.detectable


def batched(ctx: Context, fn: Callable[[tuple], np.ndarray], n: int, *args: Any, key: int = 0,
            batches: int = BATCHES) -> np.ndarray:
    """Run `n` Monte Carlo replicates as `batches` fixed tasks through ``ctx.map`` and concatenate them in
    task order. Task b is ``(seed_sequence_b, n_b, *args)``; `fn` (a module-level, picklable function) returns
    the n_b replicates drawn from ``numpy.random.default_rng(seed_sequence_b)``. The result does not depend on
    the executor or its worker count."""
    sizes = [n // batches + (1 if b < n % batches else 0) for b in range(batches)]
    seqs = ctx.seed_sequences(batches, 0x6D63, key)
    parts = ctx.map(fn, [(s, nb, *args) for s, nb in zip(seqs, sizes, strict=True)])
    return np.concatenate([np.asarray(p) for p in parts], axis=0)


def mse_figure(ctx: Context, name: str, Ms, measured, formulas: dict, title: str) -> list:
    """Measured MSE (+- N_SE se) against M with the formula curves; [] unless --report."""
    path = ctx.figure_path(name)
    if path is None:
        return []
    fig, ax = new_figure(figsize=(5, 3.5))
    ax.errorbar(Ms, [a for a, _ in measured], yerr=[N_SE * b for _, b in measured], fmt="o", color="k",
                label="measured MSE (+- 5 SE)")
    for lab, vals in formulas.items():
        ax.plot(Ms, vals, "--", label=lab)
    ax.set(xscale="log", yscale="log", xlabel="M (random features)", ylabel="MSE", title=title)
    ax.legend(fontsize=7)
    return [save_figure(fig, path, dpi=110)]
