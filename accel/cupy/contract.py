r"""CuPy kernel for ``a^T b`` over a long row axis (split over rows; CUDA through cuBLAS).

Supported (read by ``tests/accel/test_cupy.py``):

===================  ============  ================  ======================
primitive            backend       dtypes            registered as
===================  ============  ================  ======================
``contract_rows``    CuPy (CUDA)   float32, float64  ``"contract_rows"``
===================  ============  ================  ======================

Same signature and result as :func:`refattn._xp._contract_rows_reference`: ``a: (..., N, p)``,
``b: (..., N, r)`` -> ``a^T b: (..., p, r)``. With N in the tens of thousands and p x r = 256 x 65, one GEMM
has only a few output tiles per batch entry and leaves most of the GPU's multiprocessors idle (measured 0.84 ms
for ``phi_k^T [v, 1]`` at H = 8, L = 16384, against 0.2 ms for ``phi_q kv`` with the same flops). Here the rows
are cut into :data:`ROWS_PER_SPLIT`-row blocks, each block's product is one entry of a batched GEMM, and the
partial products are summed (a split-K GEMM written with two CuPy calls); rows past the last whole block go
through one more GEMM. The summation order differs from one GEMM's, within the dtype tolerance of the tests.
"""

from __future__ import annotations

import cupy

from ._common import as_cupy

__all__ = ["SUPPORTED", "ROWS_PER_SPLIT", "contract_rows"]

SUPPORTED = {
    "contract_rows": {"backends": ("cupy",), "dtypes": ("float32", "float64"), "primitive": "contract_rows"},
}

#: Rows per block of the split (chosen by the sweep in benchmarks/gpu.py).
ROWS_PER_SPLIT = 1024


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
    n = N // ROWS_PER_SPLIT
    if n < 2:
        return cupy.swapaxes(a, -1, -2) @ b
    main = n * ROWS_PER_SPLIT
    a4 = a[..., :main, :].reshape(lead + (n, ROWS_PER_SPLIT, p))         # (..., n, R, p) a view when main == N
    b4 = b[..., :main, :].reshape(lead + (n, ROWS_PER_SPLIT, r))
    out = (cupy.swapaxes(a4, -1, -2) @ b4).sum(axis=-3)                    # (..., p, r)
    if main < N:
        out += cupy.swapaxes(a[..., main:, :], -1, -2) @ b[..., main:, :]
    return out
