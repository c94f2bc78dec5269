"""Causal linear attention with per-feature key frames ``k_log_scale: (..., L, m)``: the dense reference, both
chunk paths (chunk frame and exact), prefix invariance, the recurrent step, gradients."""

from __future__ import annotations

import numpy as np
import pytest

from refattn import linear_attention, linear_attention_step
from refattn.attention import linear_attention_bwd, linear_attention_fwd
from refattn import _dispatch
from refattn.attention import _causal
from tests.helpers import asxp, to_numpy
from validation import check_vjp


def _inputs(rng, shape=(2, 11), m=5, d_v=3, jump=0.0):
    batch, L = shape[:-1], shape[-1]
    phi_q = np.exp(rng.standard_normal(batch + (L, m)) - 1.0)
    phi_k = np.exp(rng.standard_normal(batch + (L, m)) - 1.0)
    v = rng.standard_normal(batch + (L, d_v))
    s = np.maximum.accumulate(rng.standard_normal(batch + (L, m)) * 2.0, axis=-2)  # (..., L, m) prefix maxima
    if jump:
        s[..., L // 2:, 1] += jump                                                 # one feature jumps mid-way
    return phi_q, phi_k, v, s


def dense(phi_q, phi_k, v, s):
    """sum_{j<=i} sum_f q_if k_jf exp(s_jf - s_if) v_j / same without v, in float64 with explicit weights."""
    W = np.einsum("...if,...jf,...ijf->...ij", phi_q, phi_k,
                  np.exp(np.clip(s[..., None, :, :] - s[..., :, None, :], None, 0.0)))
    W = np.tril(W)
    return (W @ v) / W.sum(-1, keepdims=True)


@pytest.fixture(params=["chunk_frame", "exact"])
def path(request, monkeypatch):
    monkeypatch.setattr(_causal, "SPREAD_LIMIT", float("inf") if request.param == "chunk_frame" else -1.0)
    return request.param


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 32])
def test_equals_dense_reference(xp, rng, path, chunk_size):
    phi_q, phi_k, v, s = _inputs(rng)
    y = linear_attention(*(asxp(xp, a) for a in (phi_q, phi_k, v)), causal=True, k_log_scale=asxp(xp, s),
                         chunk_size=chunk_size)
    np.testing.assert_allclose(to_numpy(y), dense(phi_q, phi_k, v, s), rtol=1e-11, atol=1e-12)


def test_guarded_path_takes_both_branches_and_agrees(rng):
    """Default SPREAD_LIMIT: a jump of e^60 in one feature sends its chunk to the exact path; same result."""
    phi_q, phi_k, v, s = _inputs(rng, shape=(2, 40), jump=60.0)
    plan = _causal.chunk_plan(np.asarray(s), 8, xp=np)[1]
    assert not all(plan) and any(plan), plan
    y = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=8)
    np.testing.assert_allclose(y, dense(phi_q, phi_k, v, s), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prefix_invariance_under_huge_later_frames(rng, dtype):
    """Keys appended with frames e^200 (float32) / e^900 (float64) larger leave the prefix's outputs as they
    were; a frame taken over the whole chunk (future included) would flush the prefix's weights to zero."""
    L0, jump = 13, (200.0 if dtype == "float32" else 900.0)
    phi_q, phi_k, v, s = _inputs(rng, shape=(2, L0 + 9))
    s[..., L0:, :] += jump
    args = [a.astype(dtype) for a in (phi_q, phi_k, v, s)]
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    for chunk_size in (4, 8, 32):
        y = linear_attention(*args[:3], causal=True, k_log_scale=args[3], chunk_size=chunk_size)
        y0 = linear_attention(*(a[..., :L0, :] for a in args[:3]), causal=True,
                              k_log_scale=args[3][..., :L0, :], chunk_size=chunk_size)
        assert np.all(np.isfinite(y))
        np.testing.assert_allclose(y[..., :L0, :], y0, **tol)


def test_chunk_frame_alone_would_leak_a_huge_later_key(rng, monkeypatch):
    """Must-fail companion: forcing the chunk-level frame on a chunk with an e^200 jump in float32 breaks the
    prefix (the earlier queries' weights underflow or overflow): the guard is what keeps it exact."""
    monkeypatch.setattr(_causal, "SPREAD_LIMIT", float("inf"))
    phi_q, phi_k, v, s = _inputs(rng, shape=(1, 8))
    s[..., 6:, :] += 200.0
    args = [a.astype(np.float32) for a in (phi_q, phi_k, v, s)]
    with np.errstate(all="ignore"):
        try:
            y = linear_attention(*args[:3], causal=True, k_log_scale=args[3], chunk_size=8,
                                 on_nonpositive="ignore")
        except ValueError:
            return  # the leak surfaced as a non-finite output
    y0 = linear_attention(*(a[..., :6, :] for a in args[:3]), causal=True, k_log_scale=args[3][..., :6, :],
                          chunk_size=8)
    assert not np.allclose(y[..., :6, :], y0, rtol=1e-5, atol=1e-6)


def test_recurrent_step_equals_causal(xp, rng):
    phi_q, phi_k, v, s = _inputs(rng, jump=40.0)
    y = to_numpy(linear_attention(*(asxp(xp, a) for a in (phi_q, phi_k, v)), causal=True,
                                  k_log_scale=asxp(xp, s), chunk_size=4))
    state = None
    for t in range(phi_q.shape[-2]):
        out, state = linear_attention_step(state, *(asxp(xp, a[..., t, :]) for a in (phi_q, phi_k, v)),
                                           asxp(xp, s[..., t, :]))
        np.testing.assert_allclose(to_numpy(out), y[..., t, :], rtol=1e-12, atol=1e-13)


def test_bidirectional_rejects_frames(rng):
    phi_q, phi_k, v, s = _inputs(rng)
    with pytest.raises(ValueError, match=r"k_log_scale: per-feature frames of shape \(\.\.\., L, m\) are for "
                                         r"causal=True"):
        linear_attention(phi_q, phi_k, v, k_log_scale=s)


@pytest.mark.parametrize("chunk_size", [3, 32])
def test_gradients(rng, path, chunk_size):
    phi_q, phi_k, v, s = _inputs(rng, shape=(2, 7), jump=5.0)
    fwd = lambda phi_q, phi_k, v, k_log_scale: linear_attention_fwd(  # noqa: E731
        phi_q, phi_k, v, causal=True, k_log_scale=k_log_scale, chunk_size=chunk_size)
    check_vjp(fwd, linear_attention_bwd, {"phi_q": phi_q, "phi_k": phi_k, "v": v, "k_log_scale": s})


def test_gradients_strict(rng):
    import array_api_strict as xs

    phi_q, phi_k, v, s = (asxp(xs, a) for a in _inputs(rng, shape=(1, 6), jump=30.0))
    fwd = lambda phi_q, phi_k, v, k_log_scale: linear_attention_fwd(  # noqa: E731
        phi_q, phi_k, v, causal=True, k_log_scale=k_log_scale, chunk_size=4)
    check_vjp(fwd, linear_attention_bwd, {"phi_q": phi_q, "phi_k": phi_k, "v": v, "k_log_scale": s})


def test_gradient_check_must_fail(rng):
    """A frame cotangent that forgets the query side (ds = phi_k dphi_k) is caught."""
    phi_q, phi_k, v, s = _inputs(rng, shape=(1, 6))

    def bad_bwd(dy, cache):
        g = linear_attention_bwd(dy, cache)
        return g._replace(k_log_scale=cache.phi_k * g.phi_k)

    fwd = lambda phi_q, phi_k, v, k_log_scale: linear_attention_fwd(  # noqa: E731
        phi_q, phi_k, v, causal=True, k_log_scale=k_log_scale, chunk_size=4)
    with pytest.raises(AssertionError, match="gradient for k_log_scale"):
        check_vjp(fwd, bad_bwd, {"phi_q": phi_q, "phi_k": phi_k, "v": v, "k_log_scale": s})


@pytest.mark.parametrize("kept", [True, False], ids=["kept-states", "two-sweeps"])
def test_log_features_cotangents(xp, rng, path, kept):
    """The frames primitive's ``log_features=True`` (FAVOR+'s gauge backward) returns ``dphi * phi`` for the
    queries and the keys, formed chunk by chunk, on both chunk paths and both backward forms; ``dv_aug`` is
    unchanged. (FAVOR+'s gradient checks run through it; a missing factor fails them.)"""
    phi_q, phi_k, v, s = _inputs(rng, shape=(2, 19), jump=5.0)
    v_aug = np.concatenate([v, np.ones(v.shape[:-1] + (1,))], axis=-1)
    g = rng.standard_normal(v_aug.shape)
    a = [asxp(xp, x) for x in (g, phi_q, phi_k, v_aug, s)]
    fwd = _dispatch.reference("linear_attention.causal_frames_fwd")
    bwd = _dispatch.reference("linear_attention.causal_frames_bwd")
    _, states = fwd(*a[1:], 4, 2 if kept else None)
    plain = [to_numpy(x) for x in bwd(*a, 4, states, 2)]
    logf = [to_numpy(x) for x in bwd(*a, 4, states, 2, log_features=True)]
    np.testing.assert_allclose(logf[0], plain[0] * phi_q, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(logf[1], plain[1] * phi_k, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(logf[2], plain[2])


def test_core_log_features_keeps_every_gradient(rng):
    """``linear_attention_bwd_core(log_features=True)``: the feature fields are ``dphi * phi``, ``v`` and the
    frames' cotangent are the plain backward's (the latter formed from the log-feature cotangents)."""
    from refattn._xp import namespace
    from refattn.attention.linear import linear_attention_bwd_core

    phi_q, phi_k, v, s = _inputs(rng, shape=(2, 13), jump=3.0)
    dy = rng.standard_normal(v.shape)
    _, cache = linear_attention_fwd(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=4)
    plain = linear_attention_bwd(dy, cache)
    logf = linear_attention_bwd_core(dy, cache, xp=namespace(dy), log_features=True)
    np.testing.assert_allclose(logf.phi_q, plain.phi_q * phi_q, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(logf.phi_k, plain.phi_k * phi_k, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(logf.v, plain.v)
    np.testing.assert_allclose(logf.k_log_scale, plain.k_log_scale, rtol=1e-12, atol=1e-13)
