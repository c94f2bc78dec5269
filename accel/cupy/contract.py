r"""CuPy kernel for ``a^T b`` over a long row axis (split over rows; CUDA through cuBLAS).

Supported (read by ``tests/accel/test_cupy.py``):

===================  ============  ================  ======================
primitive            backend       dtypes            registered as
===================  ============  ================  ======================
``contract_rows``    CuPy (CUDA)   float32, float64  ``"contract_rows"``
===================  ============  ================  ======================

Same signature and result as :func:`refattn._xp._contract_rows_reference`: ``a: (..., N, p)``,
``b: (..., N, r)`` -> ``a^T b: (..., p, r)``. With N in the tens of thousands and p x r = 256 x 65, one GEMM
has only a few output tiles per batch entry, and a *batched* cuBLAS GEMM of that shape leaves most of the
GPU's multiprocessors idle (``phi_k^T [v, 1]`` takes several times as long as ``phi_q kv`` with the same
flops; benchmarks/gpu.py, BENCHMARKS.md), while a single 2-D GEMM of that shape runs fast (cuBLAS splits its
inner axis itself). So:

* no batch axes: one 2-D GEMM;
* up to :data:`LOOP_MAX_BATCH` batch entries: one 2-D GEMM per entry, written into a preallocated output;
* more: the rows are cut into :data:`ROWS_PER_SPLIT`-row blocks, each block's product is one entry of a
  batched GEMM, and the partial products are summed (a split-K GEMM written with two CuPy calls); rows past
  the last whole block go through one more GEMM.

The summation order differs from one GEMM's, within the dtype tolerance of the tests.
"""

from __future__ import annotations

import cupy

from ._common import as_cupy

__all__ = ["SUPPORTED", "ROWS_PER_SPLIT", "LOOP_MAX_BATCH", "contract_rows"]

SUPPORTED = {
    "contract_rows": {"backends": ("cupy",), "dtypes": ("float32", "float64"), "primitive": "contract_rows"},
}

#: Rows per block of the split (chosen by the sweep in benchmarks/gpu.py).
ROWS_PER_SPLIT = 1024
#: Batch entries up to which a loop of 2-D GEMMs is used instead of the split.
LOOP_MAX_BATCH = 64


def contract_rows(a, b):
    """``a^T b`` over the row axis.

    Parameters
    ----------
    a : (..., N, p) cupy.ndarray
    b : (..., N, r) cupy.ndarray

    Returns
    -------
    (..., p, r) cupy.ndarray
    """
    kern = "contract_rows"
    dts = SUPPORTED[kern]["dtypes"]
    a = as_cupy("a", a, dts, kernel=kern)
    b = as_cupy("b", b, dts, kernel=kern, like=a)
    if a.ndim < 2 or b.ndim != a.ndim or a.shape[:-1] != b.shape[:-1]:
        raise ValueError(f"b: expected shape (..., N, r) with (..., N) = {tuple(a.shape[:-1])} (from a); got "
                         f"{tuple(b.shape)}")
    lead, (N, p), r = tuple(a.shape[:-2]), a.shape[-2:], b.shape[-1]
    B = 1
    for size in lead:
        B *= size
    if B == 1:
        return (a.reshape(N, p).T @ b.reshape(N, r)).reshape(lead + (p, r))
    if B <= LOOP_MAX_BATCH:
        a3, b3 = a.reshape(B, N, p), b.reshape(B, N, r)
        out = cupy.empty((B, p, r), dtype=a.dtype)
        for i in range(B):
            cupy.matmul(a3[i].T, b3[i], out=out[i])
        return out.reshape(lead + (p, r))
    n = N // ROWS_PER_SPLIT
    if n < 2:
        return cupy.swapaxes(a, -1, -2) @ b
    main = n * ROWS_PER_SPLIT
    a4 = a[..., :main, :].reshape(lead + (n, ROWS_PER_SPLIT, p))  # (..., n, R, p) a view when main == N
    b4 = b[..., :main, :].reshape(lead + (n, ROWS_PER_SPLIT, r))
    out = (cupy.swapaxes(a4, -1, -2) @ b4).sum(axis=-3)                    # (..., p, r)
    if main < N:
        out += cupy.swapaxes(a[..., main:, :], -1, -2) @ b[..., main:, :]
    return out
