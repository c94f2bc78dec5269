"""``contract_rows`` (``a^T b`` over a long row axis, linear attention's ``phi_k^T [v, 1]``): the reference
sums float32 products over blocks of ``CONTRACT_BLOCK_ROWS`` rows; every row must be counted once, including
a partial last block, with and without batch axes. float64 (and short float32 inputs) take one matmul."""

from __future__ import annotations

import numpy as np
import pytest

from refattn import _dispatch
from refattn._xp import CONTRACT_BLOCK_ROWS, contract_rows

B = CONTRACT_BLOCK_ROWS


@pytest.mark.parametrize("n", [1, B, 2 * B, 2 * B + 1, 3 * B - 1, 5 * B, 7 * B + 13])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_blocked_float32_contraction_counts_every_row_once(rng, n, batch):
    a = rng.standard_normal(batch + (n, 7))
    b = rng.standard_normal(batch + (n, 5))
    exact = np.swapaxes(a, -1, -2) @ b                                        # float64 reference
    got = contract_rows(a.astype(np.float32), b.astype(np.float32))
    assert got.dtype == np.float32 and got.shape == batch + (7, 5)
    # float32 rounding of the inputs and of n-term sums: |err| <= ~ n eps sum|a_i b_i|; a lost or doubled
    # block of rows changes the result by O(sqrt(B)) against a bound of O(1e-3) here
    bound = 4 * n * np.finfo(np.float32).eps * (np.swapaxes(np.abs(a), -1, -2) @ np.abs(b)) + 1e-6
    assert np.all(np.abs(got - exact) <= bound)


def test_float64_is_one_matmul(rng):
    a, b = rng.standard_normal((3, 4 * B + 5, 6)), rng.standard_normal((3, 4 * B + 5, 2))
    np.testing.assert_array_equal(contract_rows(a, b), np.swapaxes(a, -1, -2) @ b)


def test_the_dispatch_point_runs_the_reference(rng):
    a, b = rng.standard_normal((3 * B + 1, 4)).astype(np.float32), rng.standard_normal((3 * B + 1, 2))
    ref = _dispatch.reference("contract_rows")
    np.testing.assert_array_equal(contract_rows(a, b.astype(np.float32)), ref(a, b.astype(np.float32)))
