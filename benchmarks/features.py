"""Benchmark: FAVOR+ (favor_attention, positive features) against its same-run roofline and performer-pytorch.

    python benchmarks/features.py [--quick] [--threads N] [--L 4096] [--repeat 5] [--dtypes float32,float64]
                                  [--rounds 7] [--no-numba] [--no-torch]

Workload: H = 8 heads, d = 64, m = 256 projections, d_v = 64, float32, one batch. Prints the median
time of each pass and these same-run ratios:

* forward / roofline, where the roofline is the time of what FAVOR+ cannot avoid: the two projection GEMMs
  ``(H L, d) @ (d, m)`` (queries and keys), the two attention GEMMs (``phi_k^T [v, 1]`` and ``phi_q kv``) and
  one ``np.exp`` pass over each (H, L, m) feature matrix (target <= 2);
* causal / bidirectional (target <= 1.4) and backward / forward (target <= 1.8);
* refattn vs performer-pytorch ``FastAttention`` (torch CPU, the same omega copied into its projection buffer,
  same thread count), both modes, forward only (skipped cleanly when torch or performer_pytorch is missing).

Then, per dtype, the **roofline section**: process CPU time (minimum and median of interleaved rounds; with
one BLAS thread the CPU time is the work, not inflated when other processes take the core) of the roofline,
the roofline with ``phi_k^T [v, 1]`` summed over 256-row blocks (as the reference's ``contract_rows`` does;
the stricter baseline), and the inference forwards ``favor_attention`` bidirectional and causal, NumPy
reference and ``accel.use("numba")``.

BLAS threads are pinned with threadpoolctl (default 1: the shared test machine; pass --threads for more).
"""
# ruff: noqa: B023 -- every timed lambda runs inside the loop iteration that defines it

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from _timing import timeit

from refattn import favor_attention
from refattn.attention import favor_attention_bwd, favor_attention_fwd
from refattn.random import draw_orthogonal




def interleaved_min(fns, *, repeat):
    """Minimum time of each function over `repeat` rounds calling them in turn (same-load ratios)."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def roofline(q, k, v, omega, rows=None):
    """The unavoidable work of bidirectional FAVOR+ forward, as plain contiguous NumPy calls (``rows``: the
    product ``phi_k^T [v, 1]`` summed over blocks of that many rows)."""
    H, L, d = q.shape
    m = omega.shape[0]
    wT = np.ascontiguousarray(omega.T)                    # (d, m)
    q2, k2 = q.reshape(H * L, d), k.reshape(H * L, d)
    v_aug = np.concatenate([v, np.ones(v.shape[:-1] + (1,), v.dtype)], -1)   # (H, L, d_v + 1)

    def run():
        uq = (q2 @ wT).reshape(H, L, m)                   # projection GEMMs
        uk = (k2 @ wT).reshape(H, L, m)
        np.exp(uq, out=uq)                                # one exp pass per feature matrix
        np.exp(uk, out=uk)
        if rows is None:
            kv = np.swapaxes(uk, -1, -2) @ v_aug          # attention GEMMs
        else:
            kv = sum(np.swapaxes(uk[:, a:a + rows], -1, -2) @ v_aug[:, a:a + rows] for a in range(0, L, rows))
        return uq @ kv

    return run


def performer_pytorch_fwd(q, k, v, omega, causal, threads):
    try:
        import torch
        from performer_pytorch import FastAttention
    except ImportError as exc:                            # optional crosscheck extra
        return None, f"skipped ({exc.__class__.__name__}: {exc})"
    torch.set_num_threads(threads)
    H, L, d = q.shape
    att = FastAttention(dim_heads=d, nb_features=omega.shape[0], causal=causal)
    att.projection_matrix.copy_(torch.from_numpy(omega))   # the same draw as refattn
    tq, tk, tv = (torch.from_numpy(a)[None] for a in (q, k, v))   # (1, H, L, d)

    def run():
        with torch.no_grad():
            return att(tq, tk, tv)

    return run, "ok"


def cpu_interleaved(fns, rounds):
    """``{name: (min, median)}`` of the process CPU time over `rounds` rounds calling ``{name: fn}``."""
    for fn in fns.values():
        fn()
    ts = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn()
            ts[name].append(time.process_time() - t0)
    return {name: (min(t), float(np.median(t))) for name, t in ts.items()}


def roofline_section(rng, H, L, d, m, d_v, dt, rounds, *, numba):
    """FAVOR+ inference forwards against the rooflines, process CPU time, interleaved (one dtype)."""
    import os

    q, k = ((0.5 * rng.standard_normal((H, L, d))).astype(dt) for _ in range(2))
    v = rng.standard_normal((H, L, d_v)).astype(dt)
    omega = draw_orthogonal(rng, m, d, dtype=dt)
    fns = {"roofline": roofline(q, k, v, omega), "roofline_blocked": roofline(q, k, v, omega, rows=256),
           "bidir": lambda: favor_attention(q, k, v, omega),
           "causal": lambda: favor_attention(q, k, v, omega, causal=True)}
    if numba:
        import sys
        from pathlib import Path

        # the repository root before this directory, whose accel.py (a script) would shadow the package
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        import accel

        if not accel.available().get("numba"):
            print("# numba: skipped (not installed: the 'accel' extra)")
            numba = False
    if numba:
        def under_numba(causal):
            def run():
                with accel.use("numba"):
                    return favor_attention(q, k, v, omega, causal=causal)
            return run
        fns["numba_bidir"], fns["numba_causal"] = under_numba(False), under_numba(True)
    t = cpu_interleaved(fns, rounds)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n## roofline, {dt.name}, H={H} L={L} d={d} m={m} d_v={d_v}: process CPU time, min / median of "
          f"{rounds} interleaved rounds (ms), load {load}")
    print("  " + ", ".join(f"{n} {1e3 * a:.1f}/{1e3 * b:.1f}" for n, (a, b) in t.items()))

    def r(a, b):
        return f"{t[a][0] / t[b][0]:.2f} (medians {t[a][1] / t[b][1]:.2f})"

    print(f"  bidirectional forward / roofline {r('bidir', 'roofline')}, / blocked roofline "
          f"{r('bidir', 'roofline_blocked')}; causal / bidirectional {r('causal', 'bidir')}; causal / "
          f"blocked roofline {r('causal', 'roofline_blocked')}")
    if numba:
        print(f"  numba: bidirectional / roofline {r('numba_bidir', 'roofline')}, / blocked roofline "
              f"{r('numba_bidir', 'roofline_blocked')}; causal / bidirectional "
              f"{r('numba_causal', 'numba_bidir')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, to check that the script runs")
    ap.add_argument("--threads", type=int, default=1, help="BLAS / torch threads (default 1)")
    ap.add_argument("--L", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dtypes", default="float32,float64", help="dtypes of the roofline section")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds of the roofline section")
    ap.add_argument("--no-numba", action="store_true", help="skip accel.use('numba') in the roofline section")
    ap.add_argument("--no-torch", action="store_true", help="skip performer-pytorch")
    ap.add_argument("--only-roofline", action="store_true", help="only the roofline section")
    args = ap.parse_args()
    H, d, m, d_v = 8, 64, 256, 64
    L = 512 if args.quick else args.L
    repeat = 2 if args.quick else args.repeat

    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=args.threads):
        blas = ", ".join(f"{i['internal_api']} {i['num_threads']} thread(s)" for i in threadpool_info())
        print(f"# benchmarks/features.py  H={H} d={d} m={m} d_v={d_v} L={L} float32  "
              f"numpy {np.__version__}  {platform.processor() or platform.machine()}  BLAS: {blas}")
        rng = np.random.default_rng(0)
        if args.only_roofline:
            for dt in args.dtypes.split(","):
                roofline_section(rng, H, L, d, m, d_v, np.dtype(dt), 2 if args.quick else args.rounds,
                                 numba=not args.no_numba)
            return
        q, k = (0.5 * rng.standard_normal((H, L, d))).astype(np.float32), \
            (0.5 * rng.standard_normal((H, L, d))).astype(np.float32)
        v = rng.standard_normal((H, L, d_v)).astype(np.float32)
        omega = draw_orthogonal(rng, m, d, dtype=np.float32)

        t_roof = timeit(roofline(q, k, v, omega), repeat=repeat)
        t = {}
        for causal in (False, True):
            t[causal, "fwd"] = timeit(lambda: favor_attention(q, k, v, omega, causal=causal), repeat=repeat)
            y, cache = favor_attention_fwd(q, k, v, omega, causal=causal)
            dy = np.ones_like(y)
            t[causal, "bwd"] = timeit(lambda: favor_attention_bwd(dy, cache), repeat=repeat)
        print(f"roofline (2 projection GEMMs + 2 attention GEMMs + 2 exp passes): {t_roof * 1e3:9.2f} ms")
        for causal in (False, True):
            mode = "causal" if causal else "bidir "
            print(f"FAVOR+ {mode} forward {t[causal, 'fwd'] * 1e3:9.2f} ms   "
                  f"backward {t[causal, 'bwd'] * 1e3:9.2f} ms"
                  f"   backward/forward {t[causal, 'bwd'] / t[causal, 'fwd']:5.2f}")
        print(f"forward / roofline (bidirectional)      {t[False, 'fwd'] / t_roof:5.2f}   (target <= 2)")
        print(f"causal / bidirectional forward          {t[True, 'fwd'] / t[False, 'fwd']:5.2f}   "
              "(target <= 1.4)")
        print(f"backward / forward (bidirectional)      {t[False, 'bwd'] / t[False, 'fwd']:5.2f}   "
              "(target <= 1.8)")
        # the same ratios from interleaved rounds (minimum of each): robust to a loaded, shared machine
        _, cb = favor_attention_fwd(q, k, v, omega)
        _, cc = favor_attention_fwd(q, k, v, omega, causal=True)
        dy = np.ones((H, L, d_v), np.float32)
        mins = interleaved_min([roofline(q, k, v, omega), lambda: favor_attention(q, k, v, omega),
                                lambda: favor_attention(q, k, v, omega, causal=True),
                                lambda: favor_attention_bwd(dy, cb), lambda: favor_attention_bwd(dy, cc)],
                               repeat=repeat)
        r, bf, cf, bb, cbw = mins
        print(f"interleaved minima (ms): roofline {r * 1e3:.2f}, bidir fwd {bf * 1e3:.2f}, causal fwd "
              f"{cf * 1e3:.2f}, bidir bwd {bb * 1e3:.2f}, causal bwd {cbw * 1e3:.2f}")
        print(f"  forward/roofline {bf / r:5.2f}   causal/bidir {cf / bf:5.2f}   "
              f"bwd/fwd bidir {bb / bf:5.2f}   causal {cbw / cf:5.2f}")
        for dt in args.dtypes.split(","):
            roofline_section(rng, H, L, d, m, d_v, np.dtype(dt), 2 if args.quick else args.rounds,
                             numba=not args.no_numba)
        for causal in (False, True) if not args.no_torch else ():
            run, status = performer_pytorch_fwd(q, k, v, omega, causal, args.threads)
            mode = "causal" if causal else "bidir"
            if run is None:
                print(f"performer-pytorch FastAttention {mode}: {status}")
                continue
            t_pt = timeit(run, repeat=repeat)
            print(f"performer-pytorch FastAttention {mode:6s} forward {t_pt * 1e3:9.2f} ms   "
                  f"refattn / performer-pytorch {t[causal, 'fwd'] / t_pt:5.2f}")


if __name__ == "__main__":
    main()
