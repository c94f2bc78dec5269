"""kernel_attention (Chowdhury et al. Eq. 1): with exp(q.k/sqrt d) it is softmax attention."""

from __future__ import annotations

import numpy as np
import pytest

from refattn import exp_dot_kernel, kernel_attention, softmax_attention
from tests.helpers import asxp, out_tol, randn, to_numpy
from validation import assert_close


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_exp_kernel_is_softmax(xp, dtype, rng, causal):
    q, k, v = (randn(rng, xp, 2, 3, 11, 4, dtype=dtype) for _ in range(3))
    y = kernel_attention(q, k, v, exp_dot_kernel, causal=causal)
    assert_close(y, softmax_attention(q, k, v, causal=causal), **out_tol(xp, dtype))


def test_wrong_scale_is_not_softmax(xp, rng):
    """Companion: a kernel with scale 1/d (instead of 1/sqrt d) is detectably different."""
    q, k, v = (randn(rng, xp, 11, 16) for _ in range(3))
    y = kernel_attention(q, k, v, lambda a, b: exp_dot_kernel(a, b, scale=1 / 16))
    with pytest.raises(AssertionError):
        assert_close(y, softmax_attention(q, k, v))


def test_kernel_bad_output_shape_and_nonpositive(xp, rng):
    q = randn(rng, xp, 4, 2)
    with pytest.raises(ValueError, match=r"kernel\(q, k\): expected shape \(4, 4\); got \(4, 3\)"):
        kernel_attention(q, q, q, lambda a, b: xp.ones((4, 3), dtype=xp.float64))
    neg = lambda a, b: -xp.ones((4, 4), dtype=xp.float64)  # noqa: E731
    with pytest.raises(ValueError, match=r"4 non-positive row sum"):
        kernel_attention(q, q, q, neg)
    y = kernel_attention(q, q, q, neg, on_nonpositive="ignore")
    np.testing.assert_allclose(to_numpy(y), np.repeat(to_numpy(q).mean(0, keepdims=True), 4, 0))


def test_causal_needs_square(xp):
    with pytest.raises(ValueError, match="causal=True needs as many queries as keys"):
        kernel_attention(asxp(xp, np.ones((3, 2))), asxp(xp, np.ones((4, 2))), asxp(xp, np.ones((4, 1))),
                         exp_dot_kernel, causal=True)
