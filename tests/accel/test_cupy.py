"""accel.cupy: the chunk-parallel causal algorithm equals the chunked reference (on the CPU, with the plain
scan loops: runs everywhere); on a device, the CUDA scans equal those loops, every CuPy kernel equals its
reference forward and backward in every mode its ``SUPPORTED`` table declares, and prefix invariance,
recurrent == causal, gradient checks, FAVOR+ and a transformer training step hold under
``accel.use("cupy")``; clear TypeErrors. The device tests skip cleanly without CuPy and a CUDA device."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import accel
from accel.cupy import chunk_parallel
from refattn._dispatch import reference
from validation import assert_close, check_vjp

_causal_fwd_reference = reference("linear_attention.causal_fwd")
_causal_bwd_reference = reference("linear_attention.causal_bwd")

# (batch, L, m, e): L = 1, L not a multiple of the chunk, several chunks, one chunk exactly
CASES = [(1, 1, 3, 3), (2, 37, 5, 4), (3, 70, 4, 3), (2, 64, 8, 5)]
CASE_IDS = ["L1", "L37", "L70", "L64"]
TOL = {"float64": 1e-12, "float32": 2e-5}     # relative to the largest |entry| of the reference output

needs_gpu = pytest.mark.skipif(not accel.available()["cupy"],
                               reason="no CuPy with a CUDA device (extra 'gpu'): tested on a device machine")


def _inputs(rng, shape, dtype, with_scale, scale=3.0):
    *bt, L, m, e = shape
    phi_q = np.exp(rng.standard_normal((*bt, L, m))).astype(dtype)
    phi_k = np.exp(rng.standard_normal((*bt, L, m))).astype(dtype)
    v_aug = np.concatenate([rng.standard_normal((*bt, L, e - 1)), np.ones((*bt, L, 1))],
                           axis=-1).astype(dtype)
    s = (scale * rng.standard_normal((*bt, L))).astype(dtype) if with_scale else None
    return phi_q, phi_k, v_aug, s


def _close(actual, expected, dtype, label):
    expected = np.asarray(expected)
    assert_close(actual, expected, rtol=TOL[dtype], atol=TOL[dtype] * float(np.max(np.abs(expected))),
                 label=label)


# ------------------------------------------------------------------------- the algorithm, on the CPU

_SCANS = dict(scan_fwd=functools.partial(chunk_parallel.scan_fwd_loop, xp=np))
_RSCAN = functools.partial(chunk_parallel.scan_rev_loop, xp=np)


@pytest.mark.parametrize("C", [1, 4, 16, 128])
@pytest.mark.parametrize("with_scale", [False, True], ids=["plain", "logscale"])
@pytest.mark.parametrize("shape", CASES, ids=CASE_IDS)
def test_chunk_parallel_algorithm_equals_reference(rng, shape, with_scale, C):
    phi_q, phi_k, v_aug, s = _inputs(rng, shape, "float64", with_scale)
    numer0, M0 = _causal_fwd_reference(phi_q, phi_k, v_aug, s, 8)
    numer1, M1 = chunk_parallel.causal_fwd(phi_q, phi_k, v_aug, s, C, xp=np, **_SCANS)
    _close(numer1, numer0, "float64", "numer_aug")
    if with_scale:
        np.testing.assert_array_equal(M1, M0)                        # a running maximum is exact
    else:
        assert M1 is None
    g = rng.standard_normal(numer0.shape)
    ref = _causal_bwd_reference(g, phi_q, phi_k, v_aug, s, M0, 8)
    got = chunk_parallel.causal_bwd(g, phi_q, phi_k, v_aug, s, C, xp=np, scan_rev=_RSCAN, **_SCANS)
    for name, a, e in zip(("dphi_q", "dphi_k", "dv_aug"), got, ref, strict=True):
        _close(a, e, "float64", name)


def test_chunk_parallel_prefix_invariant_and_fails_with_a_global_maximum(rng):
    """Keys e^900 larger after position 30 leave the first 30 outputs exactly unchanged. The must-fail
    companion: stabilising with the global maximum instead (keys scaled by exp(s - max s), no log-scales)
    underflows every prefix key to 0, so the prefix's normaliser is 0 and its outputs are lost."""
    L, L0 = 40, 30
    phi_q, phi_k, v_aug, s = _inputs(rng, (1, L, 4, 3), "float64", True, scale=1.0)
    s2 = s.copy()
    s2[:, L0:] += 900.0
    a, _ = chunk_parallel.causal_fwd(phi_q, phi_k, v_aug, s, 8, xp=np, **_SCANS)
    b, _ = chunk_parallel.causal_fwd(phi_q, phi_k, v_aug, s2, 8, xp=np, **_SCANS)
    np.testing.assert_array_equal(b[:, :L0], a[:, :L0])

    assert np.all(b[:, :L0, -1] > 0)                                 # the normaliser column
    phi_k_global = phi_k * np.exp(s2 - np.max(s2))[..., None]
    c, _ = chunk_parallel.causal_fwd(phi_q, phi_k_global, v_aug, None, 8, xp=np, **_SCANS)
    np.testing.assert_array_equal(c[:, :L0, -1], 0.0)


# ------------------------------------------------------------------------- on a device

@pytest.fixture
def cp():
    if not accel.available()["cupy"]:
        pytest.skip("no CuPy with a CUDA device (extra 'gpu'): tested on a device machine")
    import cupy

    return cupy


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("with_scale", [False, True], ids=["plain", "logscale"])
def test_cuda_scans_equal_loops(rng, cp, dtype, with_scale):
    from accel.cupy import causal

    B, n, K = 3, 9, 37
    U = rng.standard_normal((B, n, K)).astype(dtype)
    mc = (5.0 * rng.standard_normal((B, n))).astype(dtype) if with_scale else None
    S0, P0 = chunk_parallel.scan_fwd_loop(U, mc, xp=np)
    S1, P1 = causal.scan_fwd(cp.asarray(U), None if mc is None else cp.asarray(mc))
    _close(cp.asnumpy(S1), S0, dtype, "S")
    if with_scale:
        np.testing.assert_array_equal(cp.asnumpy(P1), P0)
    else:
        assert P1 is None
    G0 = chunk_parallel.scan_rev_loop(U, P0, xp=np)
    G1 = causal.scan_rev(cp.asarray(U), None if P0 is None else cp.asarray(P0))
    _close(cp.asnumpy(G1), G0, dtype, "G")


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("with_scale", [False, True], ids=["plain", "logscale"])
@pytest.mark.parametrize("shape", CASES + [(2, 3, 133, 6, 4)], ids=CASE_IDS + ["batchHeadsL133"])
def test_causal_kernels_equal_reference(rng, cp, dtype, with_scale, shape):
    from accel.cupy import causal

    phi_q, phi_k, v_aug, s = _inputs(rng, shape, dtype, with_scale)
    numer0, M0 = _causal_fwd_reference(phi_q, phi_k, v_aug, s, 8)
    d = [cp.asarray(a) if a is not None else None for a in (phi_q, phi_k, v_aug, s)]
    numer1, M1 = causal.causal_fwd(*d, 8)
    assert isinstance(numer1, cp.ndarray) and numer1.shape == numer0.shape and numer1.dtype == numer0.dtype
    _close(cp.asnumpy(numer1), numer0, dtype, "numer_aug")
    if with_scale:
        np.testing.assert_array_equal(cp.asnumpy(M1), M0)
    else:
        assert M1 is None
    g = rng.standard_normal(numer0.shape).astype(dtype)
    ref = _causal_bwd_reference(g, phi_q, phi_k, v_aug, s, M0, 8)
    got = causal.causal_bwd(cp.asarray(g), *d, M1, 8)
    for name, a, e in zip(("dphi_q", "dphi_k", "dv_aug"), got, ref, strict=True):
        assert a.shape == e.shape
        _close(cp.asnumpy(a), e, dtype, name)


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm", [1.0, 60.0], ids=["unit", "norm60"])
def test_positive_kernel_equals_reference(rng, cp, dtype, norm):
    """Inputs of norm 60 overflow exp(|x|^2/2) in both dtypes: the outputs stay finite and equal. Tolerance:
    the
    two GEMMs (cuBLAS, NumPy's BLAS) round ``u = x . omega`` differently by at most ``d eps |x| |omega|``
    (times a safety factor 4), and phi <= 1 moves by at most that much absolutely, as does the log-scale."""
    from accel.cupy import positive
    _positive_features_stable_reference = reference("positive_features_stable")

    x = rng.standard_normal((2, 3, 41, 16))
    x = (norm * x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(dtype)
    omega = rng.standard_normal((37, 16)).astype(dtype)
    phi0, ls0 = _positive_features_stable_reference(x, omega)
    phi1, ls1 = positive.positive_features_stable(cp.asarray(x), cp.asarray(omega))
    phi1, ls1 = cp.asnumpy(phi1), cp.asnumpy(ls1)
    assert np.all(np.isfinite(phi1)) and np.all(np.isfinite(ls1))
    assert phi1.shape == phi0.shape and ls1.shape == ls0.shape
    eps = float(np.finfo(dtype).eps)
    tol_u = 4 * x.shape[-1] * eps * norm * float(np.max(np.linalg.norm(omega.astype(float), axis=-1)))
    assert_close(phi1, phi0, rtol=0, atol=tol_u, label="phi")
    np.testing.assert_array_equal(np.max(phi1, axis=-1), 1.0)      # each row's maximum is exp(0)
    assert_close(ls1, ls0, rtol=4 * eps, atol=tol_u, label="log_scale")


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("causal_mode", [False, True], ids=["bidir", "causal"])
def test_favor_under_use_equals_reference(rng, cp, dtype, causal_mode):
    """FAVOR+ forward and backward inside accel.use('cupy') (both kernels) equal the NumPy reference."""
    from refattn.attention import favor_attention_bwd, favor_attention_fwd

    B, H, L, d, m, d_v = 2, 3, 45, 8, 16, 5
    q, k = ((0.7 * rng.standard_normal((B, H, L, d))).astype(dtype) for _ in range(2))
    v = rng.standard_normal((B, H, L, d_v)).astype(dtype)
    omega = rng.standard_normal((m, d)).astype(dtype)
    dy = rng.standard_normal((B, H, L, d_v)).astype(dtype)
    y0, c0 = favor_attention_fwd(q, k, v, omega, causal=causal_mode)
    g0 = favor_attention_bwd(dy, c0)
    with accel.use("cupy"):
        y1, c1 = favor_attention_fwd(*(cp.asarray(a) for a in (q, k, v, omega)), causal=causal_mode)
        g1 = favor_attention_bwd(cp.asarray(dy), c1)
    tol = dict(float32=1e-4, float64=1e-11)[dtype]
    assert_close(cp.asnumpy(y1), y0, rtol=tol, atol=tol, label="y")
    for f in g0._fields:
        e = getattr(g0, f)
        assert_close(cp.asnumpy(getattr(g1, f)), e, rtol=tol, atol=tol * float(np.max(np.abs(e))), label=f)


@needs_gpu
@pytest.mark.parametrize("dtype_name, rtol", [("float32", 1e-5), ("float64", 1e-12)])
def test_prefix_invariance_under_cupy(rng, cp, dtype_name, rtol):
    from refattn import linear_attention

    L0, L1 = 21, 140
    phi_q = np.exp(rng.standard_normal((2, L1, 4))).astype(dtype_name)
    phi_k = np.exp(rng.standard_normal((2, L1, 4))).astype(dtype_name)
    v = rng.standard_normal((2, L1, 3)).astype(dtype_name)
    s = rng.standard_normal((2, L1))
    s[:, L0:] += 200.0
    s = s.astype(dtype_name)
    a = [cp.asarray(x) for x in (phi_q, phi_k, v, s)]
    with accel.use("cupy"):
        full = linear_attention(*a[:3], causal=True, k_log_scale=a[3])
        prefix = linear_attention(*(x[:, :L0] for x in a[:3]), causal=True, k_log_scale=a[3][:, :L0])
    assert_close(cp.asnumpy(full[:, :L0]), cp.asnumpy(prefix), rtol=rtol)


@needs_gpu
@pytest.mark.parametrize("with_scale", [False, True], ids=["plain", "logscale"])
def test_recurrent_equals_causal_under_cupy(rng, cp, with_scale):
    from refattn import linear_attention, linear_attention_step

    B, L, m, d_v = 2, 75, 5, 3
    phi_q = np.exp(rng.standard_normal((B, L, m)))
    phi_k = np.exp(rng.standard_normal((B, L, m)))
    v = rng.standard_normal((B, L, d_v))
    s = 5.0 * rng.standard_normal((B, L)) if with_scale else None
    with accel.use("cupy"):
        y = linear_attention(cp.asarray(phi_q), cp.asarray(phi_k), cp.asarray(v), causal=True,
                             k_log_scale=None if s is None else cp.asarray(s))
    state, outs = None, []
    for t in range(L):
        o, state = linear_attention_step(state, phi_q[:, t], phi_k[:, t], v[:, t],
                                         None if s is None else s[:, t])
        outs.append(o)
    assert_close(cp.asnumpy(y), np.stack(outs, axis=1), rtol=1e-10, atol=1e-12)


@needs_gpu
@pytest.mark.parametrize("with_scale", [False, True], ids=["plain", "logscale"])
def test_gradcheck_under_cupy(rng, cp, with_scale):
    from refattn.attention import linear_attention_bwd, linear_attention_fwd

    B, H, L, m, d_v = 2, 2, 71, 5, 3
    args = dict(phi_q=cp.asarray(np.exp(rng.standard_normal((B, H, L, m)))),
                phi_k=cp.asarray(np.exp(rng.standard_normal((B, H, L, m)))),
                v=cp.asarray(rng.standard_normal((B, H, L, d_v))))
    if with_scale:
        args["k_log_scale"] = cp.asarray(3.0 * rng.standard_normal((B, H, L)))
    with accel.use("cupy"):
        check_vjp(linear_attention_fwd, linear_attention_bwd, args, kwargs=dict(causal=True))


@needs_gpu
def test_gradcheck_favor_under_cupy(rng, cp):
    from refattn.attention import favor_attention_bwd, favor_attention_fwd

    args = dict(q=cp.asarray(0.5 * rng.standard_normal((2, 70, 4))),
                k=cp.asarray(0.5 * rng.standard_normal((2, 70, 4))),
                v=cp.asarray(rng.standard_normal((2, 70, 3))), omega=cp.asarray(rng.standard_normal((6, 4))))
    with accel.use("cupy"):
        check_vjp(favor_attention_fwd, favor_attention_bwd, args, kwargs=dict(causal=True))


@needs_gpu
def test_training_step_under_cupy_equals_reference(cp):
    """Loss, gradients and one Adam update of a causal FAVOR+ language model on CuPy inside accel.use('cupy')
    equal the NumPy reference step."""
    import refattn.nn.init as nninit
    import refattn.random as rr
    from refattn.nn.optim import adam_init, adam_update
    from refattn.nn.transformer import loss_and_grads
    from refattn.tree import tree_leaves

    cfg = dict(task="lm", vocab_size=11, d_model=16, n_heads=2, n_layers=2, max_len=80, d_ff=24,
               attention={"kind": "favor", "features": "positive", "m": 16, "draw": "orthogonal"},
               position="learned", dtype="float64")
    rng = np.random.default_rng(0)
    params = nninit.init_transformer(rng, cfg)
    feats = nninit.draw_attention_features(rng, cfg)
    ids = rng.integers(0, 11, size=(3, 77))
    labels = rng.integers(0, 11, size=(3, 77))

    def step(p, f, i, lab):
        loss, grads = loss_and_grads(p, i, lab, f, config=cfg)
        return loss, grads, adam_update(p, grads, adam_init(p), lr=1e-2)[0]

    loss0, g0, p0 = step(params, feats, ids, labels)
    like = cp.zeros(1, dtype=cp.float64)
    to = functools.partial(rr.tree_as_xp, like=like)
    with accel.use("cupy"):
        loss1, g1, p1 = step(to(params), to(feats), cp.asarray(ids), cp.asarray(labels))
    np.testing.assert_allclose(float(loss1), float(loss0), rtol=1e-10)
    for i, (a, b) in enumerate(zip(tree_leaves(g1), tree_leaves(g0), strict=True)):
        np.testing.assert_allclose(cp.asnumpy(a), b, rtol=1e-9, atol=1e-9 * float(np.max(np.abs(b)) or 1.0),
                                   err_msg=f"gradient leaf {i}")
    for i, (a, b) in enumerate(zip(tree_leaves(p1), tree_leaves(p0), strict=True)):
        np.testing.assert_allclose(cp.asnumpy(a), b, rtol=1e-9, atol=1e-9,
                                   err_msg=f"updated parameter leaf {i}")


@needs_gpu
def test_clear_errors(rng, cp):
    from accel.cupy import causal, positive
    from refattn import linear_attention

    phi = np.exp(rng.standard_normal((1, 7, 3)))
    v = rng.standard_normal((1, 7, 2))
    with accel.use("cupy"):
        with pytest.raises(TypeError, match=r"phi_q: CuPy kernels take CuPy arrays; got numpy.ndarray"):
            linear_attention(phi, phi, v, causal=True)
    with pytest.raises(TypeError, match=r"phi_q: the CuPy kernel causal_fwd supports dtypes float32, "
                                        r"float64; got dtype float16"):
        causal.causal_fwd(cp.asarray(phi, dtype=cp.float16), cp.asarray(phi, dtype=cp.float16),
                          cp.asarray(v, dtype=cp.float16), None, 8)
    with pytest.raises(TypeError, match=r"omega: dtype float32 differs from float64"):
        positive.positive_features_stable(cp.asarray(phi), cp.asarray(phi[0], dtype=cp.float32))
    with pytest.raises(ValueError,
                       match=r"phi_k: expected shape \(1, 7, 3\) \(from phi_q\); got \(1, 6, 3\)"):
        causal.causal_fwd(cp.asarray(phi), cp.asarray(phi[:, :6]), cp.asarray(v), None, 8)


@needs_gpu
@pytest.mark.parametrize("loop_max", [64, 0], ids=["loop", "split"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape",
                         [(5, 3, 2), (2, 3, 4096, 7, 5), (3000, 6, 4), (2, 5000, 9, 3), (1, 2500, 4, 3)],
                         ids=["short", "batchHeadsSplitExact", "2d", "batchRemainder", "batchOf1"])
def test_contract_rows_equals_reference(rng, cp, monkeypatch, dtype, shape, loop_max):
    """Each path (one 2-D GEMM, a loop over batch entries, the split over rows) equals the reference."""
    from accel.cupy import contract
    _contract_rows_reference = reference("contract_rows")

    monkeypatch.setattr(contract, "ROWS_PER_SPLIT", 1024)
    monkeypatch.setattr(contract, "LOOP_MAX_BATCH", loop_max)
    *lead, N, p, r = shape
    a = rng.standard_normal((*lead, N, p)).astype(dtype)
    b = rng.standard_normal((*lead, N, r)).astype(dtype)
    expected = _contract_rows_reference(a, b)
    got = contract.contract_rows(cp.asarray(a), cp.asarray(b))
    assert got.shape == expected.shape and got.dtype == expected.dtype
    eps = float(np.finfo(dtype).eps)  # a sum of N products: error ~ eps sqrt(N) |a_col| |b_col|
    scale = np.sqrt(np.sum(a.astype(float) ** 2, axis=-2))[..., :, None] * np.sqrt(
        np.sum(b.astype(float) ** 2, axis=-2))[..., None, :]
    assert np.all(np.abs(cp.asnumpy(got) - expected) <= 8 * eps * np.sqrt(N) * scale)
    with accel.use("cupy"):
        from refattn._xp import contract_rows
        assert isinstance(contract_rows(cp.asarray(a), cp.asarray(b)), cp.ndarray)
        with pytest.raises(TypeError, match=r"a: CuPy kernels take CuPy arrays; got numpy.ndarray"):
            contract_rows(a, b)
