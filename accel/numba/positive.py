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

(Choromanski et al. Lemma 1 with the max-subtraction stabiliser, design.md trap 3). The projection is the same
single 2-D GEMM as the reference (BLAS does that best); the kernel then fuses, per row and in parallel over rows,
the row maximum, the subtraction *in place* in the GEMM's output, and |x|^2 with the log-scale (two passes over a
row that stays in L1); the ``exp`` is then applied in place by NumPy's SIMD ufunc. (Numba without Intel SVML
calls the scalar libm ``exp``: measured 1.5x slower than the reference for the whole map in float32 when the
exp was inside the kernel; numpy's vectorised exp is 5-10x faster per element.) No (..., L, m) temporary
beyond the output, against the reference's extra one. Each row's maximum entry is exactly exp(0) = 1.

Every feature map built on ``positive_features_stable`` (FAVOR+ in ``refattn.attention.favor``, the GMM maps)
picks this kernel up inside ``accel.use("numba")``; together with the causal scan
(:mod:`accel.numba.causal`) that is the fused numba FAVOR+ causal path.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._common import FASTMATH, as_numpy

__all__ = ["SUPPORTED", "positive_features_stable"]

SUPPORTED = {
    "positive_features_stable": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                                 "primitive": "positive_features_stable"},
}


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _shift_rows(u, x, half_log_m, log_scale):  # pragma: no cover - compiled
    """In place: ``u[n] <- u[n] - max u[n]``; ``log_scale[n] = max u[n] - |x[n]|^2/2 - log(m)/2``."""
    N, m = u.shape
    d = x.shape[1]
    half = u.dtype.type(0.5)
    for n in prange(N):
        row = u[n]                                                       # (m,)
        mx = row[0]
        for j in range(1, m):
            if row[j] > mx:
                mx = row[j]                                              # row maximum
        for j in range(m):
            row[j] = row[j] - mx                                         # <= 0; exactly 0 at the max
        xr = x[n]
        ss = u.dtype.type(0)
        for i in range(d):
            ss += xr[i] * xr[i]
        log_scale[n] = mx - half * ss - half_log_m


def positive_features_stable(x, omega):
    """``(phi, log_scale)`` of the stabilised positive map (signature of the reference).

    Parameters
    ----------
    x : (..., L, d) ndarray
    omega : (m, d) ndarray

    Returns
    -------
    phi : (..., L, m) ndarray
    log_scale : (..., L) ndarray
    """
    kern = "positive_features_stable"
    dts = SUPPORTED[kern]["dtypes"]
    x = as_numpy("x", x, dts, kernel=kern)
    omega = as_numpy("omega", omega, dts, kernel=kern, like=x)
    if omega.ndim != 2 or x.ndim < 1 or omega.shape[1] != x.shape[-1]:
        raise ValueError(f"omega: expected shape (m, d) with d = {x.shape[-1]} (from x); got {omega.shape}")
    m, d = omega.shape
    x2 = x.reshape(-1, d)                                                # (N, d), N = prod(...) L
    u = x2 @ omega.T                                                     # (N, m) fresh array, overwritten
    log_scale = np.empty(x2.shape[0], dtype=x.dtype)                     # (N,)
    _shift_rows(u, x2, x.dtype.type(0.5 * math.log(m)), log_scale)
    np.exp(u, out=u)                                                     # (N, m) in (0, 1], in place (SIMD)
    return u.reshape(x.shape[:-1] + (m,)), log_scale.reshape(x.shape[:-1])
