"""Property-based contracts of linear_attention (hypothesis): for any shapes, chunk size and key log-scales,
causal outputs equal the dense masked reference, do not depend on the chunk size, and do not change when
tokens are appended (prefix invariance), even when the appended keys carry much larger log-scales."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from refattn import linear_attention  # noqa: E402


def dense_causal(phi_q, phi_k, v, s):
    """softmax-free reference: tril(phi_q (phi_k e^s)^T) v / row sums, computed with the global
    max removed."""
    w = np.exp(s - s.max(axis=-1, keepdims=True))[..., None]
    A = np.tril(phi_q @ np.swapaxes(phi_k * w, -1, -2))
    return (A @ v) / A.sum(-1, keepdims=True)


shapes = st.tuples(st.integers(0, 2), st.integers(1, 24), st.integers(1, 24), st.integers(1, 5),
                   st.integers(1, 3), st.integers(1, 9))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(shape=shapes, seed=st.integers(0, 2**16), frac=st.floats(0.0, 1.0),
       dtype=st.sampled_from(["float32", "float64"]))
def test_causal_contracts(shape, seed, frac, dtype):
    n_batch, L0, extra, m, d_v, chunk = shape
    rng = np.random.default_rng(seed)
    batch = (2,) * n_batch
    L = L0 + extra
    # later keys may dominate by up to e^200 (float32: past its underflow at e^-87) or e^900 (float64: past
    # e^-708), so a stabiliser taking the maximum over all keys would flush the prefix's keys to zero and
    # be caught
    jump = frac * (200.0 if dtype == "float32" else 900.0)
    phi_q = np.exp(rng.standard_normal(batch + (L, m))).astype(dtype)
    phi_k = np.exp(rng.standard_normal(batch + (L, m))).astype(dtype)
    v = rng.standard_normal(batch + (L, d_v)).astype(dtype)
    s = rng.standard_normal(batch + (L,))
    s[..., L0:] += jump
    s = s.astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    y = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=chunk)
    # prefix invariance: the first L0 outputs computed without the appended tokens
    y0 = linear_attention(phi_q[..., :L0, :], phi_k[..., :L0, :], v[..., :L0, :], causal=True,
                          k_log_scale=s[..., :L0], chunk_size=chunk)
    np.testing.assert_allclose(y[..., :L0, :], y0, **tol)
    # chunk-size independence
    y1 = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=1)
    np.testing.assert_allclose(y, y1, **(tol if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)))
    # the dense reference, where its global-max scaling does not underflow
    if dtype == "float64" and jump < 30.0:
        np.testing.assert_allclose(y, dense_causal(phi_q, phi_k, v, s), rtol=1e-9, atol=1e-12)
