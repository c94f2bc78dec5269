r"""Trig (RKS) and softmax-trig features: exact formulas (numpy and array_api_strict), unbiasedness
against the kernel each one estimates (with the wrong kernel rejected), the derived MSE formulas,
gradients, bad input.

Derivation checked here (iid omega ~ N(0, I_d), m projections, delta = q - k). The RKS estimate is
``(1/m) sum_i cos(omega_i . delta)``; ``E cos(omega . delta) = exp(-|delta|^2/2)`` (characteristic function)
and ``E cos^2 = (1 + E cos(2 omega . delta))/2 = (1 + exp(-2|delta|^2))/2``, so

    Var cos(omega . delta) = (1 + e^{-2|delta|^2})/2 - e^{-|delta|^2} = (1 - e^{-|delta|^2})^2 / 2,
    MSE_RKS = (1 - e^{-|delta|^2})^2 / (2m),      MSE_softmax-trig = e^{|q|^2 + |k|^2} MSE_RKS.
"""

from __future__ import annotations

import numpy as np
import pytest

from refattn import (
    gaussian_kernel,
    softmax_kernel,
    softmax_trig_features,
    softmax_trig_features_stable,
    trig_features,
)
from refattn.features import (
    softmax_trig_features_bwd,
    softmax_trig_features_fwd,
    softmax_trig_features_stable_bwd,
    softmax_trig_features_stable_fwd,
    softmax_trig_mse,
    trig_features_bwd,
    trig_features_fwd,
    trig_mse,
)
from refattn.random import draw_gaussian
from refattn.random.performer import draw_orthogonal_core
from tests.helpers import asxp, randn, to_numpy
from validation import assert_close, assert_mean_within_se, assert_mse_matches, check_vjp, mean_test

# ----------------------------------------------------------------------------------------------------------
# Monte Carlo helper (also used by test_positive.py): n draws at once through ONE call of the feature map


def per_draw_kernel(feature_map, q, k, W, groups):
    """Estimates ``phi(q) . phi(k)`` for each of the n draws in ``W: (n, m, d)``, shape ``(n, Pq, Pk)``.

    The map is called once on the stacked projections ``(n m, d)``; its output has `groups` blocks of n m
    columns (2 for [cos, sin] or [exp(u), exp(-u)], 1 for positive maps) and a normalisation ``1/sqrt(n m)``
    (or ``1/sqrt(2 n m)``), so the per-draw inner product is n times the block-restricted one.
    """
    n, m, d = W.shape
    Wf = W.reshape(n * m, d)
    pq = np.asarray(feature_map(q, Wf)).reshape(q.shape[0], groups, n, m)
    pk = np.asarray(feature_map(k, Wf)).reshape(k.shape[0], groups, n, m)
    return n * np.einsum("pgnm,rgnm->npr", pq, pk)


def _points(rng, P, d, r):
    x = rng.standard_normal((P, d))
    return r * x / np.linalg.norm(x, axis=1, keepdims=True) * rng.uniform(0.5, 1.0, (P, 1))


CASES = [(1, 1, 1, 1), (2, 5, 3, 4), (2, 3, 17, 8, 6)]  # (..., L, d, m)


# ----------------------------------------------------------------------------------------------------------
# exact formulas


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_trig_formulas(xp, dtype, case, rng):
    *lead, d, m = case
    xn = rng.standard_normal((*lead, d))
    wn = rng.standard_normal((m, d))
    x, w = asxp(xp, xn, dtype), asxp(xp, wn, dtype)
    u = xn @ wn.T
    expect_t = np.concatenate([np.cos(u), np.sin(u)], -1) / np.sqrt(m)
    assert_close(trig_features(x, w), asxp(xp, expect_t, dtype), atol=1e-6 if dtype == xp.float32 else 1e-15)
    h = np.exp(0.5 * np.sum(xn * xn, -1))[..., None]
    assert_close(softmax_trig_features(x, w), asxp(xp, h * expect_t, dtype),
                 atol=1e-6 if dtype == xp.float32 else 1e-14)
    phi, ls = softmax_trig_features_stable(x, w)
    assert_close(phi, trig_features(x, w))
    assert_close(ls, asxp(xp, 0.5 * np.sum(xn * xn, -1), dtype))


def test_kernels_closed_forms(xp):
    rng = np.random.default_rng(0)
    qn, kn = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 4, 3))
    q, k = asxp(xp, qn), asxp(xp, kn)
    diff = qn[:, :, None, :] - kn[:, None, :, :]
    assert_close(gaussian_kernel(q, k), asxp(xp, np.exp(-0.5 * np.sum(diff ** 2, -1))))
    assert_close(softmax_kernel(q, k), asxp(xp, np.exp(qn @ np.swapaxes(kn, -1, -2))))
    # the two kernels differ by exp(-|q|^2/2 - |k|^2/2) (docs/guide/features.md, the maps' table)
    ratio = to_numpy(gaussian_kernel(q, k)) / to_numpy(softmax_kernel(q, k))
    np.testing.assert_allclose(
        ratio, np.exp(-0.5 * (qn ** 2).sum(-1)[..., None] - 0.5 * (kn ** 2).sum(-1)[:, None]))


def test_inner_product_is_mean_cosine(rng):
    """phi(q) . phi(k) = (1/m) sum_i cos(omega_i . (q - k)) exactly (RKS as a shift-invariant kernel)."""
    q, k, w = rng.standard_normal((4, 5)), rng.standard_normal((3, 5)), rng.standard_normal((7, 5))
    lhs = trig_features(q, w) @ trig_features(k, w).T
    rhs = np.mean(np.cos((q[:, None, :] - k[None, :, :]) @ w.T), axis=-1)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-13, atol=1e-15)


# ----------------------------------------------------------------------------------------------------------
# unbiasedness, each with a must-fail companion (the wrong kernel)


@pytest.mark.parametrize("draws", ["iid", "orthogonal"])
def test_rks_unbiased_for_gaussian_kernel(draws, seed):
    rng = np.random.default_rng(seed)
    d, m, n = 4, 8, 10000
    q, k = _points(rng, 3, d, 1.0), _points(rng, 3, d, 1.0)
    W = rng.standard_normal((n, m, d)) if draws == "iid" else draw_orthogonal_core(rng, n, m, d)
    est = per_draw_kernel(trig_features, q, k, W, 2)
    assert_mean_within_se(est, gaussian_kernel(q, k), label=f"RKS ({draws})", seed=seed)
    # must fail: RKS does not estimate the softmax kernel
    assert not mean_test(est, softmax_kernel(q, k)).passed


@pytest.mark.parametrize("draws", ["iid", "orthogonal"])
def test_softmax_trig_unbiased_for_softmax_kernel(draws, seed):
    rng = np.random.default_rng(seed)
    d, m, n = 4, 8, 10000
    q, k = _points(rng, 3, d, 0.8), _points(rng, 3, d, 0.8)
    W = rng.standard_normal((n, m, d)) if draws == "iid" else draw_orthogonal_core(rng, n, m, d)
    est = per_draw_kernel(softmax_trig_features, q, k, W, 2)
    assert_mean_within_se(est, softmax_kernel(q, k), label=f"softmax-trig ({draws})", seed=seed)
    # must fail: it is not the Gaussian kernel
    assert not mean_test(est, gaussian_kernel(q, k)).passed


# ----------------------------------------------------------------------------------------------------------
# MSE formulas (iid): the public closed forms trig_mse / softmax_trig_mse against Monte Carlo. Tolerance:
# assert_mse_matches' 5 SE of the mean of the n squared errors, the SE estimated from their own spread (the
# fourth moment of the estimator; nothing typed in). Must-fail companion: the formula without the 1/2 (the
# 2/m scale of KL Eq. (13)), i.e. twice the MSE, is rejected at the same n.


def test_mse_formulas(seed):
    rng = np.random.default_rng(seed)
    d, m, n = 4, 4, 20000
    q, k = _points(rng, 3, d, 1.0), _points(rng, 3, d, 1.0)
    W = rng.standard_normal((n, m, d))
    est = per_draw_kernel(trig_features, q, k, W, 2)
    assert_mse_matches(est, gaussian_kernel(q, k), trig_mse(q, k, m), label="RKS MSE", seed=seed)
    est_s = per_draw_kernel(softmax_trig_features, q, k, W, 2)
    assert_mse_matches(est_s, softmax_kernel(q, k), softmax_trig_mse(q, k, m), label="softmax-trig MSE",
                       seed=seed)
    # must fail: the same MSEs without the factor 1/2
    assert not mean_test((est - gaussian_kernel(q, k)) ** 2, 2 * trig_mse(q, k, m)).passed
    assert not mean_test((est_s - softmax_kernel(q, k)) ** 2, 2 * softmax_trig_mse(q, k, m)).passed


def test_mse_is_zero_at_q_equals_k(seed):
    """At q = k every draw gives exactly cos^2 + sin^2 = 1 (up to rounding): trig_mse is 0 there, and
    assert_mse_matches accepts it with an atol of the rounding scale, (16 eps)^2 (estimates ~1)."""
    rng = np.random.default_rng(seed)
    d, m, n = 4, 4, 2000
    q = _points(rng, 3, d, 1.0)
    est = per_draw_kernel(trig_features, q, q, rng.standard_normal((n, m, d)), 2)
    mse = trig_mse(q, q, m)
    assert np.all(np.diag(mse) == 0.0)
    assert_mse_matches(est, gaussian_kernel(q, q), mse, atol=(16 * np.finfo(np.float64).eps) ** 2,
                       label="RKS MSE at q = k", seed=seed)


def test_mse_closed_forms_array_api_and_bad_input(xp):
    q, k = randn(np.random.default_rng(1), np, 2, 3, 4), randn(np.random.default_rng(2), np, 2, 5, 4)
    for fn in (trig_mse, softmax_trig_mse):
        got = fn(asxp(xp, q), asxp(xp, k), 8)
        assert got.shape == (2, 3, 5)
        assert_close(to_numpy(got), fn(q, k, 8), rtol=1e-12)
        with pytest.raises(ValueError, match=r"m: expected a positive integer; got 0"):
            fn(q, k, 0)
        with pytest.raises(TypeError, match=r"m: expected"):
            fn(q, k, 2.5)
        with pytest.raises(ValueError, match=r"k: "):
            fn(q, k[..., :3], 8)


# ----------------------------------------------------------------------------------------------------------
# gradients


def _xw(xp, rng, shape=(2, 5, 4), m=6):
    return asxp(xp, rng.standard_normal(shape) * 0.7), asxp(xp, rng.standard_normal((m, shape[-1])))


@pytest.mark.parametrize("pair", [(trig_features_fwd, trig_features_bwd),
                                  (softmax_trig_features_fwd, softmax_trig_features_bwd)],
                         ids=["trig", "softmax_trig"])
def test_gradients(xp, pair, rng):
    x, w = _xw(xp, rng)
    check_vjp(pair[0], pair[1], {"x": x, "omega": w})


def test_gradients_stable(xp, rng):
    x, w = _xw(xp, rng)
    check_vjp(softmax_trig_features_stable_fwd, softmax_trig_features_stable_bwd, {"x": x, "omega": w})
    # queries: the log-scale's cotangent is None
    check_vjp(softmax_trig_features_stable_fwd,
              lambda c, cache: softmax_trig_features_stable_bwd((c, None), cache),
              {"x": x, "omega": w}, output=lambda y: y[0])


def test_gradient_check_must_fail(rng):
    x, w = _xw(np, rng)
    x, w = np.asarray(x), np.asarray(w)

    def bad_bwd(dphi, cache):
        g = trig_features_bwd(dphi, cache)
        return g._replace(omega=g.omega * (1 + 1e-4))

    with pytest.raises(AssertionError, match="gradient for omega"):
        check_vjp(trig_features_fwd, bad_bwd, {"x": x, "omega": w})


def test_softmax_trig_bwd_overflow_raises():
    # exp(|x|^2/2) dphi overflows while dphi and phi are finite: the backward raises instead of returning inf
    x = np.full((1, 3, 2), 17.0)                                   # |x|^2 / 2 = 289, exp(289) ~ 3e125
    omega = np.eye(2)
    phi, cache = softmax_trig_features_fwd(x, omega)
    assert np.all(np.isfinite(phi))
    dphi = np.full(phi.shape, 1e200)
    with np.errstate(all="ignore"), pytest.raises(ValueError,
                                                  match=r"dphi \* exp\(\|x\|\^2/2\): expected finite values"):
        softmax_trig_features_bwd(dphi, cache)


# ----------------------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("fn", [trig_features, softmax_trig_features, softmax_trig_features_stable])
def test_bad_input(fn):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 16))
    with pytest.raises(ValueError,
                       match=r"omega: expected shape \(m, d\) with .*d = 16 \(from x\); got \(64, 15\)"):
        fn(x, rng.standard_normal((64, 15)))
    with pytest.raises(ValueError, match=r"omega: expected shape \(m, d\).*got \(2, 64, 16\)"):
        fn(x, rng.standard_normal((2, 64, 16)))
    with pytest.raises(ValueError, match=r"omega: expected at least one projection row.*got \(0, 16\)"):
        fn(x, np.zeros((0, 16)))
    with pytest.raises(ValueError, match=r"x: expected finite values; got 1 non-finite entry"):
        xb = x.copy()
        xb[0, 0, 0] = np.nan
        fn(xb, rng.standard_normal((4, 16)))
    with pytest.raises(TypeError, match=r"omega: dtype float32 differs from x's dtype float64"):
        fn(x, draw_gaussian(rng, 4, 16, dtype=np.float32))
    with pytest.raises(TypeError, match=r"x: expected an array"):
        fn([[1.0] * 16], rng.standard_normal((4, 16)))


def test_float32_preserved(xp):
    rng = np.random.default_rng(0)
    x = randn(rng, xp, 3, 4, dtype=xp.float32)
    w = asxp(xp, draw_gaussian(rng, 5, 4, dtype=np.float32), xp.float32)
    for out in (trig_features(x, w), softmax_trig_features(x, w), *softmax_trig_features_stable(x, w)):
        assert out.dtype == xp.float32
