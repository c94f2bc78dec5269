"""Benchmark: FLT Algorithm 1 (FLT-FAVOR+) vs plain FAVOR+ on the same workload, and its scaling in L.

    python benchmarks/flt.py [--quick] [--threads N] [--r 16,64] [--L 1024,2048,4096]

H = 8 heads, d = 64, m = 256 projections, float32, bidirectional and causal. Plain FAVOR+ is
positive_features_stable(q d^{-1/4}), positive_features_stable(k d^{-1/4}) and linear_attention; FLT adds
the real features N1, N2 (2r columns, Gaussian-mixture spectrum, D = 1) and projects d + 2r columns instead
of d. Prints median times, the ratio FLT / FAVOR+ for each r (target <= 1.3 at r = 16), and the log-log
slope of time against L (target 1 +- 0.2). BLAS threads pinned with threadpoolctl (printed).
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import timeit

from refattn import linear_attention, positive_features_stable
from refattn.random import draw_flt_noise, draw_orthogonal
from refattn.rpe.flt import flt_attention
from refattn.rpe.spectra import GaussianMixture, Proposal




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--r", default="16,64")
    ap.add_argument("--L", default="1024,2048,4096")
    args = ap.parse_args()
    H, d, m = 8, 64, 256
    Ls = [128, 256] if args.quick else [int(x) for x in args.L.split(",")]
    rs = [4] if args.quick else [int(x) for x in args.r.split(",")]
    if args.quick:
        H, m = 2, 32
    repeat = 2 if args.quick else 5
    dt = np.float32
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=args.threads):
        threads = [i.get("num_threads") for i in threadpool_info()]
        print(f"BLAS threads: {threads}; H={H} d={d} m={m} float32")
        spec = GaussianMixture(np.array([1.0, 0.5], dt), np.array([[0.0], [0.05]], dt),
                               np.array([0.05, 0.1], dt))
        prop = Proposal("gaussian", np.zeros(1, dt), np.array(0.12, dt))
        for causal in (False, True):
            times = {"favor": []}
            for r in rs:
                times[r] = []
            for L in Ls:
                rng = np.random.default_rng(L)
                q, k, v = (rng.standard_normal((H, L, d)).astype(dt) * 0.5 for _ in range(3))
                pos = np.arange(L, dtype=dt)[:, None]
                om = draw_orthogonal(rng, m, d, dtype=dt)
                s = d ** -0.25

                # Bound as defaults: each closure is timed within its own iteration (B023).
                def favor(q=q, k=k, v=v, s=s, om=om, causal=causal):
                    pq, _ = positive_features_stable(q * s, om)
                    pk, lk = positive_features_stable(k * s, om)
                    return linear_attention(pq, pk, v, causal=causal, k_log_scale=lk)

                t_f = timeit(favor, repeat)
                times["favor"].append(t_f)
                line = f"{'causal' if causal else 'bidir '} L={L:6d} FAVOR+ {t_f * 1e3:8.1f} ms"
                for r in rs:
                    eps = draw_flt_noise(rng, r, 1, dtype=dt)
                    om_r = draw_orthogonal(rng, m, d + 2 * r, dtype=dt)
                    def flt(q=q, k=k, v=v, pos=pos, eps=eps, om_r=om_r, causal=causal):
                        return flt_attention(q, k, v, pos, eps, spec, prop, om_r, causal=causal)

                    t_r = timeit(flt, repeat)
                    times[r].append(t_r)
                    line += f" | FLT r={r}: {t_r * 1e3:8.1f} ms (x{t_r / t_f:.2f})"
                print(line)
            for key, ts in times.items():
                if len(Ls) > 1:
                    slope = np.polyfit(np.log(Ls), np.log(ts), 1)[0]
                    label = key if key == "favor" else "FLT r=" + str(key)
                    print(f"  {'causal' if causal else 'bidir'} {label}: "
                          f"log-log slope of time vs L = {slope:.2f}")


if __name__ == "__main__":
    main()
