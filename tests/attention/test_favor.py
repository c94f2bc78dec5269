"""FAVOR / FAVOR+ (favor_attention): it is exactly linear attention on the raw feature maps; it converges to
softmax_attention with RMS error proportional to m^{-1/2} (both modes, float32 and float64); it stays finite
for |x| up to 60 in float32; in causal mode a prefix's output does not depend on appended tokens, even keys
aligned with rows of omega whose exponent exceeds every earlier one (a global-max stabiliser fails the same
test); gradients for q, k, v and omega; trig normalisers reported; bad input.
"""

from __future__ import annotations

import numpy as np
import pytest

from refattn import (
    favor_attention,
    hyperbolic_features,
    linear_attention,
    positive_features,
    positive_features_stable,
    softmax_attention,
    softmax_trig_features,
)
from refattn.attention import (
    favor_attention_bwd,
    favor_attention_fwd,
)
from refattn.random import draw_gaussian, draw_orthogonal
from tests.helpers import asxp
from validation import assert_close, check_vjp

RAW = {"positive": positive_features, "hyperbolic": hyperbolic_features, "trig": softmax_trig_features}


def _qkv(rng, shape=(2, 12, 8), d_v=3, scale=0.5):
    q = scale * rng.standard_normal(shape)
    k = scale * rng.standard_normal(shape)
    v = rng.standard_normal(shape[:-1] + (d_v,))
    return q, k, v


# ----------------------------------------------------------------------------------------------------------
# exact composition


@pytest.mark.parametrize("features", ["positive", "hyperbolic", "trig"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_equals_linear_attention_on_raw_features(xp, features, causal, rng):
    qn, kn, vn = _qkv(rng, scale=0.3)
    d = qn.shape[-1]
    wn = draw_orthogonal(rng, 16, d)
    q, k, v, w = (asxp(xp, a) for a in (qn, kn, vn, wn))
    s = d ** -0.25
    raw = RAW[features]
    expect = linear_attention(raw(q * s, w), raw(k * s, w), v, causal=causal, chunk_size=5,
                              on_nonpositive="ignore")
    got = favor_attention(q, k, v, w, causal=causal, features=features, chunk_size=5, on_nonpositive="ignore")
    assert_close(got, expect, rtol=1e-12, atol=1e-13)  # outputs are O(1) averages of v: absolute rounding


# ----------------------------------------------------------------------------------------------------------
# convergence: RMS error proportional to m^{-1/2}


def _m_times_mse(q, k, v, exact, m, R, rng, causal, features, dtype):
    d = q.shape[-1]
    out = np.empty(R)
    for r in range(R):
        w = draw_gaussian(rng, m, d, dtype=dtype)
        y = favor_attention(q, k, v, w, causal=causal, features=features)
        out[r] = m * np.mean((y.astype(np.float64) - exact) ** 2)
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_error_scales_as_inverse_sqrt_m(dtype, causal, seed):
    """m * MSE(m) must be the same at m = 64 and m = 1024 (within 5 standard errors of the difference, from R
    replicates each): the RMS error falls as m^{-1/2}. Must fail: m^2 * MSE (a 1/m rate) is not constant."""
    rng = np.random.default_rng(seed)
    q, k, v = _qkv(rng, shape=(1, 16, 8), d_v=2, scale=0.3)   # light tails: |q + k|^2 d^{-1/2} ~ 0.5
    exact = softmax_attention(q, k, v, causal=causal)
    q, k, v = (a.astype(dtype) for a in (q, k, v))
    R, (m1, m2) = 80, (64, 1024)
    a = _m_times_mse(q, k, v, exact, m1, R, rng, causal, "positive", dtype)
    b = _m_times_mse(q, k, v, exact, m2, R, rng, causal, "positive", dtype)
    se = np.sqrt(a.var(ddof=1) / R + b.var(ddof=1) / R)
    z = abs(a.mean() - b.mean()) / se
    assert z <= 5, f"m*MSE: {a.mean():.4e} at m={m1} vs {b.mean():.4e} at m={m2}, z = {z:.2f} (seed {seed})"
    # must fail: the m^{-1} rate
    a2, b2 = a * m1, b * m2
    se2 = np.sqrt(a2.var(ddof=1) / R + b2.var(ddof=1) / R)
    assert abs(a2.mean() - b2.mean()) / se2 > 5


# ----------------------------------------------------------------------------------------------------------
# large inputs, float32


@pytest.mark.parametrize("features", ["positive", "hyperbolic"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_finite_for_norm_60_float32(features, causal):
    rng = np.random.default_rng(1)
    d, L = 16, 70
    norms = np.linspace(1.0, 60.0, L)[None, :, None]
    q = rng.standard_normal((2, L, d))
    k = rng.standard_normal((2, L, d))
    q = (norms * q / np.linalg.norm(q, axis=-1, keepdims=True)).astype(np.float32)
    k = (norms[:, ::-1] * k / np.linalg.norm(k, axis=-1, keepdims=True)).astype(np.float32)
    v = rng.standard_normal((2, L, 4)).astype(np.float32)
    w = draw_orthogonal(rng, 64, d, dtype=np.float32)
    y = favor_attention(q, k, v, w, causal=causal, features=features)
    assert y.dtype == np.float32 and np.all(np.isfinite(y))
    # each output is a convex combination of values
    assert np.all(y <= v.max(axis=-2, keepdims=True) + 1e-4)
    assert np.all(y >= v.min(axis=-2, keepdims=True) - 1e-4)


# ----------------------------------------------------------------------------------------------------------
# causal prefix invariance (docs/tutorials/causal-linear-attention.rst, Secs. 6-7)


def _prefix_case(dtype):
    rng = np.random.default_rng(4)
    d, m, L0, L1 = 16, 32, 24, 40
    w = draw_gaussian(rng, m, d)
    s = d ** 0.25                                          # favor scales inputs by d^{-1/4}
    u = rng.standard_normal((L0, d))
    k0 = 20.0 * s * u / np.linalg.norm(u, axis=1, keepdims=True)   # large norm: exponents ~ -150
    big = np.argsort(-np.linalg.norm(w, axis=1))[:4]
    k1 = s * w[np.resize(big, L1)]  # aligned with rows of omega: exponent |omega_i|^2/2
    q = 0.5 * rng.standard_normal((L0 + L1, d))
    k = np.concatenate([k0, k1])[None]
    v = rng.standard_normal((1, L0 + L1, 3))
    return (a.astype(dtype) for a in (q[None], k, v, w)), L0


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("features", ["positive", "hyperbolic"])
def test_causal_prefix_invariance(dtype, features):
    (q, k, v, w), L0 = _prefix_case(dtype)
    _, ls = positive_features_stable(k[0] * k.shape[-1] ** -0.25, w)
    assert ls[L0:].min() > ls[:L0].max() + 100              # the appended keys dominate every earlier one
    full = favor_attention(q, k, v, w, causal=True, features=features, chunk_size=16)
    prefix = favor_attention(q[:, :L0], k[:, :L0], v[:, :L0], w, causal=True, features=features,
                             chunk_size=16)
    assert np.all(np.isfinite(full))
    rtol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(full[:, :L0], prefix, rtol=rtol, atol=0)


def test_causal_prefix_invariance_must_fail_with_global_max():
    """Must fail: stabilising the keys with the maximum over ALL positions (not the prefix) leaks the future
    through underflow in float32: the earlier keys' features vanish once the aligned keys are appended."""
    (q, k, v, w), L0 = _prefix_case(np.float32)
    s = q.shape[-1] ** -0.25
    phi_q, _ = positive_features_stable(q * s, w)

    def leaky(L):
        phi_k, ls = positive_features_stable(k[:, :L] * s, w)
        phi_k = phi_k * np.exp(ls - ls.max())[..., None]    # global maximum: depends on the future
        return linear_attention(phi_q[:, :L], phi_k, v[:, :L], causal=True, on_nonpositive="ignore")

    prefix = leaky(L0)
    assert np.all(np.isfinite(prefix))
    try:
        with np.errstate(all="ignore"):
            full = leaky(L0 + 40)
        changed = not np.allclose(full[:, :L0], prefix, rtol=2e-5, atol=0)
    except ValueError:                                      # 0/0: the prefix's normaliser underflowed to zero
        changed = True
    assert changed


# ----------------------------------------------------------------------------------------------------------
# trig: non-positive normalisers are reported, never hidden


def test_trig_nonpositive_normaliser_reported():
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, shape=(1, 32, 8), scale=1.5)
    w = draw_gaussian(rng, 2, 8)
    with pytest.raises(ValueError, match="non-positive normaliser"):
        favor_attention(q, k, v, w, features="trig")
    y = favor_attention(q, k, v, w, features="trig", on_nonpositive="ignore")
    assert y.shape == (1, 32, 3)


# ----------------------------------------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("features", ["positive", "hyperbolic", "trig"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_gradients(xp, features, causal, rng):
    qn, kn, vn = _qkv(rng, shape=(2, 7, 4), d_v=3, scale=0.4)
    wn = rng.standard_normal((5, 4))
    args = {"q": asxp(xp, qn), "k": asxp(xp, kn), "v": asxp(xp, vn), "omega": asxp(xp, wn)}
    check_vjp(favor_attention_fwd, favor_attention_bwd, args,
              kwargs={"causal": causal, "features": features, "chunk_size": 3, "on_nonpositive": "ignore"})


def test_gradient_check_must_fail(rng):
    qn, kn, vn = _qkv(rng, shape=(1, 6, 4), scale=0.4)
    args = {"q": qn, "k": kn, "v": vn, "omega": rng.standard_normal((5, 4))}

    def bad_bwd(dy, cache):
        g = favor_attention_bwd(dy, cache)
        return g._replace(omega=g.omega + 1e-4)

    with pytest.raises(AssertionError, match="gradient for omega"):
        check_vjp(favor_attention_fwd, bad_bwd, args)


# ----------------------------------------------------------------------------------------------------------
# bad input


def test_bad_input():
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, shape=(2, 5, 16))
    w = rng.standard_normal((8, 16))
    with pytest.raises(ValueError,
                       match=r"omega: expected shape \(m, d\) with .*d = 16 \(from q\); got \(8, 15\)"):
        favor_attention(q, k, v, w[:, :15])
    with pytest.raises(ValueError, match=r"omega: expected shape \(m, d\).*got \(1, 8, 16\)"):
        favor_attention(q, k, v, w[None])
    with pytest.raises(ValueError,
                       match=r"features: expected one of 'positive', 'hyperbolic', 'trig'; got 'relu'"):
        favor_attention(q, k, v, w, features="relu")
    with pytest.raises(ValueError, match=r"k: expected shape \(\.\.\., L, d\)"):
        favor_attention(q, k[:, :4], v, w)
    with pytest.raises(ValueError, match=r"omega: expected at least one projection row"):
        favor_attention(q, k, v, w[:0])
    with pytest.raises(TypeError, match=r"omega: dtype float32 differs from q's dtype float64"):
        favor_attention(q, k, v, w.astype(np.float32))
    with pytest.raises(ValueError, match=r"q: expected finite values"):
        favor_attention(q * np.inf, k, v, w)
    with pytest.raises(TypeError, match=r"causal: expected a bool"):
        favor_attention(q, k, v, w, causal=1)
