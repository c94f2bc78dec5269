"""The 2-D S2 adjoint builds each class sum once: O(L k^2), bit-identical to the old O(L k^3) code path.

The adjoint of the Manhattan class sums, ``out_j = sum_r ClassSum_r(u[..., r, :])_j``, used to build all
k + 1 class sums of every slice and keep one (k + 1 times the work); it now builds class r's sum of slice r
alone (a ring for r < k, ``total - window`` for the far class). The old code path is copied below as the
oracle: the new result must equal it bit for bit (same rings, same padding, same summation order), and the
number of ring sums formed must be 2k (k near rings plus the far class's window of k rings), not k (k + 1).
"""

from __future__ import annotations

import numpy as np
import pytest
from array_api_compat import array_namespace

from refattn.rpe import s2_clipped

# (H, W, k): far class present, k >= grid extent (far class empty), k = 1, a single row, non-square grids
GRIDS = [(4, 5, 2), (3, 4, 6), (6, 3, 3), (1, 7, 3), (7, 1, 2), (5, 5, 1), (14, 14, 6), (9, 11, 4)]


def _old_adjoint(u, k, H, W):
    """The code path before: every class sum of slice r built, class r kept (copied as the oracle)."""
    xp = array_namespace(u)          # the array-API namespace a core takes (raw numpy < 2.0 lacks device=)

    def class_sums_2d(x):
        batch, e = tuple(x.shape[:-2]), x.shape[-1]
        py, px = min(k - 1, H - 1), min(k - 1, W - 1)
        xpad = s2_clipped._pad_2d(xp.reshape(x, batch + (H, W, e)), py, px, xp=xp)
        out, window = [], None
        for r in range(k):
            ring = s2_clipped._ring_2d(xpad, r, H, W, py, px, xp=xp)
            ring = xp.zeros(batch + (H, W, e), dtype=x.dtype) if ring is None else ring
            ring = xp.reshape(ring, batch + (H * W, e))
            out.append(ring)
            window = ring if window is None else window + ring
        if k > H + W - 2:
            out.append(xp.zeros_like(x))
        else:
            out.append(xp.sum(x, axis=-2, keepdims=True) - window)
        return out

    out = None
    for r in range(k + 1):
        part = class_sums_2d(u[..., r, :])[r]
        out = part if out is None else out + part
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("H, W, k", GRIDS)
def test_adjoint_is_bit_identical_to_the_old_code_path(rng, dtype, H, W, k):
    u = rng.standard_normal((2, 3, H * W, k + 1, 5)).astype(dtype)           # (..., L, R, e)
    new = s2_clipped.s2_window_sums_reference(u, k, (H, W), adjoint=True)
    np.testing.assert_array_equal(new, _old_adjoint(u, k, H, W))
    assert new.dtype == dtype


@pytest.mark.parametrize("H, W, k", GRIDS)
def test_adjoint_is_the_transpose_of_the_class_sums(rng, H, W, k):
    """Against the quadratic definition ``out_j = sum_i sum_r [class(i, j) = r] u_ir``."""
    L = H * W
    u = rng.standard_normal((2, L, k + 1, 3))
    cls = np.asarray(s2_clipped.s2_class_index(L, k, (H, W), xp=np))            # (L, L)
    onehot = (cls[..., None] == np.arange(k + 1)).astype(float)                  # (L, L, R)
    ref = np.einsum("ijr,bire->bje", onehot, u)
    np.testing.assert_allclose(s2_clipped.s2_window_sums_reference(u, k, (H, W), adjoint=True), ref,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("k", [1, 3, 6])
def test_adjoint_builds_each_class_sum_once(rng, monkeypatch, k):
    """Ring sums formed by the adjoint: k near rings (one per near class) + k for the far class's window."""
    calls = []
    ring = s2_clipped._ring_2d

    def counting(*args, **kwargs):
        calls.append(args[1])
        return ring(*args, **kwargs)

    monkeypatch.setattr(s2_clipped, "_ring_2d", counting)
    H = W = 14
    s2_clipped.s2_window_sums_reference(rng.standard_normal((1, H * W, k + 1, 2)), k, (H, W), adjoint=True)
    assert len(calls) == 2 * k, f"{len(calls)} ring sums for k = {k} (old code path: {k * (k + 1)})"
    assert sorted(calls) == sorted(list(range(k)) * 2)
