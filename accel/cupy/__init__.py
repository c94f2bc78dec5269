"""CuPy (CUDA) kernels for refattn's hot primitives; one module per primitive, each with a ``SUPPORTED``
table.

=====================  ================================  =====================================================
module                 registered primitive(s)           reference
=====================  ================================  =====================================================
``causal``             ``linear_attention.causal_fwd``,
``refattn.attention.linear._causal_{fwd,bwd}_reference``
                       ``linear_attention.causal_bwd``   (algorithm: :mod:`accel.cupy.chunk_parallel`)
``positive``           ``positive_features_stable``
``refattn.features.positive._positive_features_stable_reference``
``contract``           ``contract_rows``                 ``refattn._xp._contract_rows_reference``
=====================  ================================  =====================================================

Everything else runs the array-API reference on CuPy arrays (array-api-compat's CuPy namespace); kernels were
written only where the reference was measured slow on a device (benchmarks/gpu.py, BENCHMARKS.md): the causal
scan (a Python loop over chunks: 322 ms at L = 16384 against 3.7 ms for the bidirectional pass), the
feature map's elementwise passes, and the GEMM with a long inner axis ``phi_k^T [v, 1]`` (0.84 ms, a quarter
of
the bidirectional forward).

:func:`register` is called by ``accel.use("cupy")`` (never at import). Importing this package does not import
CuPy (:mod:`accel.cupy.chunk_parallel` is plain array-API code, tested on the CPU); the kernel modules do.
"""

from __future__ import annotations

from .._checks import register_backend

__all__ = ["register", "BACKEND", "PRIMITIVES"]

BACKEND = "cupy"

#: primitive name -> kernel, filled on first :func:`register`.
PRIMITIVES: dict = {}


def _primitives() -> dict:
    from . import causal, contract, positive

    return {
        "linear_attention.causal_fwd": causal.causal_fwd,
        "linear_attention.causal_bwd": causal.causal_bwd,
        "positive_features_stable": positive.positive_features_stable,
        "contract_rows": contract.contract_rows,
    }


def register() -> None:
    """Register the CuPy kernels with the core's dispatch point (idempotent)."""
    register_backend(BACKEND, PRIMITIVES, _primitives)
