"""Benchmark: exact vs linear (bidirectional, causal) attention, forward and backward, against same-run GEMMs.

    python benchmarks/attention.py [--quick] [--threads N] [--dtypes float32,float64] [--L 1024,4096,16384]
                                   [--chunks 32,64,128,256] [--only main,chunks,frames,inference]
                                   [--rounds 7]

Prints, for H = 8 heads, d = 64, m' = 256 features, d_v = 64: the time of each pass (median of repeats), the
ratios causal/bidirectional, backward/forward, the L-scaling time(4L)/time(L), and the achieved fraction of
the same-run GEMM time of the products each pass needs. Features are given (drawn once), so this measures
attention alone. Also sweeps the causal chunk size (the default's justification), and (``frames``) measures
the cost of the causal key scalings in one run: none, row log-scales ``(..., L)`` (row-stabilised FAVOR+) and
per-feature frames ``(..., L, m)`` (FAVOR+'s causal key frames), the latter on realistic frames (prefix maxima
of FAVOR+ keys, every chunk within the spread limit) and with every chunk forced onto the exact path.

``inference`` (interleaved rounds in one process, minimum and median of each): the plain forwards
(``linear_attention``, which keep nothing for a backward) against the two GEMMs of bidirectional attention,
timed alone as plain matmuls and as the same products with ``phi_k^T [v, 1]`` summed over 256-row blocks (the
reference's ``contract_rows``); causal over bidirectional with no key scale and with FAVOR+'s per-feature key
frames (features given); the differentiable forwards (``*_fwd``, states kept) and backward / forward.
"""
# ruff: noqa: B023 -- every timed lambda runs inside the loop iteration that defines it

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from _timing import timeit

import refattn
from refattn.attention import (linear_attention_bwd, linear_attention_fwd, softmax_attention_bwd,
                               softmax_attention_fwd)




def gemm_baseline(phi_q, phi_k, v_aug):
    """The two GEMMs bidirectional linear attention needs: kv = phi_k^T v_aug, out = phi_q kv (contiguous)."""
    kT = np.ascontiguousarray(np.swapaxes(phi_k, -1, -2))

    def run():
        kv = kT @ v_aug
        return phi_q @ kv

    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, to check that the script runs")
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: all cores)")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--L", default=None)
    ap.add_argument("--chunks", default="32,64,128,256")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="main,chunks,frames")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds of the inference section")
    args = ap.parse_args()
    only = set(args.only.split(","))
    from threadpoolctl import threadpool_info, threadpool_limits

    H, d, m, d_v = 8, 64, 256, 64
    Ls = [int(x) for x in (args.L or ("256,1024" if args.quick else "1024,4096,16384")).split(",")]
    if args.quick:
        H = 2
    repeat = 2 if args.quick else args.repeat
    limits = threadpool_limits(limits=args.threads) if args.threads else None
    blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
    cpu = platform.processor() or platform.machine()
    print(f"# refattn {refattn.__version__}, numpy {np.__version__}, {cpu}, "
          f"BLAS threads {blas}")
    print(f"# H={H} d={d} m'={m} d_v={d_v}; times in ms, median of {repeat}")
    rng = np.random.default_rng(0)
    results = {}
    for dt_name in (args.dtypes.split(",") if "main" in only else []):
        dt = np.dtype(dt_name)
        print(f"\n## {dt_name}")
        print(f"{'L':>6} {'exact':>9} {'exact_bwd':>9} {'gemm':>8} {'bidir':>8} {'bidir/gemm':>10} "
              f"{'causal':>8} {'caus/bidir':>10} {'bidir_bwd':>9} {'bwd/fwd':>7} {'caus_bwd':>9} "
              f"{'cbwd/cfwd':>9} {'GF/s':>6}")
        for L in Ls:
            phi_q = np.exp(rng.standard_normal((1, H, L, m)) * 0.3).astype(dt)
            phi_k = np.exp(rng.standard_normal((1, H, L, m)) * 0.3).astype(dt)
            v = rng.standard_normal((1, H, L, d_v)).astype(dt)
            dy = rng.standard_normal((1, H, L, d_v)).astype(dt)
            v_aug = np.concatenate([v, np.ones_like(v[..., :1])], -1)
            t_gemm = timeit(gemm_baseline(phi_q, phi_k, v_aug), repeat=repeat)
            t_bi = timeit(lambda: linear_attention_fwd(phi_q, phi_k, v), repeat=repeat)
            _, cb = linear_attention_fwd(phi_q, phi_k, v)
            t_bi_b = timeit(lambda: linear_attention_bwd(dy, cb), repeat=repeat)
            t_ca = timeit(lambda: linear_attention_fwd(phi_q, phi_k, v, causal=True), repeat=repeat)
            _, cc = linear_attention_fwd(phi_q, phi_k, v, causal=True)
            t_ca_b = timeit(lambda: linear_attention_bwd(dy, cc), repeat=repeat)
            if L <= 4096 or args.quick:
                q = rng.standard_normal((1, H, L, d)).astype(dt)
                k = rng.standard_normal((1, H, L, d)).astype(dt)
                t_ex = timeit(lambda: softmax_attention_fwd(q, k, v), repeat=max(1, repeat // 2))
                _, ce = softmax_attention_fwd(q, k, v)
                t_ex_b = timeit(lambda: softmax_attention_bwd(dy, ce), repeat=max(1, repeat // 2))
            else:
                t_ex = t_ex_b = float("nan")
            flops = 2 * 2 * H * L * m * (d_v + 1)
            results[(dt_name, L)] = dict(bi=t_bi, ca=t_ca, bi_b=t_bi_b, ca_b=t_ca_b, gemm=t_gemm)
            print(f"{L:>6} {1e3 * t_ex:9.1f} {1e3 * t_ex_b:9.1f} {1e3 * t_gemm:8.2f} {1e3 * t_bi:8.2f} "
                  f"{t_bi / t_gemm:10.2f} {1e3 * t_ca:8.2f} {t_ca / t_bi:10.2f} {1e3 * t_bi_b:9.2f} "
                  f"{t_bi_b / t_bi:7.2f} {1e3 * t_ca_b:9.2f} {t_ca_b / t_ca:9.2f} "
                  f"{flops / t_gemm / 1e9:6.1f}")
        Ls_sorted = sorted(Ls)
        for a, b in zip(Ls_sorted, Ls_sorted[1:], strict=False):
            ra, rb = results[(dt_name, a)], results[(dt_name, b)]
            print(f"L-scaling {b}/{a} (x{b // a}): bidir {rb['bi'] / ra['bi']:.2f}, "
                  f"causal {rb['ca'] / ra['ca']:.2f}, "
                  f"bidir bwd {rb['bi_b'] / ra['bi_b']:.2f}, causal bwd {rb['ca_b'] / ra['ca_b']:.2f}")

    if "inference" in only:
        inference_section(args, H, d, m, d_v, Ls)
    if "frames" in only:
        frames_section(args, H, d, m, d_v, repeat)
    if "chunks" not in only:
        return
    print("\n## causal chunk-size sweep (float32, L = %d): causal fwd / bidirectional fwd, "
          "causal bwd / causal fwd"
          % (1024 if args.quick else 4096))
    L = 1024 if args.quick else 4096
    phi_q = np.exp(rng.standard_normal((1, H, L, m)) * 0.3).astype(np.float32)
    phi_k = np.exp(rng.standard_normal((1, H, L, m)) * 0.3).astype(np.float32)
    v = rng.standard_normal((1, H, L, d_v)).astype(np.float32)
    dy = rng.standard_normal((1, H, L, d_v)).astype(np.float32)
    s = rng.standard_normal((1, H, L)).astype(np.float32)
    t_bi = timeit(lambda: linear_attention_fwd(phi_q, phi_k, v), repeat=repeat)
    for C in [int(c) for c in args.chunks.split(",")]:
        t_c = timeit(lambda: linear_attention_fwd(phi_q, phi_k, v, causal=True, chunk_size=C), repeat=repeat)
        _, cc = linear_attention_fwd(phi_q, phi_k, v, causal=True, chunk_size=C)
        t_cb = timeit(lambda: linear_attention_bwd(dy, cc), repeat=repeat)
        t_cs = timeit(lambda: linear_attention_fwd(phi_q, phi_k, v, causal=True, chunk_size=C, k_log_scale=s),
                      repeat=repeat)
        print(f"C={C:4d}: causal/bidir {t_c / t_bi:5.2f}  causal-bwd/causal-fwd {t_cb / t_c:5.2f}  "
              f"with k_log_scale: causal/bidir {t_cs / t_bi:5.2f}")
    if limits is not None:
        limits.unregister() if hasattr(limits, "unregister") else None


def interleaved_min(fns, *, repeat):
    """Minimum time of each function over `repeat` rounds that call them in turn (ratios between them are then
    measured under the same machine load; the minimum is the least disturbed run)."""
    for fn in fns:
        fn()                                                                  # warm-up
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def interleaved_stats(fns, *, rounds):
    """``{name: (min, median)}`` of the process CPU time over `rounds` rounds calling the functions of
    ``{name: fn}`` in turn. With one BLAS thread the CPU time is the work done; unlike wall time it is not
    inflated when other processes of a shared machine take the core (cache and memory contention remain)."""
    for fn in fns.values():
        fn()                                                                  # warm-up
    ts = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn()
            ts[name].append(time.process_time() - t0)
    return {name: (min(t), float(np.median(t))) for name, t in ts.items()}


def blocked_gemm_baseline(phi_q, phi_k, v_aug, rows=256):
    """The two GEMMs with ``phi_k^T v_aug`` summed over `rows`-row blocks (as the reference contracts)."""
    L = phi_k.shape[-2]

    def run():
        kv = None
        for a in range(0, L, rows):
            part = np.swapaxes(phi_k[..., a:a + rows, :], -1, -2) @ v_aug[..., a:a + rows, :]
            kv = part if kv is None else kv + part
        return phi_q @ kv

    return run


def inference_section(args, H, d, m, d_v, Ls):
    """Plain (inference) forwards against the GEMMs and against each other, interleaved in one process."""
    import os

    from refattn.attention import linear_attention
    from refattn.features.key_frames import positive_key_features_stable
    from refattn.features.positive import positive_features_stable
    from refattn.random import draw_orthogonal

    rounds = 2 if args.quick else args.rounds
    print(f"\n## inference: plain forwards (nothing kept) vs GEMMs and vs the differentiable forwards "
          f"(H={H}, m'={m}, d_v={d_v}; process CPU time, min / median of {rounds} interleaved rounds, ms; "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    rng = np.random.default_rng(2)
    for dt_name in args.dtypes.split(","):
        dt = np.dtype(dt_name)
        for L in Ls:
            phi_q = np.exp(rng.standard_normal((1, H, L, m)) * 0.3).astype(dt)
            phi_k = np.exp(rng.standard_normal((1, H, L, m)) * 0.3).astype(dt)
            v = rng.standard_normal((1, H, L, d_v)).astype(dt)
            dy = rng.standard_normal((1, H, L, d_v)).astype(dt)
            v_aug = np.concatenate([v, np.ones_like(v[..., :1])], -1)
            omega = draw_orthogonal(rng, m, d, dtype=dt)
            k = (0.5 * d ** -0.25 * rng.standard_normal((1, H, L, d))).astype(dt)
            q = (0.5 * d ** -0.25 * rng.standard_normal((1, H, L, d))).astype(dt)
            fk_b, frame_b = positive_key_features_stable(k, omega)                 # FAVOR+ features
            fq_b, _ = positive_features_stable(q, omega, k_log_scale=frame_b)
            fk_c, frame_c = positive_key_features_stable(k, omega, causal=True)
            fq_c, _ = positive_features_stable(q, omega, k_log_scale=frame_c)
            _, cb = linear_attention_fwd(phi_q, phi_k, v)
            _, cc = linear_attention_fwd(phi_q, phi_k, v, causal=True)
            _, cf = linear_attention_fwd(fq_c, fk_c, v, causal=True, k_log_scale=frame_c)
            t = interleaved_stats({
                "gemm": gemm_baseline(phi_q, phi_k, v_aug),
                "gemm_blocked": blocked_gemm_baseline(phi_q, phi_k, v_aug),
                "bidir": lambda: linear_attention(phi_q, phi_k, v),
                "causal": lambda: linear_attention(phi_q, phi_k, v, causal=True),
                "favor_bidir": lambda: linear_attention(fq_b, fk_b, v),
                "favor_causal": lambda: linear_attention(fq_c, fk_c, v, causal=True, k_log_scale=frame_c),
                "bidir_fwd": lambda: linear_attention_fwd(phi_q, phi_k, v),
                "causal_fwd": lambda: linear_attention_fwd(phi_q, phi_k, v, causal=True),
                "favor_causal_fwd": lambda: linear_attention_fwd(fq_c, fk_c, v, causal=True,
                                                                 k_log_scale=frame_c),
                "bidir_bwd": lambda: linear_attention_bwd(dy, cb),
                "causal_bwd": lambda: linear_attention_bwd(dy, cc),
                "favor_causal_bwd": lambda: linear_attention_bwd(dy, cf),
            }, rounds=rounds)
            print(f"{dt_name} L={L}: "
                  + ", ".join(f"{n} {1e3 * a:.1f}/{1e3 * b:.1f}" for n, (a, b) in t.items()))

            def r(a, b):
                return f"{t[a][0] / t[b][0]:.2f} (medians {t[a][1] / t[b][1]:.2f})"

            print(f"  bidir / GEMMs {r('bidir', 'gemm')}, / blocked GEMMs {r('bidir', 'gemm_blocked')}")
            print(f"  causal / bidir: no scale {r('causal', 'bidir')}, FAVOR+ key frames "
                  f"{r('favor_causal', 'favor_bidir')}; kept-state fwd / plain: no scale "
                  f"{r('causal_fwd', 'causal')}, frames {r('favor_causal_fwd', 'favor_causal')}")
            print(f"  bwd / fwd (the pair): bidir {r('bidir_bwd', 'bidir_fwd')}, causal "
                  f"{r('causal_bwd', 'causal_fwd')}, frames {r('favor_causal_bwd', 'favor_causal_fwd')}")


def frames_section(args, H, d, m, d_v, repeat):
    """Causal forward/backward cost of the key scalings, features given, in one run."""
    from refattn.attention import _causal
    from refattn.features.key_frames import positive_key_features_stable
    from refattn.features.positive import positive_features_stable
    from refattn.random import draw_gaussian

    L = 1024 if args.quick else 4096
    rng = np.random.default_rng(1)
    for dt_name in args.dtypes.split(","):
        dt = np.dtype(dt_name)
        omega = draw_gaussian(rng, m, d).astype(dt)
        q = (rng.standard_normal((1, H, L, d)) * d ** -0.25).astype(dt)      # q' = d^{-1/4} q, q ~ N(0, I)
        k = (rng.standard_normal((1, H, L, d)) * d ** -0.25).astype(dt)
        v = rng.standard_normal((1, H, L, d_v)).astype(dt)
        dy = rng.standard_normal((1, H, L, d_v)).astype(dt)
        phi_q_row, _ = positive_features_stable(q, omega)                     # row-stabilised FAVOR+
        phi_k_row, s_row = positive_features_stable(k, omega)
        phi_k, frame = positive_key_features_stable(k, omega, causal=True)    # per-feature key frames
        phi_q, _ = positive_features_stable(q, omega, k_log_scale=frame)
        cheap = _causal.chunk_plan(frame, 32, xp=__import__("array_api_compat").array_namespace(frame))[1]
        cases = {
            "no scale": (phi_q_row, phi_k_row, None),
            "row log-scales (..., L)": (phi_q_row, phi_k_row, s_row),
            "per-feature frames (..., L, m)": (phi_q, phi_k, frame),
        }
        print(f"\n## causal key scaling, {dt_name}, H={H}, L={L}, m'={m}, d_v={d_v} (features given; "
              f"{sum(cheap)}/{len(cheap)} chunks within the spread limit): ms (min of {repeat}, "
              "interleaved), ratio to the row-scaled pass")
        t = {}
        for name, (pq, pk, s) in cases.items():
            _, c = linear_attention_fwd(pq, pk, v, causal=True, k_log_scale=s)
            c2 = c._replace(states=None)  # the two-sweep backward (no kept states)
            c3 = c._replace(states=c.states._replace(intra=None))   # kept states, intra weights recomputed
            tf, tb, tb2, tb3 = interleaved_min([
                lambda: linear_attention_fwd(pq, pk, v, causal=True, k_log_scale=s),
                lambda: linear_attention_bwd(dy, c), lambda: linear_attention_bwd(dy, c2),
                lambda: linear_attention_bwd(dy, c3)], repeat=repeat)
            states, intra = c.states                                          # kept states, in units of L m
            kept = (states.size + sum(a.size for a in intra or () if a is not None)) / pq.size
            print(f"{name:32s} backward from kept states {1e3 * tb:9.2f} ms, without the kept intra-chunk "
                  f"weights {1e3 * tb3:9.2f} ms, two sweeps {1e3 * tb2:9.2f} ms: bwd/fwd {tb / tf:5.2f} "
                  f"(without intra {tb3 / tf:5.2f}, two sweeps {tb2 / tf:5.2f}); kept {kept:.2f} L m")
            t[name] = (tf, tb)
        if dt_name == "float32":                                              # slow: one float32 run
            limit = _causal.SPREAD_LIMIT
            _causal.SPREAD_LIMIT = -1.0                                       # every chunk on the exact path
            try:
                _, c = linear_attention_fwd(phi_q, phi_k, v, causal=True, k_log_scale=frame)
                tf, tb = interleaved_min([
                    lambda: linear_attention_fwd(phi_q, phi_k, v, causal=True, k_log_scale=frame),
                    lambda: linear_attention_bwd(dy, c)], repeat=1)
                t["frames, every chunk exact"] = (tf, tb)
            finally:
                _causal.SPREAD_LIMIT = limit
        base_f, base_b = t["row log-scales (..., L)"]
        for name, (tf, tb) in t.items():
            print(f"{name:32s} fwd {1e3 * tf:9.2f} ({tf / base_f:5.2f}x)   "
                  f"bwd {1e3 * tb:9.2f} ({tb / base_b:5.2f}x)"
                  f"   bwd/fwd {tb / tf:5.2f}")


if __name__ == "__main__":
    main()
