"""accel.numba.positive: the fused stabilised positive-feature map equals the reference; FAVOR+ (causal and
bidirectional) under accel.use('numba') -- the fused numba path: feature kernel + causal scan -- equals the
reference, forward and backward; gradient checks; clear TypeErrors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import accel
from tests.accel.helpers import unwrap as _unwrap  # noqa: E402
from accel.numba import positive  # noqa: E402
from refattn import _dispatch  # noqa: E402
from refattn.attention.favor import favor_attention_bwd, favor_attention_fwd  # noqa: E402
from refattn.features.positive import (  # noqa: E402
    positive_features_stable_bwd,
    positive_features_stable_fwd,
)
from refattn._dispatch import reference  # noqa: E402
from tests.helpers import get_namespace  # noqa: E402

_key_features_reference = reference("positive_key_features_stable")
_positive_features_stable_reference = reference("positive_features_stable")
from validation import assert_close, check_vjp  # noqa: E402

DTYPES = positive.SUPPORTED["positive_features_stable"]["dtypes"]
SHAPES = [(1, 4), (7, 8), (2, 3, 13, 16)]                            # (..., L, d)
SHAPE_IDS = ["L1", "noBatch", "batchHeads"]
TOL = {"float64": 1e-13, "float32": 1e-5}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("m", [1, 5, 32])
def test_kernel_equals_reference(rng, dtype, shape, m):
    x = (2.0 * rng.standard_normal(shape)).astype(dtype)
    omega = rng.standard_normal((m, shape[-1])).astype(dtype)
    phi1, ls1 = positive.positive_features_stable(x, omega)
    phi0, ls0 = _positive_features_stable_reference(x, omega)
    assert_close(phi1, phi0, rtol=TOL[dtype], atol=TOL[dtype])
    assert_close(ls1, ls0, rtol=TOL[dtype], atol=TOL[dtype] * float(np.max(np.abs(ls0))))
    np.testing.assert_array_equal(np.max(phi1, axis=-1), 1.0)          # each row's maximum is exactly 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("frame_rows", ["one", "per_position"])
def test_kernel_with_folded_frame_equals_reference(rng, dtype, shape, frame_rows):
    m = 70
    x = (2.0 * rng.standard_normal(shape)).astype(dtype)
    omega = rng.standard_normal((m, shape[-1])).astype(dtype)
    rows = 1 if frame_rows == "one" else shape[-2]
    frame = (30.0 * rng.standard_normal(shape[:-2] + (rows, m))).astype(dtype)
    phi1, ls1 = positive.positive_features_stable(x, omega, frame)
    phi0, ls0 = _positive_features_stable_reference(x, omega, frame)
    assert_close(phi1, phi0, rtol=TOL[dtype], atol=TOL[dtype])
    assert_close(ls1, ls0, rtol=TOL[dtype], atol=TOL[dtype] * float(np.max(np.abs(ls0))))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 8), (2, 3, 13, 16)], ids=["noBatch", "batchHeads"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("m", [1, 70, 130])
def test_key_kernel_equals_reference(rng, dtype, shape, causal, m):
    x = (2.0 * rng.standard_normal(shape)).astype(dtype)
    omega = rng.standard_normal((m, shape[-1])).astype(dtype)
    phi1, fr1 = positive.positive_key_features_stable(x, omega, causal)
    phi0, fr0 = _key_features_reference(x, omega, causal)
    assert phi1.shape == phi0.shape and fr1.shape == fr0.shape
    assert_close(phi1, phi0, rtol=TOL[dtype], atol=TOL[dtype])
    assert_close(fr1, fr0, rtol=TOL[dtype], atol=TOL[dtype] * float(np.max(np.abs(fr0))))


def test_large_norm_inputs_stay_finite():
    """|x| = 300: raw features exp(u - |x|^2/2) underflow/overflow in both dtypes; the stabilised pair is
    finite."""
    rng = np.random.default_rng(1)
    x = 300.0 * rng.standard_normal((2, 9, 8))
    omega = rng.standard_normal((16, 8))
    phi, ls = positive.positive_features_stable(x, omega)
    phi0, ls0 = _positive_features_stable_reference(x, omega)
    assert np.all(np.isfinite(phi)) and np.all(np.isfinite(ls))
    assert_close(phi, phi0, rtol=1e-12, atol=1e-13)
    assert_close(ls, ls0, rtol=1e-12)


def test_dispatch_reaches_the_kernel():
    with accel.use("numba"):
        assert _unwrap(_dispatch.kernel_for("positive_features_stable")) is positive.positive_features_stable
    assert _dispatch.kernel_for("positive_features_stable") is None


def test_feature_pair_gradcheck_under_numba(rng):
    args = dict(x=rng.standard_normal((2, 6, 4)), omega=rng.standard_normal((5, 4)))
    with accel.use("numba"):
        check_vjp(positive_features_stable_fwd, positive_features_stable_bwd, args)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("features", ["positive", "hyperbolic"])
def test_favor_under_numba_equals_reference(rng, dtype, causal, features):
    """The fused numba FAVOR+ path (feature kernels, then the causal scan) equals the reference, fwd and
    bwd."""
    B, H, L, d, d_v, m = 2, 2, 37, 8, 4, 16
    q, k = (rng.standard_normal((B, H, L, d)).astype(dtype) for _ in range(2))
    v = rng.standard_normal((B, H, L, d_v)).astype(dtype)
    omega = rng.standard_normal((m, d)).astype(dtype)
    dy = rng.standard_normal((B, H, L, d_v)).astype(dtype)
    y0, c0 = favor_attention_fwd(q, k, v, omega, causal=causal, features=features)
    g0 = favor_attention_bwd(dy, c0)
    with accel.use("numba"):
        y1, c1 = favor_attention_fwd(q, k, v, omega, causal=causal, features=features)
        g1 = favor_attention_bwd(dy, c1)
    tol = 1e-11 if dtype == "float64" else 2e-4
    for name, a, e in [("y", y1, y0)] + [(f, getattr(g1, f), getattr(g0, f)) for f in g0._fields]:
        assert_close(a, e, rtol=tol, atol=tol * float(np.max(np.abs(e))), label=name)


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_favor_gradcheck_under_numba(rng, causal):
    args = dict(q=rng.standard_normal((2, 11, 4)), k=rng.standard_normal((2, 11, 4)),
                v=rng.standard_normal((2, 11, 3)), omega=rng.standard_normal((6, 4)))
    with accel.use("numba"):
        check_vjp(favor_attention_fwd, favor_attention_bwd, args, kwargs=dict(causal=causal))


def test_gradcheck_catches_wrong_feature_kernel(rng, monkeypatch):
    """Must-fail: a key-feature kernel whose features are off by a factor exp(1e-3 x_0) breaks the FAVOR+
    gradient check (the backward is the reference's; the forward no longer matches it)."""
    from accel.numba.kernels import PRIMITIVES

    with accel.use("numba"):
        pass
    real = positive.positive_key_features_stable

    def broken(x, omega, causal):
        phi, frame = real(x, omega, causal)
        return phi * np.exp(1e-3 * x[..., :1]), frame

    monkeypatch.setitem(PRIMITIVES, "positive_key_features_stable", broken)
    args = dict(q=rng.standard_normal((1, 9, 4)), k=rng.standard_normal((1, 9, 4)),
                v=rng.standard_normal((1, 9, 2)), omega=rng.standard_normal((6, 4)))
    with accel.use("numba"):
        with pytest.raises(AssertionError, match="gradient for k"):
            check_vjp(favor_attention_fwd, favor_attention_bwd, args, kwargs=dict(causal=True), wrt=("k",))


def test_errors():
    xps = get_namespace("array_api_strict")
    x = np.ones((2, 3, 4))
    om = np.ones((5, 4))
    with pytest.raises(TypeError, match=r"x: numba kernels take NumPy arrays; got array_api_strict\.Array"):
        positive.positive_features_stable(xps.asarray(x), xps.asarray(om))
    with pytest.raises(TypeError, match=r"supports dtypes float32, float64; got dtype float16"):
        positive.positive_features_stable(x.astype(np.float16), om.astype(np.float16))
    with pytest.raises(TypeError, match=r"omega: dtype float32 differs from float64"):
        positive.positive_features_stable(x, om.astype(np.float32))
    with accel.use("numba"):
        with pytest.raises(TypeError, match=r"x: numba kernels take NumPy arrays"):
            positive_features_stable_fwd(xps.asarray(x), xps.asarray(om))
