"""Benchmark: Horn S2 fast paths vs their naive quadratic references, S1-FAVOR+ vs plain FAVOR+, and the exact
Toeplitz-FFT RPE vs the dense C * (phi_q phi_k^T) path with its L-scaling and crossover.

    python benchmarks/rpe.py [--quick] [--threads N] [--dtype float32] [--repeat 3] [--only s2,s1,toeplitz]
                             [--workers W] [--toeplitz-L 256,1024,4096] [--toeplitz-reference] [--heads H]

Workload: H = 8 heads, d = 64, m = 256 features, d_v = 64, L = 4096 (a 64 x 64 grid for 2-D S2),
k = 6. Every ratio is measured in one run (median of repeats). The naive and dense references are run one head
at a time so that their (L, L) temporaries stay at 64 MiB (float32); their time is the sum over heads.

Toeplitz: ``--workers`` is passed to ``toeplitz_attention`` (SciPy FFT threads on the NumPy path; omitted when
not given, so the script also runs against older refattn versions for before/after figures).
``--toeplitz-reference`` also times the array-API path (``xp.fft`` through array_api_strict) on the same
inputs in the same run (slow: one repeat). The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
from _timing import timeit

from refattn.attention.favor import favor_attention
from refattn.random.performer import draw_gaussian
from refattn.random.positional import init_s1_params
from refattn.rpe.s1_rotation import s1_attention
from refattn.rpe.s2_clipped import s2_attention, s2_attention_naive
from refattn.rpe.toeplitz import toeplitz_attention, toeplitz_attention_dense




def per_head(fn, *arrays):
    """Run fn on one head at a time (bounded memory for the quadratic references)."""
    def run():
        return [fn(*(a[h] for a in arrays)) for h in range(arrays[0].shape[0])]
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, to check that the script runs")
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: all cores)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="s2,s1,toeplitz", help="comma-separated sections")
    ap.add_argument("--workers", type=int, default=None, help="SciPy FFT threads for the Toeplitz FFT path")
    ap.add_argument("--toeplitz-L", default=None,
                    help="comma-separated Toeplitz lengths (default 256,1024,4096)")
    ap.add_argument("--heads", type=int, default=None, help="H (default 8; a per-head crossover needs 1)")
    ap.add_argument("--toeplitz-reference", action="store_true",
                    help="also time the array-API Toeplitz path (array_api_strict) in the same run")
    ap.add_argument("--toeplitz-baseline", default=None, metavar="REV",
                    help="also time refattn/rpe/toeplitz.py as of git revision REV (e.g. 901c887) in "
                         "the same process, interleaved with today's; prints old/new")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of --toeplitz-baseline")
    args = ap.parse_args()
    only = set(args.only.split(","))
    from threadpoolctl import threadpool_info, threadpool_limits

    H, d, m, d_v, k = 8, 64, 256, 64, 6
    side = 64
    toeplitz_Ls = [256, 1024, 4096]
    if args.quick:
        H, m, side, toeplitz_Ls = 2, 32, 16, [64, 256]
    if args.heads is not None:
        H = args.heads
    if args.toeplitz_L:
        toeplitz_Ls = [int(x) for x in args.toeplitz_L.split(",")]
    L = side * side
    repeat = 1 if args.quick else args.repeat
    dt = np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    with threadpool_limits(limits=args.threads):
        threads = max((i.get("num_threads", 1) for i in threadpool_info()), default=1)
        print(f"# refattn benchmarks/rpe.py  {platform.processor() or platform.machine()}  "
              f"BLAS threads: {threads}  dtype {dt}  H={H} d={d} m={m} d_v={d_v} L={L} k={k}"
              f"{'  (--quick)' if args.quick else ''}")
        print(f"# load average (1, 5, 15 min) at start: {os.getloadavg()}  cpus: {os.cpu_count()}  "
              f"FFT workers: {args.workers}")
        q, kk, v = (rng.standard_normal((H, L, d)).astype(dt) for _ in range(3))
        q *= 0.5
        kk *= 0.5
        omega = draw_gaussian(rng, m, d, dtype=dt)

        # --- S2: fast vs naive ------------------------------------------------------------------------
        if "s2" in only:
            print("\n## S2 (clipped relative encodings): window trick vs naive quadratic reference")
            print(f"{'geometry':<22}{'kernel':<10}{'fast s':>10}{'naive s':>10}{'naive/fast':>12}")
            for geom, grid, R in (("1-D signed", None, 2 * k + 1),
                                  (f"2-D {side}x{side} Manhattan", (side, side), k + 1)):
                w = (0.5 * rng.standard_normal((R, d))).astype(dt)
                for kern, om in (("softmax", None), ("FAVOR+", omega)):
                    def naive(qh, vh, w=w, grid=grid, om=om):
                        return s2_attention_naive(qh, vh, w, k=k, grid=grid, omega=om)

                    t_fast = timeit(lambda w=w, grid=grid, om=om:
                                    s2_attention(q, v, w, k=k, grid=grid, omega=om), repeat=repeat)
                    t_naive = timeit(per_head(naive, q, v), repeat=max(1, repeat - 1))
                    print(f"{geom:<22}{kern:<10}{t_fast:>10.4f}{t_naive:>10.3f}{t_naive / t_fast:>12.1f}")

        # --- S1: FAVOR+ with positional features vs plain FAVOR+ --------------------------------------
        if "s1" in only:
            print("\n## S1 (rotation features) with FAVOR+ vs plain FAVOR+ (same m)")
            print(f"{'positions':<22}{'P':>4}{'FAVOR+ s':>11}{'S1-FAVOR+ s':>13}{'ratio':>8}")
            for A, pos in ((1, np.arange(L)), (2, np.stack(np.divmod(np.arange(L), side), -1))):
                params = init_s1_params(rng, n_axes=A, n_lengthscales=4, batch_shape=(H,), dtype=dt)
                P = 2 * A * 4
                om_aug = draw_gaussian(rng, m, d + P, dtype=dt)
                t_plain = timeit(lambda: favor_attention(q, kk, v, omega), repeat=repeat)
                t_s1 = timeit(lambda pos=pos, params=params, om_aug=om_aug:
                              s1_attention(q, kk, v, pos, params, omega=om_aug), repeat=repeat)
                label = "1-D" if A == 1 else "2-D grid"
                print(f"{label:<22}{P:>4}{t_plain:>11.4f}{t_s1:>13.4f}{t_s1 / t_plain:>8.2f}")

        if "toeplitz" in only:
            toeplitz_section(rng, H, m, d_v, dt, toeplitz_Ls, repeat, args)
        if args.toeplitz_baseline:
            toeplitz_baseline_section(rng, H, m, d_v, dt, toeplitz_Ls, args.rounds, args)


def load_baseline(rev: str):
    """refattn/rpe/toeplitz.py as of git revision `rev`, imported as ``refattn.rpe._toeplitz_baseline`` (its
    relative imports resolve against today's package)."""
    import importlib.util
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    src = subprocess.run(["git", "show", f"{rev}:refattn/rpe/toeplitz.py"], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    name = "refattn.rpe._toeplitz_baseline"
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "refattn.rpe"
    sys.modules[name] = mod
    exec(compile(src, f"{rev}:refattn/rpe/toeplitz.py", "exec"), mod.__dict__)
    return mod


def toeplitz_baseline_section(rng, H, m, d_v, dt, toeplitz_Ls, rounds, args):
    """Today's Toeplitz FFT path against the one at ``--toeplitz-baseline REV``, same process, interleaved:
    each round calls old then new (forward, then backward) on the same arrays; minima and medians over
    rounds, and the per-round old/new ratios."""
    from refattn.rpe import toeplitz as new

    old = load_baseline(args.toeplitz_baseline)
    fft_kw = {} if args.workers is None else {"workers": args.workers}
    print(f"\n## Toeplitz FFT: today's vs git {args.toeplitz_baseline} (same process, {rounds} interleaved "
          f"rounds, H = {H}, m = {m}, d_v = {d_v}, {np.dtype(dt).name})")
    print(f"{'L':>6}{'mode':>8}{'pass':>6}{'old min s':>11}{'new min s':>11}{'old/new (min)':>15}"
          f"{'old/new (median)':>18}  per-round old/new")
    for Lt in toeplitz_Ls:
        pq = np.exp(rng.standard_normal((H, Lt, m)) * 0.3).astype(dt)
        pk = np.exp(rng.standard_normal((H, Lt, m)) * 0.3).astype(dt)
        vt = rng.standard_normal((H, Lt, d_v)).astype(dt)
        coeffs = np.exp(0.1 * rng.standard_normal(2 * Lt - 1)).astype(dt)
        dy = np.ones((H, Lt, d_v), dt)
        for causal in (False, True):
            times = {(w, p): [] for w in ("old", "new") for p in ("fwd", "bwd")}
            for _ in range(rounds):
                for who, mod, kw in (("old", old, {}), ("new", new, fft_kw)):
                    t0 = time.perf_counter()
                    _, cache = mod.toeplitz_attention_fwd(pq, pk, vt, coeffs, causal=causal, **kw)
                    t1 = time.perf_counter()
                    mod.toeplitz_attention_bwd(dy, cache)
                    t2 = time.perf_counter()
                    times[who, "fwd"].append(t1 - t0)
                    times[who, "bwd"].append(t2 - t1)
            mode = "causal" if causal else "bidir"
            for p in ("fwd", "bwd"):
                o, n = np.array(times["old", p]), np.array(times["new", p])
                per = ", ".join(f"{r:.2f}" for r in o / n)
                print(f"{Lt:>6}{mode:>8}{p:>6}{o.min():>11.3f}{n.min():>11.3f}{o.min() / n.min():>15.2f}"
                      f"{np.median(o) / np.median(n):>18.2f}  {per}", flush=True)


def toeplitz_section(rng, H, m, d_v, dt, toeplitz_Ls, repeat, args):
    """Toeplitz RPE: FFT path vs the dense C * (phi_q phi_k^T) path (and optionally the array-API path)."""
    fft_kw = {} if args.workers is None else {"workers": args.workers}
    print("\n## Toeplitz RPE: FFT (exact) vs dense C * (phi_q phi_k^T), features given (m features)")
    ref_head = f"{'array-API s':>13}{'api/fft':>9}" if args.toeplitz_reference else ""
    print(f"{'L':>6}{'mode':>8}{'fft s':>10}{'dense s':>10}{'dense/fft':>11}{ref_head}")
    prev = {}
    for Lt in toeplitz_Ls:
        pq = np.exp(rng.standard_normal((H, Lt, m)) * 0.3).astype(dt)
        pk = np.exp(rng.standard_normal((H, Lt, m)) * 0.3).astype(dt)
        vt = rng.standard_normal((H, Lt, d_v)).astype(dt)
        coeffs = np.exp(0.1 * rng.standard_normal(2 * Lt - 1)).astype(dt)
        for causal in (False, True):
            def dense(a, b, c, coeffs=coeffs, causal=causal):
                return toeplitz_attention_dense(a, b, c, coeffs, causal=causal)

            t_fft = timeit(lambda pq=pq, pk=pk, vt=vt, coeffs=coeffs, causal=causal:
                           toeplitz_attention(pq, pk, vt, coeffs, causal=causal, **fft_kw), repeat=repeat)
            t_dense = timeit(per_head(dense, pq, pk, vt), repeat=max(1, repeat - 1))
            mode = "causal" if causal else "bidir"
            row = f"{Lt:>6}{mode:>8}{t_fft:>10.4f}{t_dense:>10.4f}{t_dense / t_fft:>11.2f}"
            if args.toeplitz_reference:
                import array_api_strict as xps

                arrs = [xps.asarray(a) for a in (pq, pk, vt, coeffs)]
                t_api = timeit(lambda arrs=arrs, causal=causal: toeplitz_attention(*arrs, causal=causal),
                               repeat=1)
                row += f"{t_api:>13.3f}{t_api / t_fft:>9.2f}"
            print(row, flush=True)
            prev.setdefault(mode, []).append((Lt, t_fft, t_dense))
    for mode, rows in prev.items():
        for (L0, f0, d0), (L1, f1, d1) in zip(rows, rows[1:], strict=False):
            print(f"L-scaling {mode}: L {L0} -> {L1} (x{L1 // L0}): fft time x{f1 / f0:.2f}, "
                  f"dense time x{d1 / d0:.2f}")


if __name__ == "__main__":
    main()
