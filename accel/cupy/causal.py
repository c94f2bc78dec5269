r"""CuPy kernels for the causal linear-attention scan, forward and backward (CUDA): row log-scales and
per-feature key frames.

Supported (read by ``tests/accel/test_cupy.py``):

=====================  ============  ==================  ==================================================
primitive              backend       dtypes              registered as
=====================  ============  ==================  ==================================================
``causal_fwd``         CuPy (CUDA)   float32, float64    ``"linear_attention.causal_fwd"``
``causal_bwd``         CuPy (CUDA)   float32, float64    ``"linear_attention.causal_bwd"``
``causal_frames_fwd``  CuPy (CUDA)   float32, float64    ``"linear_attention.causal_frames_fwd"``
``causal_frames_bwd``  CuPy (CUDA)   float32, float64    ``"linear_attention.causal_frames_bwd"``
=====================  ============  ==================  ==================================================

Same signatures and results (to the dtype tolerance stated in the tests: 1e-12 float64, 2e-5 float32, relative
to the largest entry) as the core's chunked references. The algorithm is the chunk-parallel form of
:mod:`accel.cupy.chunk_parallel` (row log-scales) and :mod:`accel.cupy.frames_parallel` (per-feature frames,
FAVOR+): every GEMM batched over all chunks (cuBLAS), and the carry from chunk to chunk an elementwise scan
kernel (``scan_fwd`` / ``scan_rev`` in :mod:`accel.cupy._cuda`, one thread per state entry; with frames, the
same kernels with the feature axis in the batch axis). The reference's Python loop over ``L / C`` chunks
launches O(10 L / C) small kernels and is launch-bound on a GPU; here a forward is O(20) launches whatever L
is (plus O(10) per chunk on the frames' exact path).

``chunk_size``: the reference's chunk is a CPU-cache knob; this kernel cuts positions into chunks of
:data:`GPU_CHUNK_SIZE` (chosen by the sweep in benchmarks/gpu.py) whatever it is given, as the numba
recurrence ignores it: the result does not depend on the chunk length beyond rounding. The frames kernels
keep no states (``kept`` is None; a backward recomputes them, and ignores what a reference forward kept), and
a chunk of :data:`GPU_CHUNK_SIZE` rows whose frames spread by more than the reference's ``SPREAD_LIMIT`` takes
the exact path as the reference's does.
"""

from __future__ import annotations

import array_api_compat
import cupy
import numpy as np

from . import chunk_parallel, frames_parallel
from .._checks import scan_operands
from ._common import check_same, flatten
from ._cuda import function, launch_1d

__all__ = ["SUPPORTED", "GPU_CHUNK_SIZE", "causal_fwd", "causal_bwd", "causal_frames_fwd",
           "causal_frames_bwd", "scan_fwd", "scan_rev"]

SUPPORTED = {
    "causal_fwd": {"backends": ("cupy",), "dtypes": ("float32", "float64"),
                   "primitive": "linear_attention.causal_fwd"},
    "causal_bwd": {"backends": ("cupy",), "dtypes": ("float32", "float64"),
                   "primitive": "linear_attention.causal_bwd"},
    "causal_frames_fwd": {"backends": ("cupy",), "dtypes": ("float32", "float64"),
                          "primitive": "linear_attention.causal_frames_fwd"},
    "causal_frames_bwd": {"backends": ("cupy",), "dtypes": ("float32", "float64"),
                          "primitive": "linear_attention.causal_frames_bwd"},
}

#: Chunk length of the chunk-parallel scan on the GPU (positions per chunk).
GPU_CHUNK_SIZE = 64


def scan_fwd(U, mc):
    """CUDA forward scan (see :func:`accel.cupy.chunk_parallel.scan_fwd_loop`): ``U: (B, n, K)``,
    ``mc: (B, n)`` or None -> ``S: (B, n, K)``, ``P: (B, n)`` or None."""
    U = cupy.ascontiguousarray(U)
    B, n, K = U.shape
    S = cupy.empty_like(U)
    has = mc is not None
    mcc = cupy.ascontiguousarray(mc) if has else U
    P = cupy.empty((B, n), dtype=U.dtype) if has else U
    launch_1d(function("scan_fwd", U.dtype), B * K,
              (U, mcc, S, P, np.int64(B), np.int32(n), np.int64(K), np.int32(has)))
    return S, (P if has else None)


def scan_rev(V, P):
    """CUDA reverse scan (see :func:`accel.cupy.chunk_parallel.scan_rev_loop`)."""
    V = cupy.ascontiguousarray(V)
    B, n, K = V.shape
    G = cupy.empty_like(V)
    has = P is not None
    Pc = cupy.ascontiguousarray(P) if has else V
    launch_1d(function("scan_rev", V.dtype), B * K,
              (V, Pc, G, np.int64(B), np.int32(n), np.int64(K), np.int32(has)))
    return G


def _flat_inputs(kern, phi_q, phi_k, v_aug, s, g=None, *, frames=False):
    dts = SUPPORTED[kern]["dtypes"]
    pq, pk, ua, gf, lead = scan_operands(flatten, kern, dts, phi_q, phi_k, v_aug, g)
    sf = None
    if frames and s is None:
        raise ValueError(f"s: per-feature frames (..., L, m) are required by {kern}; got None")
    if s is not None:
        sf, _ = flatten("s", s, 2 if frames else 1, dts, kern, like=pq)
        check_same("s", sf, "phi_q", pq.shape if frames else pq.shape[:2])
    return pq, pk, ua, sf, gf, lead


def causal_fwd(phi_q, phi_k, v_aug, s, chunk_size):
    """Causal numerator and normaliser (signature of ``_causal_fwd_reference``).

    Parameters
    ----------
    phi_q, phi_k : (..., L, m) cupy.ndarray
    v_aug : (..., L, d_v + 1) cupy.ndarray
    s : (..., L) cupy.ndarray or None
        Key log-scales.
    chunk_size : int
        Accepted for the signature; the GPU chunk is :data:`GPU_CHUNK_SIZE`.

    Returns
    -------
    numer_aug : (..., L, d_v + 1) cupy.ndarray
    M : (..., L) cupy.ndarray or None
        Prefix maxima of `s`.
    """
    pq, pk, ua, sf, _, lead = _flat_inputs("causal_fwd", phi_q, phi_k, v_aug, s)
    xp = array_api_compat.array_namespace(pq)
    numer, M = chunk_parallel.causal_fwd(pq, pk, ua, sf, GPU_CHUNK_SIZE, xp=xp, scan_fwd=scan_fwd)
    L = pq.shape[1]
    return numer.reshape(lead + numer.shape[1:]), (None if M is None else M.reshape(lead + (L,)))


def causal_bwd(g, phi_q, phi_k, v_aug, s, M, chunk_size):
    """Backward of :func:`causal_fwd` (signature of ``_causal_bwd_reference``; `M` is recomputed from `s`).

    Returns
    -------
    dphi_q, dphi_k : (..., L, m) cupy.ndarray
    dv_aug : (..., L, d_v + 1) cupy.ndarray
    """
    pq, pk, ua, sf, gf, lead = _flat_inputs("causal_bwd", phi_q, phi_k, v_aug, s, g)
    xp = array_api_compat.array_namespace(pq)
    dq, dk, du = chunk_parallel.causal_bwd(gf, pq, pk, ua, sf, GPU_CHUNK_SIZE, xp=xp,
                                           scan_fwd=scan_fwd, scan_rev=scan_rev)
    return tuple(a.reshape(lead + a.shape[1:]) for a in (dq, dk, du))


def causal_frames_fwd(phi_q, phi_k, v_aug, s, chunk_size, stride):
    """Causal numerator and normaliser with per-feature frames (signature of
    ``_causal_frames_fwd_reference``).

    Parameters
    ----------
    phi_q, phi_k : (..., L, m) cupy.ndarray
    v_aug : (..., L, d_v + 1) cupy.ndarray
    s : (..., L, m) cupy.ndarray
        Per-feature frames, nondecreasing along L.
    chunk_size, stride : int, int or None
        Accepted for the signature; the GPU chunk is :data:`GPU_CHUNK_SIZE` and no states are kept.

    Returns
    -------
    numer_aug : (..., L, d_v + 1) cupy.ndarray
    kept : None
    """
    pq, pk, ua, sf, _, lead = _flat_inputs("causal_frames_fwd", phi_q, phi_k, v_aug, s, frames=True)
    xp = array_api_compat.array_namespace(pq)
    numer = frames_parallel.causal_frames_fwd(pq, pk, ua, sf, GPU_CHUNK_SIZE, xp=xp, scan_fwd=scan_fwd)
    return numer.reshape(lead + numer.shape[1:]), None


def causal_frames_bwd(g, phi_q, phi_k, v_aug, s, chunk_size, kept, stride, log_features=False):
    """Backward of :func:`causal_frames_fwd` (signature of ``_causal_frames_bwd_reference``; `kept` and
    `stride` are not read: the states are recomputed).

    Returns
    -------
    dphi_q, dphi_k : (..., L, m) cupy.ndarray
        Cotangents of the features (of their logarithms with ``log_features=True``).
    dv_aug : (..., L, d_v + 1) cupy.ndarray
    """
    pq, pk, ua, sf, gf, lead = _flat_inputs("causal_frames_bwd", phi_q, phi_k, v_aug, s, g, frames=True)
    xp = array_api_compat.array_namespace(pq)
    out = frames_parallel.causal_frames_bwd(gf, pq, pk, ua, sf, GPU_CHUNK_SIZE, xp=xp, scan_fwd=scan_fwd,
                                            scan_rev=scan_rev, log_features=log_features)
    return tuple(a.reshape(lead + a.shape[1:]) for a in out)
