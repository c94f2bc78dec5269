"""Benchmark: S2 (Horn et al. clipped relative encodings) forward + backward on a 2-D grid, the adjoint's
class sums built once (today) against the adjoint that built all k + 1 class sums per class (before), same
process.

    python benchmarks/s2_grid.py [--threads 1] [--rounds 7] [--quick]

Two workloads, k = 6 (the paper's clip): the image model's positional heads (batch 32, 2 heads, 14 x 14
grid, d = d_v = 16, FAVOR+ m = 64 and the exact kernel) and the rpe.py workload (8 heads, 64 x 64 grid,
d = d_v = 64, m = 256). "before" registers the old adjoint, ``sum_r ClassSums(u[..., r, :])[..., r, :]``
(every class sum of slice r, one kept: O(L k^3)), as a dispatch backend for ``"s2_window_sums"``; "after" is
the reference. Prints the minimum and median of interleaved rounds and their ratio, the BLAS threads and the
load average.
"""
# ruff: noqa: B023 -- every timed lambda runs inside the loop iteration that defines it

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from refattn import _dispatch
from refattn.random import draw_gaussian
from refattn.rpe.s2_clipped import s2_attention_bwd, s2_attention_fwd

REFERENCE = _dispatch.reference("s2_window_sums")


def old_window_sums(u, k, grid, *, adjoint=False):
    """The class sums with the adjoint of before: every class sum of slice r built, class r kept."""
    if not adjoint or grid is None:
        return REFERENCE(u, k, grid, adjoint=adjoint)
    out = None
    for r in range(k + 1):
        part = REFERENCE(u[..., r, :], k, grid)[..., r, :]                     # all k + 1 sums, one kept
        out = part if out is None else out + part
    return out


_dispatch.register("s2_adjoint_before", "s2_window_sums", old_window_sums)


def interleaved(fns, rounds):
    """Minimum and median of each function's process CPU time over `rounds` rounds calling them in turn
    (one BLAS thread: the CPU time is the work, not inflated by other processes taking the core)."""
    for fn in fns:
        fn()
    ts = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            ts[i].append(time.process_time() - t0)
    return [min(t) for t in ts], [float(np.median(t)) for t in ts]


def fwd_bwd(q, v, w, omega, k, grid, dy):
    def run():
        _, cache = s2_attention_fwd(q, v, w, k=k, grid=grid, omega=omega)
        return s2_attention_bwd(dy, cache, omega_grad=False)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(0)
    k = 6
    workloads = [("image: B=32, 2 heads, 14x14, d=16", (32, 2), (14, 14), 16, 64)]
    if not args.quick:
        workloads.append(("rpe.py: 8 heads, 64x64, d=64", (8,), (64, 64), 64, 256))
    rounds = 2 if args.quick else args.rounds
    with threadpool_limits(limits=args.threads):
        blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"# benchmarks/s2_grid.py | {platform.processor() or platform.machine()} | "
              f"numpy {np.__version__} | BLAS threads {blas} | load {load} | k = {k} | "
              f"float32 | forward + backward, process CPU time, min / median of {rounds} interleaved "
              "rounds (ms)")
        for name, batch, grid, d, m in workloads:
            L = grid[0] * grid[1]
            q = (0.5 * rng.standard_normal(batch + (L, d))).astype(np.float32)
            v = rng.standard_normal(batch + (L, d)).astype(np.float32)
            dy = rng.standard_normal(batch + (L, d)).astype(np.float32)
            w = (0.3 * rng.standard_normal((batch[-1], k + 1, d))).astype(np.float32)
            for kernel, omega in (("FAVOR+ m=%d" % m, draw_gaussian(rng, m, d).astype(np.float32)),
                                  ("exact", None)):
                run = fwd_bwd(q, v, w, omega, k, grid, dy)

                def before():
                    with _dispatch.use_backend("s2_adjoint_before"):
                        return run()

                g_new, g_old = run(), before()
                same = all(np.array_equal(a, b) for a, b in zip(g_new, g_old, strict=True) if a is not None)
                (t_new, t_old), (m_new, m_old) = interleaved([run, before], rounds)
                print(f"{name:36s} {kernel:12s} before {1e3 * t_old:8.2f} / {1e3 * m_old:8.2f}   after "
                      f"{1e3 * t_new:8.2f} / {1e3 * m_new:8.2f}   after/before {t_new / t_old:5.2f} (min) "
                      f"{m_new / m_old:5.2f} (median)   gradients bit-identical: {same}")


if __name__ == "__main__":
    main()
