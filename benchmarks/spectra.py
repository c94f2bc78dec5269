"""Benchmark: the KL-Transformer's learnable spectra (GMM, FastFood, Generative; RKS and PRF) against FAVOR+.

    python benchmarks/spectra.py [--quick] [--threads N]

Prints (default sizes; ``--quick``: H = 2, L = 256 and 512..2048 for the slopes, fewer repeats):

1. time of one feature-map forward on x of shape (1, H, L, d), H = 8, d = 64, M = 256 frequencies,
   L = 4096, for every map, as a ratio to plain FAVOR+ (``positive_features_stable`` with a (256, 64)
   Gaussian omega) measured in the same run. RKS maps output 2M columns, PRF maps M. GMM: C = 2
   components, full factors (RKS) and diagonal factors (PRF); Generative: evaluation mode (its generator
   runs once per call, included). FastFood: the FWHT path, and the same features through the explicit V
   (dense GEMM) for comparison;
2. ``fwht`` against ``x @ scipy.linalg.hadamard(d)`` on (8 x 4096, d) arrays, d in {64, 256, 1024};
3. linear scaling in L: the slope of log(time) vs log(L) over L in {1024, 2048, 4096, 8192, 16384}
   (median of repeated runs per L) for every map; a linear-time map has slope 1 (cache effects move
   single runs by ~0.15).

BLAS threads are pinned with threadpoolctl (``--threads``, default 1) and printed. Every ratio compares
numbers measured in this one run.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from _timing import timeit  # noqa: E402
import scipy.linalg  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from refattn.features.fastfood import fastfood_prf_features_stable, fastfood_rks_features  # noqa: E402
from refattn.features.fastfood_transform import fastfood_matrix  # noqa: E402
from refattn.features.fwht import fwht  # noqa: E402
from refattn.features.generative import generative_prf_features_stable, generative_rks_features  # noqa: E402
from refattn.features.gmm import gmm_prf_features_stable, gmm_rks_features  # noqa: E402
from refattn.features.gmm_spectrum import GMMParams  # noqa: E402
from refattn.features.positive import positive_features_stable  # noqa: E402
from refattn.features.trig import trig_features  # noqa: E402
from refattn.random import (draw_fastfood, draw_gaussian, draw_generator_noise, draw_gmm_noise,  # noqa: E402
                            init_generator)




def make_maps(rng, d, M):
    omega = draw_gaussian(rng, M, d)
    C = 2
    gmm_full = GMMParams(np.zeros(C), 0.1 * rng.standard_normal((C, d)), np.stack([np.eye(d)] * C))
    gmm_diag = GMMParams(np.zeros(C), 0.1 * rng.standard_normal((C, d)), np.ones((C, d)))
    noise = draw_gmm_noise(rng, C, M, d)
    ff = draw_fastfood(rng, M, d)
    V = fastfood_matrix(ff, d)
    gp, gs = init_generator(rng, d)
    gnoise = draw_generator_noise(rng, M, d)
    return {
        "FAVOR+ (positive_features_stable)": lambda x: positive_features_stable(x, omega),
        "GMM-RKS (C=2, full S)": lambda x: gmm_rks_features(x, noise, gmm_full),
        "GMM-PRF (C=2, diagonal S, stable)": lambda x: gmm_prf_features_stable(x, noise, gmm_diag),
        "FastFood-RKS (FWHT path)": lambda x: fastfood_rks_features(x, ff),
        "FastFood-PRF (FWHT path, stable)": lambda x: fastfood_prf_features_stable(x, ff),
        "FastFood-RKS via explicit V (GEMM)": lambda x: trig_features(x, V),
        "Generative-RKS (eval)": lambda x: generative_rks_features(x, gnoise, gp, gs, train=False),
        "Generative-PRF (eval, stable)": lambda x: generative_prf_features_stable(
            x, gnoise, gp, gs, train=False),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    args = ap.parse_args(argv)
    H, d, M = (2, 64, 256) if args.quick else (8, 64, 256)
    L = 256 if args.quick else 4096
    Ls = (512, 1024, 2048) if args.quick else (1024, 2048, 4096, 8192, 16384)
    repeat = 3 if args.quick else 7
    rng = np.random.default_rng(0)
    with threadpool_limits(limits=args.threads):
        blas = [(i.get("internal_api"), i.get("num_threads")) for i in threadpool_info()]
        print(f"BLAS threads pinned: {blas}")
        print(f"sizes: H = {H}, d = {d}, M = {M}, L = {L}; repeats = {repeat} (median)\n")
        maps = make_maps(rng, d, M)
        x = 0.125 * rng.standard_normal((1, H, L, d))                      # d^-1/4 scaled queries
        print(f"1. one forward, (1, {H}, {L}, {d}) -> features; ratio to FAVOR+ in this run")
        base = None
        for name, fn in maps.items():
            t = timeit(lambda fn=fn: fn(x), repeat)  # loop variables bound as defaults (B023)
            base = t if base is None else base
            print(f"   {name:40s} {1e3 * t:9.2f} ms   x{t / base:6.2f}")
        print("\n2. fwht vs dense Hadamard product on (8 x 4096, d) rows" if not args.quick
              else "\n2. fwht vs dense Hadamard product on (2 x 256, d) rows")
        N = H * L
        for dd in (64, 256, 1024):
            y = rng.standard_normal((N, dd))
            Hm = scipy.linalg.hadamard(dd).astype(np.float64)
            t_f = timeit(lambda y=y: fwht(y), repeat)
            t_d = timeit(lambda y=y, Hm=Hm: y @ Hm, repeat)
            print(f"   d = {dd:5d}: fwht {1e3 * t_f:8.2f} ms, dense {1e3 * t_d:8.2f} ms, "
                  f"fwht/dense x{t_f / t_d:5.2f}")
        print(f"\n3. slope of log time vs log L over L in {Ls} (median of {repeat} runs per L)")
        for name, fn in maps.items():
            ts = []
            for LL in Ls:
                xl = 0.125 * rng.standard_normal((1, H, LL, d))
                ts.append(timeit(lambda fn=fn, xl=xl: fn(xl), repeat))
            slope = float(np.polyfit(np.log(Ls), np.log(ts), 1)[0])
            flag = "" if abs(slope - 1) <= 0.2 else "   (outside 1 +- 0.2)"
            print(f"   {name:40s} slope {slope:5.2f}{flag}")


if __name__ == "__main__":
    main()
