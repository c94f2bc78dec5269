"""Benchmark on a CUDA device: FAVOR+ on CuPy against the device's measured roofline and performer-pytorch.

    python benchmarks/gpu.py [--quick] [--L 4096,16384,65536] [--dtypes float32,float64] [--repeat 10]

Needs CuPy and a CUDA device (``refattn[gpu]``); the performer-pytorch rows also need torch with CUDA and
``performer_pytorch`` (skipped cleanly otherwise). Prints, for H = 8 heads, d = 64, m = 256 features, d_v =
64:

1. the device's ceilings measured in this run: the GEMM rate of a square CuPy matmul (8192, per dtype; TF32
off,
   CuPy's default) and the memory bandwidth of a device-to-device copy of 1 GiB (bytes read + written);
2. FAVOR+ (``favor_attention_fwd``/``_bwd``, positive features) on CuPy arrays, bidirectional and causal,
   forward and backward: the array-API reference as it runs on CuPy (``accel`` off), and inside
   ``accel.use("cupy")`` (the kernels of ``accel/cupy/`` at the hot primitives, where they exist);
3. the fraction of the roofline reached: roofline time = max(flops / GEMM rate, bytes / bandwidth) with the
flop
   count of the unavoidable GEMMs (forward, per head: ``4 L d m`` projections + ``4 L m (d_v + 1)`` attention)
   and the bytes of a fully fused pass (read q, k, v, write y);
4. performer-pytorch ``FastAttention`` on torch CUDA with the same omega copied into its projection buffer,
   forward, both modes, and refattn's time over its time;
5. a breakdown of the causal forward: the feature maps alone, the causal scan alone (features given).

Times are medians over ``--repeat`` runs timed with CUDA events after two warm-ups; every ratio compares
numbers measured in this one run.
"""
# ruff: noqa: B023 -- every timed lambda runs inside the loop iteration that defines it

from __future__ import annotations

import argparse
import os
import sys
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import numpy as np  # noqa: E402

H, D, M, DV = 8, 64, 256, 64


def gpu_time(fn, *, repeat):
    """Median seconds of `fn()` over `repeat` runs, timed with CUDA events (two warm-ups first)."""
    import cupy

    for _ in range(2):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    ts = []
    for _ in range(repeat):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(a, b) * 1e-3)
    return float(np.median(ts))


def torch_time(fn, *, repeat):
    import torch

    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e-3)
    return float(np.median(ts))


def ceilings(dtypes, repeat):
    import cupy

    out = {}
    n = 8192
    for dt in dtypes:
        a = cupy.random.standard_normal((n, n), dtype=dt)
        b = cupy.random.standard_normal((n, n), dtype=dt)
        t = gpu_time(lambda a=a, b=b: a @ b, repeat=repeat)
        out[("gemm", dt)] = 2.0 * n**3 / t
        print(f"ceiling  GEMM {dt:7s} {n}^3: {t * 1e3:8.3f} ms  {out[('gemm', dt)] / 1e12:7.2f} TFLOP/s")
        del a, b
    x = cupy.empty(2**28, dtype=cupy.float32)                  # 1 GiB
    y = cupy.empty_like(x)
    t = gpu_time(lambda: cupy.copyto(y, x), repeat=repeat)
    out["bw"] = 2.0 * x.nbytes / t
    print(f"ceiling  copy 1 GiB: {t * 1e3:8.3f} ms  {out['bw'] / 1e12:7.3f} TB/s (read + write)")
    return out


def flops_favor(L, *, backward):
    """GEMM flops of the forward; the backward's GEMMs are twice the forward's."""
    fwd = H * (4.0 * L * D * M + 4.0 * L * M * (DV + 1))
    return 2.0 * fwd if backward else fwd


def bytes_fused(L, itemsize, *, backward):
    """Bytes a fully fused pass must move: forward reads q, k, v and writes y; backward reads q, k, v, dy and
    writes dq, dk, dv."""
    per_row = (4 * D + 3 * DV) if backward else (3 * D + DV)
    return H * L * per_row * itemsize


def make_inputs(L, dt, seed=0):
    import cupy

    from refattn.random import draw_orthogonal

    rng = np.random.default_rng(seed)
    q = cupy.asarray(rng.standard_normal((1, H, L, D)) * 0.5, dtype=dt)
    k = cupy.asarray(rng.standard_normal((1, H, L, D)) * 0.5, dtype=dt)
    v = cupy.asarray(rng.standard_normal((1, H, L, DV)), dtype=dt)
    omega = cupy.asarray(draw_orthogonal(rng, M, D), dtype=dt)
    dy = cupy.asarray(rng.standard_normal((1, H, L, DV)), dtype=dt)
    return q, k, v, omega, dy


def scope(backend):
    """The context a backend's rows run in: nothing for the reference, ``accel.use(backend)`` otherwise."""
    import contextlib

    import accel

    return contextlib.nullcontext() if backend == "reference" else accel.use(backend)


def favor_rows(L, dt, ceil, repeat, backends):
    from refattn.attention import favor_attention_bwd, favor_attention_fwd

    q, k, v, omega, dy = make_inputs(L, dt)
    res = {}
    for backend in backends:
        for causal in (False, True):
            if backend == "reference" and causal and L > 16384:
                print(f"favor+ {dt:7s} L={L:6d} causal reference: not timed (its loop over L/C chunks takes "
                      "over a second per call here; see the rows at L <= 16384)")
                continue

            def fwd():
                with scope(backend):
                    return favor_attention_fwd(q, k, v, omega, causal=causal)

            _, cache = fwd()

            def bwd():
                with scope(backend):
                    return favor_attention_bwd(dy, cache)

            tf = gpu_time(fwd, repeat=repeat)
            tb = gpu_time(bwd, repeat=repeat)
            res[(backend, causal)] = (tf, tb)
            itemsize = np.dtype(dt).itemsize
            roof_f = max(flops_favor(L, backward=False) / ceil[("gemm", dt)],
                         bytes_fused(L, itemsize, backward=False) / ceil["bw"])
            roof_b = max(flops_favor(L, backward=True) / ceil[("gemm", dt)],
                         bytes_fused(L, itemsize, backward=True) / ceil["bw"])
            mode = "causal" if causal else "bidir"
            print(f"favor+ {dt:7s} L={L:6d} {mode:6s} {backend:9s} fwd {tf * 1e3:8.3f} ms "
                  f"({roof_f / tf * 100:5.1f}% of roofline {roof_f * 1e3:7.3f} ms)   bwd {tb * 1e3:8.3f} ms "
                  f"({roof_b / tb * 100:5.1f}% of {roof_b * 1e3:7.3f} ms)  bwd/fwd {tb / tf:5.2f}")
    for backend in backends:
        if (backend, True) not in res:
            continue
        print(f"favor+ {dt:7s} L={L:6d} {backend:9s} causal/bidir fwd "
              f"{res[(backend, True)][0] / res[(backend, False)][0]:5.2f}")
    return res


def features_given(L, dt):
    """Inputs and their FAVOR+ features: ``q, k, v, omega, dy, phi_q, phi_k, k_log_scale``."""
    from refattn.features.positive import positive_features_stable_fwd

    q, k, v, omega, dy = make_inputs(L, dt)
    (pq, _), _ = positive_features_stable_fwd(q * float(D) ** -0.25, omega)
    (pk, s), _ = positive_features_stable_fwd(k * float(D) ** -0.25, omega)
    return q, k, v, omega, dy, pq, pk, s


def breakdown(L, dt, repeat, backends):
    from refattn.attention.linear import linear_attention_fwd
    from refattn.features.positive import positive_features_stable_fwd

    q, k, v, omega, dy, pq, pk, s = features_given(L, dt)
    scale = float(D) ** -0.25
    for backend in backends:
        def feats():
            with scope(backend):
                positive_features_stable_fwd(q * scale, omega)
                positive_features_stable_fwd(k * scale, omega)

        t_feat = gpu_time(feats, repeat=repeat)
        line = f"breakdown {dt:7s} L={L:6d} {backend:9s} both feature maps {t_feat * 1e3:8.3f} ms"
        for causal in (False, True):
            if backend == "reference" and causal and L > 16384:
                continue
            def scan():
                with scope(backend):
                    linear_attention_fwd(pq, pk, v, causal=causal, k_log_scale=s)
            t = gpu_time(scan, repeat=repeat)
            line += f" | linear attention {'causal' if causal else 'bidir'} {t * 1e3:8.3f} ms"
        print(line)


def chunk_sweep(L, dt, repeat):
    from refattn.attention.linear import linear_attention_fwd

    _, _, v, _, _, pq, pk, s = features_given(L, dt)
    line = f"reference causal chunk sweep {dt} L={L}:"
    for c in (32, 64, 128, 256, 512):
        t = gpu_time(lambda: linear_attention_fwd(pq, pk, v, causal=True, k_log_scale=s, chunk_size=c),
                     repeat=repeat)
        line += f"  C={c}: {t * 1e3:.3f} ms"
    print(line)


def gpu_chunk_sweep(L, dt, repeat):
    """The chunk-parallel CUDA scan (accel.cupy) at chunk lengths C, forward and backward, features given."""
    import array_api_compat

    import cupy

    from accel.cupy import causal, chunk_parallel

    _, _, v, _, dy, pq, pk, s = features_given(L, dt)

    B = H
    pq, pk = pq.reshape(B, L, M), pk.reshape(B, L, M)
    ua = cupy.concatenate([v.reshape(B, L, DV), cupy.ones((B, L, 1), dtype=v.dtype)], axis=-1)
    s = s.reshape(B, L)
    g = cupy.concatenate([dy.reshape(B, L, DV), cupy.ones((B, L, 1), dtype=v.dtype)], axis=-1)
    xp = array_api_compat.array_namespace(pq)
    line = f"cupy chunk-parallel scan {dt} L={L} (fwd / bwd ms, log-scales on):"
    for C in (16, 32, 64, 128, 256):
        tf = gpu_time(lambda: chunk_parallel.causal_fwd(pq, pk, ua, s, C, xp=xp, scan_fwd=causal.scan_fwd),
                      repeat=repeat)
        tb = gpu_time(lambda: chunk_parallel.causal_bwd(g, pq, pk, ua, s, C, xp=xp, scan_fwd=causal.scan_fwd,
                                                        scan_rev=causal.scan_rev), repeat=repeat)
        flops = B * 4.0 * L * M * (DV + 1)
        line += f"  C={C}: {tf * 1e3:.3f} / {tb * 1e3:.3f} ({flops / tf / 1e12:.1f} TFLOP/s fwd)"
    print(line)


def micro_profile(L, dt, repeat):
    """Each step of the bidirectional FAVOR+ forward alone, to see where the time goes."""
    import cupy

    from refattn.attention.linear import linear_attention_fwd
    from refattn._dispatch import reference

    _positive_features_stable_reference = reference("positive_features_stable")

    q, k, v, omega, dy = make_inputs(L, dt)
    N = H * L
    x2 = q.reshape(N, D)
    u = x2 @ omega.T
    phi = cupy.exp(u - u.max(axis=-1, keepdims=True)).reshape(1, H, L, M)
    s = cupy.zeros((1, H, L), dtype=q.dtype)
    ua = cupy.concatenate([v, cupy.ones((1, H, L, 1), dtype=v.dtype)], axis=-1)
    kv = cupy.swapaxes(phi, -1, -2) @ ua
    rows = [
        ("projection GEMM (N, d) x (d, m)", lambda: x2 @ omega.T),
        ("row max of (N, m)", lambda: u.max(axis=-1, keepdims=True)),
        ("u - max (N, m)", lambda: u - u[:, :1]),
        ("exp (N, m)", lambda: cupy.exp(u)),
        ("isfinite + all + sync on (N, m)", lambda: bool(cupy.all(cupy.isfinite(u)))),
        ("reference positive_features_stable", lambda: _positive_features_stable_reference(q, omega)),
        ("concat [v, 1]", lambda: cupy.concatenate([v, cupy.ones((1, H, L, 1), dtype=v.dtype)], axis=-1)),
        ("phi_k^T [v, 1] (batched, K = L)", lambda: cupy.swapaxes(phi, -1, -2) @ ua),
        ("phi_q kv (batched)", lambda: phi @ kv),
        ("linear_attention_fwd bidir (checks included)",
         lambda: linear_attention_fwd(phi, phi, v, k_log_scale=s)),
    ]
    for label, fn in rows:
        print(f"profile {dt} L={L} {label:48s} {gpu_time(fn, repeat=repeat) * 1e3:8.3f} ms")
    from accel.cupy import contract

    keep = contract.ROWS_PER_SPLIT, contract.LOOP_MAX_BATCH
    phik = phi.reshape(1, H, L, M)
    du2, xx = u, x2
    t = gpu_time(lambda: contract.contract_rows(phik, ua), repeat=repeat)
    print(f"profile {dt} L={L} contract_rows as registered (a loop of {H} 2-D GEMMs): phi_k^T [v, 1] "
          f"{t * 1e3:7.3f} ms")
    try:
        contract.LOOP_MAX_BATCH = 0
        for R in (256, 512, 1024, 2048, 4096, 1 << 30):
            contract.ROWS_PER_SPLIT = R
            t1 = gpu_time(lambda: contract.contract_rows(phik, ua), repeat=repeat)
            t2 = gpu_time(lambda: contract.contract_rows(du2, xx), repeat=repeat)
            print(f"profile {dt} L={L} contract_rows split R={R if R < 1 << 30 else 'none':>5}: "
                  f"phi_k^T [v, 1] {t1 * 1e3:7.3f} ms, du^T x (N={N}, m={M}, d={D}) {t2 * 1e3:7.3f} ms")
    finally:
        contract.ROWS_PER_SPLIT, contract.LOOP_MAX_BATCH = keep


def performer_rows(L, dt, repeat, refattn_times):
    try:
        import torch
        from performer_pytorch import FastAttention
    except ImportError as exc:
        print(f"performer-pytorch: skipped ({type(exc).__name__}: {exc})")
        return
    if not torch.cuda.is_available():
        print("performer-pytorch: skipped (torch sees no CUDA device)")
        return
    import cupy

    q, k, v, omega, _ = make_inputs(L, dt)
    tdt = getattr(torch, dt)
    tq, tk, tv, tom = (torch.as_tensor(cupy.asnumpy(a), device="cuda", dtype=tdt) for a in (q, k, v, omega))
    for causal in (False, True):
        att = FastAttention(dim_heads=D, nb_features=M, causal=causal).to(device="cuda", dtype=tdt)
        att.projection_matrix = tom

        def run():
            with torch.no_grad():
                return att(tq, tk, tv)

        try:
            t = torch_time(run, repeat=repeat)
        except Exception as exc:  # noqa: BLE001 - report and go on (e.g. out of memory in its causal path)
            print(f"performer-pytorch {dt} L={L} causal={causal}: failed ({type(exc).__name__}: {exc})")
            continue
        mode = "causal" if causal else "bidir"
        line = f"performer-pytorch FastAttention {dt:7s} L={L:6d} {mode:6s} fwd {t * 1e3:8.3f} ms"
        for (backend, c), (tf, _) in refattn_times.items():
            if c == causal:
                line += f" | refattn {backend} / performer-pytorch {tf / t:6.2f}"
        print(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--L", default="4096,16384,65536")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--sections", default="ceilings,favor,breakdown,sweep,gpusweep,profile,performer")
    args = ap.parse_args()
    import cupy

    import accel
    import refattn

    Ls = [256, 1024] if args.quick else [int(x) for x in args.L.split(",")]
    dtypes = args.dtypes.split(",")
    repeat = 3 if args.quick else args.repeat
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"device: {name}, cupy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, "
          f"numpy {np.__version__}, refattn from {os.path.dirname(refattn.__file__)}")
    print(f"accel.available(): {accel.available()}; H={H} d={D} m={M} d_v={DV}; CUPY_TF32="
          f"{os.environ.get('CUPY_TF32', '0')}")
    backends = ["reference", "cupy"]
    sections = set(args.sections.split(","))
    ceil = ceilings(dtypes, repeat)
    for dt in dtypes:
        for L in Ls:
            times = {}
            for section in ("favor", "breakdown", "sweep", "gpusweep", "profile", "performer"):
                if section not in sections:
                    continue
                try:
                    if section == "favor":
                        times = favor_rows(L, dt, ceil, repeat, backends)
                    elif section == "breakdown":
                        breakdown(L, dt, repeat, backends)
                    elif section == "sweep" and L == Ls[len(Ls) // 2]:
                        chunk_sweep(L, dt, repeat)
                    elif section == "gpusweep" and L == Ls[len(Ls) // 2]:
                        gpu_chunk_sweep(L, dt, repeat)
                    elif section == "profile" and L == Ls[len(Ls) // 2] and dt == dtypes[0]:
                        micro_profile(L, dt, repeat)
                    elif section == "performer":
                        performer_rows(L, dt, repeat, times)
                except Exception:  # noqa: BLE001 - one failing section must not hide the others' numbers
                    print(f"section {section} {dt} L={L} failed:")
                    traceback.print_exc(file=sys.stdout)
                cupy.get_default_memory_pool().free_all_blocks()
            sys.stdout.flush()


if __name__ == "__main__":
    main()
