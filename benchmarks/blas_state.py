"""Benchmark: the float32 row contraction's speed depends on what OpenBLAS has run before it in the process.

    python benchmarks/blas_state.py [--threads 1] [--processes 3] [--L 4096,16384] [--blocks 256,512,1024,0]

``contract_rows`` (``refattn._xp``) sums ``a^T b`` over the long row axis in blocks of
``CONTRACT_BLOCK_ROWS`` rows (float32). Each child process sets the block size (0: one unblocked GEMM), builds
the inputs of bidirectional linear attention (H = 8, m' = 256, d_v = 64, features given), and times
``linear_attention(phi_q, phi_k, v)``:

* **fresh**: the process's first BLAS calls are linear attention's own (three calls, the last two timed);
* **after**: then one GEMM with a long inner axis runs (``(65, 4096) @ (4096, 65)``, a few milliseconds), and
  the same call is timed again (two calls).

The two states are timed in the same process, fresh first (the order cannot be interleaved: the state does
not go back). Times are process CPU time, one BLAS thread; the script prints the medians over the processes
and the ratio after / fresh per block size, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def run_child(L, block, threads):
    """In a fresh process (``--child``): time linear attention fresh, then after one long-inner-axis GEMM."""
    import time

    import numpy as np
    from threadpoolctl import threadpool_limits

    from refattn import _xp
    from refattn.attention import linear_attention

    threadpool_limits(limits=threads)
    if block:
        _xp.CONTRACT_BLOCK_ROWS = block
    else:
        _xp.CONTRACT_BLOCK_ROWS = 1 << 62                        # never blocked: one GEMM over all rows
    H, m, d_v = 8, 256, 64
    rng = np.random.default_rng(0)
    phi_q = np.exp(0.3 * rng.standard_normal((1, H, L, m))).astype(np.float32)
    phi_k = np.exp(0.3 * rng.standard_normal((1, H, L, m))).astype(np.float32)
    v = rng.standard_normal((1, H, L, d_v)).astype(np.float32)

    def cpu(n):
        ts = []
        for _ in range(n):
            t0 = time.process_time()
            linear_attention(phi_q, phi_k, v)
            ts.append(time.process_time() - t0)
        return min(ts[1:]) if n > 1 else ts[0]

    fresh = cpu(3)
    np.ones((65, 4096), np.float32) @ np.ones((4096, 65), np.float32)
    after = cpu(2)
    print(json.dumps([fresh, after]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--L", default="4096,16384")
    ap.add_argument("--blocks", default="256,512,1024,0", help="block rows of contract_rows (0: unblocked)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        return run_child(int(args.L), args.child, args.threads)
    import numpy as np

    print(f"# benchmarks/blas_state.py | float32 | BLAS threads {args.threads} | {args.processes} fresh "
          f"processes per row | load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for L in (int(x) for x in args.L.split(",")):
        for block in (int(b) for b in args.blocks.split(",")):
            cmd = [sys.executable, __file__, "--child", str(block), "--L", str(L),
                   "--threads", str(args.threads)]
            runs = np.array([json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True)
                                        .stdout.strip().splitlines()[-1]) for _ in range(args.processes)])
            fresh, after = np.median(runs[:, 0]), np.median(runs[:, 1])
            name = f"{block} rows" if block else "unblocked"
            print(f"L={L:6d} contract_rows {name:>10s}: fresh {1e3 * fresh:8.1f} ms, after a long-inner-axis "
                  f"GEMM {1e3 * after:8.1f} ms: after / fresh {after / fresh:.2f}")
    print(f"# load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
