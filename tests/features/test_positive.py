r"""Positive random features (FAVOR+), the stabiliser, KL Eq. (9) and hyperbolic features: exact formulas,
the dispatch point, unbiasedness against the kernel each estimates (wrong kernel / wrong offset rejected), the
derived variance formulas, large-norm inputs, gradients, bad input.

Variances derived here (iid omega ~ N(0, I_d), m projections, s = q + k; E exp(omega . a) = exp(|a|^2/2)):

* positive: Y = exp(omega.s - |q|^2/2 - |k|^2/2), E Y^2 = exp(2|s|^2 - |q|^2 - |k|^2) = exp(2 q.k) exp(|s|^2),
  so Var = exp(2 q.k) (exp(|s|^2) - 1) / m;
* hyperbolic: Y = cosh(omega.s) e^{-(|q|^2+|k|^2)/2}, E cosh^2 = (1 + e^{2|s|^2})/2,
  Var cosh = (e^{|s|^2} - 1)^2/2, so Var = e^{-|q|^2-|k|^2} (e^{|s|^2} - 1)^2 / (2m);
* KL Eq. (9): Y = exp(omega.s - |q|^2 - |k|^2), E Y^2 = exp(2|s|^2 - 2|q|^2 - 2|k|^2)
  = e^{-|q-k|^2} e^{|s|^2}, so Var = exp(-|q - k|^2) (exp(|s|^2) - 1) / m, around the mean exp(-|q - k|^2/2)
  (the Gaussian kernel).
"""

from __future__ import annotations

import numpy as np
import pytest

from refattn import (
    gaussian_kernel,
    gaussian_positive_features,
    hyperbolic_features,
    hyperbolic_features_stable,
    positive_features,
    positive_features_stable,
    softmax_kernel,
)
from refattn.features import (
    gaussian_positive_features_bwd,
    gaussian_positive_features_fwd,
    gaussian_positive_mse,
    hyperbolic_features_bwd,
    hyperbolic_features_fwd,
    hyperbolic_features_stable_bwd,
    hyperbolic_features_stable_fwd,
    hyperbolic_mse,
    positive_features_bwd,
    positive_features_fwd,
    positive_features_stable_bwd,
    positive_features_stable_fwd,
    positive_mse,
)
from refattn import _dispatch
from refattn.random import draw_gaussian
from refattn.random.performer import draw_orthogonal_core
from tests.features.test_trig import _points, per_draw_kernel
from tests.helpers import asxp, to_numpy
from validation import assert_close, assert_mean_within_se, assert_mse_matches, check_vjp, mean_test

_positive_features_stable_reference = _dispatch.reference("positive_features_stable")

CASES = [(1, 1, 1, 1), (2, 5, 3, 4), (2, 3, 17, 8, 6)]  # (..., L, d, m)


# ----------------------------------------------------------------------------------------------------------
# exact formulas


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_positive_formulas(xp, dtype, case, rng):
    *lead, d, m = case
    xn, wn = rng.standard_normal((*lead, d)), rng.standard_normal((m, d))
    x, w = asxp(xp, xn, dtype), asxp(xp, wn, dtype)
    u, sq = xn @ wn.T, np.sum(xn * xn, -1, keepdims=True)
    f32 = dtype == xp.float32
    tol = dict(rtol=2e-5) if f32 else {}
    assert_close(positive_features(x, w), asxp(xp, np.exp(u - sq / 2) / np.sqrt(m), dtype), **tol)
    assert_close(gaussian_positive_features(x, w), asxp(xp, np.exp(u - sq) / np.sqrt(m), dtype), **tol)
    hyp = np.concatenate([np.exp(u), np.exp(-u)], -1) * np.exp(-sq / 2) / np.sqrt(2 * m)
    assert_close(hyperbolic_features(x, w), asxp(xp, hyp, dtype), **tol)
    # stable maps: phi in (0, 1] with row maximum exactly 1, and phi * exp(log_scale) = the raw map
    for stable, raw in ((positive_features_stable, positive_features), (hyperbolic_features_stable,
                                                                         hyperbolic_features)):
        phi, ls = stable(x, w)
        assert tuple(ls.shape) == tuple(lead)
        pn = to_numpy(phi)
        assert np.all(pn > 0) and np.all(np.max(pn, -1) == 1.0)
        assert_close(phi * xp.exp(ls)[..., None], raw(x, w), **tol)


def test_dispatch_point_is_used():
    """positive_features_stable_fwd asks refattn._dispatch for "positive_features_stable"; a registered
    kernel's outputs are returned inside its backend scope only."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    calls = []

    def fake(x_, w_, frame_=None):
        calls.append(1)
        phi, ls = _positive_features_stable_reference(x_, w_, frame_)
        return phi * 0.5, ls

    _dispatch.register("test-features-fake", "positive_features_stable", fake)
    with _dispatch.use_backend("test-features-fake"):
        phi_fake, _ = positive_features_stable(x, w)
    phi_ref, _ = positive_features_stable(x, w)
    assert len(calls) == 1
    np.testing.assert_array_equal(phi_fake, 0.5 * phi_ref)


# ----------------------------------------------------------------------------------------------------------
# unbiasedness, each with must-fail companions (the wrong kernel, the wrong offset)


@pytest.mark.parametrize("draws", ["iid", "orthogonal"])
def test_positive_unbiased_for_softmax_kernel(draws, seed):
    rng = np.random.default_rng(seed)
    d, m, n = 4, 8, 20000
    q, k = _points(rng, 3, d, 0.7), _points(rng, 3, d, 0.7)
    W = rng.standard_normal((n, m, d)) if draws == "iid" else draw_orthogonal_core(rng, n, m, d)
    est = per_draw_kernel(positive_features, q, k, W, 1)
    assert np.all(est > 0)
    assert_mean_within_se(est, softmax_kernel(q, k), label=f"PRF ({draws})", seed=seed)
    assert not mean_test(est, gaussian_kernel(q, k)).passed                       # must fail: wrong kernel
    est_eq9 = per_draw_kernel(gaussian_positive_features, q, k, W, 1)
    assert not mean_test(est_eq9, softmax_kernel(q, k)).passed  # must fail: wrong offset |x|^2


@pytest.mark.parametrize("draws", ["iid", "orthogonal"])
def test_kl_eq9_unbiased_for_gaussian_kernel(draws, seed):
    rng = np.random.default_rng(seed)
    d, m, n = 4, 8, 20000
    q, k = _points(rng, 3, d, 0.7), _points(rng, 3, d, 0.7)
    W = rng.standard_normal((n, m, d)) if draws == "iid" else draw_orthogonal_core(rng, n, m, d)
    est = per_draw_kernel(gaussian_positive_features, q, k, W, 1)
    assert_mean_within_se(est, gaussian_kernel(q, k), label=f"KL Eq. 9 ({draws})", seed=seed)
    assert not mean_test(est, softmax_kernel(q, k)).passed                        # must fail


def test_hyperbolic_unbiased_for_softmax_kernel(seed):
    rng = np.random.default_rng(seed)
    d, m, n = 4, 8, 20000
    q, k = _points(rng, 3, d, 0.7), _points(rng, 3, d, 0.7)
    est = per_draw_kernel(hyperbolic_features, q, k, rng.standard_normal((n, m, d)), 2)
    assert_mean_within_se(est, softmax_kernel(q, k), label="hyperbolic", seed=seed)
    assert not mean_test(est, gaussian_kernel(q, k)).passed                       # must fail


# ----------------------------------------------------------------------------------------------------------
# variance / MSE formulas (iid)


def test_variance_formulas(seed):
    """The public closed forms (positive_mse, hyperbolic_mse, gaussian_positive_mse) against Monte Carlo:
    assert_mse_matches' 5 SE of the mean squared error, the SE from the squared errors' own spread."""
    rng = np.random.default_rng(seed)
    d, m, n = 4, 4, 40000
    q, k = _points(rng, 3, d, 0.45), _points(rng, 3, d, 0.45)
    W = rng.standard_normal((n, m, d))
    est = per_draw_kernel(positive_features, q, k, W, 1)
    assert_mse_matches(est, softmax_kernel(q, k), positive_mse(q, k, m), label="positive variance", seed=seed)
    est_h = per_draw_kernel(hyperbolic_features, q, k, W, 2)
    assert_mse_matches(est_h, softmax_kernel(q, k), hyperbolic_mse(q, k, m), label="hyperbolic variance",
                       seed=seed)
    est_g = per_draw_kernel(gaussian_positive_features, q, k, W, 1)
    assert_mse_matches(est_g, gaussian_kernel(q, k), gaussian_positive_mse(q, k, m),
                       label="KL Eq. 9 variance", seed=seed)
    # must fail: each formula with a factor wrong -- the positive one without exp(2 q.k), the hyperbolic one
    # without its 1/2 (the positive map's (exp(|s|^2) - 1) / m is another wrong candidate), KL Eq. 9's
    # with the softmax map's exp(2 q.k) in place of exp(-|q - k|^2)
    qk = q @ k.T
    s2 = np.sum((q[:, None, :] + k[None, :, :]) ** 2, -1)
    assert not mean_test((est - softmax_kernel(q, k)) ** 2, (np.exp(s2) - 1) / m).passed
    assert not mean_test((est_h - softmax_kernel(q, k)) ** 2, 2 * hyperbolic_mse(q, k, m)).passed
    assert not mean_test((est_g - gaussian_kernel(q, k)) ** 2, np.exp(2 * qk) * np.expm1(s2) / m).passed


def test_hyperbolic_mse_is_the_positive_one_times_half_one_minus_exp():
    """Lemma 2's relation, exactly: hyperbolic_mse = positive_mse (1 - exp(-|q + k|^2)) / 2."""
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((4, 5)) * 0.5, rng.standard_normal((6, 5)) * 0.5
    s2 = np.sum((q[:, None, :] + k[None, :, :]) ** 2, -1)
    assert_close(hyperbolic_mse(q, k, 7), positive_mse(q, k, 7) * -np.expm1(-s2) / 2, rtol=1e-12)


def test_mse_closed_forms_array_api_and_bad_input(xp):
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 3, 4)) * 0.5, rng.standard_normal((2, 5, 4)) * 0.5
    for fn in (positive_mse, hyperbolic_mse, gaussian_positive_mse):
        got = fn(asxp(xp, q), asxp(xp, k), 8)
        assert got.shape == (2, 3, 5)
        assert_close(to_numpy(got), fn(q, k, 8), rtol=1e-12)
        with pytest.raises(ValueError, match=r"m: expected a positive integer; got -1"):
            fn(q, k, -1)
        with pytest.raises(ValueError, match=r"q: "):
            fn(q + np.nan, k, 8)


# ----------------------------------------------------------------------------------------------------------
# large inputs: the raw map overflows/underflows, the stable map does not (docs/guide/features.md)


@pytest.mark.parametrize("norm", [20.0, 60.0])
def test_stable_finite_for_large_norms_float32(norm):
    rng = np.random.default_rng(0)
    d, m = 16, 32
    x = rng.standard_normal((2, 8, d))
    x = (norm * x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
    w = draw_gaussian(rng, m, d, dtype=np.float32)
    with np.errstate(over="ignore", under="ignore"):
        raw = positive_features(x, w)
    assert np.any(raw == 0) or not np.all(np.isfinite(raw)), "the raw map should under/overflow here"
    for stable in (positive_features_stable, hyperbolic_features_stable):
        phi, ls = stable(x, w)
        assert np.all(np.isfinite(phi)) and np.all(np.isfinite(ls)) and np.all(phi.max(-1) == 1)
        # the log of the (unrepresentable) raw features agrees with a float64 evaluation
        phi64, ls64 = stable(x.astype(np.float64), w.astype(np.float64))
        keep = phi64 > 1e-30
        lhs = np.log(phi[keep]) + np.broadcast_to(ls[..., None], phi.shape)[keep]
        rhs = np.log(phi64[keep]) + np.broadcast_to(ls64[..., None], phi.shape)[keep]
        np.testing.assert_allclose(lhs, rhs, atol=2e-5 * norm ** 2)


# ----------------------------------------------------------------------------------------------------------
# gradients


def _xw(xp, rng, shape=(2, 5, 4), m=6):
    return asxp(xp, rng.standard_normal(shape) * 0.7), asxp(xp, rng.standard_normal((m, shape[-1])))


PAIRS = {
    "positive": (positive_features_fwd, positive_features_bwd),
    "kl_eq9": (gaussian_positive_features_fwd, gaussian_positive_features_bwd),
    "hyperbolic": (hyperbolic_features_fwd, hyperbolic_features_bwd),
    "positive_stable": (positive_features_stable_fwd, positive_features_stable_bwd),
    "hyperbolic_stable": (hyperbolic_features_stable_fwd, hyperbolic_features_stable_bwd),
}


@pytest.mark.parametrize("name", list(PAIRS))
def test_gradients(xp, name, rng):
    x, w = _xw(xp, rng)
    fwd, bwd = PAIRS[name]
    check_vjp(fwd, bwd, {"x": x, "omega": w})


@pytest.mark.parametrize("name", ["positive_stable", "hyperbolic_stable"])
def test_gradients_stable_query_side(xp, name, rng):
    """dlog_scale = None: the gradient of phi alone (what the query side of FAVOR+ uses)."""
    x, w = _xw(xp, rng)
    fwd, bwd = PAIRS[name]
    check_vjp(fwd, lambda c, cache: bwd((c, None), cache), {"x": x, "omega": w}, output=lambda y: y[0])


def test_gradient_check_must_fail(rng):
    x, w = (np.asarray(a) for a in _xw(np, rng))

    def bad_bwd(dout, cache):           # forgets that the row maximum moves with x
        dphi, dls = dout
        g = positive_features_stable_bwd((dphi, None), cache)
        return g._replace(x=g.x - dls[..., None] * cache.x)

    with pytest.raises(AssertionError, match="gradient for x"):
        check_vjp(positive_features_stable_fwd, bad_bwd, {"x": x, "omega": w})


# ----------------------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("fn", [positive_features, positive_features_stable, gaussian_positive_features,
                                hyperbolic_features, hyperbolic_features_stable])
def test_bad_input(fn):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 16))
    with pytest.raises(ValueError,
                       match=r"omega: expected shape \(m, d\) with .*d = 16 \(from x\); got \(64, 15\)"):
        fn(x, rng.standard_normal((64, 15)))
    with pytest.raises(ValueError, match=r"omega: expected shape \(m, d\).*got \(64,\)"):
        fn(x, rng.standard_normal(64))
    with pytest.raises(ValueError, match=r"omega: expected at least one projection row.*got \(0, 16\)"):
        fn(x, np.zeros((0, 16)))
    with pytest.raises(ValueError, match=r"omega: expected finite values"):
        fn(x, np.full((4, 16), np.inf))
    with pytest.raises(TypeError, match=r"x: expected a real floating dtype"):
        fn(np.ones((2, 16), dtype=np.int64), rng.standard_normal((4, 16)))
