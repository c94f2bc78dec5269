r"""CuPy kernel for the fused positive-feature map with its row stabiliser (FAVOR+; CUDA).

Supported (read by ``tests/accel/test_cupy.py``):

===============================  ============  ================  ==========================================
primitive                        backend       dtypes            registered as
===============================  ============  ================  ==========================================
``positive_features_stable``     CuPy (CUDA)   float32, float64  ``"positive_features_stable"``
===============================  ============  ================  ==========================================

Same signature and outputs as :func:`refattn.features.positive._positive_features_stable_reference`
(``x: (..., L, d)``, ``omega: (m, d)``)::

    phi = exp(u - max_row u) in (0, 1],     log_scale = max_row u - |x|^2/2 - log(m)/2,     u = x omega^T.

The projection is one cuBLAS GEMM (as in the reference); the ``positive_stable`` kernel of
:mod:`accel.cupy._cuda` then does the rest in one pass, one warp per row, in place in the GEMM's output: the
row maximum (warp shuffle), ``exp(u - max)``, ``|x|^2`` and the log-scale (four passes in the reference).
"""

from __future__ import annotations

import math

import cupy
import numpy as np

from .._checks import positive_projection
from ._common import as_cupy
from ._cuda import function, launch_1d

__all__ = ["SUPPORTED", "positive_features_stable"]

SUPPORTED = {
    "positive_features_stable": {"backends": ("cupy",), "dtypes": ("float32", "float64"),
                                 "primitive": "positive_features_stable"},
}


def positive_features_stable(x, omega, k_log_scale=None):
    """``(phi, log_scale)`` of the stabilised positive map with the reference's signature: ``x: (..., L, d)``
    and ``omega: (m, d)`` CuPy arrays; ``k_log_scale`` (a key frame ``(..., 1, m)`` or ``(..., L, m)``),
    when given, is added to the GEMM's output before the row maximum."""
    kern = "positive_features_stable"
    x, x2, u, m = positive_projection(x, omega, k_log_scale, as_array=as_cupy,
                                      dtypes=SUPPORTED[kern]["dtypes"], kernel=kern)
    d = x2.shape[1]
    N = x2.shape[0]
    log_scale = cupy.empty(N, dtype=x.dtype)                             # (N,)
    if N:
        launch_1d(function("positive_stable", x.dtype), 32 * N,
                  (u, x2, log_scale, np.int64(N), np.int32(m), np.int32(d), x.dtype.type(0.5 * math.log(m))))
    return u.reshape(tuple(x.shape[:-1]) + (m,)), log_scale.reshape(tuple(x.shape[:-1]))
