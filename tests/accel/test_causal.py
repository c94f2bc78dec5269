"""accel.numba.causal: the time-blocked causal scan equals the chunked reference, forward and backward, in
every mode the ``SUPPORTED`` table declares (no scales, row log-scales, per-feature frames; the chunk-frame
path and the exact path); prefix invariance under huge late keys, recurrent == causal and gradient checks
also run under ``accel.use("numba")``; O(m d_v) memory per (batch, head); clear TypeErrors."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

pytest.importorskip("numba")

import accel
from tests.accel.helpers import unwrap as _unwrap  # noqa: E402
import refattn  # noqa: E402
from accel.numba import causal  # noqa: E402
from accel.numba.kernels import PRIMITIVES  # noqa: E402
from refattn import _dispatch, linear_attention  # noqa: E402
from refattn.attention import linear_attention_bwd, linear_attention_fwd  # noqa: E402
from refattn import linear_attention_step  # noqa: E402
from refattn._dispatch import reference  # noqa: E402

_causal_fwd_reference = reference("linear_attention.causal_fwd")
_causal_bwd_reference = reference("linear_attention.causal_bwd")
_frames_fwd_reference = reference("linear_attention.causal_frames_fwd")
_frames_bwd_reference = reference("linear_attention.causal_frames_bwd")
from tests.helpers import get_namespace  # noqa: E402
from validation import assert_close, check_vjp  # noqa: E402

DTYPES = causal.SUPPORTED["causal_fwd"]["dtypes"]
assert all(row["dtypes"] == DTYPES for row in causal.SUPPORTED.values())
# (batch..., L, m, d_v): L = 1, no batch, small m, L not a multiple of the time blocks used (8, 64) nor of the
# reference's chunk (8), batch and head axes, L over several blocks
CASES = [(1, 1, 3, 2), (5, 4, 3), (2, 37, 5, 3), (2, 3, 33, 8, 4), (1, 150, 3, 2)]
CASE_IDS = ["L1", "noBatch", "L37m5", "batchHeadsL33", "L150"]
TOL = {"float64": 1e-11, "float32": 3e-5}     # relative to the largest |entry| of the reference output
SCALES = ["plain", "rows", "frames", "frames-exact"]


def _inputs(rng, shape, dtype, scales, scale=3.0):
    """Features, ``[v, 1]`` and key scales: none, row log-scales, or frames (prefix maxima; "frames-exact"
    lifts one feature by e^40 from the middle on, so the chunk there takes the exact path)."""
    *bt, L, m, d_v = shape
    phi_q = np.exp(rng.standard_normal((*bt, L, m))).astype(dtype)
    phi_k = np.exp(rng.standard_normal((*bt, L, m))).astype(dtype)
    v_aug = np.concatenate([rng.standard_normal((*bt, L, d_v)), np.ones((*bt, L, 1))], axis=-1).astype(dtype)
    if scales in ("rows", True):
        s = (scale * rng.standard_normal((*bt, L))).astype(dtype)
    elif scales in ("frames", "frames-exact"):
        s = np.maximum.accumulate(scale * rng.standard_normal((*bt, L, m)), axis=-2)
        if scales == "frames-exact":
            s[..., L // 2:, 0] += 40.0
        s = s.astype(dtype)
    else:
        s = None
    return phi_q, phi_k, v_aug, s


def _reference_pair(phi_q, phi_k, v_aug, s, g, chunk, log_features=False):
    """(numer, M, grads) of the reference for these scales (M None for frames; frames: the one-sweep
    backward from kept states, stride 2)."""
    if s is not None and s.ndim == phi_q.ndim:
        numer, kept = _frames_fwd_reference(phi_q, phi_k, v_aug, s, chunk, 2)
        return numer, None, _frames_bwd_reference(g, phi_q, phi_k, v_aug, s, chunk, kept, 2,
                                                  log_features=log_features)
    numer, M = _causal_fwd_reference(phi_q, phi_k, v_aug, s, chunk)
    return numer, M, _causal_bwd_reference(g, phi_q, phi_k, v_aug, s, M, chunk)


def _kernel_pair(phi_q, phi_k, v_aug, s, g, chunk, log_features=False):
    if s is not None and s.ndim == phi_q.ndim:
        numer, kept = causal.causal_frames_fwd(phi_q, phi_k, v_aug, s, chunk, 2)
        assert kept is None                                          # this kernel keeps nothing
        return numer, None, causal.causal_frames_bwd(g, phi_q, phi_k, v_aug, s, chunk, kept, 2,
                                                     log_features=log_features)
    numer, M = causal.causal_fwd(phi_q, phi_k, v_aug, s, chunk)
    return numer, M, causal.causal_bwd(g, phi_q, phi_k, v_aug, s, M, chunk)


def _close(actual, expected, dtype, label):
    assert_close(actual, expected, rtol=TOL[dtype], atol=TOL[dtype] * float(np.max(np.abs(expected))),
                 label=label)


def test_supported_table_matches_registration():
    for name, row in causal.SUPPORTED.items():
        assert row["backends"] == ("numpy",)
        registered = PRIMITIVES.get(row["primitive"])
        assert registered is None or _unwrap(registered) is getattr(causal, name)
    with accel.use("numba"):
        for name, row in causal.SUPPORTED.items():
            assert _unwrap(_dispatch.kernel_for(row["primitive"])) is getattr(causal, name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scales", SCALES)
@pytest.mark.parametrize("shape", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("block", [8, 64], ids=["block8", "block64"])
def test_kernels_equal_reference(rng, dtype, scales, shape, block, monkeypatch):
    monkeypatch.setattr(causal, "TIME_BLOCK", block)
    phi_q, phi_k, v_aug, s = _inputs(rng, shape, dtype, scales)
    g = rng.standard_normal(v_aug.shape).astype(dtype)
    numer0, M0, ref = _reference_pair(phi_q, phi_k, v_aug, s, g, 8)
    numer1, M1, got = _kernel_pair(phi_q, phi_k, v_aug, s, g, 8)
    _close(numer1, numer0, dtype, "numer_aug")
    if scales == "rows":
        np.testing.assert_array_equal(M1, M0)                        # a running maximum is exact
    else:
        assert M1 is None
    for name, a, e in zip(("dphi_q", "dphi_k", "dv_aug"), got, ref, strict=True):
        _close(a, e, dtype, name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scales", ["frames", "frames-exact"])
def test_log_features_cotangents(rng, dtype, scales):
    """``log_features=True``: the kernel's first two outputs are ``dphi * phi`` (formed per chunk), equal to
    the reference's (itself tested against the product in tests/attention/test_linear_frames.py), on the
    chunk-frame and the exact path; a states argument from the reference's forward is accepted and not
    needed."""
    phi_q, phi_k, v_aug, s = _inputs(rng, (2, 3, 45, 6, 3), dtype, scales)
    g = rng.standard_normal(v_aug.shape).astype(dtype)
    _, _, ref = _reference_pair(phi_q, phi_k, v_aug, s, g, 8, log_features=True)
    _, _, plain = _kernel_pair(phi_q, phi_k, v_aug, s, g, 8)
    _, _, got = _kernel_pair(phi_q, phi_k, v_aug, s, g, 8, log_features=True)
    _close(got[0], phi_q * plain[0], dtype, "dlog phi_q")
    _close(got[1], phi_k * plain[1], dtype, "dlog phi_k")
    np.testing.assert_array_equal(got[2], plain[2])
    for name, a, e in zip(("dlog phi_q", "dlog phi_k", "dv_aug"), got, ref, strict=True):
        _close(a, e, dtype, name)
    _, kept = _frames_fwd_reference(phi_q, phi_k, v_aug, s, 8, 2)
    again = causal.causal_frames_bwd(g, phi_q, phi_k, v_aug, s, 8, kept, 2, log_features=True)
    for a, b in zip(again, got, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scales", ["rows", "frames"])
def test_exact_path_equals_chunk_frame_path(rng, dtype, scales, monkeypatch):
    """Every chunk forced onto the exact path (SPREAD_LIMIT = -1) gives the chunk-frame result: the guard
    only chooses between two exact algebraic forms."""
    phi_q, phi_k, v_aug, s = _inputs(rng, (2, 45, 6, 3), dtype, scales)
    g = rng.standard_normal(v_aug.shape).astype(dtype)
    n0, _, b0 = _kernel_pair(phi_q, phi_k, v_aug, s, g, 8)
    monkeypatch.setattr(causal, "SPREAD_LIMIT", -1.0)
    n1, _, b1 = _kernel_pair(phi_q, phi_k, v_aug, s, g, 8)
    _close(n1, n0, dtype, "numer_aug")
    for name, a, e in zip(("dphi_q", "dphi_k", "dv_aug"), b1, b0, strict=True):
        _close(a, e, dtype, name)


def test_time_block_changes_only_rounding(rng, monkeypatch):
    """The kernel's own block, not the core's chunk_size, sets the chunks: other values change rounding
    only."""
    phi_q, phi_k, v_aug, s = _inputs(rng, (2, 45, 6, 3), "float64", "frames")
    g = rng.standard_normal(v_aug.shape)
    n1, _, b1 = _kernel_pair(phi_q, phi_k, v_aug, s, g, 64)
    n2, _, b2 = _kernel_pair(phi_q, phi_k, v_aug, s, g, 3)
    np.testing.assert_array_equal(n2, n1)                            # chunk_size is not used
    for a, b in zip(b2, b1, strict=True):
        np.testing.assert_array_equal(a, b)
    monkeypatch.setattr(causal, "TIME_BLOCK", 5)
    n3, _, b3 = _kernel_pair(phi_q, phi_k, v_aug, s, g, 64)
    _close(n3, n1, "float64", "numer_aug")
    for a, b in zip(b3, b1, strict=True):
        _close(a, b, "float64", "grad")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal_mode, scales", [(False, "plain"), (False, "rows"), (True, "plain"),
                                                 (True, "rows"), (True, "frames"), (True, "frames-exact")],
                         ids=["bidir-plain", "bidir-rows", "causal-plain", "causal-rows", "causal-frames",
                              "causal-frames-exact"])
def test_public_pair_under_use_equals_reference(rng, dtype, causal_mode, scales):
    """linear_attention_fwd/bwd inside accel.use('numba') equal the reference (bidirectional mode has no
    kernel: it is the reference itself, and stays so), the frames' gradient included."""
    B, H, L, m, d_v = 2, 3, 29, 6, 4
    phi_q, phi_k, v_aug, s = _inputs(rng, (B, H, L, m, d_v), dtype, scales)
    v = v_aug[..., :d_v]
    dy = rng.standard_normal((B, H, L, d_v)).astype(dtype)
    kw = dict(causal=causal_mode, k_log_scale=s, chunk_size=8)
    y0, c0 = linear_attention_fwd(phi_q, phi_k, v, **kw)
    g0 = linear_attention_bwd(dy, c0)
    with accel.use("numba"):
        y1, c1 = linear_attention_fwd(phi_q, phi_k, v, **kw)
        g1 = linear_attention_bwd(dy, c1)
    _close(y1, y0, dtype, "y")
    for f in g0._fields:
        if getattr(g0, f) is None:
            assert getattr(g1, f) is None
        else:
            _close(getattr(g1, f), getattr(g0, f), dtype, f)


def test_kernel_is_what_runs_inside_use(rng, monkeypatch):
    """A spy registered in PRIMITIVES is called inside the scope and not outside it."""
    calls = []
    real = PRIMITIVES.get("linear_attention.causal_fwd") or causal.causal_fwd

    def spy(*a):
        calls.append(1)
        return real(*a)

    with accel.use("numba"):
        pass                                                          # fills PRIMITIVES
    monkeypatch.setitem(PRIMITIVES, "linear_attention.causal_fwd", spy)
    phi = np.exp(rng.standard_normal((1, 7, 3)))
    v = rng.standard_normal((1, 7, 2))
    linear_attention(phi, phi, v, causal=True)
    assert calls == []
    with accel.use("numba"):
        linear_attention(phi, phi, v, causal=True)
    assert calls == [1]
    monkeypatch.undo()
    with accel.use("numba"):                                          # re-registers the real kernel
        assert _unwrap(_dispatch.kernel_for("linear_attention.causal_fwd")) is causal.causal_fwd


@pytest.mark.parametrize("dtype_name, rtol", [("float32", 1e-5), ("float64", 1e-12)])
def test_prefix_invariance_under_numba(rng, dtype_name, rtol):
    """Later keys with log-scales 200 larger (their exp would push earlier keys to zero in float32 if the
    maximum were global) leave the prefix's outputs unchanged."""
    L0, L1 = 21, 40
    phi_q = np.exp(rng.standard_normal((2, L1, 4))).astype(dtype_name)
    phi_k = np.exp(rng.standard_normal((2, L1, 4))).astype(dtype_name)
    v = rng.standard_normal((2, L1, 3)).astype(dtype_name)
    s = rng.standard_normal((2, L1))
    s[:, L0:] += 200.0
    s = s.astype(dtype_name)
    with accel.use("numba"):
        full = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s)
        prefix = linear_attention(phi_q[:, :L0], phi_k[:, :L0], v[:, :L0], causal=True, k_log_scale=s[:, :L0])
    assert_close(full[:, :L0], prefix, rtol=rtol)


@pytest.mark.parametrize("dtype_name, rtol", [("float32", 2e-5), ("float64", 1e-12)])
@pytest.mark.parametrize("features", ["positive", "hyperbolic"])
def test_favor_prefix_invariance_under_numba_huge_late_keys(rng, dtype_name, rtol, features):
    """Causal FAVOR+ inside accel.use('numba'): keys appended after position L0 are aligned with rows of omega
    and long (their exponent is ~150 above the earlier keys': a frame or maximum over all positions would
    push the earlier keys' features to zero in float32), and the prefix's outputs do not change. The late keys
    lift the frames by far more than SPREAD_LIMIT inside one chunk, so the exact path runs there."""
    from refattn.attention.favor import favor_attention

    L0, L1, d, m = 45, 90, 8, 16
    omega = rng.standard_normal((m, d))
    q = rng.standard_normal((2, L1, d))
    k = rng.standard_normal((2, L1, d))
    v = rng.standard_normal((2, L1, 3))
    k[:, L0:] = 6.0 * omega[rng.integers(0, m, size=L1 - L0)] / np.linalg.norm(omega[0])
    q, k, v, omega = (a.astype(dtype_name) for a in (q, k, v, omega))
    with accel.use("numba"):
        full = favor_attention(q, k, v, omega, causal=True, features=features)
        prefix = favor_attention(q[:, :L0], k[:, :L0], v[:, :L0], omega, causal=True, features=features)
    assert np.all(np.isfinite(full))
    assert_close(full[:, :L0], prefix, rtol=rtol, atol=rtol * float(np.max(np.abs(prefix))))


def test_large_log_scales_stay_finite_under_numba():
    """Log-scales of +-800 overflow exp() in both dtypes; the kernel's running maximum keeps the
    output exact."""
    L = 9
    phi = np.ones((1, L, 2))
    v = np.arange(L, dtype=float).reshape(1, L, 1)
    s = np.array([[-800.0, 0.0, 800.0, 10.0, 900.0, -900.0, 0.0, 0.0, 0.0]])
    with accel.use("numba"):
        y = linear_attention(phi, phi, v, causal=True, k_log_scale=s)[0, :, 0]
    np.testing.assert_allclose(y, [0.0, 1.0, 2.0, 2.0, 4.0, 4.0, 4.0, 4.0, 4.0], rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_scale", [False, True], ids=["plain", "logscale"])
def test_recurrent_equals_causal_under_numba(rng, dtype, with_scale):
    B, L, m, d_v = 2, 11, 5, 3
    phi_q = np.exp(rng.standard_normal((B, L, m))).astype(dtype)
    phi_k = np.exp(rng.standard_normal((B, L, m))).astype(dtype)
    v = rng.standard_normal((B, L, d_v)).astype(dtype)
    s = (5.0 * rng.standard_normal((B, L))).astype(dtype) if with_scale else None
    with accel.use("numba"):
        y = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s)
    state, outs = None, []
    for t in range(L):
        o, state = linear_attention_step(state, phi_q[:, t], phi_k[:, t], v[:, t],
                                         None if s is None else s[:, t])
        outs.append(o)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    assert_close(np.stack(outs, axis=1), y, **tol)


# ---------------------------------------------------------------------------------------------- gradients

@pytest.mark.parametrize("scales", ["plain", "rows", "frames", "frames-exact"])
def test_gradcheck_under_numba(rng, scales, monkeypatch):
    monkeypatch.setattr(causal, "TIME_BLOCK", 4)                      # several chunks at L = 13
    B, H, L, m, d_v = 2, 2, 13, 5, 3
    phi_q, phi_k, v_aug, s = _inputs(rng, (B, H, L, m, d_v), "float64", scales)
    args = dict(phi_q=phi_q, phi_k=phi_k, v=v_aug[..., :d_v])
    if s is not None:
        args["k_log_scale"] = s
    with accel.use("numba"):
        check_vjp(linear_attention_fwd, linear_attention_bwd, args, kwargs=dict(causal=True))


def test_gradcheck_long_sequence_late_keys_dominate(rng):
    """Later keys exp(60) larger: the reverse sweep's factors are all <= 1, nothing is recovered by
    subtraction, and the gradients still match central differences in float64."""
    L = 200
    args = dict(phi_q=np.exp(rng.standard_normal((1, L, 3))), phi_k=np.exp(rng.standard_normal((1, L, 3))),
                v=rng.standard_normal((1, L, 2)), k_log_scale=np.linspace(0.0, 60.0, L)[None, :])
    with accel.use("numba"):
        check_vjp(linear_attention_fwd, linear_attention_bwd, args, kwargs=dict(causal=True))


def test_gradcheck_catches_wrong_numba_backward(rng, monkeypatch):
    """Must-fail: a numba backward whose dv is off by 1e-4 (relative) is caught."""
    with accel.use("numba"):
        pass
    real = causal.causal_bwd

    def broken(*a):
        dq, dk, dv = real(*a)
        return dq, dk, dv * 1.0001

    monkeypatch.setitem(PRIMITIVES, "linear_attention.causal_bwd", broken)
    args = dict(phi_q=np.exp(rng.standard_normal((1, 9, 3))), phi_k=np.exp(rng.standard_normal((1, 9, 3))),
                v=rng.standard_normal((1, 9, 2)))
    with accel.use("numba"):
        with pytest.raises(AssertionError, match="gradient for v"):
            check_vjp(linear_attention_fwd, linear_attention_bwd, args, kwargs=dict(causal=True))
    monkeypatch.undo()
    with accel.use("numba"):
        assert _unwrap(_dispatch.kernel_for("linear_attention.causal_bwd")) is causal.causal_bwd


# ---------------------------------------------------------------------------------------------- memory

@pytest.mark.parametrize("scales", ["rows", "frames"])
def test_extra_memory_is_o_m_dv_per_head(rng, scales):
    """tracemalloc sees every allocation (the kernels allocate their state and blocks through NumPy): beyond
    the outputs, the peak is the (B, m, D) state and a few (C, m) blocks per (batch, head) plus O(B L), far
    below one (L, m, D) stack of prefix states."""
    B, L, m, d_v = 2, 1024, 32, 32
    phi_q, phi_k, v_aug, s = _inputs(rng, (B, L, m, d_v), "float64", scales)
    g = rng.standard_normal(v_aug.shape)
    _kernel_pair(phi_q, phi_k, v_aug, s, g, 64)                       # compile outside the measurement
    M = None if scales == "frames" else causal.causal_fwd(phi_q, phi_k, v_aug, s, 64)[1]

    def fwd(*a):
        return causal.causal_frames_fwd(*a, 2) if scales == "frames" else causal.causal_fwd(*a)

    def bwd():
        if scales == "frames":
            return causal.causal_frames_bwd(g, phi_q, phi_k, v_aug, s, 64, None, 2)
        return causal.causal_bwd(g, phi_q, phi_k, v_aug, s, M, 64)

    D, it, C = d_v + 1, 8, causal.TIME_BLOCK
    stack = B * L * m * D * it
    blocks = B * (2 * m * D + 3 * C * m + 2 * C * C + C * D) * it     # state, ubuf; q/k/t2 blocks; A, Bm; T
    for name, call, outputs in [
        ("fwd", lambda: fwd(phi_q, phi_k, v_aug, s, 64), B * L * (D + 1) * it),
        ("bwd", bwd, B * L * (2 * m + D) * it),
    ]:
        tracemalloc.start()
        call()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        budget = outputs + blocks + 2 * B * L * it + 64 * 1024         # + prefix maxima + slack
        assert peak <= budget, (name, peak, budget)
        assert peak - outputs < stack / 16, (name, peak - outputs, stack)


# ---------------------------------------------------------------------------------------------- errors

def test_non_numpy_arrays_raise_typeerror(rng):
    xps = get_namespace("array_api_strict")
    phi = xps.asarray(np.exp(rng.standard_normal((1, 5, 3))))
    v = xps.asarray(rng.standard_normal((1, 5, 2)))
    with accel.use("numba"):
        with pytest.raises(TypeError,
                           match=r"phi_q: numba kernels take NumPy arrays; got array_api_strict\.Array"):
            linear_attention(phi, phi, v, causal=True)
    y = linear_attention(phi, phi, v, causal=True)                    # outside the scope: the reference runs
    assert tuple(y.shape) == (1, 5, 2)


def test_unsupported_dtype_raises_typeerror(rng):
    phi = np.exp(rng.standard_normal((1, 5, 3))).astype(np.float16)
    v = rng.standard_normal((1, 5, 2)).astype(np.float16)
    with accel.use("numba"):                                      # the public boundary refuses it first
        with pytest.raises(TypeError, match=r"phi_q: expected a real floating dtype .*got dtype float16"):
            linear_attention(phi, phi, v, causal=True)
    v_aug = np.concatenate([v, np.ones((1, 5, 1), np.float16)], axis=-1)
    with pytest.raises(TypeError, match=r"phi_q: the numba kernel causal_fwd supports dtypes float32, "
                                        r"float64; got dtype float16"):
        causal.causal_fwd(phi, phi, v_aug, None, 8)
    with pytest.raises(TypeError, match="supports dtypes float32, float64; got dtype float16"):
        causal.causal_bwd(v_aug, phi, phi, v_aug, None, None, 8)


def test_mixed_dtypes_and_shapes_raise_in_direct_calls(rng):
    phi_q, phi_k, v_aug, s = _inputs(rng, (1, 6, 3, 2), "float64", True)
    with pytest.raises(TypeError, match=r"phi_k: dtype float32 differs from float64"):
        causal.causal_fwd(phi_q, phi_k.astype(np.float32), v_aug, s, 8)
    with pytest.raises(ValueError, match=r"s: expected shape \(1, 6\) \(from phi_q\); got \(1, 5\)"):
        causal.causal_fwd(phi_q, phi_k, v_aug, s[:, :5], 8)


def test_core_import_does_not_register_kernels():
    """refattn alone hands out no kernel; registration happens in accel.use, not at import."""
    assert refattn is not None
    assert _dispatch.kernel_for("linear_attention.causal_fwd") is None
