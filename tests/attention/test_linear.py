"""linear_attention: exactness against kernel_attention, log-scale stabilisation, prefix invariance,
recurrent form, gradients and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from refattn import (
    kernel_attention,
    linear_attention,
    linear_attention_step,
)
from refattn.attention import (
    linear_attention_bwd,
    linear_attention_fwd,
)
from refattn.features import elu_features, elu_kernel
from tests.helpers import asxp, out_tol, randn, to_numpy
from validation import assert_close, check_vjp

# (batch..., L, d) cases: L = 1, L not a multiple of the chunk, batch and head axes
CASES = [(1, 1, 3), (5, 4), (2, 23, 3), (2, 3, 17, 8)]
CASE_IDS = ["L1", "noBatch", "L23", "batchHeads"]


def _elu_inputs(rng, xp, shape, dtype=None, d_v=3):
    q = randn(rng, xp, *shape, dtype=dtype)
    k = randn(rng, xp, *shape, dtype=dtype)
    v = randn(rng, xp, *shape[:-1], d_v, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("shape", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_elu_linear_equals_kernel_attention(xp, dtype, rng, shape, causal):
    q, k, v = _elu_inputs(rng, xp, shape, dtype)
    y = linear_attention(elu_features(q), elu_features(k), v, causal=causal, chunk_size=4)
    ref = kernel_attention(q, k, v, elu_kernel, causal=causal)
    assert_close(y, ref, **out_tol(xp, dtype))


@pytest.mark.parametrize("chunk_size", [1, 3, 64, 1000])
def test_causal_independent_of_chunk_size(xp, rng, chunk_size):
    q, k, v = _elu_inputs(rng, xp, (2, 37, 4))
    s = randn(rng, xp, 2, 37, scale=3.0)
    ref = linear_attention(elu_features(q), elu_features(k), v, causal=True, k_log_scale=s, chunk_size=5)
    y = linear_attention(elu_features(q), elu_features(k), v, causal=True, k_log_scale=s,
                         chunk_size=chunk_size)
    assert_close(y, ref, rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_k_log_scale_equals_unscaled_where_finite(xp, dtype, rng, causal):
    """Keys given as phi_k * exp(s): the stabilised path equals the raw product where that does
    not overflow."""
    q, k, v = _elu_inputs(rng, xp, (2, 19, 4), dtype)
    s = randn(rng, xp, 2, 19, dtype=dtype, scale=2.0)
    phi_q, phi_k = elu_features(q), elu_features(k)
    y = linear_attention(phi_q, phi_k, v, causal=causal, k_log_scale=s, chunk_size=4)
    raw = linear_attention(phi_q, phi_k * xp.exp(s)[..., None], v, causal=causal, chunk_size=4)
    assert_close(y, raw, **out_tol(xp, dtype))


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_k_log_scale_finite_where_raw_overflows(xp, dtype, rng, causal):
    """Log-scales of +-800 overflow exp() in both dtypes; the stabilised output stays finite and equals the
    analytic answer (the largest-scale key in range dominates)."""
    L = 9
    phi = xp.ones((1, L, 2), dtype=dtype)
    v = asxp(xp, np.arange(L, dtype=float).reshape(1, L, 1), dtype)
    s = asxp(xp, np.array([[-800.0, 0.0, 800.0, 10.0, 900.0, -900.0, 0.0, 0.0, 0.0]]), dtype)
    with np.errstate(over="ignore"):                                 # the overflow is the point
        raw = phi * xp.exp(s)[..., None]
    assert not bool(xp.all(xp.isfinite(raw)))
    y = linear_attention(phi, phi, v, causal=causal, k_log_scale=s, chunk_size=4)
    y_np = to_numpy(y)[0, :, 0]
    assert np.all(np.isfinite(y_np))
    if causal:
        # position i's output is the value of the prefix's largest-scale key: 0, 1, 2, 2, 4, 4, ...
        expected = [0.0, 1.0, 2.0, 2.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    else:
        expected = [4.0] * L
    np.testing.assert_allclose(y_np, expected, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("dtype_name, rtol", [("float32", 1e-5), ("float64", 1e-12)])
def test_causal_prefix_invariance(xp, rng, dtype_name, rtol):
    """Appending tokens never changes the outputs of a prefix -- also when the appended keys have larger
    log-scales (the probe of docs/tutorials/causal-linear-attention.rst, Sec. 6: a key maximum over all
    positions would push the earlier keys' scaled features to zero in float32 through underflow)."""
    dtype = getattr(xp, dtype_name)
    L0, L1 = 21, 40
    q, k, v = _elu_inputs(rng, xp, (2, L1, 4), dtype)
    s_np = rng.standard_normal((2, L1))
    s_np[:, L0:] += 200.0  # later keys: exp(200 - s_j) underflows float32
    s = asxp(xp, s_np, dtype)
    phi_q, phi_k = elu_features(q), elu_features(k)
    full = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=16)
    prefix = linear_attention(phi_q[:, :L0, :], phi_k[:, :L0, :], v[:, :L0, :], causal=True,
                              k_log_scale=s[:, :L0], chunk_size=16)
    assert_close(full[:, :L0, :], prefix, rtol=rtol)


def test_causal_prefix_invariance_enlarged_future_keys(xp, rng):
    """Changing only later keys (values and scales) leaves earlier outputs bit-for-bit equal up
    to rounding."""
    q, k, v = _elu_inputs(rng, xp, (1, 30, 3))
    s = randn(rng, xp, 1, 30)
    k2 = xp.concat([k[:, :13, :], 50.0 * k[:, 13:, :]], axis=1)
    s2 = xp.concat([s[:, :13], s[:, 13:] + 300.0], axis=1)
    y1 = linear_attention(elu_features(q), elu_features(k), v, causal=True, k_log_scale=s, chunk_size=8)
    y2 = linear_attention(elu_features(q), elu_features(k2), v, causal=True, k_log_scale=s2, chunk_size=8)
    assert_close(y1[:, :13, :], y2[:, :13, :], rtol=1e-12)


@pytest.mark.parametrize("with_scale", [False, True], ids=["plain", "logscale"])
def test_recurrent_equals_causal(xp, dtype, rng, with_scale):
    B, L, m, d_v = 2, 11, 4, 3
    q, k, v = _elu_inputs(rng, xp, (B, L, m), dtype, d_v)
    phi_q, phi_k = elu_features(q), elu_features(k)
    s = randn(rng, xp, B, L, dtype=dtype, scale=5.0) if with_scale else None
    y = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=4)
    state, outs = None, []
    for t in range(L):
        o, state = linear_attention_step(state, phi_q[:, t, :], phi_k[:, t, :], v[:, t, :],
                                         None if s is None else s[:, t])
        outs.append(o)
    assert_close(xp.stack(outs, axis=1), y, **out_tol(xp, dtype))


# ---------------------------------------------------------------------------------------------- gradients

@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("with_scale", [False, True], ids=["plain", "logscale"])
@pytest.mark.parametrize("chunk_size", [1, 4, 64])
def test_linear_attention_gradcheck(rng, causal, with_scale, chunk_size):
    B, H, L, m, d_v = 2, 1, 13, 5, 3
    args = dict(phi_q=np.exp(rng.standard_normal((B, H, L, m))),
                phi_k=np.exp(rng.standard_normal((B, H, L, m))),
                v=rng.standard_normal((B, H, L, d_v)))
    if with_scale:
        args["k_log_scale"] = 3.0 * rng.standard_normal((B, H, L))
    check_vjp(linear_attention_fwd, linear_attention_bwd, args,
              kwargs=dict(causal=causal, chunk_size=chunk_size))


def test_linear_attention_gradcheck_strict(rng):
    """The backward runs in the strict namespace too (same numbers as NumPy's)."""
    from tests.conftest import get_namespace

    xp = get_namespace("array_api_strict")
    args_np = dict(phi_q=np.exp(rng.standard_normal((2, 9, 4))), phi_k=np.exp(rng.standard_normal((2, 9, 4))),
                   v=rng.standard_normal((2, 9, 3)), k_log_scale=rng.standard_normal((2, 9)))
    args = {n: xp.asarray(a) for n, a in args_np.items()}
    check_vjp(linear_attention_fwd, linear_attention_bwd, args, kwargs=dict(causal=True, chunk_size=4))


def test_gradcheck_catches_wrong_causal_backward(rng, monkeypatch):
    """Must-fail: a causal backward whose dphi_k is off by 1e-4 (relative) is caught, for the default
    one-sweep backward from the kept states and for the two-sweep reference."""
    import refattn.attention.linear as linear_mod
    from refattn import _dispatch

    args = dict(phi_q=np.exp(rng.standard_normal((1, 9, 3))), phi_k=np.exp(rng.standard_normal((1, 9, 3))),
                v=rng.standard_normal((1, 9, 2)))
    real_stored = linear_mod.causal_bwd_stored

    def broken_stored(*a):
        dq, dk, dv = real_stored(*a)
        return dq, dk * 1.0001, dv

    monkeypatch.setattr(linear_mod, "causal_bwd_stored", broken_stored)
    with pytest.raises(AssertionError, match="gradient for phi_k"):
        check_vjp(linear_attention_fwd, linear_attention_bwd, args, kwargs=dict(causal=True, chunk_size=4))
    monkeypatch.setattr(linear_mod, "causal_bwd_stored", real_stored)
    real = _dispatch.reference("linear_attention.causal_bwd")

    def broken(g, phi_q, phi_k, v_aug, s, M, chunk_size):
        dq, dk, dv = real(g, phi_q, phi_k, v_aug, s, M, chunk_size)
        return dq, dk * 1.0001, dv

    monkeypatch.setitem(_dispatch._references, "linear_attention.causal_bwd", broken)

    def fwd_without_states(**kw):
        y, cache = linear_attention_fwd(**kw, causal=True, chunk_size=4)
        return y, cache._replace(states=None)

    with pytest.raises(AssertionError, match="gradient for phi_k"):
        check_vjp(fwd_without_states, linear_attention_bwd, args)


@pytest.mark.parametrize("scale", ["none", "rows", "frames"])
@pytest.mark.parametrize("chunk_size, L", [(4, 37), (1, 9), (32, 100), (8, 8)])
def test_kept_states_backward_equals_two_sweep_reference(rng, scale, chunk_size, L):
    """The default causal backward (one reverse sweep from the states kept by the forward) equals the
    two-sweep reference that recomputes them; the kept states stay within 2 L m elements."""
    phi_q, phi_k = (np.exp(rng.standard_normal((2, L, 5))) for _ in range(2))
    v = rng.standard_normal((2, L, 3))
    dy = rng.standard_normal((2, L, 3))
    s = {"none": None, "rows": 3.0 * rng.standard_normal((2, L)),
         "frames": np.maximum.accumulate(3.0 * rng.standard_normal((2, L, 5)), axis=-2)}[scale]
    if scale == "frames":
        s[..., L // 2:, 0] += 50.0                                   # a chunk on the exact path
    y, cache = linear_attention_fwd(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=chunk_size)
    assert cache.states is not None
    states, intra = cache.states
    kept = states.size + sum(a.size for a in intra or () if a is not None)
    assert kept <= 2 * phi_q.size + cache.stride * states[..., 0, :, :].size
    if intra is not None:                                            # the forward's masked weights, reused
        assert len(intra) == -(-L // chunk_size)
    g1 = linear_attention_bwd(dy, cache)
    g0 = linear_attention_bwd(dy, cache._replace(states=None))
    for name in ("phi_q", "phi_k", "v", "k_log_scale"):
        a, b = getattr(g1, name), getattr(g0, name)
        if b is None:
            assert a is None
            continue
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * float(np.max(np.abs(b))), err_msg=name)


def test_causal_backward_uses_no_subtraction_precision(rng):
    """A long sequence whose late keys dominate: a state recovered by subtraction would lose the early
    prefix states; the two-sweep backward matches the full Jacobian-free check in float64."""
    L = 200
    phi_q = np.exp(rng.standard_normal((1, L, 3)))
    phi_k = np.exp(rng.standard_normal((1, L, 3)))
    s = np.linspace(0.0, 60.0, L)[None, :]                          # later keys exp(60) larger
    v = rng.standard_normal((1, L, 2))
    check_vjp(linear_attention_fwd, linear_attention_bwd, dict(phi_q=phi_q, phi_k=phi_k, v=v, k_log_scale=s),
              kwargs=dict(causal=True, chunk_size=16))


# ---------------------------------------------------------------------------------------------- bad input

def test_nonpositive_normaliser_raises_with_count_and_minimum(xp):
    phi_q = asxp(xp, [[[1.0, 0.0], [1.0, 0.0]]])
    phi_k = asxp(xp, [[[1.0, 0.0], [-3.0, 1.0]]])
    v = asxp(xp, [[[1.0], [2.0]]])
    with pytest.raises(ValueError, match=r"2 non-positive normaliser\(s\).*minimum -2\.000e\+00"):
        linear_attention(phi_q, phi_k, v)
    y = linear_attention(phi_q, phi_k, v, on_nonpositive="ignore")          # returned as computed
    np.testing.assert_allclose(to_numpy(y)[0, :, 0], [2.5, 2.5])
    with pytest.raises(ValueError, match=r"1 non-positive normaliser"):
        linear_attention(phi_q, phi_k, v, causal=True)


@pytest.mark.parametrize(
    "change, exc, match",
    [
        (dict(phi_q=np.ones((5,))), ValueError,
         r"phi_q: expected shape \(\.\.\., L, m\).*expected at least 2 dim"),
        (dict(phi_k=np.ones((2, 6, 4))), ValueError,
         r"phi_k: expected shape \(\.\.\., L, m\) with .*L = 5 \(from phi_q\).*got \(2, 6, 4\)"),
        (dict(phi_k=np.ones((2, 5, 3))), ValueError, r"phi_k: expected shape \(\.\.\., L, m\) with .*m = 4"),
        (dict(v=np.ones((3, 5, 2))), ValueError, r"v: .*leading batch axes must be equal"),
        (dict(k_log_scale=np.ones((2, 4))), ValueError, r"k_log_scale: expected shape \(\.\.\., L\)"),
        (dict(phi_q=np.ones((2, 5, 4), dtype=np.int64)), TypeError, r"phi_q: expected a real floating dtype"),
        (dict(v=np.ones((2, 5, 2), dtype=np.float32)), TypeError, r"v: dtype float32 differs from phi_q"),
        (dict(k_log_scale=np.full((2, 5), np.nan)), ValueError, r"k_log_scale: expected finite values"),
        (dict(on_nonpositive="clip"), ValueError,
         r"on_nonpositive: expected one of 'raise', 'ignore'; got 'clip'"),
        (dict(chunk_size=0), ValueError, r"chunk_size: expected a positive integer; got 0"),
        (dict(causal="yes"), TypeError, r"causal: expected a bool"),
        (dict(phi_q=np.ones((2, 5, 4), dtype=np.complex128)), TypeError,
         r"phi_q: expected a real floating dtype"),
    ],
)
def test_bad_input_messages(change, exc, match):
    args = dict(phi_q=np.ones((2, 5, 4)), phi_k=np.ones((2, 5, 4)), v=np.ones((2, 5, 2)), k_log_scale=None,
                causal=False, chunk_size=4, on_nonpositive="raise")
    args.update(change)
    with pytest.raises(exc, match=match):
        linear_attention(args.pop("phi_q"), args.pop("phi_k"), args.pop("v"), **args)


def test_nan_features_are_named():
    phi = np.ones((1, 4, 2))
    phi[0, 2, 1] = np.nan
    with pytest.raises(ValueError, match=r"phi_k: expected finite values; got 1 non-finite entry"):
        linear_attention(np.ones((1, 4, 2)), phi, np.ones((1, 4, 1)))


def test_mixed_libraries_rejected():
    from tests.conftest import get_namespace

    xs = get_namespace("array_api_strict")
    with pytest.raises(TypeError, match="several libraries"):
        linear_attention(np.ones((1, 4, 2)), xs.ones((1, 4, 2), dtype=xs.float64), np.ones((1, 4, 1)))


def test_step_bad_input():
    with pytest.raises(ValueError,
                       match=r"phi_k_t: expected shape \(\.\.\., m\) with .*m = 3 \(from phi_q_t\); "
                             r"got \(2, 4\)"):
        linear_attention_step(None, np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 1)))
