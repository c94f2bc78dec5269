"""softmax_attention: the oracle against a direct dense computation, causal masking, mask_add, blocking,
gradients and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from refattn import softmax_attention
from refattn.attention import softmax_attention_bwd, softmax_attention_fwd
from tests.helpers import asxp, randn, to_numpy
from validation import assert_close, check_vjp


def dense_reference(q, k, v, mask=None, causal=False, scale=None):
    """Plain NumPy: softmax(mask + scale q k^T) v with no blocking and no stabiliser beyond the row max."""
    q, k, v = (np.asarray(to_numpy(a), dtype=np.float64) for a in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    logits = scale * q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        logits = logits + np.asarray(to_numpy(mask), dtype=np.float64)
    if causal:
        logits = np.where(np.tril(np.ones(logits.shape[-2:], dtype=bool)), logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("shape", [(1, 1, 3), (7, 5), (2, 3, 17, 8)], ids=["L1", "noBatch", "batchHeads"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("block_elements", [1, 40, 2**22], ids=["rowByRow", "blocked", "oneBlock"])
def test_oracle_equals_dense(xp, dtype, rng, shape, causal, block_elements):
    q, k = randn(rng, xp, *shape, dtype=dtype), randn(rng, xp, *shape, dtype=dtype)
    v = randn(rng, xp, *shape[:-1], 4, dtype=dtype)
    mask = randn(rng, xp, shape[-2], shape[-2], dtype=dtype)
    y = softmax_attention(q, k, v, mask_add=mask, causal=causal, block_elements=block_elements)
    ref = dense_reference(q, k, v, mask, causal)
    assert y.dtype == dtype
    rtol = 1e-12 if dtype == xp.float64 else 1e-5
    np.testing.assert_allclose(to_numpy(y), ref, rtol=rtol, atol=rtol)


def test_causal_ignores_future(xp, rng):
    q, k, v = (randn(rng, xp, 2, 10, 4) for _ in range(3))
    y1 = softmax_attention(q, k, v, causal=True)
    k2 = xp.concat([k[:, :6, :], 100.0 * randn(rng, xp, 2, 4, 4)], axis=1)
    v2 = xp.concat([v[:, :6, :], randn(rng, xp, 2, 4, 4)], axis=1)
    y2 = softmax_attention(q, k2, v2, causal=True)
    assert_close(y1[:, :6, :], y2[:, :6, :], rtol=1e-14)


def test_mask_add_enters_logits(xp, rng):
    """A mask of -1000 on all but one key selects that key's value; a constant mask changes nothing."""
    q, k, v = (randn(rng, xp, 5, 3) for _ in range(3))
    sel = np.full((5, 5), -1000.0)
    sel[:, 2] = 0.0
    y = softmax_attention(q, k, v, mask_add=asxp(xp, sel))
    np.testing.assert_allclose(to_numpy(y), np.repeat(to_numpy(v)[2:3], 5, axis=0), rtol=1e-15, atol=1e-15)
    assert_close(softmax_attention(q, k, v, mask_add=asxp(xp, np.full((5, 5), 3.0))),
                 softmax_attention(q, k, v))


def test_rectangular_and_scale(xp, rng):
    q, k, v = randn(rng, xp, 3, 4), randn(rng, xp, 6, 4), randn(rng, xp, 6, 2)
    y = softmax_attention(q, k, v, scale=0.3)
    np.testing.assert_allclose(to_numpy(y), dense_reference(q, k, v, scale=0.3), rtol=1e-12)


def test_large_logits_stay_finite(xp, dtype, rng):
    q, k, v = (randn(rng, xp, 6, 4, dtype=dtype), randn(rng, xp, 6, 4, dtype=dtype),
               randn(rng, xp, 6, 2, dtype=dtype))
    y = softmax_attention(300.0 * q, 300.0 * k, v)
    assert bool(xp.all(xp.isfinite(y)))


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("mask_shape", [None, (9, 9), (2, 1, 9, 9), (1, 9)],
                         ids=["nomask", "LL", "perBatch", "rowBcast"])
def test_softmax_gradcheck(rng, causal, mask_shape):
    args = dict(q=rng.standard_normal((2, 3, 9, 4)), k=rng.standard_normal((2, 3, 9, 4)),
                v=rng.standard_normal((2, 3, 9, 2)))
    if mask_shape is not None:
        args["mask_add"] = rng.standard_normal(mask_shape)
    check_vjp(softmax_attention_fwd, softmax_attention_bwd, args,
              kwargs=dict(causal=causal, grad_mask_add=mask_shape is not None, block_elements=100))


def test_mask_gradient_only_when_asked(rng):
    q = rng.standard_normal((4, 3))
    y, cache = softmax_attention_fwd(q, q, q, mask_add=rng.standard_normal((4, 4)))
    assert softmax_attention_bwd(np.ones_like(y), cache).mask_add is None


def test_gradcheck_catches_wrong_softmax_backward(rng):
    """Must-fail: a dv off by 1e-4 relative is caught."""
    def bad_bwd(dy, cache):
        g = softmax_attention_bwd(dy, cache)
        return g._replace(v=g.v * (1 + 1e-4))

    args = dict(q=rng.standard_normal((5, 3)), k=rng.standard_normal((5, 3)), v=rng.standard_normal((5, 2)))
    with pytest.raises(AssertionError, match="gradient for v"):
        check_vjp(softmax_attention_fwd, bad_bwd, args)


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(q=np.ones((4,))), ValueError, r"q: expected shape \(\.\.\., Lq, d\)"),
        (dict(k=np.ones((2, 5, 4))), ValueError, r"k: expected shape \(\.\.\., Lk, d\) with .*d = 3"),
        (dict(v=np.ones((2, 6, 2))), ValueError, r"v: expected shape \(\.\.\., Lk, d_v\) with .*Lk = 5"),
        (dict(mask_add=np.ones((3, 5))), ValueError, r"mask_add: expected a shape broadcastable to"),
        (dict(q=np.ones((2, 4, 3)), causal=True), ValueError, r"causal=True needs as many queries as keys"),
        (dict(q=np.ones((2, 5, 3), dtype=np.float32)), TypeError,
         r"k: dtype float64 differs from q's dtype float32"),
        (dict(v=np.full((2, 5, 2), np.inf)), ValueError, r"v: expected finite values"),
        (dict(scale=float("nan")), ValueError, r"scale: expected a finite real number"),
    ],
)
def test_bad_input(kw, exc, match):
    args = dict(q=np.ones((2, 5, 3)), k=np.ones((2, 5, 3)), v=np.ones((2, 5, 2)))
    args.update(kw)
    with pytest.raises(exc, match=match):
        softmax_attention(args.pop("q"), args.pop("k"), args.pop("v"), **args)


def test_long_sequence_memory_is_blocked():
    """L = 16384 with the default block budget: each block holds <= 2**22 logits (32 MiB), not L^2 = 2**28."""
    from refattn.attention.softmax import DEFAULT_BLOCK_ELEMENTS, _block_rows

    assert _block_rows(1, 16384, DEFAULT_BLOCK_ELEMENTS) * 16384 <= DEFAULT_BLOCK_ELEMENTS
