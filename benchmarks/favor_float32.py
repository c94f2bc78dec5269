"""Float32 accuracy of FAVOR+ at large input norms: an error grid over the norms (not a timing benchmark).

    python benchmarks/favor_float32.py [--seeds 20] [--L 256] [--R 10,20,30,40,50,60] [--backend numba]
    [--grad]

For ``|q'| = |k'| = R`` (after the d^{-1/4} scaling; d = 64, m = 256, one head of L positions), queries in
random directions and keys either in random directions (``random``) or along rows of omega (``aligned``: the
keys whose exponent is largest), it runs ``favor_attention`` in float32 and in float64 on the same inputs and
omega (the float32 arrays cast up) and prints, per (features, mode, keys, R): how many of the seeds raise, and
the largest normwise error ``max|y32 - y64| / max|y64|`` over the seeds that do not (``--grad``: the same for
dq, dk, dv, domega with a random cotangent). float64 raising is reported separately (it never should).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from refattn.attention import favor_attention_bwd, favor_attention_fwd  # noqa: E402
from refattn.random import draw_gaussian  # noqa: E402


def inputs(seed, R, L, d, m, keys):
    rng = np.random.default_rng([22, seed])
    omega = draw_gaussian(rng, m, d)                                               # (m, d)
    q = rng.standard_normal((L, d))
    q *= R / np.linalg.norm(q, axis=-1, keepdims=True)                             # |q'| = R
    if keys == "aligned":
        rows = omega[rng.integers(0, m, size=L)]                                   # (L, d) rows of omega
        k = R * rows / np.linalg.norm(rows, axis=-1, keepdims=True)
    else:
        k = rng.standard_normal((L, d))
        k *= R / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((L, d))
    dy = rng.standard_normal((L, d))
    s = d ** 0.25                                                                  # favor applies d^{-1/4}
    return [a.astype(np.float32) for a in (q * s, k * s, v, omega, dy)]


def normwise(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def run(q, k, v, omega, dy, *, causal, features, grad):
    y, cache = favor_attention_fwd(q, k, v, omega, causal=causal, features=features)
    if not grad:
        return (y,)
    g = favor_attention_bwd(dy, cache)
    return (y, g.q, g.k, g.v, g.omega)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--L", type=int, default=256)
    ap.add_argument("--R", default="10,20,30,40,50,60")
    ap.add_argument("--features", default="positive,hyperbolic")
    ap.add_argument("--modes", default="bidirectional,causal")
    ap.add_argument("--keys", default="random,aligned")
    ap.add_argument("--backend", default=None, help="numba: run inside accel.use('numba')")
    ap.add_argument("--grad", action="store_true", help="also the backward (dq, dk, dv, domega)")
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    d, m = 64, 256
    Rs = [float(r) for r in args.R.split(",")]
    scope = None
    if args.backend:
        import accel

        scope = accel.use(args.backend)
        scope.__enter__()
    names = ["y", "dq", "dk", "dv", "domega"] if args.grad else ["y"]
    print(f"# FAVOR float32 vs float64, d={d}, m={m}, L={args.L}, seeds={args.seeds}, backend={args.backend}")
    print("| features | mode | keys | R | f32 raises | f64 raises | "
          + " | ".join(f"max err {n}" for n in names)
          + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(names))
    for features in args.features.split(","):
        for mode in args.modes.split(","):
            for keys in args.keys.split(","):
                for R in Rs:
                    raises32 = raises64 = 0
                    worst = [0.0] * len(names)
                    msgs = set()
                    for seed in range(args.seeds):
                        q, k, v, omega, dy = inputs(seed, R, args.L, d, m, keys)
                        kw = dict(causal=(mode == "causal"), features=features, grad=args.grad)
                        try:
                            out64 = run(*(a.astype(np.float64) for a in (q, k, v, omega, dy)), **kw)
                        except ValueError:
                            raises64 += 1
                            continue
                        try:
                            out32 = run(q, k, v, omega, dy, **kw)
                        except ValueError as exc:
                            raises32 += 1
                            msgs.add(str(exc)[:90])
                            continue
                        for i, (a, b) in enumerate(zip(out32, out64, strict=True)):
                            err = normwise(a.astype(np.float64), b)
                            worst[i] = max(worst[i], err if np.isfinite(err) else np.inf)
                    errs = " | ".join(f"{w:.1e}" for w in worst)
                    print(f"| {features} | {mode} | {keys} | {R:g} | {raises32}/{args.seeds} | "
                          f"{raises64}/{args.seeds} | {errs} |", flush=True)
                    for msg in sorted(msgs):
                        print(f"  raised: {msg}", file=sys.stderr)
    if scope is not None:
        scope.__exit__(None, None, None)


if __name__ == "__main__":
    main()
