"""Benchmark on a CUDA device: FAVOR+ on CuPy against the device's measured roofline and performer-pytorch.

    python benchmarks/gpu.py [--quick] [--L 4096,16384,65536] [--dtypes float32,float64] [--repeat 10]

Needs CuPy and a CUDA device (``refattn[gpu]``); the performer-pytorch rows also need torch with CUDA and
``performer_pytorch`` (skipped cleanly otherwise). Prints, for H = 8 heads, d = 64, m = 256 features,
d_v = 64:

1. the device's ceilings measured in this run: the GEMM rate of a square CuPy matmul (8192, per dtype; TF32
   off, CuPy's default) and the memory bandwidth of a device-to-device copy of 1 GiB (bytes read + written);
2. FAVOR+ (``favor_attention_fwd``/``_bwd``, positive features) on CuPy arrays, bidirectional and causal,
   forward and backward: the array-API reference as it runs on CuPy (``accel`` off), and inside
   ``accel.use("cupy")`` (the kernels of ``accel/cupy/`` at the hot primitives, where they exist);
3. the fraction of the roofline reached: roofline time = max(flops / GEMM rate, bytes / bandwidth) with the
   flop count of the unavoidable GEMMs (forward, per head: ``4 L d m`` projections + ``4 L m (d_v + 1)``
   attention) and the bytes of a fully fused pass (read q, k, v, write y);
4. performer-pytorch ``FastAttention`` on torch CUDA with the same omega copied into its projection buffer,
   forward, both modes, and refattn's time over its time;
5. a breakdown of the causal forward: the feature maps alone, the causal scan alone (features given);
6. ``roofline``: the bidirectional and causal FAVOR+ forward (``accel.use("cupy")``, float32 by default)
   against two rooflines: the measured one (the same GEMMs and exp passes timed alone in the same process: two
   projection GEMMs, one exp pass per feature matrix, and the attention GEMMs: ``phi_k^T [v, 1]`` and ``phi_q
   kv`` bidirectional, the chunk-parallel scan's batched GEMMs at ``GPU_CHUNK_SIZE`` causal) and the
   theoretical one of item 3 (causal: plus the intra-chunk flops ``2 L C (m + d_v + 1)`` per head);
7. ``fla``: the causal scan against flash-linear-attention's Triton chunk kernel
   (``fla.ops.linear_attn.chunk_linear_attn(q, k, v, scale=1.0, normalize=False)``, layout (B, L, H, m)) on
   the same positive features, m = 64 and 128, d_v = 64, forward and forward + backward: the unnormalised
   numerator on both sides (refattn's ``accel.cupy.causal.causal_fwd``/``_bwd`` with ``v`` as the value
   operand), the error of each against the same scan in float64, and refattn's extra costs apart: the
   normaliser column (``[v, 1]``), row log-scales, the per-feature frames (the primitive
   ``linear_attention.causal_frames_fwd``/``_bwd`` as ``accel.use("cupy")`` dispatches it) and the checked
   public ``linear_attention_fwd``/``_bwd`` with frames. float32 on both sides with no TF32: torch's
   ``allow_tf32`` off, Triton's ``tl.dot`` in IEEE float32 (``TRITON_F32_DEFAULT=ieee``, set before Triton is
   imported) and CuPy's default. fla's autotuning runs in its warm-ups, outside the timing.

Times are medians over ``--repeat`` runs timed with CUDA events after two warm-ups (a call whose first run
takes over ``SLOW_S`` seconds is warmed once and timed once); every ratio compares numbers measured in this
one run. Each section runs for every dtype and L before the next one starts (``SECTION_ORDER``). ``--out
FILE`` writes the tables as markdown, then the whole log, rewritten after every section (a run cut short keeps
what it measured).
"""
# ruff: noqa: B023 -- every timed lambda runs inside the loop iteration that defines it

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")                # before anything imports Triton

import numpy as np  # noqa: E402

H, D, M, DV = 8, 64, 256, 64
#: A call whose first run takes longer than this (seconds) is warmed once and timed once.
SLOW_S = 0.25
#: Markdown tables of this run, {title: [header, rows...]}, written by --out.
TABLES: dict = {}
#: The order the sections run in, each over every dtype and L before the next: fla, whose Triton compilation
#: and autotuning are the slowest warm-up, runs last, so a run cut short keeps the FAVOR+ rows of every L.
SECTION_ORDER = ("favor", "roofline", "breakdown", "sweep", "gpusweep", "profile", "performer", "fla")


def table_row(title, header, row):
    TABLES.setdefault(title, ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)])
    TABLES[title].append("| " + " | ".join(str(x) for x in row) + " |")


class Tee:
    """stdout that also keeps what it printed (for --out)."""

    def __init__(self, stream):
        self.stream, self.lines = stream, []

    def write(self, text):
        self.lines.append(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


def write_markdown(path, head, tee):
    if not path:
        return
    parts = [f"# benchmarks/gpu.py\n\n{head}\n"]
    for title, rows in TABLES.items():
        parts.append(f"## {title}\n\n" + "\n".join(rows) + "\n")
    parts.append("## log\n\n```\n" + "".join(tee.lines).rstrip("\n") + "\n```\n")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def gpu_time(fn, *, repeat):
    """Median seconds of `fn()` over `repeat` runs, timed with CUDA events (two warm-ups first; one warm-up
    and one timed run when the first takes over ``SLOW_S`` seconds)."""
    import time

    import cupy

    cupy.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    fn()
    cupy.cuda.runtime.deviceSynchronize()
    if time.perf_counter() - t0 > SLOW_S:
        repeat = 1
    else:
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


def torch_time(fn, *, repeat, warmup=2):
    """`gpu_time` for torch work (torch's CUDA events; `warmup` runs first, Triton's autotuning in them)."""
    import torch

    for _ in range(warmup):
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
            table_row("FAVOR+ favor_attention_fwd / _bwd (theoretical roofline = max(flops / GEMM rate, "
                      "fused bytes / bandwidth))",
                      ["dtype", "L", "mode", "backend", "fwd ms", "fwd % of roofline", "bwd ms",
                       "bwd % of roofline"],
                      [dt, L, mode, backend, f"{tf * 1e3:.3f}", f"{roof_f / tf * 100:.1f}%",
                       f"{tb * 1e3:.3f}", f"{roof_b / tb * 100:.1f}%"])
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


def rel_err(x, ref):
    """max |x - ref| / max |ref| (host float64)."""
    import cupy

    x, ref = (cupy.asnumpy(a).astype(np.float64) for a in (x, ref))
    return float(np.max(np.abs(x - ref)) / max(np.max(np.abs(ref)), np.finfo(np.float64).tiny))


def roofline_rows(L, dt, ceil, repeat):
    """FAVOR+ forward (``accel.use("cupy")``) against the measured and the theoretical roofline."""
    import cupy

    from accel.cupy import causal as cupy_causal
    from accel.cupy import contract
    from refattn.attention import favor_attention_fwd

    q, k, v, omega, _ = make_inputs(L, dt)
    N, C = H * L, cupy_causal.GPU_CHUNK_SIZE
    n = -(-L // C)
    scale = float(D) ** -0.25
    q2, k2, wT = (q * scale).reshape(N, D), (k * scale).reshape(N, D), cupy.ascontiguousarray(omega.T)
    uq, uk = q2 @ wT, k2 @ wT
    phq, phk = cupy.exp(uq).reshape(H, L, M), cupy.exp(uk).reshape(H, L, M)
    ua = cupy.concatenate([v.reshape(H, L, DV), cupy.ones((H, L, 1), dtype=v.dtype)], axis=-1)
    kv = cupy.swapaxes(phk, -1, -2) @ ua
    pad = n * C - L
    qc, kc, uc = (cupy.pad(a, ((0, 0), (0, pad), (0, 0))).reshape(H, n, C, -1) for a in (phq, phk, ua))
    kcT = cupy.swapaxes(kc, -1, -2)
    A = qc @ kcT
    S = cupy.cumsum(kcT @ uc, axis=1)
    parts = {
        "projection GEMM q": lambda: q2 @ wT,
        "projection GEMM k": lambda: k2 @ wT,
        "exp pass q": lambda: cupy.exp(uq, out=uq),
        "exp pass k": lambda: cupy.exp(uk, out=uk),
    }
    bidir = {
        "phi_k^T [v, 1]": lambda: min(gpu_time(lambda: cupy.swapaxes(phk, -1, -2) @ ua, repeat=repeat),
                                      gpu_time(lambda: contract.contract_rows(phk, ua), repeat=repeat)),
        "phi_q kv": lambda: gpu_time(lambda: phq @ kv, repeat=repeat),
    }
    causal = {
        "chunks Q K^T": lambda: gpu_time(lambda: qc @ kcT, repeat=repeat),
        "chunks K^T U": lambda: gpu_time(lambda: kcT @ uc, repeat=repeat),
        "chunks A U": lambda: gpu_time(lambda: A @ uc, repeat=repeat),
        "chunks Q S": lambda: gpu_time(lambda: qc @ S, repeat=repeat),
    }
    t_parts = {name: gpu_time(fn, repeat=repeat) for name, fn in parts.items()}
    t_bidir = {name: f() for name, f in bidir.items()}
    t_causal = {name: f() for name, f in causal.items()}
    common = sum(t_parts.values())
    meas = {False: common + sum(t_bidir.values()), True: common + sum(t_causal.values())}
    for name, t in {**t_parts, **t_bidir, **t_causal}.items():
        print(f"roofline {dt} L={L} alone: {name:20s} {t * 1e3:8.3f} ms")
    itemsize = np.dtype(dt).itemsize
    bw = bytes_fused(L, itemsize, backward=False) / ceil["bw"]
    for is_causal in (False, True):
        flops = flops_favor(L, backward=False)
        if is_causal:
            flops += H * 2.0 * L * C * (M + DV + 1)
        theo = max(flops / ceil[("gemm", dt)], bw)

        def fwd():
            with scope("cupy"):
                return favor_attention_fwd(q, k, v, omega, causal=is_causal)

        t = gpu_time(fwd, repeat=repeat)
        mode = "causal" if is_causal else "bidir"
        mr = meas[is_causal]
        print(f"roofline {dt} L={L} {mode:6s} favor+ fwd (cupy) {t * 1e3:8.3f} ms | measured roofline "
              f"{mr * 1e3:7.3f} ms (x{t / mr:.2f}) | theoretical {theo * 1e3:7.3f} ms "
              f"({theo / t * 100:.1f}%; {'flop' if flops / ceil[('gemm', dt)] >= bw else 'byte'}-bound)")
        table_row("FAVOR+ forward against its rooflines (accel.use(\"cupy\"))",
                  ["dtype", "L", "mode", "favor+ fwd ms", "measured roofline ms", "fwd / measured",
                   "theoretical ms", "% of theoretical"],
                  [dt, L, mode, f"{t * 1e3:.3f}", f"{mr * 1e3:.3f}", f"{t / mr:.2f}",
                   f"{theo * 1e3:.3f}", f"{theo / t * 100:.1f}%"])


def fla_inputs(L, m, seed=0):
    """float32 CuPy inputs (1, H, L, .) of the fla comparison: positive features with row log-scales
    (``pq, pk, s``), FAVOR+'s framed features (``fq, fk, frame``), ``v`` and ``dy``."""
    import cupy

    from refattn.features.key_frames import positive_key_features_stable_fwd
    from refattn.features.positive import positive_features_stable_fwd
    from refattn.random import draw_orthogonal

    rng = np.random.default_rng(seed)
    dt = "float32"
    q = cupy.asarray(rng.standard_normal((1, H, L, D)) * 0.5, dtype=dt) * float(D) ** -0.25
    k = cupy.asarray(rng.standard_normal((1, H, L, D)) * 0.5, dtype=dt) * float(D) ** -0.25
    v = cupy.asarray(rng.standard_normal((1, H, L, DV)), dtype=dt)
    dy = cupy.asarray(rng.standard_normal((1, H, L, DV)), dtype=dt)
    omega = cupy.asarray(draw_orthogonal(rng, m, D), dtype=dt)
    (pq, _), _ = positive_features_stable_fwd(q, omega)
    (pk, s), _ = positive_features_stable_fwd(k, omega)
    (fk, frame), _ = positive_key_features_stable_fwd(k, omega, causal=True)
    (fq, _), _ = positive_features_stable_fwd(q, omega, k_log_scale=frame)
    return pq, pk, s, fq, fk, frame, v, dy


def fla_rows(L, repeat, ms, frames_max_L):
    """The causal scan against flash-linear-attention's chunk kernel (module docstring, item 7)."""
    import cupy

    print("fla: importing torch and fla", flush=True)
    t0 = time.perf_counter()
    try:
        import torch
        from fla.ops.linear_attn import chunk_linear_attn
    except ImportError as exc:
        print(f"fla: skipped ({type(exc).__name__}: {exc})")
        return
    if not torch.cuda.is_available():
        print("fla: skipped (torch sees no CUDA device)")
        return
    import accel
    from accel.cupy import causal as cupy_causal
    from refattn import _dispatch
    from refattn.attention import linear_attention_bwd, linear_attention_fwd
    from refattn.attention.linear import DEFAULT_CHUNK_SIZE
    from refattn.attention._causal import state_stride

    import triton
    print(f"fla: torch {torch.__version__}, triton {triton.__version__} imported in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    fwd, bwd = cupy_causal.causal_fwd, cupy_causal.causal_bwd
    C = cupy_causal.GPU_CHUNK_SIZE
    for m in ms:
        pq, pk, s, fq, fk, frame, v, dy = fla_inputs(L, m)
        ones = cupy.ones((1, H, L, 1), dtype=v.dtype)
        ua = cupy.concatenate([v, ones], axis=-1)
        g = cupy.concatenate([dy, cupy.asarray(np.random.default_rng(1).standard_normal((1, H, L, 1)),
                                               dtype=v.dtype)], axis=-1)

        def to_torch(a, grad=False):                                  # (1, H, L, .) -> (1, L, H, .)
            t = torch.from_dlpack(a).transpose(1, 2).contiguous()
            return t.requires_grad_(grad)

        def to_cupy(t):                                               # (1, L, H, .) -> (1, H, L, .)
            return cupy.from_dlpack(t.detach().transpose(1, 2).contiguous())

        tq, tk, tv, tdo = (to_torch(a) for a in (pq, pk, v, dy))
        gq, gk, gv = (to_torch(a, grad=True) for a in (pq, pk, v))

        def fla_fwd():
            with torch.no_grad():
                return chunk_linear_attn(tq, tk, tv, scale=1.0, normalize=False)[0]

        def fla_fwd_bwd():
            for t in (gq, gk, gv):
                t.grad = None
            o, _ = chunk_linear_attn(gq, gk, gv, scale=1.0, normalize=False)
            o.backward(tdo)
            return o

        label = f"fla L={L:6d} m={m:3d}"
        print(f"{label}: warming up (Triton compiles and autotunes here, outside the timing)", flush=True)
        try:
            t_fla_f = torch_time(fla_fwd, repeat=repeat, warmup=3)
            t_fla_fb = torch_time(fla_fwd_bwd, repeat=repeat, warmup=3)
        except Exception as exc:  # noqa: BLE001 - report and go on with refattn's rows
            print(f"{label}: fla failed ({type(exc).__name__}: {exc})")
            traceback.print_exc(file=sys.stdout)
            t_fla_f = t_fla_fb = float("nan")
        # correctness: each side against the same scan in float64
        t64 = [a.astype(cupy.float64) for a in (pq, pk, v, dy)]
        num64 = fwd(t64[0], t64[1], t64[2], None, C)[0]
        d64 = bwd(t64[3], t64[0], t64[1], t64[2], None, None, C)
        num = fwd(pq, pk, v, None, C)[0]
        d32 = bwd(dy, pq, pk, v, None, None, C)
        errs = {"refattn": [rel_err(num, num64)] + [rel_err(a, b) for a, b in zip(d32, d64, strict=True)]}
        if t_fla_f == t_fla_f:
            o = fla_fwd_bwd()
            torch.cuda.synchronize()
            grads = [to_cupy(t.grad) for t in (gq, gk, gv)]
            errs["fla"] = [rel_err(to_cupy(o), num64)] + [rel_err(a, b)
                                                          for a, b in zip(grads, d64, strict=True)]
            errs["fla vs refattn"] = [rel_err(to_cupy(o), num)] + [rel_err(a, b)
                                                                   for a, b in zip(grads, d32, strict=True)]
        for who, e in errs.items():
            print(f"{label} max rel err {who:15s} numerator {e[0]:.2e}  dq {e[1]:.2e}  dk {e[2]:.2e}  "
                  f"dv {e[3]:.2e}  (against the float64 scan unless named)")
        del t64, num64, d64, num, d32
        # refattn: numerator alone, with the normaliser column, with row log-scales
        rows = {
            "numerator": (lambda: fwd(pq, pk, v, None, C),
                          lambda: (fwd(pq, pk, v, None, C), bwd(dy, pq, pk, v, None, None, C))),
            "+ normaliser": (lambda: fwd(pq, pk, ua, None, C),
                             lambda: (fwd(pq, pk, ua, None, C), bwd(g, pq, pk, ua, None, None, C))),
            "+ row log-scales": (lambda: fwd(pq, pk, ua, s, C),
                                 lambda: (fwd(pq, pk, ua, s, C), bwd(g, pq, pk, ua, s, None, C))),
        }
        if L <= frames_max_L:
            Cf = DEFAULT_CHUNK_SIZE
            stride = state_stride(Cf, DV + 1)

            def frames_fwd():
                with accel.use("cupy"):
                    return _dispatch.implementation("linear_attention.causal_frames_fwd")(
                        fq, fk, ua, frame, Cf, stride)

            def frames_fwd_bwd():
                with accel.use("cupy"):
                    _, kept = frames_fwd()
                    return _dispatch.implementation("linear_attention.causal_frames_bwd")(
                        g, fq, fk, ua, frame, Cf, kept, stride)

            def public_fwd():
                with accel.use("cupy"):
                    return linear_attention_fwd(fq, fk, v, causal=True, k_log_scale=frame)

            def public_fwd_bwd():
                with accel.use("cupy"):
                    _, cache = linear_attention_fwd(fq, fk, v, causal=True, k_log_scale=frame)
                    return linear_attention_bwd(dy, cache)

            with accel.use("cupy"):
                kernel = _dispatch.kernel_for("linear_attention.causal_frames_fwd")
            which = "kernel" if kernel else "reference"
            rows[f"+ frames ({which}, C={Cf})"] = (frames_fwd, frames_fwd_bwd)
            rows["linear_attention_fwd/_bwd, frames, checked"] = (public_fwd, public_fwd_bwd)
        else:
            print(f"{label}: frames rows not timed at L > --fla-frames-max-L = {frames_max_L}")
        times = {}
        for name, (f, fb) in rows.items():
            try:
                times[name] = (gpu_time(f, repeat=repeat), gpu_time(fb, repeat=repeat))
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"{label} refattn {name}: failed ({type(exc).__name__}: {exc})")
                traceback.print_exc(file=sys.stdout)
        base = times.get("numerator", (float("nan"), float("nan")))
        print(f"{label} fla chunk_linear_attn (normalize=False, scale=1) fwd {t_fla_f * 1e3:8.3f} ms  "
              f"fwd+bwd {t_fla_fb * 1e3:8.3f} ms")
        title = ("causal scan vs flash-linear-attention chunk_linear_attn (float32, no TF32; "
                 "refattn / fla > 1: refattn slower)")
        header = ["L", "m", "what", "fwd ms", "fwd+bwd ms", "fwd / fla", "fwd+bwd / fla",
                  "fwd - numerator ms", "fwd+bwd - numerator ms"]
        table_row(title, header, [L, m, "fla chunk_linear_attn", f"{t_fla_f * 1e3:.3f}",
                                  f"{t_fla_fb * 1e3:.3f}", "1", "1", "", ""])
        for name, (tf, tfb) in times.items():
            print(f"{label} refattn {name:42s} fwd {tf * 1e3:8.3f} ms (x{tf / t_fla_f:5.2f} fla)  fwd+bwd "
                  f"{tfb * 1e3:8.3f} ms (x{tfb / t_fla_fb:5.2f} fla)")
            table_row(title, header, [L, m, f"refattn {name}", f"{tf * 1e3:.3f}", f"{tfb * 1e3:.3f}",
                                      f"{tf / t_fla_f:.2f}", f"{tfb / t_fla_fb:.2f}",
                                      "" if name == "numerator" else f"{(tf - base[0]) * 1e3:.3f}",
                                      "" if name == "numerator" else f"{(tfb - base[1]) * 1e3:.3f}"])
        e = errs.get("fla", [float("nan")] * 4)
        r = errs["refattn"]
        table_row("max relative error against the float64 scan (max |x - x64| / max |x64|)",
                  ["L", "m", "refattn numerator", "fla numerator", "refattn dq/dk/dv", "fla dq/dk/dv"],
                  [L, m, f"{r[0]:.1e}", f"{e[0]:.1e}", "/".join(f"{x:.1e}" for x in r[1:]),
                   "/".join(f"{x:.1e}" for x in e[1:])])
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="L = 256, 1024 and 3 repeats (a smoke run)")
    ap.add_argument("--L", default="4096,16384,65536", help="sequence lengths, comma-separated")
    ap.add_argument("--dtypes", default="float32,float64", help="dtypes of FAVOR+ sections (fla: float32)")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per call (the median is reported)")
    ap.add_argument("--sections", default="ceilings,favor,breakdown,sweep,gpusweep,profile,performer",
                    help="comma-separated among ceilings,favor,breakdown,sweep,gpusweep,profile,performer,"
                         "roofline,fla (the ceilings are measured whenever favor or roofline runs)")
    ap.add_argument("--fla-m", default="64,128", help="feature widths m of the fla section")
    ap.add_argument("--fla-frames-max-L", type=int, default=16384,
                    help="time the per-feature frames rows of the fla section only up to this L")
    ap.add_argument("--out", default=None, help="write the tables and the log as markdown to this file")
    args = ap.parse_args()
    tee = Tee(sys.stdout)
    sys.stdout = tee
    import cupy

    import accel
    import refattn

    Ls = [256, 1024] if args.quick else [int(x) for x in args.L.split(",")]
    dtypes = args.dtypes.split(",")
    repeat = 3 if args.quick else args.repeat
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    head = (f"device: {name}, cupy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, "
            f"numpy {np.__version__}, refattn from {os.path.dirname(refattn.__file__)}; command: "
            f"`python {' '.join(sys.argv)}`")
    print(head)
    print(f"accel.available(): {accel.available()}; H={H} d={D} m={M} d_v={DV}; CUPY_TF32="
          f"{os.environ.get('CUPY_TF32', '0')}; TRITON_F32_DEFAULT={os.environ.get('TRITON_F32_DEFAULT')}")
    backends = ["reference", "cupy"]
    sections = set(args.sections.split(","))
    ceil = ceilings(dtypes, repeat) if sections & {"ceilings", "favor", "roofline"} else None
    write_markdown(args.out, head, tee)
    times = {}                                                    # (dt, L) -> the favor rows' times
    for section in SECTION_ORDER:
        if section not in sections:
            continue
        for dt in dtypes:
            for L in Ls:
                try:
                    if section == "favor":
                        times[(dt, L)] = favor_rows(L, dt, ceil, repeat, backends)
                    elif section == "roofline":
                        roofline_rows(L, dt, ceil, repeat)
                    elif section == "breakdown":
                        breakdown(L, dt, repeat, backends)
                    elif section == "sweep" and L == Ls[len(Ls) // 2]:
                        chunk_sweep(L, dt, repeat)
                    elif section == "gpusweep" and L == Ls[len(Ls) // 2]:
                        gpu_chunk_sweep(L, dt, repeat)
                    elif section == "profile" and L == Ls[len(Ls) // 2] and dt == dtypes[0]:
                        micro_profile(L, dt, repeat)
                    elif section == "performer":
                        performer_rows(L, dt, repeat, times.get((dt, L), {}))
                    elif section == "fla" and dt == dtypes[0]:
                        fla_rows(L, repeat, [int(x) for x in args.fla_m.split(",")], args.fla_frames_max_L)
                except Exception:  # noqa: BLE001 - one failing section must not hide the others' numbers
                    print(f"section {section} {dt} L={L} failed:")
                    traceback.print_exc(file=sys.stdout)
                cupy.get_default_memory_pool().free_all_blocks()
                sys.stdout.flush()
                write_markdown(args.out, head, tee)


if __name__ == "__main__":
    main()
