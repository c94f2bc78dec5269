"""Exact Toeplitz-FFT RPE: equals the dense C * (phi_q phi_k^T) attention and the softmax oracle with the mask
it encodes, in both modes, chunked or not; gradients (phi_q, phi_k, v, coeffs); bad input."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.attention.softmax import softmax_attention
from refattn.rpe.toeplitz import (
    ToeplitzAttentionGrads,
    toeplitz_attention,
    toeplitz_attention_bwd,
    toeplitz_attention_dense,
    toeplitz_attention_fwd,
    toeplitz_matrix,
)
from tests.helpers import asxp, randn, to_numpy
from validation import assert_close, check_vjp

# (batch, L, m, d_v, coeffs leading axes)
CASES = [((), 1, 3, 2, ()), ((2,), 5, 4, 3, ()), ((2, 3), 8, 3, 2, (3,)), ((1, 2), 13, 5, 4, (2,))]


def _inputs(rng, xp, batch, L, m, d_v, cb, dtype=None):
    phi_q = asxp(xp, np.exp(rng.standard_normal(batch + (L, m))), dtype)
    phi_k = asxp(xp, np.exp(rng.standard_normal(batch + (L, m))), dtype)
    v = randn(rng, xp, *(batch + (L, d_v)), dtype=dtype)
    coeffs = asxp(xp, np.exp(rng.standard_normal(cb + (2 * L - 1,))), dtype)
    return phi_q, phi_k, v, coeffs


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"B{c[0]}-L{c[1]}")
def test_equals_dense(xp, dtype, rng, case, causal):
    phi_q, phi_k, v, coeffs = _inputs(rng, xp, *case, dtype=dtype)
    for chunk in (2**21, 7):                                                       # one chunk; many chunks
        y = toeplitz_attention(phi_q, phi_k, v, coeffs, causal=causal, chunk_elements=chunk)
        y_ref = toeplitz_attention_dense(phi_q, phi_k, v, coeffs, causal=causal)
        f64 = dtype == xp.float64
        assert_close(y, y_ref, rtol=None if f64 else 2e-5, atol=1e-12 if f64 else 1e-5)


def test_dense_reference_is_the_definition(rng):
    """The dense reference itself, against an explicit double loop."""
    import numpy as xnp

    L = 4
    phi_q, phi_k, v, coeffs = (np.asarray(a) for a in _inputs(rng, np, (), L, 2, 3, ()))
    for causal in (False, True):
        num, den = xnp.zeros((L, 3)), xnp.zeros((L, 1))
        for i in range(L):
            for j in range(L):
                if causal and j > i:
                    continue
                a = coeffs[i - j + L - 1] * phi_q[i] @ phi_k[j]
                num[i] += a * v[j]
                den[i] += a
        y_dense = toeplitz_attention_dense(phi_q, phi_k, v, coeffs, causal=causal)
        np.testing.assert_allclose(y_dense, num / den,
                                   rtol=1e-13)


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_equals_softmax_oracle_with_its_mask(xp, rng, causal):
    """Features with phi_q_i . phi_k_j = exp(a_i + b_j) (m = 1) and coeffs = exp(n): the attention is
    softmax(a_i + b_j + N_ij) v with N = toeplitz_matrix(n), i.e. the oracle with mask_add = N."""
    L, d_v = 11, 3
    a, b, n = rng.standard_normal((2, L)), rng.standard_normal((2, L)), rng.standard_normal(2 * L - 1)
    v = randn(rng, xp, 2, L, d_v)
    y = toeplitz_attention(asxp(xp, np.exp(a)[..., None]), asxp(xp, np.exp(b)[..., None]), v,
                           asxp(xp, np.exp(n)), causal=causal)
    q2 = asxp(xp, np.stack([a, np.ones_like(a)], -1))                              # q . k = a_i + b_j
    k2 = asxp(xp, np.stack([np.ones_like(b), b], -1))
    N = toeplitz_matrix(asxp(xp, n), L)
    y_ref = softmax_attention(q2, k2, v, mask_add=N, scale=1.0, causal=causal)
    assert_close(y, y_ref, rtol=1e-10, atol=1e-13)


def test_toeplitz_matrix(xp):
    L = 4
    c = asxp(xp, np.arange(2 * L - 1, dtype=float))
    C = to_numpy(toeplitz_matrix(c, L))
    i, j = np.meshgrid(np.arange(L), np.arange(L), indexing="ij")
    np.testing.assert_array_equal(C, i - j + L - 1)


def test_causal_ignores_negative_offsets(xp, rng):
    phi_q, phi_k, v, coeffs = _inputs(rng, xp, (2,), 6, 3, 2, ())
    c2 = to_numpy(coeffs).copy()
    c2[:5] *= 100.0                                                                # i - j < 0 entries
    y1 = toeplitz_attention(phi_q, phi_k, v, coeffs, causal=True)
    y2 = toeplitz_attention(phi_q, phi_k, v, asxp(xp, c2), causal=True)
    assert_close(y1, y2, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("cb", [(), (3,), (1, 3)], ids=["shared", "per-head", "keepdims"])
def test_gradients(rng, causal, cb):
    phi_q, phi_k, v, coeffs = _inputs(rng, np, (2, 3), 6, 3, 2, cb)
    check_vjp(lambda **a: toeplitz_attention_fwd(**a, causal=causal, chunk_elements=40),
              toeplitz_attention_bwd,
              dict(phi_q=phi_q, phi_k=phi_k, v=v, coeffs=coeffs))


def test_gradients_causal_zero_for_unused_coeffs(rng):
    phi_q, phi_k, v, coeffs = _inputs(rng, np, (2,), 5, 3, 2, ())
    y, cache = toeplitz_attention_fwd(phi_q, phi_k, v, coeffs, causal=True)
    g = toeplitz_attention_bwd(rng.standard_normal(y.shape), cache)
    assert np.all(g.coeffs[:4] == 0.0) and np.any(g.coeffs[4:] != 0.0)


def test_gradient_check_catches_a_wrong_backward(rng):
    """Must fail: a backward with a 1e-4 error in dcoeffs is caught."""
    phi_q, phi_k, v, coeffs = _inputs(rng, np, (2,), 5, 3, 2, ())

    def bad_bwd(dy, cache):
        g = toeplitz_attention_bwd(dy, cache)
        return ToeplitzAttentionGrads(g.phi_q, g.phi_k, g.v, g.coeffs * (1 + 1e-4))

    with pytest.raises(AssertionError, match="coeffs"):
        check_vjp(toeplitz_attention_fwd, bad_bwd, dict(phi_q=phi_q, phi_k=phi_k, v=v, coeffs=coeffs),
                  wrt=("coeffs",))


def test_numpy_scipy_path_and_array_api_path_agree_forward_and_backward(rng):
    """The NumPy/SciPy fast path (scipy.fft, N = next_fast_len) and the array-API path (xp.fft, N a power of
    two, taken by array_api_strict) give the same output and the same gradients, at a length where their FFT
    sizes differ (L = 13: N = 25 and 32), with several feature chunks and SciPy threads."""
    xps = pytest.importorskip("array_api_strict")
    phi_q, phi_k, v, coeffs = _inputs(rng, np, (2, 3), 13, 5, 3, (3,))
    dy = rng.standard_normal((2, 3, 13, 3))
    for causal in (False, True):
        y_np, c_np = toeplitz_attention_fwd(phi_q, phi_k, v, coeffs, causal=causal, chunk_elements=60,
                                            workers=2)
        args = [xps.asarray(a) for a in (phi_q, phi_k, v, coeffs)]
        y_st, c_st = toeplitz_attention_fwd(*args, causal=causal, chunk_elements=60 * 4)
        assert (c_np.n_fft, c_st.n_fft) == (25, 32)
        assert c_np.chunk < 5, "several feature chunks on the NumPy path"
        np.testing.assert_allclose(y_np, to_numpy(y_st), rtol=1e-12, atol=1e-13)
        g_np = toeplitz_attention_bwd(dy, c_np)
        g_st = toeplitz_attention_bwd(xps.asarray(dy), c_st)
        for name in ToeplitzAttentionGrads._fields:
            np.testing.assert_allclose(getattr(g_np, name), to_numpy(getattr(g_st, name)), rtol=1e-10,
                                       atol=1e-12, err_msg=f"{name} (causal={causal})")


@pytest.mark.parametrize("batch", [(), (2,), (3, 2)], ids=["one-head", "2-heads", "6-heads"])
def test_workers_gives_the_same_result_and_is_checked(rng, batch):
    """Heads spread over threads (``B >= 2``) or the workers inside the FFTs (one head): forward and
    backward bit-identical to one worker, whatever the count (heads are independent, each writes its own
    slice)."""
    phi_q, phi_k, v, coeffs = _inputs(rng, np, batch, 9, 4, 3, ())
    dy = rng.standard_normal(v.shape)
    y1, c1 = toeplitz_attention_fwd(phi_q, phi_k, v, coeffs, workers=1, chunk_elements=60)
    g1 = toeplitz_attention_bwd(dy, c1)
    for w in (2, 3, -1):
        y2, c2 = toeplitz_attention_fwd(phi_q, phi_k, v, coeffs, workers=w, chunk_elements=60)
        np.testing.assert_array_equal(y2, y1)
        for a, b in zip(toeplitz_attention_bwd(dy, c2), g1, strict=True):
            np.testing.assert_array_equal(a, b)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="workers: expected None or a nonzero int"):
            toeplitz_attention(phi_q, phi_k, v, coeffs, workers=bad)


def test_bad_inputs(xp, rng):
    phi_q, phi_k, v, coeffs = _inputs(rng, xp, (2,), 5, 3, 2, ())
    with pytest.raises(ValueError, match=r"coeffs: expected shape \(\.\.\., 2L - 1\) = \(\.\.\., 9\)"):
        toeplitz_attention(phi_q, phi_k, v, coeffs[:-1])
    with pytest.raises(ValueError, match="coeffs: leading axes"):
        toeplitz_attention(phi_q, phi_k, v, asxp(xp, np.ones((3, 9))))
    with pytest.raises(ValueError, match="phi_k: expected shape"):
        toeplitz_attention(phi_q, phi_k[..., :4, :], v, coeffs)
    bad = to_numpy(coeffs).copy()
    bad[2] = np.nan
    with pytest.raises(ValueError, match="coeffs: expected finite values"):
        toeplitz_attention(phi_q, phi_k, v, asxp(xp, bad))
    with pytest.raises(TypeError, match="causal: expected a bool"):
        toeplitz_attention(phi_q, phi_k, v, coeffs, causal=1)
    with pytest.raises(TypeError, match="coeffs: dtype"):
        toeplitz_attention(phi_q, phi_k, v, xp.astype(coeffs, xp.float32))
    with pytest.raises(ValueError, match="chunk_elements"):
        toeplitz_attention(phi_q, phi_k, v, coeffs, chunk_elements=0)
    neg = to_numpy(phi_q).copy() * -1.0
    with pytest.raises(ValueError, match="non-positive normaliser"):
        toeplitz_attention(asxp(xp, neg), phi_k, v, coeffs)
