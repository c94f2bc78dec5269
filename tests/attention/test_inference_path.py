"""Inference pays only for inference: the plain forwards keep no state for a backward, and give the
differentiable forward's output bit for bit.

``linear_attention(..., causal=True)`` and ``favor_attention(..., causal=True)`` run the chunked scan with
nothing kept (``linear_attention_fwd_core(..., keep=False)``); ``*_fwd`` keeps the states its one-sweep
backward reads. The two scans do the same arithmetic in the same order, so the outputs are equal bit for bit,
for every chunk length (including chunks that do not divide L), every key scaling (none, row log-scales,
per-feature frames on both frame paths) and both dtypes; the result is also the recurrence's
(``linear_attention_step``) to rounding, so a scan that drops its state in both paths still fails. A
backward from an inference cache (nothing kept) recomputes the states and gives the kept-state backward's
gradients to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from array_api_compat import array_namespace

from refattn import favor_attention, linear_attention, linear_attention_step
from refattn.attention import _causal, favor_attention_fwd, linear_attention_bwd, linear_attention_fwd
from refattn.attention.linear import linear_attention_fwd_core
from refattn.random import draw_orthogonal

B, L, M_FEAT, D_V = 2, 37, 5, 3          # L = 37: prime, so no chunk length below divides it


def _inputs(rng, scales, dtype):
    phi_q = np.exp(rng.standard_normal((B, L, M_FEAT)))
    phi_k = np.exp(rng.standard_normal((B, L, M_FEAT)))
    v = rng.standard_normal((B, L, D_V))
    if scales == "none":
        s = None
    elif scales == "rows":
        s = 4.0 * rng.standard_normal((B, L))
    else:                                                          # per-feature frames (prefix maxima)
        s = np.maximum.accumulate(2.0 * rng.standard_normal((B, L, M_FEAT)), axis=-2)
        s[..., L // 2:, 1] += 30.0                                 # one chunk past the spread limit
    def cast(a):
        return None if a is None else a.astype(dtype)

    return cast(phi_q), cast(phi_k), cast(v), cast(s)


def _recurrent(phi_q, phi_k, v, s):
    state, outs = None, []
    for t in range(phi_q.shape[-2]):
        out_t, state = linear_attention_step(state, phi_q[:, t], phi_k[:, t], v[:, t],
                                             None if s is None else s[:, t])
        outs.append(out_t)
    return np.stack(outs, axis=1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scales", ["none", "rows", "frames"])
@pytest.mark.parametrize("chunk_size", [1, 3, 10, 32, 64], ids=lambda c: f"C{c}")
def test_inference_scan_equals_the_kept_state_scan(rng, dtype, scales, chunk_size):
    phi_q, phi_k, v, s = _inputs(rng, scales, dtype)
    y_inf = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=chunk_size)
    y_fwd, cache = linear_attention_fwd(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=chunk_size)
    if chunk_size < L:                                                # the fwd path kept states
        assert cache.states is not None
    np.testing.assert_array_equal(y_inf, y_fwd)                       # bit for bit
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(y_inf, _recurrent(phi_q, phi_k, v, s), **tol)


@pytest.mark.parametrize("scales", ["none", "rows", "frames"])
def test_inference_cache_keeps_nothing_and_still_differentiates(rng, scales):
    phi_q, phi_k, v, s = _inputs(rng, scales, np.float64)
    inputs = {"phi_q": phi_q, "phi_k": phi_k, "v": v, "k_log_scale": s}
    y, lean = linear_attention_fwd_core(phi_q, phi_k, v, True, s, 10, "raise", xp=array_namespace(phi_q),
                                        inputs=inputs, keep=False)
    assert lean.states is None and lean.stride is None
    y_k, kept = linear_attention_fwd(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=10)
    np.testing.assert_array_equal(y, y_k)
    dy = rng.standard_normal(y.shape)
    for a, b in zip(linear_attention_bwd(dy, lean), linear_attention_bwd(dy, kept), strict=True):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("path", ["chunk_frame", "exact"])
def test_inference_equals_fwd_on_each_frame_path(rng, monkeypatch, path):
    monkeypatch.setattr(_causal, "SPREAD_LIMIT", float("inf") if path == "chunk_frame" else -1.0)
    phi_q, phi_k, v, s = _inputs(rng, "frames", np.float64)
    s[..., L // 2:, 1] -= 25.0
    for C in (3, 10, 32):
        y_inf = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=C)
        y_fwd, _ = linear_attention_fwd(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=C)
        np.testing.assert_array_equal(y_inf, y_fwd)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("features", ["positive", "hyperbolic", "trig"])
def test_favor_inference_equals_fwd(rng, dtype, causal, features):
    Lf, d = 45, 8
    q, k, v = (0.5 * rng.standard_normal((2, Lf, d))).astype(dtype), \
        (0.5 * rng.standard_normal((2, Lf, d))).astype(dtype), rng.standard_normal((2, Lf, 4)).astype(dtype)
    omega = draw_orthogonal(rng, 16, d, dtype=dtype)
    for C in (4, 32):
        y_inf = favor_attention(q, k, v, omega, causal=causal, features=features, chunk_size=C,
                                on_nonpositive="ignore")
        y_fwd, _ = favor_attention_fwd(q, k, v, omega, causal=causal, features=features, chunk_size=C,
                                       on_nonpositive="ignore")
        np.testing.assert_array_equal(y_inf, y_fwd)


@pytest.mark.parametrize("causal", [False, True])
def test_s1_and_flt_inference_equal_their_fwd(rng, causal):
    """The RPE attentions' plain forwards (no states kept) give their differentiable forwards' output."""
    from refattn.random import draw_flt_noise, draw_gaussian
    from refattn.random.positional import init_s1_params
    from refattn.rpe import flt_attention, flt_attention_fwd, s1_attention, s1_attention_fwd
    from refattn.rpe.spectra import GaussianMixture, Proposal

    Lr, d = 41, 4
    q, k, v = (0.5 * rng.standard_normal((2, Lr, d)) for _ in range(3))
    params = init_s1_params(rng, n_axes=1, n_lengthscales=2, base=10.0)
    omega = draw_gaussian(rng, 16, d + 2 * 1 * 2)
    y_inf = s1_attention(q, k, v, np.arange(Lr), params, omega=omega, causal=causal)
    y_fwd, _ = s1_attention_fwd(q, k, v, np.arange(Lr), params, omega=omega, causal=causal)
    np.testing.assert_array_equal(y_inf, y_fwd)
    spec = GaussianMixture(np.array([0.8, -0.3]), np.array([[0.2], [-0.1]]), np.array([0.3, 0.5]))
    prop = Proposal("gaussian", np.zeros(1), np.array(0.6))
    pos, eps = np.arange(Lr)[:, None], draw_flt_noise(rng, 3, 1)
    omega = draw_gaussian(rng, 16, 2 * 3 + d)
    for C in (5, 32):
        y_inf = flt_attention(q, k, v, pos, eps, spec, prop, omega, causal=causal, chunk_size=C)
        y_fwd, _ = flt_attention_fwd(q, k, v, pos, eps, spec, prop, omega, causal=causal, chunk_size=C)
        np.testing.assert_array_equal(y_inf, y_fwd)
