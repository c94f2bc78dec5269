"""Benchmark: numba kernels (accel/numba) against the NumPy core and same-run GEMM rates.

    python benchmarks/accel.py [--quick] [--threads N] [--dtypes float32,float64] [--L 4096,16384]
                               [--rounds R] [--sections causal,blocks,favor,fwht] [--blocks 32,64,...]

Prints, for H = 8 heads, d = 64, m' = 256 features, d_v = 64 (``--quick``: L = 256, 1024, m' = 64):

1. ``causal``: the causal scan with features given, ``linear_attention_fwd`` and ``linear_attention_bwd``
   inside ``accel.use("numba")`` (the time-blocked numba scan) and outside (the NumPy core, which keeps a few
   states in the forward for its one-sweep backward), for row log-scales and for per-feature frames (the
   FAVOR+ path): times, the numba scan's flop rate on its own flop count (``scan_flops``) as a fraction of
   the same-run GEMM rate (a square GEMM in the same dtype), the speed-up, and the peak traced memory of each
   (tracemalloc; the numba kernels allocate their state and blocks through NumPy, so tracemalloc sees every
   byte);
2. ``blocks``: a sweep of the numba scan's ``TIME_BLOCK`` (frames, forward + backward), against NumPy;
3. ``favor``: FAVOR+ end to end (positive features from q, k), forward and forward + backward: numba causal
   (fused feature kernels + scan, inside ``accel.use("numba")``) against the NumPy core's causal and
   bidirectional paths;
4. ``fwht``: numba vs the NumPy reference vs a dense product with the Hadamard matrix, d in {64, 256, 1024}.

BLAS (numpy's and the one SciPy ships, which numba's ``np.dot`` calls) and numba threads are pinned to
``--threads`` (default 1) and printed. Sections 1-3 time their calls in interleaved rounds (every variant
once per round) and report the minimum over rounds, so a ratio compares calls made under the same load; the
load average is printed with each section (the machine is shared). Every ratio compares numbers measured in
this one run.
"""
# ruff: noqa: B023 -- every timed lambda runs inside the loop iteration that defines it

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
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
from refattn._dispatch import reference  # noqa: E402
from refattn.attention.favor import favor_attention_bwd, favor_attention_fwd  # noqa: E402
from refattn.attention.linear import DEFAULT_CHUNK_SIZE, linear_attention_bwd, linear_attention_fwd  # noqa: E402


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


def _rounds(fns, rounds):
    """Interleaved timing: each round calls every function once (after one warm-up call each); returns the
    minimum over rounds per name. Ratios of these minima compare calls made under the same load. Odd rounds
    run in reverse order: on this VM a call that follows one with many small page faults (the NumPy causal
    forward) can pay ~1 s of system time in huge-page faults (measured with getrusage at L = 16384), so no
    variant may always sit in that position."""
    for fn in fns.values():
        fn()
    best = {name: float("inf") for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            fn = fns[name]
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def _load():
    return "load %.2f %.2f %.2f" % os.getloadavg()


def scan_flops(L, m, D, C, backward):
    """The time-blocked scan's flop count per (batch, head) (accel/numba/causal.py, module docstring)."""
    n, tail = divmod(L, C)
    chunks = [C] * n + ([tail] if tail else [])
    if backward:
        return float(sum(10 * c * m * D + 2 * c * c * (3 * m + 3 * D) for c in chunks))
    return float(sum(4 * c * m * D + 2 * c * c * (m + D) for c in chunks))


def bench_causal(args, H, m, d_v):
    """linear_attention_fwd / _bwd with features given, inside accel.use("numba") and outside (the NumPy core:
    the chunked reference that keeps states for its backward), interleaved in one process."""
    from accel.numba import causal

    C = causal.TIME_BLOCK
    print(f"\n## causal scan, features given: linear_attention_fwd / _bwd (H = {H}, m' = {m}, d_v = {d_v}; "
          f"numpy chunk = {DEFAULT_CHUNK_SIZE}, numba TIME_BLOCK = {C}; "
          f"min of {args.rounds} interleaved rounds)")
    print("dtype    L      scales  pass  numba_s   GF/s  %GEMM  numpy_s  speedup  numba_MB  numpy_MB")
    for dt in args.dtypes:
        gem = gemm_rate(dt, args.gemm_n, args.repeat)
        rng = np.random.default_rng(0)
        for L in args.L:
            # frames as FAVOR+ makes them: prefix maxima of the keys' exponents (few records per column)
            pq, pk, v, dy, frames = _scan_inputs(rng, H, L, m, d_v, dt)
            for scales, s in (("rows", rng.standard_normal((H, L)).astype(dt)), ("frames", frames)):
                kw = dict(causal=True, k_log_scale=s)

                def fwd_nb():
                    with accel.use("numba"):
                        return linear_attention_fwd(pq, pk, v, **kw)

                cache_nb = fwd_nb()[1]
                cache_np = linear_attention_fwd(pq, pk, v, **kw)[1]

                def bwd_nb():
                    with accel.use("numba"):
                        return linear_attention_bwd(dy, cache_nb)

                fns = {"fwd_nb": fwd_nb, "fwd_np": lambda: linear_attention_fwd(pq, pk, v, **kw),
                       "bwd_nb": bwd_nb, "bwd_np": lambda: linear_attention_bwd(dy, cache_np)}
                best = _rounds(fns, args.rounds)
                for name in ("fwd", "bwd"):
                    tn, tr = best[name + "_nb"], best[name + "_np"]
                    mn, mr = peak_traced(fns[name + "_nb"]), peak_traced(fns[name + "_np"])
                    rate = H * scan_flops(L, m, d_v + 1, C, name == "bwd") / tn
                    print(f"{dt:8s} {L:6d} {scales:7s} {name:4s} {tn:8.4f} {rate / 1e9:6.1f} "
                          f"{100 * rate / gem:5.0f}% {tr:8.4f} {tr / tn:7.2f}x {mb(mn)}  {mb(mr)}")
        print(f"  ({dt} GEMM {args.gemm_n}^3: {gem / 1e9:.1f} GF/s; memory: peak traced during the call, "
              f"outputs and, for fwd, the cache included; {_load()})")


def _scan_inputs(rng, H, L, m, d_v, dt):
    """Features given: ``phi_q, phi_k (H, L, m)`` positive, ``v, dy (H, L, d_v)`` and frames ``(H, L, m)``
    (prefix maxima, as FAVOR+ keys make them)."""
    pq = np.exp(rng.standard_normal((H, L, m)) * 0.3).astype(dt)
    pk = np.exp(rng.standard_normal((H, L, m)) * 0.3).astype(dt)
    v = rng.standard_normal((H, L, d_v)).astype(dt)
    dy = rng.standard_normal((H, L, d_v)).astype(dt)
    frames = np.maximum.accumulate(rng.standard_normal((H, L, m)), axis=-2).astype(dt)
    return pq, pk, v, dy, frames


def bench_blocks(args, H, m, d_v):
    """TIME_BLOCK sweep of the numba frames scan (forward + backward), against the NumPy core."""
    from accel.numba import causal

    blocks = [int(b) for b in args.blocks.split(",")]
    print(f"\n## numba TIME_BLOCK sweep: frames scan fwd + bwd, features given (H = {H}, m' = {m}, "
          f"d_v = {d_v}; min of {args.rounds} interleaved rounds)")
    print("dtype    L      " + "".join(f"  C={b:<4d}" for b in blocks) + "   numpy  (seconds)")
    saved = causal.TIME_BLOCK
    try:
        for dt in args.dtypes:
            rng = np.random.default_rng(0)
            for L in args.L:
                pq, pk, v, dy, s = _scan_inputs(rng, H, L, m, d_v, dt)

                def fb(block):
                    def run():
                        if block is None:
                            return linear_attention_bwd(dy, linear_attention_fwd(pq, pk, v, causal=True,
                                                                                 k_log_scale=s)[1])
                        causal.TIME_BLOCK = block
                        with accel.use("numba"):
                            return linear_attention_bwd(dy, linear_attention_fwd(pq, pk, v, causal=True,
                                                                                 k_log_scale=s)[1])
                    return run

                fns = {b: fb(b) for b in blocks}
                fns["numpy"] = fb(None)
                best = _rounds(fns, args.rounds)
                row = "".join(f" {best[b]:7.4f}" for b in blocks)
                print(f"{dt:8s} {L:6d} {row} {best['numpy']:7.4f}")
    finally:
        causal.TIME_BLOCK = saved
    print(f"  ({_load()})")


def bench_favor(args, H, d, m, d_v):
    print(f"\n## FAVOR+ end to end (positive features from q, k; H = {H}, d = {d}, m = {m}, d_v = {d_v}); "
          f"min of {args.rounds} interleaved rounds; fwd = favor_attention_fwd, "
          "fwd+bwd = then favor_attention_bwd")
    print("dtype    L      pass     numba_causal_s  numpy_causal_s  numpy_bidir_s  numpy_causal/numba  "
          "numba_causal/numpy_bidir")
    for dt in args.dtypes:
        for L in args.L:
            rng = np.random.default_rng(0)
            q, k = (rng.standard_normal((H, L, d)).astype(dt) for _ in range(2))
            v = rng.standard_normal((H, L, d_v)).astype(dt)
            dy = rng.standard_normal((H, L, d_v)).astype(dt)
            omega = rng.standard_normal((m, d)).astype(dt)

            def run(causal, numba, backward):
                def once():
                    y, cache = favor_attention_fwd(q, k, v, omega, causal=causal)
                    if backward:
                        favor_attention_bwd(dy, cache)

                def call():
                    if numba:
                        with accel.use("numba"):
                            once()
                    else:
                        once()
                return call

            for name, bwd in (("fwd", False), ("fwd+bwd", True)):
                fns = {"nb": run(True, True, bwd), "npc": run(True, False, bwd),
                       "npb": run(False, False, bwd)}
                best = _rounds(fns, args.rounds)
                tn, tc, tb = best["nb"], best["npc"], best["npb"]
                print(f"{dt:8s} {L:6d} {name:8s} {tn:14.4f}  {tc:14.4f}  {tb:13.4f}  {tc / tn:18.2f}  "
                      f"{tn / tb:23.2f}")
    print(f"  ({_load()})")


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
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (min over rounds)")
    ap.add_argument("--sections", default="causal,favor,fwht",
                    help="comma-separated: causal, blocks, favor, fwht")
    ap.add_argument("--blocks", default="32,48,64,96,128", help="TIME_BLOCK values for --sections blocks")
    args = ap.parse_args()
    args.dtypes = args.dtypes.split(",")
    if args.quick:
        args.L = [int(x) for x in (args.L or "256,1024").split(",")]
        m, args.repeat, args.gemm_n, args.fwht_rows = 64, 2, 512, 1024
        args.rounds = args.rounds or 2
    else:
        args.L = [int(x) for x in (args.L or "4096,16384").split(",")]
        m, args.repeat, args.gemm_n, args.fwht_rows = 256, 3, 2048, 8 * 4096
        args.rounds = args.rounds or 5
    sections = args.sections.split(",")
    import numba
    import scipy.linalg.cython_blas  # noqa: F401 -- the BLAS numba's np.dot calls: loaded before the limits

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    with threadpool_limits(limits=args.threads):
        blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
        cpu = platform.processor() or platform.machine()
        print(f"# benchmarks/accel.py {'--quick ' if args.quick else ''}| {cpu}"
              f" | numpy {np.__version__}, numba {numba.__version__} | BLAS threads {blas} | numba threads "
              f"{numba.get_num_threads()} | {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | {_load()}")
        if "causal" in sections:
            bench_causal(args, H=8, m=m, d_v=64)
        if "blocks" in sections:
            bench_blocks(args, H=8, m=m, d_v=64)
        if "favor" in sections:
            bench_favor(args, H=8, d=64, m=m, d_v=64)
        if "fwht" in sections:
            bench_fwht(args)
        print(f"\n(numba threading layer: {numba.threading_layer()}; {_load()})")


if __name__ == "__main__":
    main()
