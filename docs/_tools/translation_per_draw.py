"""How far one random-feature draw of S1 and FLT attention is from translation invariance (a measurement).

Exact S1 / FLT attention depends on positions only through differences: shifting every position by the same
offset leaves the output unchanged (to rounding), which is what makes the models translation-equivariant.
Their FAVOR+ estimates apply positive random features exp(omega . [x, positional features(z)]) to the
*absolute* positional features, so one draw of omega gives an output that changes when all positions shift;
the estimate is invariant only in distribution (its mean over draws is). This script measures both, on the
shape of the Horn/FLT image experiments at size full (14 x 14 token grid, head width 16, m = 64 orthogonal
features, 4 lengthscales per axis): per draw, ``|y(z + t) - y(z)|_F / |y(z)|_F`` for horizontal shifts of
t = 1..4 tokens, with the same content and the same draw; and for the exact (softmax) output.

    python docs/_tools/translation_per_draw.py [--draws 256] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

from refattn.random import draw_flt_noise, draw_orthogonal, init_s1_params
from refattn import softmax_attention
from refattn.rpe import GaussianKernel, flt_attention, kernel_proposal, rpe_mask, s1_attention


def rel(a, b):
    """|a - b|_F / |b|_F."""
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    side, d, m, S, r = 14, 16, 64, 4, 16
    L = side * side
    grid = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1).reshape(L, 2) * 1.0
    q, k, v = rng.standard_normal((3, L, d))                       # one head's content (L, d)
    s1 = init_s1_params(rng, n_axes=2, n_lengthscales=S)
    spectrum = GaussianKernel(C=np.asarray(1.0), length=np.asarray(3.0))
    proposal = kernel_proposal(spectrum, 2)
    shifts = (1, 2, 3, 4)

    def s1_y(z, omega=None):
        return s1_attention(q, k, v, z, s1, omega=omega)

    def flt_y(z, eps, omega):
        return flt_attention(q, k, v, z, eps, spectrum, proposal, omega)

    print(f"L = {L} ({side} x {side} grid), d = {d}, m = {m} orthogonal features, {args.draws} draws, "
          f"seed {args.seed}; shift t tokens along the columns: z -> z + (0, t)")
    exact_s1 = max(rel(s1_y(grid + [0, t]), s1_y(grid)) for t in shifts)

    def flt_exact(z):
        return softmax_attention(q, k, v, mask_add=rpe_mask(z, spectrum))

    exact_flt = max(rel(flt_exact(grid + [0, t]), flt_exact(grid)) for t in shifts)
    print(f"exact (softmax with the RPE): max over t of |y(z+t) - y(z)| / |y(z)|: S1 {exact_s1:.1e}, "
          f"FLT {exact_flt:.1e}")
    for name in ("S1 FAVOR+", "FLT FAVOR+"):
        per = np.empty((args.draws, len(shifts)))
        y0s, yts = [], []
        for n in range(args.draws):
            if name == "S1 FAVOR+":
                omega = draw_orthogonal(rng, m, d + 2 * 2 * S)
                y0, ys = s1_y(grid, omega), [s1_y(grid + [0, t], omega) for t in shifts]
            else:
                eps = draw_flt_noise(rng, r, 2)
                omega = draw_orthogonal(rng, m, 2 * r + d)
                y0, ys = flt_y(grid, eps, omega), [flt_y(grid + [0, t], eps, omega) for t in shifts]
            per[n] = [rel(y, y0) for y in ys]
            y0s.append(y0)
            yts.append(ys)
        lo, med, hi = np.percentile(per, [0, 50, 100])
        print(f"{name}: per draw |y(z+t) - y(z)| / |y(z)| over {per.size} (draw, t): min {lo:.2f}, median "
              f"{med:.2f}, max {hi:.2f}; median by t: "
              + ", ".join(f"t={t}: {np.median(per[:, i]):.2f}" for i, t in enumerate(shifts)))
        y0s, yts = np.stack(y0s), np.stack(yts)                   # (draws, L, d), (draws, shifts, L, d)
        for n in (args.draws // 16, args.draws // 4, args.draws):
            m0 = y0s[:n].mean(0)
            print(f"{name}: means over {n:4d} draws: |mean y(z+t) - mean y(z)| / |mean y(z)| = "
                  + ", ".join(f"{rel(yts[:n, i].mean(0), m0):.3f}" for i in range(len(shifts))))

if __name__ == "__main__":
    main()
