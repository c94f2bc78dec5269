"""Horn S2: fast class-sum paths equal their naive quadratic references (1-D signed with both signs in the
window and both far regions, 2-D Manhattan, k >= grid size, L = 1), exact S2 equals the softmax oracle with
the logits it produces, the window sums and their adjoint, gradients (q, v, w, omega), bad input, dispatch."""

from __future__ import annotations

import numpy as np
import pytest
from array_api_compat import array_namespace

from refattn import _dispatch
from refattn.attention.softmax import softmax_attention
from refattn.rpe import s2_clipped
from refattn.rpe.s2_clipped import (
    DEFAULT_CLIP,
    S2AttentionGrads,
    s2_attention,
    s2_attention_bwd,
    s2_attention_fwd,
    s2_attention_naive,
    s2_class_index,
    s2_logits,
)
from tests.helpers import asxp, randn, to_numpy
from validation import assert_close, check_vjp

# (L, grid, k): 1-D with L > 2k + 1 (both far regions and both signs in the window), 1-D with k >= L,
# 2-D with far class, 2-D with k >= grid extent, L = 1 both geometries, non-square grid
CASES = [(11, None, 3), (6, None, 8), (20, (4, 5), 2), (12, (3, 4), 6), (1, None, 6), (1, (1, 1), 6),
         (18, (6, 3), 3)]


def _inputs(rng, xp, L, grid, k, *, d=4, d_v=3, m=6, dtype=None, wb=()):
    R = 2 * k + 1 if grid is None else k + 1
    q = randn(rng, xp, 2, L, d, dtype=dtype)
    v = randn(rng, xp, 2, L, d_v, dtype=dtype)
    w = randn(rng, xp, *(wb + (R, d)), dtype=dtype)
    omega = randn(rng, xp, m, d, dtype=dtype)
    return q, v, w, omega


@pytest.mark.parametrize("kernel", ["softmax", "favor"])
@pytest.mark.parametrize("case", CASES,
                         ids=lambda c: f"L{c[0]}-{'1d' if c[1] is None else 'grid%dx%d' % c[1]}-k{c[2]}")
def test_fast_equals_naive(xp, dtype, rng, case, kernel):
    L, grid, k = case
    q, v, w, omega = _inputs(rng, xp, L, grid, k, dtype=dtype)
    om = omega if kernel == "favor" else None
    y = s2_attention(q, v, w, k=k, grid=grid, omega=om)
    y_ref = s2_attention_naive(q, v, w, k=k, grid=grid, omega=om)
    f64 = dtype == xp.float64
    assert_close(y, y_ref, rtol=None if f64 else 1e-4, atol=1e-12 if f64 else 1e-5)


@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: f"L{c[0]}-{c[1]}-k{c[2]}")
def test_exact_equals_softmax_oracle(xp, rng, case):
    """Exact S2 = softmax(N) v with N_ij = q_i . w[class(i, j)] / sqrt(d) (the oracle with the mask it
    produces)."""
    L, grid, k = case
    q, v, w, _ = _inputs(rng, xp, L, grid, k)
    N = s2_logits(q, w, k=k, grid=grid)
    y_ref = softmax_attention(q, xp.zeros_like(q), v, mask_add=N)
    assert_close(s2_attention(q, v, w, k=k, grid=grid), y_ref, rtol=1e-10, atol=1e-13)


def test_class_index_definitions():
    cls = s2_class_index(7, 2, None, xp=np)
    i, j = np.meshgrid(np.arange(7), np.arange(7), indexing="ij")
    np.testing.assert_array_equal(cls, np.clip(j - i, -2, 2) + 2)
    H, W = 3, 4
    cls = s2_class_index(12, 3, (H, W), xp=np)
    y, x = np.divmod(np.arange(12), W)
    manhattan = np.abs(y[:, None] - y[None]) + np.abs(x[:, None] - x[None])
    np.testing.assert_array_equal(cls, np.minimum(manhattan, 3))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"L{c[0]}-{c[1]}-k{c[2]}")
def test_window_sums_and_adjoint(xp, rng, case):
    """V_ir = sum_{class(i,j)=r} u_j against the one-hot definition, and <V(u), X> = <u, V^T(X)>."""
    L, grid, k = case
    R = 2 * k + 1 if grid is None else k + 1
    u = rng.standard_normal((2, L, 3))
    cls = np.asarray(s2_class_index(L, k, grid, xp=np))
    onehot = (cls[..., None] == np.arange(R)).astype(float)                        # (L, L, R)
    V_ref = np.einsum("ijr,bje->bire", onehot, u)
    V = s2_clipped.s2_window_sums_reference(asxp(xp, u), k, grid)
    assert_close(V, asxp(xp, V_ref), rtol=1e-12, atol=1e-12)
    X = rng.standard_normal((2, L, R, 3))
    VT = to_numpy(s2_clipped.s2_window_sums_reference(asxp(xp, X), k, grid, adjoint=True))
    np.testing.assert_allclose(np.sum(V_ref * X), np.sum(u * VT), rtol=1e-12)


def test_far_class_is_exactly_empty_when_k_exceeds_the_grid():
    u = np.random.default_rng(0).standard_normal((1, 12, 2)) * 1e8
    V = s2_clipped.s2_window_sums_reference(u, 6, (3, 4))
    assert np.all(V[..., 6, :] == 0.0)


def test_signed_one_sided_formula_is_wrong_for_signed_distances(rng):
    """docs/guide/horn-rpe.md (erratum horn.s2-signed-clip): the paper's one-baseline formula (every far
    pair uses w_k) is not S2 with signed distances: the far-left region uses w_{-k}."""
    L, k = 12, 2
    q, v, w, _ = _inputs(rng, np, L, None, k)
    w_one_sided = w.copy()
    w_one_sided[0] = w[-1]                                                         # w_{-k} := w_k
    y = s2_attention(q, v, w, k=k)
    y_wrong = s2_attention_naive(q, v, w_one_sided, k=k)
    assert np.max(np.abs(y - y_wrong)) > 1e-3
    assert_close(s2_attention(q, v, w_one_sided, k=k), y_wrong, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("kernel", ["softmax", "favor"])
@pytest.mark.parametrize("case", [(9, None, 2), (12, (3, 4), 2), (12, (3, 4), 6)],
                         ids=["1d", "grid", "grid-bigk"])
def test_gradients(rng, case, kernel):
    L, grid, k = case
    q, v, w, omega = _inputs(rng, np, L, grid, k, wb=(1,))
    args = dict(q=q, v=v, w=w) if kernel == "softmax" else dict(q=q, v=v, w=w, omega=omega)
    check_vjp(lambda **a: s2_attention_fwd(**a, k=k, grid=grid), s2_attention_bwd, args)


def test_gradient_check_catches_a_wrong_backward(rng):
    """Must fail: a 1e-4 error in dw is caught."""
    q, v, w, _ = _inputs(rng, np, 9, None, 2)

    def bad_bwd(dy, cache):
        g = s2_attention_bwd(dy, cache)
        return S2AttentionGrads(g.q, g.v, g.w * (1 + 1e-4), g.omega)

    with pytest.raises(AssertionError, match="w"):
        check_vjp(lambda **a: s2_attention_fwd(**a, k=2), bad_bwd, dict(q=q, v=v, w=w), wrt=("w",))


def test_default_clip_is_the_papers():
    assert DEFAULT_CLIP == 6


def test_bad_inputs(xp, rng):
    q, v, w, omega = _inputs(rng, xp, 12, (3, 4), 2)
    with pytest.raises(ValueError, match=r"grid: expected H \* W == L = 12.*got grid \(3, 5\)"):
        s2_attention(q, v, w, k=2, grid=(3, 5))
    with pytest.raises(ValueError, match=r"w: expected shape \(\.\.\., 2k \+ 1, d\) = \(\.\.\., 5, 4\)"):
        s2_attention(q, v, w, k=2)                                                 # a grid table for 1-D
    with pytest.raises(ValueError, match=r"w: expected shape \(\.\.\., k \+ 1, d\) = \(\.\.\., 4, 4\)"):
        s2_attention(q, v, w, k=3, grid=(3, 4))
    with pytest.raises(ValueError, match="k: expected a positive integer; got 0"):
        s2_attention(q, v, w, k=0, grid=(3, 4))
    with pytest.raises(ValueError, match="grid: expected None"):
        s2_attention(q, v, w, k=2, grid=(12,))
    with pytest.raises(ValueError, match="omega: expected shape"):
        s2_attention(q, v, w, k=2, grid=(3, 4), omega=omega[:, :3])
    with pytest.raises(ValueError, match="v: expected shape"):
        s2_attention(q, v[:, :5, :], w, k=2, grid=(3, 4))
    bad = to_numpy(w).copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="w: expected finite"):
        s2_attention(q, v, asxp(xp, bad), k=2, grid=(3, 4))


def test_dispatch_point_is_used(rng):
    """A kernel registered for "s2_window_sums" replaces the reference inside use_backend only."""
    calls = []

    def kernel(u, k, grid, *, adjoint=False):
        calls.append(adjoint)
        return s2_clipped.s2_window_sums_reference(u, k, grid, adjoint=adjoint)

    _dispatch.register("test-s2-window", "s2_window_sums", kernel)
    q, v, w, _ = _inputs(rng, np, 9, None, 2)
    y0 = s2_attention(q, v, w, k=2)
    assert calls == []
    with _dispatch.use_backend("test-s2-window"):
        y, cache = s2_attention_fwd(q, v, w, k=2)
        s2_attention_bwd(np.ones_like(y), cache)
    assert calls == [False, False, True]
    np.testing.assert_array_equal(y, y0)


def _authors_class_index(n, grid, k):
    """The (n + 1, n + 1) classes of a sequence whose token 0 is a class token, from Horn et al.'s geometry
    (clipped_relative_attention.py l. 150-175, where it is the last token): as a query it sits at the raster
    position after the last token ((H, 0) on an (H, W) grid, n in 1-D); as a key it is in the far class for
    every query (their window admits keys inside the image only)."""
    if grid is None:
        coords = [(i,) for i in range(n)] + [(n,)]                     # tokens 1..n, then the class query
    else:
        H, W = grid
        coords = [(i // W, i % W) for i in range(n)] + [(H, 0)]
    at = [coords[-1]] + coords[:-1]                                     # sequence order: class token first
    R = 2 * k + 1 if grid is None else k + 1
    cls = np.empty((n + 1, n + 1), dtype=np.int64)
    for i in range(n + 1):
        for j in range(n + 1):
            if j == 0:
                cls[i, j] = R - 1                                       # the class key: far (+k in 1-D)
            elif grid is None:
                cls[i, j] = min(max(at[j][0] - at[i][0], -k), k) + k
            else:
                cls[i, j] = min(abs(at[j][0] - at[i][0]) + abs(at[j][1] - at[i][1]), k)
    return cls


@pytest.mark.parametrize("n, grid, k", [(11, None, 3), (4, None, 8), (20, (4, 5), 2), (12, (3, 4), 6),
                                        (1, (1, 1), 2), (18, (6, 3), 3)])
def test_class_token_geometry_is_the_authors(xp, rng, n, grid, k):
    """``class_token=True`` (token 0) equals the dense softmax on the classes of Horn et al.'s placement, and
    the window sums' adjoint stays the transpose (through the backward's v gradient against the dense one)."""
    q, v, w, _ = _inputs(rng, xp, n + 1, grid, k)
    xpn = array_namespace(q)
    y, cache = s2_clipped.s2_attention_fwd_core(q, v, w, None, k=k, grid=grid, xp=xpn, class_token=True)
    qn, vn, wn = (to_numpy(a) for a in (q, v, w))
    logits = (qn @ wn.T) / np.sqrt(qn.shape[-1])                        # (B, L, R)
    cls = _authors_class_index(n, grid, k)
    dense = np.take_along_axis(logits, np.broadcast_to(cls, logits.shape[:-1] + (n + 1,)), axis=-1)
    att = np.exp(dense - dense.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)                              # (B, L, L)
    assert_close(y, asxp(xp, att @ vn), rtol=1e-12, atol=1e-14)
    dy = randn(rng, xp, *y.shape)
    g = s2_clipped.s2_attention_bwd_core(dy, cache, xp=xpn)
    dyn = to_numpy(dy)
    dv = np.swapaxes(att, -1, -2) @ dyn                                 # the dense backward for v
    assert_close(g.v, asxp(xp, dv), rtol=1e-11, atol=1e-13)

