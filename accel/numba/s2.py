r"""Numba kernels for the class (window) sums of Horn et al.'s Strategy 2 (clipped relative distances; CPU).

Supported (read by ``tests/accel/test_s2.py``):

====================  ============  ================  =============================  =======================
primitive             backend       dtypes            registered as                  geometries
====================  ============  ================  =============================  =======================
``s2_window_sums``    NumPy (CPU)   float32, float64  ``"s2_window_sums"``           1-D signed, 2-D Manhattan
====================  ============  ================  =============================  =======================

Same signature and results as :func:`refattn.rpe.s2_clipped.s2_window_sums_reference`, ``fn(u, k, grid, *,
adjoint)``:

* ``adjoint=False``: ``u: (..., L, e) -> V: (..., L, R, e)``, ``V_ir = sum_{j : class(i, j) = r} u_j``;
* ``adjoint=True``: ``u: (..., L, R, e) -> (..., L, e)``, ``out_j = sum_i sum_r [class(i, j) = r] u_ir``.

**1-D signed** (``grid=None``, classes r = -k..k, R = 2k + 1, index r + k): the near classes |r| < k are
shifted rows; the two far classes (``j - i >= k`` and ``j - i <= -k``, ``refattn.rpe.s2_clipped``) are a
running suffix and a running prefix sum, accumulated in one sweep each (no difference of cumulative sums, so
no cancellation). The adjoint uses ``class(i, j) = r  <=>  class(j, i) = -r``. O(L k e).

**2-D Manhattan** (``grid=(H, W)``, row-major, classes 0..k, R = k + 1): near classes are rings
``|dy| + |dx| = r`` summed cell by cell; the far class is ``total - window`` (Horn's regrouping, as in the
reference), and exact zeros when k > H + W - 2 (no pair is that far apart). Classes are symmetric, so the
adjoint applies class r's sum to slice r. O(L k^2 e). Parallel over the batch axes.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._common import FASTMATH, as_numpy

__all__ = ["SUPPORTED", "s2_window_sums"]

SUPPORTED = {"s2_window_sums": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                                "primitive": "s2_window_sums", "geometries": ("1d-signed", "2d-manhattan")}}


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _sums_1d(u, k, V):  # pragma: no cover - compiled
    """``u: (B, L, e) -> V: (B, L, 2k + 1, e)`` (V zeroed by the caller)."""
    B, L, e = u.shape
    for b in prange(B):
        for i in range(L):
            for r in range(-k + 1, k):                                   # near classes: V[i, r] = u[i + r]
                j = i + r
                if 0 <= j < L:
                    V[b, i, r + k, :] = u[b, j, :]
        for i in range(1, L):                                            # far left: sum_{j <= i - k} u_j
            if i - k >= 0:
                for c in range(e):
                    V[b, i, 0, c] = V[b, i - 1, 0, c] + u[b, i - k, c]
        for i in range(L - 2, -1, -1):                                   # far right: sum_{j >= i + k} u_j
            if i + k < L:
                for c in range(e):
                    V[b, i, 2 * k, c] = V[b, i + 1, 2 * k, c] + u[b, i + k, c]


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _sums_1d_adjoint(u, k, out):  # pragma: no cover - compiled
    """``u: (B, L, 2k + 1, e) -> out: (B, L, e)`` (out zeroed),
    ``out_j = sum_i sum_r [clip(j - i) = r] u_ir``."""
    B, L, R, e = u.shape
    acc = np.zeros((B, e), dtype=out.dtype)
    for b in prange(B):
        a = acc[b]                                                       # (e,) running sum
        for j in range(L):                                               # far right of i: i <= j - k
            if j - k >= 0:
                for c in range(e):
                    a[c] += u[b, j - k, 2 * k, c]
            for c in range(e):
                out[b, j, c] += a[c]
        a[:] = 0
        for j in range(L - 1, -1, -1):                                   # far left of i: i >= j + k
            if j + k < L:
                for c in range(e):
                    a[c] += u[b, j + k, 0, c]
            for c in range(e):
                out[b, j, c] += a[c]
        for j in range(L):
            for r in range(-k + 1, k):                                   # near: i = j - r
                i = j - r
                if 0 <= i < L:
                    for c in range(e):
                        out[b, j, c] += u[b, i, r + k, c]


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _ring_sums_2d(u, k, H, W, slice_of_class, V, far_empty):  # pragma: no cover - compiled
    """Manhattan class sums of ``u: (B, L, S, e)`` taking slice ``slice_of_class[r]`` for class r.

    Writes ``V: (B, L, k + 1, e)`` (zeroed by the caller) with ``V[i, r] = sum_{dist(i, j) = r} u[j, s_r]``
    for r < k and ``V[i, k] = sum_j u[j, s_k] - sum_{dist(i, j) < k} u[j, s_k]`` (zeros when `far_empty`):
    one walk over the rings of the window adds each cell to its class and removes it from the far class.
    """
    B, L, S, e = u.shape
    sk = slice_of_class[k]
    for b in prange(B):
        total = np.zeros(e, dtype=V.dtype)
        for j in range(L):
            for c in range(e):
                total[c] += u[b, j, sk, c]
        for y in range(H):
            for x in range(W):
                i = y * W + x
                if not far_empty:
                    for c in range(e):
                        V[b, i, k, c] = total[c]  # far = total - window (class-k slice), window removed below
                for r in range(k):
                    s = slice_of_class[r]
                    for dy in range(-r, r + 1):
                        yy = y + dy
                        if yy < 0 or yy >= H:
                            continue
                        rem = r - abs(dy)
                        for dx in (-rem, rem):
                            xx = x + dx
                            if 0 <= xx < W:
                                j = yy * W + xx                          # ring r: in the window
                                for c in range(e):
                                    V[b, i, r, c] += u[b, j, s, c]
                                if not far_empty:
                                    for c in range(e):
                                        V[b, i, k, c] -= u[b, j, sk, c]
                            if rem == 0:
                                break                                    # dx = -0 = +0: one cell


def _flatten(x, keep):
    lead = x.shape[:x.ndim - keep]
    return x.reshape((-1,) + x.shape[x.ndim - keep:]), lead


def s2_window_sums(u, k, grid, *, adjoint=False):
    """Class sums of the S2 window trick (signature of ``s2_window_sums_reference``).

    Parameters
    ----------
    u : (..., L, e) ndarray, or (..., L, R, e) when `adjoint`
    k : int
        Clipping distance (>= 1).
    grid : None or (H, W)
        None: signed 1-D distances (R = 2k + 1); (H, W): Manhattan distances on a row-major grid (R = k + 1).
    adjoint : bool
        The transpose map.

    Returns
    -------
    (..., L, R, e) ndarray, or (..., L, e) when `adjoint`
    """
    kern = "s2_window_sums"
    u = as_numpy("u", u, SUPPORTED[kern]["dtypes"], kernel=kern)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k: expected a positive int; got {k!r}")
    R = 2 * k + 1 if grid is None else k + 1
    if adjoint:
        if u.ndim < 3 or u.shape[-2] != R:
            raise ValueError(f"u: expected shape (..., L, R, e) with R = {R}; got {u.shape}")
        uf, lead = _flatten(u, 3)                                        # (B, L, R, e)
    else:
        if u.ndim < 2:
            raise ValueError(f"u: expected shape (..., L, e); got {u.shape}")
        uf, lead = _flatten(u, 2)
        uf = uf[:, :, None, :]  # (B, L, 1, e) one slice for every class
    B, L, _, e = uf.shape
    if grid is None:
        if adjoint:
            out = np.zeros((B, L, e), dtype=u.dtype)
            _sums_1d_adjoint(uf, k, out)
            return out.reshape(lead + (L, e))
        V = np.zeros((B, L, R, e), dtype=u.dtype)
        _sums_1d(np.ascontiguousarray(uf[:, :, 0, :]), k, V)
        return V.reshape(lead + (L, R, e))
    H, W = (int(g) for g in grid)
    if H * W != L:
        raise ValueError(f"grid: expected H * W = L = {L}; got grid {tuple(grid)}")
    far_empty = k > H + W - 2
    if not adjoint:
        V = np.zeros((B, L, R, e), dtype=u.dtype)
        _ring_sums_2d(uf, k, H, W, np.zeros(R, dtype=np.int64), V, far_empty)
        return V.reshape(lead + (L, R, e))
    V = np.zeros((B, L, R, e), dtype=u.dtype)                            # V[j, r] = class-r sum of slice r
    _ring_sums_2d(uf, k, H, W, np.arange(R, dtype=np.int64), V, far_empty)
    return V.sum(axis=-2).reshape(lead + (L, e))                         # symmetric classes: sum over r
