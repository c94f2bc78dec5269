"""Benchmark: the causal scans and the bidirectional pair against an earlier revision, same process (A/B).

    python benchmarks/causal_ab.py [--rev HEAD] [--threads 1] [--rounds 5] [--L 4096,16384] [--dtype float32]

"before" is ``refattn/attention/_causal.py`` as of git revision ``--rev``, imported beside today's (its
dispatch references are not attached), and the plain matmul for ``contract_rows`` (registered as a dispatch
backend); "after" is today's code. Timed, interleaved (process CPU time, one BLAS thread; minimum and median
of the rounds), on FAVOR+ features (H = 8, d = 64, m = 256, d_v = 64):

* per-feature key frames: the forward that keeps states, today's forward that keeps nothing (inference), and
  the one-sweep backward from the kept states;
* no key scale: the same for the row-scale scan (``causal_fwd_states`` / ``causal_bwd_stored``);
* bidirectional ``linear_attention_fwd`` / ``_bwd`` with ``contract_rows`` as one matmul (before) and in
  256-row blocks (after).
"""
# ruff: noqa: B023 -- every timed lambda runs inside the loop iteration that defines it

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from refattn import _dispatch
from refattn.attention import _causal, linear_attention_bwd, linear_attention_fwd
from refattn.features.key_frames import positive_key_features_stable
from refattn.features.positive import positive_features_stable
from refattn.random import draw_orthogonal


def load_before(rev):
    """``refattn/attention/_causal.py`` at `rev` as ``refattn.attention._causal_before``."""
    root = Path(__file__).resolve().parent.parent
    src = subprocess.run(["git", "show", f"{rev}:refattn/attention/_causal.py"], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    name = "refattn.attention._causal_before"
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
    mod.__package__ = "refattn.attention"
    sys.modules[name] = mod
    define = _dispatch.define
    _dispatch.define = lambda primitive, fn=None: (lambda f: f) if fn is None else fn   # attach nothing
    try:
        exec(compile(src, f"{rev}:refattn/attention/_causal.py", "exec"), mod.__dict__)
    finally:
        _dispatch.define = define
    return mod


def plain_contract(a, b):
    return np.swapaxes(a, -1, -2) @ b


_dispatch.register("contract_rows_plain_matmul", "contract_rows", plain_contract)


def stats(fns, rounds):
    for fn in fns.values():
        fn()
    ts = {n: [] for n in fns}
    for _ in range(rounds):
        for n, fn in fns.items():
            t0 = time.process_time()
            fn()
            ts[n].append(time.process_time() - t0)
    return {n: (min(t), float(np.median(t))) for n, t in ts.items()}


def report(title, t, pairs):
    print(f"{title}: " + ", ".join(f"{n} {1e3 * a:.1f}/{1e3 * b:.1f}" for n, (a, b) in t.items()))
    for label, a, b in pairs:
        print(f"  {label}: {t[a][0] / t[b][0]:.2f} (medians {t[a][1] / t[b][1]:.2f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--L", default="4096,16384")
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    old = load_before(args.rev)
    H, d, m, d_v, C = 8, 64, 256, 64, 32
    dt = np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    with threadpool_limits(limits=args.threads):
        print(f"# benchmarks/causal_ab.py | before: {args.rev} | {dt.name} | BLAS threads {args.threads} | "
              f"process CPU time, min/median of {args.rounds} interleaved rounds (ms) | load "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for L in (int(x) for x in args.L.split(",")):
            omega = draw_orthogonal(rng, m, d, dtype=dt)
            k = (0.5 * d ** -0.25 * rng.standard_normal((1, H, L, d))).astype(dt)
            q = (0.5 * d ** -0.25 * rng.standard_normal((1, H, L, d))).astype(dt)
            v = rng.standard_normal((1, H, L, d_v)).astype(dt)
            v_aug = np.concatenate([v, np.ones_like(v[..., :1])], -1)
            g = rng.standard_normal((1, H, L, d_v + 1)).astype(dt)
            pk, s = positive_key_features_stable(k, omega, causal=True)
            pq, _ = positive_features_stable(q, omega, k_log_scale=s)
            stride = _causal.state_stride(C, d_v + 1)
            _, kept_old = old._causal_frames_fwd_reference(pq, pk, v_aug, s, C, stride)
            fwd_new = _dispatch.reference("linear_attention.causal_frames_fwd")
            bwd_new = _dispatch.reference("linear_attention.causal_frames_bwd")
            kept_new = fwd_new(pq, pk, v_aug, s, C, stride)[1]
            t = stats({
                "before_fwd": lambda: old._causal_frames_fwd_reference(pq, pk, v_aug, s, C, stride),
                "after_fwd": lambda: fwd_new(pq, pk, v_aug, s, C, stride),
                "after_inference": lambda: fwd_new(pq, pk, v_aug, s, C, None),
                "before_bwd": lambda: old._causal_frames_bwd_reference(g, pq, pk, v_aug, s, C, kept_old,
                                                                       stride, log_features=True),
                "after_bwd": lambda: bwd_new(g, pq, pk, v_aug, s, C, kept_new, stride, log_features=True),
            }, args.rounds)
            report(f"L={L} per-feature frames", t, [
                ("fwd after/before", "after_fwd", "before_fwd"),
                ("inference after / fwd before", "after_inference", "before_fwd"),
                ("bwd after/before", "after_bwd", "before_bwd"),
                ("bwd/fwd before", "before_bwd", "before_fwd"), ("bwd/fwd after", "after_bwd", "after_fwd")])
            _, _, ko = old.causal_fwd_states(pq, pk, v_aug, None, C, stride)
            _, _, kn = _causal.causal_fwd_states(pq, pk, v_aug, None, C, stride)
            t = stats({
                "before_fwd": lambda: old.causal_fwd_states(pq, pk, v_aug, None, C, stride),
                "after_fwd": lambda: _causal.causal_fwd_states(pq, pk, v_aug, None, C, stride),
                "after_inference": lambda: _causal.causal_fwd_states(pq, pk, v_aug, None, C, None),
                "before_bwd": lambda: old.causal_bwd_stored(g, pq, pk, v_aug, None, None, C, ko, stride),
                "after_bwd": lambda: _causal.causal_bwd_stored(g, pq, pk, v_aug, None, None, C, kn, stride),
            }, args.rounds)
            report(f"L={L} no key scale", t, [
                ("fwd after/before", "after_fwd", "before_fwd"),
                ("inference after / fwd before", "after_inference", "before_fwd"),
                ("bwd after/before", "after_bwd", "before_bwd"),
                ("bwd/fwd before", "before_bwd", "before_fwd"), ("bwd/fwd after", "after_bwd", "after_fwd")])
            _, cache = linear_attention_fwd(pq, pk, v)
            dy = g[..., :d_v]

            def before(fn):
                def run():
                    with _dispatch.use_backend("contract_rows_plain_matmul"):
                        return fn()
                return run

            t = stats({"before_fwd": before(lambda: linear_attention_fwd(pq, pk, v)),
                       "after_fwd": lambda: linear_attention_fwd(pq, pk, v),
                       "before_bwd": before(lambda: linear_attention_bwd(dy, cache)),
                       "after_bwd": lambda: linear_attention_bwd(dy, cache)}, args.rounds)
            report(f"L={L} bidirectional pair", t, [
                ("fwd after/before", "after_fwd", "before_fwd"),
                ("bwd after/before", "after_bwd", "before_bwd"),
                ("bwd/fwd before", "before_bwd", "before_fwd"), ("bwd/fwd after", "after_bwd", "after_fwd")])


if __name__ == "__main__":
    main()
