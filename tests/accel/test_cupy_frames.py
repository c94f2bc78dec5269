"""accel.cupy, per-feature frames: the chunk-parallel frames scan (:mod:`accel.cupy.frames_parallel`) equals
the core's references ``linear_attention.causal_frames_fwd`` / ``_bwd`` on the CPU (NumPy, array_api_strict
and torch, with the plain scan loops the CUDA scans implement): chunk boundaries, L not a multiple of the
chunk, chunks on the exact path (spread over ``SPREAD_LIMIT``), every chunk on either path,
``log_features``, float32 and float64; its backward passes a float64 central-difference check for every input
(frames included), and the check fails for a backward without the exact path's weight cotangents. On a
device, the registered CuPy kernels equal the references and run inside ``accel.use("cupy")``; clear errors.
The device tests skip cleanly without CuPy and a CUDA device."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import accel
from accel.cupy import chunk_parallel, frames_parallel
from refattn._dispatch import reference
from tests.accel.helpers import unwrap
from tests.helpers import to_numpy
from validation import assert_close, check_vjp

_frames_fwd_reference = reference("linear_attention.causal_frames_fwd")
_frames_bwd_reference = reference("linear_attention.causal_frames_bwd")

# (batch, L, m, e): L = 1, L not a multiple of the chunk, several chunks, whole chunks only
CASES = [(1, 1, 3, 3), (2, 37, 5, 4), (3, 70, 4, 3), (2, 64, 8, 5)]
CASE_IDS = ["L1", "L37", "L70", "L64"]
#: Normwise error relative to the largest |entry| of the reference output: both sides sum the same
#: nonnegative-weighted terms in another order (O(C + L / C) terms per output, a few eps each).
TOL = {"float64": 1e-12, "float32": 2e-5}


def _inputs(rng, shape, dtype, jump):
    """Positive features, ``[v, 1]`` and frames (prefix maxima of log-scales; feature 1 jumps by `jump` in
    the middle of the sequence: a chunk holding the jump spreads past ``SPREAD_LIMIT`` when jump > 20)."""
    *bt, L, m, e = shape
    phi_q = np.exp(rng.standard_normal((*bt, L, m)))
    phi_k = np.exp(rng.standard_normal((*bt, L, m)))
    v_aug = np.concatenate([rng.standard_normal((*bt, L, e - 1)), np.ones((*bt, L, 1))], axis=-1)
    s = np.maximum.accumulate(3.0 * rng.standard_normal((*bt, L, m)), axis=-2)
    s[..., L // 2:, 1 % m] += jump
    return tuple(a.astype(dtype) for a in (phi_q, phi_k, v_aug, s))


def _scans(xp):
    return (functools.partial(chunk_parallel.scan_fwd_loop, xp=xp),
            functools.partial(chunk_parallel.scan_rev_loop, xp=xp))


def _close(actual, expected, dtype, label):
    expected = np.asarray(expected)
    assert_close(np.asarray(actual), expected, rtol=TOL[dtype],
                 atol=TOL[dtype] * float(np.max(np.abs(expected))), label=label)


def _run(xp, arrays, C, log_features=False):
    """The chunk-parallel forward and backward on `xp` arrays (batch axes flattened into one, as the kernels
    do), results as NumPy arrays of the inputs' shapes."""
    lead = arrays[0].shape[:-2]
    phi_q, phi_k, v_aug, s, g = (xp.asarray(np.reshape(a, (-1,) + a.shape[-2:])) for a in arrays)
    sf, sr = _scans(xp)
    numer = frames_parallel.causal_frames_fwd(phi_q, phi_k, v_aug, s, C, xp=xp, scan_fwd=sf)
    grads = frames_parallel.causal_frames_bwd(g, phi_q, phi_k, v_aug, s, C, xp=xp, scan_fwd=sf, scan_rev=sr,
                                              log_features=log_features)
    return [np.reshape(to_numpy(a), lead + a.shape[-2:]) for a in (numer, *grads)]


def _compare(xp, rng, shape, dtype, jump, C, C_ref, log_features=False):
    phi_q, phi_k, v_aug, s = _inputs(rng, shape, dtype, jump)
    g = rng.standard_normal(v_aug.shape).astype(dtype)
    numer0, _ = _frames_fwd_reference(phi_q, phi_k, v_aug, s, C_ref, None)
    ref = _frames_bwd_reference(g, phi_q, phi_k, v_aug, s, C_ref, None, None, log_features=log_features)
    numer1, *got = _run(xp, (phi_q, phi_k, v_aug, s, g), C, log_features)
    assert numer1.shape == numer0.shape and numer1.dtype == numer0.dtype
    _close(numer1, numer0, dtype, "numer_aug")
    for name, a, e in zip(("dphi_q", "dphi_k", "dv_aug"), got, ref, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype, name
        _close(a, e, dtype, name)


# ------------------------------------------------------------------------- the algorithm, on the CPU

@pytest.mark.parametrize("jump", [0.0, 40.0], ids=["chunkframe", "exactchunk"])
@pytest.mark.parametrize("C", [1, 4, 8, 16, 128])
@pytest.mark.parametrize("shape", CASES, ids=CASE_IDS)
def test_frames_algorithm_equals_reference(rng, shape, C, jump):
    """Same chunk length as the reference: the same chunks take the exact path on both sides."""
    _compare(np, rng, shape, "float64", jump, C, C)


@pytest.mark.parametrize("C, C_ref", [(8, 3), (64, 32), (5, 64)])
def test_frames_algorithm_other_chunking_changes_only_rounding(rng, C, C_ref):
    _compare(np, rng, (2, 3, 133, 6, 4), "float64", 40.0, C, C_ref)


@pytest.mark.parametrize("limit", [-1.0, float("inf")], ids=["allexact", "allchunkframe"])
def test_frames_algorithm_either_path_everywhere(rng, monkeypatch, limit):
    """Every chunk on the exact path, then every chunk on the chunk-frame path (a jump of e^5: safe there),
    against the reference on its own default decision."""
    monkeypatch.setattr(frames_parallel, "SPREAD_LIMIT", limit)
    _compare(np, rng, (2, 70, 5, 4), "float64", 5.0, 8, 8)
    _compare(np, rng, (2, 70, 5, 4), "float64", 5.0, 8, 8, log_features=True)


def test_exact_path_is_taken_and_needed(rng, monkeypatch):
    """A jump of e^120 in one feature inside chunk 4 (rows 32..39) sends that chunk alone to the exact path,
    and the result equals the reference in float32. The must-fail companion: forced onto the chunk frame
    (limit inf), exp(s - E) = e^-120 underflows to 0 in float32 for the rows before the jump, so their
    queries' factor 1 / down overflows and the result is lost."""
    phi_q, phi_k, v_aug, s = _inputs(rng, (2, 70, 5, 4), "float32", 120.0)
    f = frames_parallel._Frames(phi_q, phi_k, v_aug, s, 8, xp=np)
    assert f.exact == [4]
    numer0, _ = _frames_fwd_reference(phi_q, phi_k, v_aug, s, 8, None)
    sf, _ = _scans(np)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # no overflow: 1 / down is floored at e^-limit
        good = frames_parallel.causal_frames_fwd(phi_q, phi_k, v_aug, s, 8, xp=np, scan_fwd=sf)
    _close(good, numer0, "float32", "numer_aug")
    monkeypatch.setattr(frames_parallel, "SPREAD_LIMIT", float("inf"))
    with np.errstate(all="ignore"):
        bad = frames_parallel.causal_frames_fwd(phi_q, phi_k, v_aug, s, 8, xp=np, scan_fwd=sf)
    err = np.max(np.abs(bad - numer0)) / np.max(np.abs(numer0))
    assert not err <= TOL["float32"], err                                     # NaN or far off


@pytest.mark.parametrize("log_features", [False, True], ids=["dphi", "dlogphi"])
@pytest.mark.parametrize("jump", [0.0, 40.0], ids=["chunkframe", "exactchunk"])
def test_frames_algorithm_under_every_namespace(xp, dtype, rng, jump, log_features):
    """NumPy, array_api_strict and torch (and CuPy on a device), float32 and float64, against the NumPy
    reference in the same dtype."""
    name = "float32" if dtype == xp.float32 else "float64"
    _compare(xp, rng, (2, 3, 45, 5, 4), name, jump, 16, 16, log_features)


def test_frames_algorithm_empty_sequence():
    z = np.zeros((2, 0, 3))
    numer = frames_parallel.causal_frames_fwd(z, z, np.zeros((2, 0, 4)), z, 8, xp=np, scan_fwd=None)
    assert numer.shape == (2, 0, 4)
    grads = frames_parallel.causal_frames_bwd(np.zeros((2, 0, 4)), z, z, np.zeros((2, 0, 4)), z, 8, xp=np,
                                              scan_fwd=None, scan_rev=None)
    assert [a.shape for a in grads] == [(2, 0, 3), (2, 0, 3), (2, 0, 4)]


# ------------------------------------------------------------------------- gradient check

def _pair(C):
    """The frames scan as a differentiable pair of (phi_q, phi_k, v_aug, s); the frames' cotangent is
    ``phi_k dphi_k - phi_q dphi_q`` (formed by the caller, as ``linear_attention_bwd`` does)."""
    sf, sr = _scans(np)

    def fwd(phi_q, phi_k, v_aug, s):
        return frames_parallel.causal_frames_fwd(phi_q, phi_k, v_aug, s, C, xp=np, scan_fwd=sf), \
            (phi_q, phi_k, v_aug, s)

    def bwd(g, cache):
        phi_q, phi_k, v_aug, s = cache
        dq, dk, du = frames_parallel.causal_frames_bwd(g, phi_q, phi_k, v_aug, s, C, xp=np, scan_fwd=sf,
                                                       scan_rev=sr)
        return dict(phi_q=dq, phi_k=dk, v_aug=du, s=phi_k * dk - phi_q * dq)

    return fwd, bwd


def _grad_args(rng, jump):
    """Frames strictly increasing by at least 0.05 per row, so the check's steps (1e-6) keep them
    nondecreasing."""
    phi_q, phi_k, v_aug, _ = _inputs(rng, (2, 29, 4, 3), "float64", 0.0)
    s = np.cumsum(0.05 + 0.5 * rng.random((2, 29, 4)), axis=-2) - 5.0
    s[..., 14:, 2] += jump
    return dict(phi_q=phi_q, phi_k=phi_k, v_aug=v_aug, s=s)


@pytest.mark.parametrize("jump", [0.0, 40.0], ids=["chunkframe", "exactchunk"])
@pytest.mark.parametrize("C", [4, 8])
def test_frames_gradcheck(rng, C, jump):
    fwd, bwd = _pair(C)
    check_vjp(fwd, bwd, _grad_args(rng, jump))


def test_frames_gradcheck_catches_a_wrong_exact_backward(rng, monkeypatch):
    """The must-fail companion: the exact path's weight cotangents dropped (zeros) fails the check."""
    def no_weights_bwd(dW, q, k, sc, tril, *, xp):
        return xp.zeros_like(q), xp.zeros_like(k)

    monkeypatch.setattr(frames_parallel, "_exact_weights_bwd", no_weights_bwd)
    fwd, bwd = _pair(8)
    with pytest.raises(AssertionError):
        check_vjp(fwd, bwd, _grad_args(rng, 40.0))


# ------------------------------------------------------------------------- on a device

needs_gpu = pytest.mark.skipif(not accel.available()["cupy"],
                               reason="no CuPy with a CUDA device (extra 'gpu'): tested on a device machine")


@pytest.fixture
def cp():
    if not accel.available()["cupy"]:
        pytest.skip("no CuPy with a CUDA device (extra 'gpu'): tested on a device machine")
    import cupy

    return cupy


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("jump", [0.0, 40.0], ids=["chunkframe", "exactchunk"])
@pytest.mark.parametrize("shape", CASES + [(2, 3, 133, 6, 4), (1, 2, 300, 16, 9)],
                         ids=CASE_IDS + ["batchHeadsL133", "L300"])
def test_frames_kernels_equal_reference(rng, cp, dtype, jump, shape):
    """The registered kernels (GPU_CHUNK_SIZE rows per chunk, CUDA scans) against the references (chunk 8,
    states kept and read by the one-sweep backward), both feature cotangents."""
    from accel.cupy import causal

    phi_q, phi_k, v_aug, s = _inputs(rng, shape, dtype, jump)
    g = rng.standard_normal(v_aug.shape).astype(dtype)
    numer0, kept = _frames_fwd_reference(phi_q, phi_k, v_aug, s, 8, 2)
    d = [cp.asarray(a) for a in (phi_q, phi_k, v_aug, s)]
    numer1, kept1 = causal.causal_frames_fwd(*d, 8, 2)
    assert kept1 is None
    assert isinstance(numer1, cp.ndarray) and numer1.shape == numer0.shape and numer1.dtype == numer0.dtype
    _close(cp.asnumpy(numer1), numer0, dtype, "numer_aug")
    for log_features in (False, True):
        ref = _frames_bwd_reference(g, phi_q, phi_k, v_aug, s, 8, kept, 2, log_features=log_features)
        got = causal.causal_frames_bwd(cp.asarray(g), *d, 8, None, None, log_features=log_features)
        for name, a, e in zip(("dphi_q", "dphi_k", "dv_aug"), got, ref, strict=True):
            assert isinstance(a, cp.ndarray) and a.shape == e.shape and a.dtype == e.dtype
            _close(cp.asnumpy(a), e, dtype, name)


@needs_gpu
def test_frames_kernels_run_inside_use(cp):
    from accel.cupy import causal
    from refattn import _dispatch

    with accel.use("cupy"):
        for kern in ("causal_frames_fwd", "causal_frames_bwd"):
            registered = _dispatch.kernel_for(causal.SUPPORTED[kern]["primitive"])
            assert unwrap(registered) is getattr(causal, kern), kern


@needs_gpu
def test_frames_clear_errors(rng, cp):
    from accel.cupy import causal

    phi = cp.asarray(np.exp(rng.standard_normal((1, 7, 3))))
    v = cp.asarray(rng.standard_normal((1, 7, 2)))
    with pytest.raises(ValueError, match=r"s: per-feature frames \(\.\.\., L, m\) are required by "
                                         r"causal_frames_fwd; got None"):
        causal.causal_frames_fwd(phi, phi, v, None, 8, None)
    with pytest.raises(ValueError, match=r"s: expected shape \(1, 7, 3\) \(from phi_q\); got \(1, 7, 2\)"):
        causal.causal_frames_fwd(phi, phi, v, phi[..., :2], 8, None)
    with pytest.raises(TypeError, match=r"s: CuPy kernels take CuPy arrays; got numpy.ndarray"):
        causal.causal_frames_bwd(cp.asarray(v), phi, phi, v, np.zeros((1, 7, 3)), 8, None, None)
