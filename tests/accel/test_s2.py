"""accel.numba.s2: S2 class (window) sums equal the reference for signed 1-D and 2-D Manhattan distances,
forward and adjoint; S2 attention under accel.use('numba') equals the reference (exact and FAVOR+) with
gradient checks; clear errors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import accel
from tests.accel.helpers import unwrap as _unwrap  # noqa: E402
from accel.numba import s2 as ns2  # noqa: E402
from refattn import _dispatch  # noqa: E402
from refattn._dispatch import reference  # noqa: E402
from refattn.rpe.s2_clipped import s2_attention_bwd, s2_attention_fwd  # noqa: E402

_class_sums_reference = reference("s2_window_sums")
from tests.helpers import get_namespace  # noqa: E402
from validation import assert_close, check_vjp  # noqa: E402

DTYPES = ns2.SUPPORTED["s2_window_sums"]["dtypes"]
GEOMS = [(None, 1), (None, 7), (None, 20), ((3, 4), 12), ((1, 5), 5), ((5, 5), 25)]
GEOM_IDS = ["1d-L1", "1d-L7", "1d-L20", "2d-3x4", "2d-1x5", "2d-5x5"]
TOL = {"float64": 1e-13, "float32": 1e-5}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("grid, L", GEOMS, ids=GEOM_IDS)
@pytest.mark.parametrize("k", [1, 2, 3, 9])
def test_sums_equal_reference(rng, dtype, grid, L, k):
    """k = 9 exceeds every distance here (1-D: the far classes are empty; 2-D: exact zeros)."""
    R = 2 * k + 1 if grid is None else k + 1
    u = rng.standard_normal((2, 3, L, 4)).astype(dtype)
    ua = rng.standard_normal((2, 3, L, R, 4)).astype(dtype)
    for got, exp in [(ns2.s2_window_sums(u, k, grid), _class_sums_reference(u, k, grid)),
                     (ns2.s2_window_sums(ua, k, grid, adjoint=True),
                      _class_sums_reference(ua, k, grid, adjoint=True))]:
        scale = float(np.max(np.abs(exp))) if exp.size else 1.0
        assert_close(got, exp, rtol=TOL[dtype], atol=TOL[dtype] * scale)


def test_adjoint_is_the_transpose(rng):
    """<V(u), a> == <u, V^T(a)> for both geometries."""
    for grid, L, k in [(None, 11, 3), ((3, 5), 15, 2)]:
        R = 2 * k + 1 if grid is None else k + 1
        u, a = rng.standard_normal((2, L, 3)), rng.standard_normal((2, L, R, 3))
        lhs = np.sum(ns2.s2_window_sums(u, k, grid) * a)
        rhs = np.sum(u * ns2.s2_window_sums(a, k, grid, adjoint=True))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-12)


@pytest.mark.parametrize("grid, L", [(None, 13), ((3, 4), 12)], ids=["1d", "2d"])
@pytest.mark.parametrize("favor", [False, True], ids=["exact", "favor"])
def test_s2_attention_under_numba(rng, grid, L, favor):
    k, d, d_v = 2, 4, 3
    R = 2 * k + 1 if grid is None else k + 1
    args = dict(q=rng.standard_normal((2, L, d)), v=rng.standard_normal((2, L, d_v)),
                w=rng.standard_normal((R, d)))
    if favor:
        args["omega"] = rng.standard_normal((8, d))
    kw = dict(k=k, grid=grid)
    y0, c0 = s2_attention_fwd(**args, **kw)
    dy = rng.standard_normal(y0.shape)
    g0 = s2_attention_bwd(dy, c0)
    with accel.use("numba"):
        assert _unwrap(_dispatch.kernel_for("s2_window_sums")) is ns2.s2_window_sums
        y1, c1 = s2_attention_fwd(**args, **kw)
        g1 = s2_attention_bwd(dy, c1)
        check_vjp(s2_attention_fwd, s2_attention_bwd, args, kwargs=kw)
    assert_close(y1, y0, rtol=1e-12, atol=1e-13)
    for f in g0._fields:
        if getattr(g0, f) is not None:
            assert_close(getattr(g1, f), getattr(g0, f), rtol=1e-11, atol=1e-12, label=f)


def test_errors():
    with pytest.raises(TypeError, match=r"u: numba kernels take NumPy arrays; got array_api_strict\.Array"):
        ns2.s2_window_sums(get_namespace("array_api_strict").ones((5, 2)), 1, None)
    with pytest.raises(TypeError, match=r"supports dtypes float32, float64; got dtype float16"):
        ns2.s2_window_sums(np.ones((5, 2), dtype=np.float16), 1, None)
    with pytest.raises(ValueError, match=r"grid: expected H \* W = L = 5; got grid \(2, 3\)"):
        ns2.s2_window_sums(np.ones((5, 2)), 1, (2, 3))
    with pytest.raises(ValueError, match=r"u: expected shape \(\.\.\., L, R, e\) with R = 3"):
        ns2.s2_window_sums(np.ones((5, 2, 2)), 1, None, adjoint=True)
