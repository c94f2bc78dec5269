"""The CuPy backend's kernel table and :func:`register` (called by ``accel.use("cupy")``, never at import).

=============  ========================================  ==========================================
module         registered primitive(s)                   algorithm
=============  ========================================  ==========================================
``causal``     ``linear_attention.causal_fwd``,          the chunk-parallel scans of
               ``linear_attention.causal_bwd``,          :mod:`accel.cupy.chunk_parallel` (row
               ``linear_attention.causal_frames_fwd``,   log-scales) and
               ``linear_attention.causal_frames_bwd``    :mod:`accel.cupy.frames_parallel`
                                                         (per-feature frames)
``positive``   ``positive_features_stable``              one GEMM, then one fused pass per row
``contract``   ``contract_rows``                         the GEMM ``phi_k^T [v, 1]``, split along its
                                                         long inner axis
=============  ========================================  ==========================================

Each kernel computes what the core's reference for its primitive computes (``refattn._dispatch.reference``;
the kernel module names it). Everything else runs the array-API reference on CuPy arrays (array-api-compat's
CuPy namespace); kernels were written only where the reference was measured slow on a device
(benchmarks/gpu.py, BENCHMARKS.md): the causal scan (a Python loop over chunks), the feature map's elementwise
passes, and the GEMM with a long inner axis ``phi_k^T [v, 1]``.

Importing this module imports CuPy (the kernel modules launch CUDA code); importing the package
:mod:`accel.cupy` does not (:mod:`accel.cupy.chunk_parallel` and :mod:`accel.cupy.frames_parallel` are plain
array-API code, tested on the CPU).
"""

from __future__ import annotations

from .._checks import register_backend
from . import causal, contract, positive

__all__ = ["register", "BACKEND", "PRIMITIVES"]

BACKEND = "cupy"

#: primitive name -> kernel, filled on first :func:`register`.
PRIMITIVES: dict = {}


def _primitives() -> dict:
    return {
        "linear_attention.causal_fwd": causal.causal_fwd,
        "linear_attention.causal_bwd": causal.causal_bwd,
        "linear_attention.causal_frames_fwd": causal.causal_frames_fwd,
        "linear_attention.causal_frames_bwd": causal.causal_frames_bwd,
        "positive_features_stable": positive.positive_features_stable,
        "contract_rows": contract.contract_rows,
    }


def register() -> None:
    """Register the CuPy kernels with the core's dispatch point (idempotent)."""
    register_backend(BACKEND, PRIMITIVES, _primitives)
