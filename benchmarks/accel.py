"""Benchmark: numba kernels (accel/numba) against the NumPy core and same-run GEMM rates.

    python benchmarks/accel.py [--quick] [--threads N] [--dtypes float32,float64] [--L 1024,4096,16384]

Prints, for H = 8 heads, d = 64, m' = 256 features, d_v = 64 (``--quick``: L = 256, 1024, m' = 64, fewer
repeats):

1. the causal scan with features given, forward and backward: numba time, its flop rate on its own flop count
   (forward ``4 L m' d_v`` per head, backward ``10 L m' d_v``: a forward sweep recomputing the state plus the
   reverse sweep) as a fraction of the same-run GEMM rate (a square GEMM in the same dtype), the NumPy core's
   time (chunked reference, default chunk) and the speed-up, and the peak traced memory of each (tracemalloc;
   the numba kernels allocate their state through NumPy, so tracemalloc sees every byte);
2. FAVOR+ end to end (positive features from q, k; forward only): numba causal (fused feature kernel + scan,
   inside ``accel.use("numba")``) against the NumPy core's causal and bidirectional paths;
3. FWHT: numba vs the NumPy reference vs a dense product with the Hadamard matrix, d in {64, 256, 1024}.

BLAS and numba threads are pinned to ``--threads`` (default 1) and printed. Times are medians of repeats;
every
ratio compares numbers measured in this one run.
"""
# ruff: noqa: B023 -- every timed lambda runs inside the loop iteration that defines it

from __future__ import annotations

import argparse
import os
import platform
import sys
import tracemalloc

# This script is named accel.py: run as a script, its own directory comes first on sys.path and
# ``import accel`` would import the script. Put the repository root there instead.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import numpy as np  # noqa: E402
from benchmarks._timing import timeit  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

import accel  # noqa: E402
import refattn  # noqa: E402
from refattn.attention.favor import favor_attention_fwd  # noqa: E402
from refattn._dispatch import reference  # noqa: E402
from refattn.attention.linear import DEFAULT_CHUNK_SIZE  # noqa: E402

_causal_fwd_reference = reference("linear_attention.causal_fwd")
_causal_bwd_reference = reference("linear_attention.causal_bwd")




def peak_traced(fn):
    """Peak bytes traced by tracemalloc while `fn` runs (beyond what was allocated before)."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def gemm_rate(dtype, n, repeat):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
    t = timeit(lambda: a @ b, repeat=repeat)
    return 2.0 * n ** 3 / t


def mb(x):
    return f"{x / 2**20:8.1f}"


def bench_causal(args, H, m, d_v):
    from accel.numba.causal import causal_bwd, causal_fwd

    print(f"\n## causal scan, features given (H = {H}, m' = {m}, d_v = {d_v}; "
          f"numpy chunk = {DEFAULT_CHUNK_SIZE})")
    print("dtype    L      pass  numba_s   GF/s  %GEMM  numpy_s  speedup  numba_MB  numpy_MB")
    for dt in args.dtypes:
        gem = gemm_rate(dt, args.gemm_n, args.repeat)
        rng = np.random.default_rng(0)
        for L in args.L:
            pq = np.exp(rng.standard_normal((H, L, m)) * 0.3).astype(dt)
            pk = np.exp(rng.standard_normal((H, L, m)) * 0.3).astype(dt)
            ua = np.concatenate([rng.standard_normal((H, L, d_v)), np.ones((H, L, 1))], axis=-1).astype(dt)
            s = rng.standard_normal((H, L)).astype(dt)
            g = rng.standard_normal(ua.shape).astype(dt)
            M = causal_fwd(pq, pk, ua, s, DEFAULT_CHUNK_SIZE)[1]
            rows = [
                ("fwd", 4.0 * H * L * m * d_v,
                 lambda: causal_fwd(pq, pk, ua, s, DEFAULT_CHUNK_SIZE),
                 lambda: _causal_fwd_reference(pq, pk, ua, s, DEFAULT_CHUNK_SIZE)),
                ("bwd", 10.0 * H * L * m * d_v,
                 lambda: causal_bwd(g, pq, pk, ua, s, M, DEFAULT_CHUNK_SIZE),
                 lambda: _causal_bwd_reference(g, pq, pk, ua, s, M, DEFAULT_CHUNK_SIZE)),
            ]
            for name, flops, fnb, fref in rows:
                tn = timeit(fnb, repeat=args.repeat)
                tr = timeit(fref, repeat=args.repeat)
                mn, mr = peak_traced(fnb), peak_traced(fref)
                rate = flops / tn
                print(f"{dt:8s} {L:6d} {name:4s} {tn:8.4f} {rate / 1e9:6.1f} {100 * rate / gem:5.0f}% "
                      f"{tr:8.4f} {tr / tn:7.2f}x {mb(mn)}  {mb(mr)}")
        print(f"  ({dt} GEMM {args.gemm_n}^3: {gem / 1e9:.1f} GF/s; memory: peak traced during the call, "
              f"outputs included)")


def bench_favor(args, H, d, m, d_v):
    L = max(args.L)
    print(f"\n## FAVOR+ end to end, forward (H = {H}, d = {d}, m = {m}, d_v = {d_v}, L = {L})")
    print("dtype    numba_causal_s  numpy_causal_s  numpy_bidir_s  numba_causal/numpy_bidir")
    for dt in args.dtypes:
        rng = np.random.default_rng(0)
        q, k = (rng.standard_normal((H, L, d)).astype(dt) for _ in range(2))
        v = rng.standard_normal((H, L, d_v)).astype(dt)
        omega = rng.standard_normal((m, d)).astype(dt)

        def numba_causal():
            with accel.use("numba"):
                return favor_attention_fwd(q, k, v, omega, causal=True)

        tn = timeit(numba_causal, repeat=args.repeat)
        tc = timeit(lambda: favor_attention_fwd(q, k, v, omega, causal=True), repeat=args.repeat)
        tb = timeit(lambda: favor_attention_fwd(q, k, v, omega, causal=False), repeat=args.repeat)
        print(f"{dt:8s} {tn:14.4f}  {tc:14.4f}  {tb:13.4f}  {tn / tb:10.2f}")


def bench_fwht(args):
    from accel.numba.fwht import fwht
    _fwht_reference = reference("fwht")

    xp = refattn._xp.namespace(np.empty(0))
    print(f"\n## FWHT on {args.fwht_rows} rows (x H along the last axis)")
    print("dtype      d   numba_s   numpy_s  dense_s  numpy/numba  dense/numba  fastest")
    for dt in args.dtypes:
        rng = np.random.default_rng(0)
        for D in (64, 256, 1024):
            x = rng.standard_normal((args.fwht_rows, D)).astype(dt)
            Hm = np.array([[1.0]])
            while Hm.shape[0] < D:
                Hm = np.block([[Hm, Hm], [Hm, -Hm]])
            Hm = Hm.astype(dt)
            tn = timeit(lambda: fwht(x), repeat=args.repeat)
            tr = timeit(lambda: _fwht_reference(x, xp=xp), repeat=args.repeat)
            td = timeit(lambda: x @ Hm, repeat=args.repeat)
            best = min((tn, "numba"), (tr, "numpy"), (td, "dense"))[1]
            print(f"{dt:8s} {D:5d} {tn:9.5f} {tr:9.5f} {td:8.5f} {tr / tn:11.2f}x {td / tn:11.2f}x  {best}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (checks that the script runs)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--L", default=None, help="comma-separated sequence lengths")
    args = ap.parse_args()
    args.dtypes = args.dtypes.split(",")
    if args.quick:
        args.L = [int(x) for x in (args.L or "256,1024").split(",")]
        m, args.repeat, args.gemm_n, args.fwht_rows = 64, 2, 512, 1024
    else:
        args.L = [int(x) for x in (args.L or "1024,4096,16384").split(",")]
        m, args.repeat, args.gemm_n, args.fwht_rows = 256, 3, 2048, 8 * 4096
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    with threadpool_limits(limits=args.threads):
        blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
        cpu = platform.processor() or platform.machine()
        print(f"# benchmarks/accel.py {'--quick ' if args.quick else ''}| {cpu}"
              f" | numpy {np.__version__}, numba {numba.__version__} | BLAS threads {blas} | numba threads "
              f"{numba.get_num_threads()}")
        bench_causal(args, H=8, m=m, d_v=64)
        bench_favor(args, H=8, d=64, m=m, d_v=64)
        bench_fwht(args)
        print(f"\n(numba threading layer: {numba.threading_layer()})")


if __name__ == "__main__":
    main()
