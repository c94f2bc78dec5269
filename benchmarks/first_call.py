"""Benchmark: bidirectional linear attention from its first call in a fresh process against its two GEMMs from
their first call in another fresh process (allocation, first touch and lazy imports included), and warm.

    python benchmarks/first_call.py [--threads 1] [--pairs 7] [--L 1024,4096,16384] [--dtype float32]

Each pair starts two fresh processes, in alternating order: one builds the inputs (H = 8, m' = 256, d_v = 64,
features given) and times the first ``linear_attention(phi_q, phi_k, v)`` then a second one; the other times
the first and second ``phi_q @ (phi_k^T [v, 1])`` with the transposed operand made contiguous and ``[v, 1]``
built beforehand (plain matmuls, as BLAS gives them). Times are process CPU times (one BLAS thread: the work,
not inflated when other processes take the core); the script prints the medians over the pairs and the ratios
linear / GEMMs, first call and warm, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

def run_child(which, L, dtype, threads):
    """In a fresh process (``--child``): build the inputs, time the first and the second call, print JSON."""
    import time

    import numpy as np
    from threadpoolctl import threadpool_limits

    from refattn.attention import linear_attention

    threadpool_limits(limits=threads)                     # after the imports: it limits loaded libraries only

    H, m, d_v = 8, 256, 64
    dt = np.dtype(dtype)
    rng = np.random.default_rng(0)
    phi_q = np.exp(0.3 * rng.standard_normal((1, H, L, m))).astype(dt)
    phi_k = np.exp(0.3 * rng.standard_normal((1, H, L, m))).astype(dt)
    v = rng.standard_normal((1, H, L, d_v)).astype(dt)
    if which == "gemm":
        kT = np.ascontiguousarray(np.swapaxes(phi_k, -1, -2))
        v_aug = np.concatenate([v, np.ones_like(v[..., :1])], -1)

        def fn():
            return phi_q @ (kT @ v_aug)
    else:
        def fn():
            return linear_attention(phi_q, phi_k, v)
    t0 = time.process_time()
    fn()
    t1 = time.process_time()
    fn()
    t2 = time.process_time()
    print(json.dumps([t1 - t0, t2 - t1]))


def child(which, L, dtype, threads):
    cmd = [sys.executable, __file__, "--child", which, "--L", str(L), "--dtype", dtype,
           "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--L", default="1024,4096,16384")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--child", choices=("gemm", "linear"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return run_child(args.child, int(args.L), args.dtype, args.threads)
    import numpy as np

    print(f"# benchmarks/first_call.py | {args.dtype} | BLAS threads {args.threads} | {args.pairs} pairs of "
          f"fresh processes | load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for L in (int(x) for x in args.L.split(",")):
        lin, gemm = [], []
        for i in range(args.pairs):
            order = ("gemm", "linear") if i % 2 == 0 else ("linear", "gemm")
            for which in order:
                (gemm if which == "gemm" else lin).append(child(which, L, args.dtype, args.threads))
        lin, gemm = np.array(lin), np.array(gemm)                  # (pairs, 2): first call, second call
        first = np.median(lin[:, 0]) / np.median(gemm[:, 0])
        warm = np.median(lin[:, 1]) / np.median(gemm[:, 1])
        print(f"L={L:6d}: first call linear {1e3 * np.median(lin[:, 0]):8.1f} ms, GEMMs "
              f"{1e3 * np.median(gemm[:, 0]):8.1f} ms: {first:.2f}   warm (second call) linear "
              f"{1e3 * np.median(lin[:, 1]):8.1f} ms, GEMMs {1e3 * np.median(gemm[:, 1]):8.1f} ms: "
              f"{warm:.2f}")
    print(f"# load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
