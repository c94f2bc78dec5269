r"""Numba kernel for the fused positive-feature map with its row stabiliser (FAVOR+; CPU).

Supported (read by ``tests/accel/test_positive.py``):

===============================  ============  ================  ==========================================
primitive                        backend       dtypes            registered as
===============================  ============  ================  ==========================================
``positive_features_stable``     NumPy (CPU)   float32, float64  ``"positive_features_stable"``
===============================  ============  ================  ==========================================

Same signature and outputs as :func:`refattn.features.positive._positive_features_stable_reference`:
``x: (..., L, d)``, ``omega: (m, d)`` ->

    phi = exp(u - max_row u) in (0, 1],     log_scale = max_row u - |x|^2/2 - log(m)/2,     u = x omega^T

(Choromanski et al. Lemma 1 with the max-subtraction stabiliser of ``refattn.features.positive``). The
projection is the same single 2-D GEMM as the reference (BLAS does that best); the kernel then fuses, per row
and in parallel over rows, the row maximum, the subtraction *in place* in the GEMM's output, and |x|^2 with
the log-scale (two passes over a row that stays in L1); the ``exp`` is then applied in place by NumPy's SIMD
ufunc (numba without Intel SVML calls the scalar libm ``exp``, which is slower per element than NumPy's
vectorised one). No (..., L, m) temporary beyond the output, against the reference's extra one. Each row's
maximum entry is exactly exp(0) = 1.

Every feature map built on ``positive_features_stable`` (FAVOR+ in ``refattn.attention.favor``, the GMM maps)
picks this kernel up inside ``accel.use("numba")``; together with the causal scan
(:mod:`accel.numba.causal`) that is the fused numba FAVOR+ causal path.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .._checks import positive_projection
from ._common import FASTMATH, as_numpy

__all__ = ["SUPPORTED", "positive_features_stable", "positive_key_features_stable"]

SUPPORTED = {
    "positive_features_stable": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                                 "primitive": "positive_features_stable"},
    "positive_key_features_stable": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                                     "primitive": "positive_key_features_stable"},
}


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _shift_rows(u, x, half_log_m, log_scale, frame):  # pragma: no cover - compiled
    """In place: ``u[n] <- u[n] + frame[n] - max(u[n] + frame[n])``; ``log_scale[n] = max(...) - |x[n]|^2/2 -
    log(m)/2``. ``frame: (N, m)`` per-row key frames folded in the same pass, or ``(0, m)`` for none."""
    N, m = u.shape
    d = x.shape[1]
    half = u.dtype.type(0.5)
    framed = frame.shape[0] == N
    for n in prange(N):
        row = u[n]                                                       # (m,)
        if framed:
            fr = frame[n]
            for j in range(m):
                row[j] += fr[j]                                          # the key frame, before the max
        mx = row[0]
        for j in range(1, m):
            mx = max(mx, row[j])                                         # row maximum (vectorised)
        for j in range(m):
            row[j] = row[j] - mx                                         # <= 0; exactly 0 at the max
        xr = x[n]
        ss = u.dtype.type(0)
        for i in range(d):
            ss += xr[i] * xr[i]
        log_scale[n] = mx - half * ss - half_log_m


def positive_features_stable(x, omega, k_log_scale=None):
    """``(phi, log_scale)`` of the stabilised positive map (signature of the reference).

    Parameters
    ----------
    x : (..., L, d) ndarray
    omega : (m, d) ndarray
    k_log_scale : (..., 1, m) or (..., L, m) ndarray, optional
        A key frame folded into the exponent before the row maximum (added in place to the GEMM's output).

    Returns
    -------
    phi : (..., L, m) ndarray
    log_scale : (..., L) ndarray
    """
    kern = "positive_features_stable"
    dts = SUPPORTED[kern]["dtypes"]
    frame = None
    x = as_numpy("x", x, dts, kernel=kern)
    if (k_log_scale is not None and getattr(omega, "ndim", 0) == 2
            and tuple(k_log_scale.shape) == tuple(x.shape[:-1]) + (omega.shape[0],)):
        frame = as_numpy("k_log_scale", k_log_scale, dts, kernel=kern, like=x)   # (..., L, m): fused below
        k_log_scale = None
    x, x2, u, m = positive_projection(x, omega, k_log_scale, as_array=as_numpy, dtypes=dts, kernel=kern)
    frame = np.zeros((0, m), dtype=x.dtype) if frame is None else frame.reshape(-1, m)   # (N, m) or none
    log_scale = np.empty(x2.shape[0], dtype=x.dtype)                     # (N,)
    _shift_rows(u, x2, x.dtype.type(0.5 * math.log(m)), log_scale, frame)
    np.exp(u, out=u)                                                     # (N, m) in (0, 1], in place (SIMD)
    return u.reshape(x.shape[:-1] + (m,)), log_scale.reshape(x.shape[:-1])


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _key_frames(u, x, half_log_m, causal, frame):  # pragma: no cover - compiled
    """In place on ``u: (B, L, m)``: ``l = u - |x|^2/2``, ``u <- l - P`` with ``P`` the column maximum of
    ``l`` (``frame: (B, 1, m)``) or its prefix maximum (``frame: (B, L, m)``); ``frame = P - log(m)/2``.
    Parallel over (batch, block of 64 features); the inner loops run over a block's contiguous features
    without branches (vectorised)."""
    B, L, m = u.shape
    d = x.shape[2]
    half = u.dtype.type(0.5)
    nfb = (m + 63) // 64
    for job in prange(B * nfb):
        b = job // nfb
        f0 = (job % nfb) * 64
        f1 = min(m, f0 + 64)
        P = np.full(f1 - f0, -np.inf, dtype=u.dtype)                     # running / column maximum
        for i in range(L):
            xr = x[b, i]
            ss = u.dtype.type(0)
            for t in range(d):
                ss += xr[t] * xr[t]
            hs = half * ss
            ur = u[b, i, f0:f1]
            if causal:
                fr = frame[b, i, f0:f1]
                for t in range(f1 - f0):
                    ell = ur[t] - hs
                    p = max(P[t], ell)                                   # prefix-only: P over j <= i
                    P[t] = p
                    ur[t] = ell - p
                    fr[t] = p - half_log_m
            else:
                for t in range(f1 - f0):
                    ell = ur[t] - hs
                    P[t] = max(P[t], ell)
                    ur[t] = ell
        if not causal:
            for i in range(L):
                ur = u[b, i, f0:f1]
                for t in range(f1 - f0):
                    ur[t] -= P[t]
            for t in range(f1 - f0):
                frame[b, 0, f0 + t] = P[t] - half_log_m


def positive_key_features_stable(x, omega, causal):
    """``(phi, k_log_scale)`` of the keys' map with per-feature frames (signature of the reference
    ``refattn.features.key_frames._key_features_reference``): one GEMM, one fused pass for the frames, NumPy's
    in-place SIMD ``exp``.

    Parameters
    ----------
    x : (..., L, d) ndarray
    omega : (m, d) ndarray
    causal : bool

    Returns
    -------
    phi : (..., L, m) ndarray
    k_log_scale : (..., 1, m) or (..., L, m) ndarray
    """
    kern = "positive_key_features_stable"
    dts = SUPPORTED[kern]["dtypes"]
    x = as_numpy("x", x, dts, kernel=kern)
    omega = as_numpy("omega", omega, dts, kernel=kern, like=x)
    if omega.ndim != 2 or x.ndim < 2 or omega.shape[1] != x.shape[-1]:
        raise ValueError(f"omega: expected shape (m, d) with d = {x.shape[-1]} (from x); got {omega.shape}")
    m, d = omega.shape
    L = x.shape[-2]
    lead = x.shape[:-2]
    x3 = x.reshape(-1, L, d)                                             # (B, L, d)
    u = (x3.reshape(-1, d) @ omega.T).reshape(x3.shape[0], L, m)         # (B, L, m) fresh, overwritten
    frame = np.empty((x3.shape[0], L if causal else 1, m), dtype=x.dtype)
    _key_frames(u, x3, x.dtype.type(0.5 * math.log(m)), bool(causal), frame)
    np.exp(u, out=u)                                                     # (B, L, m) in (0, 1]
    return u.reshape(lead + (L, m)), frame.reshape(lead + frame.shape[1:])
