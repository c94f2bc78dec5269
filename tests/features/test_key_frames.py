"""Per-feature key frames: the keys' map with a column (or prefix) maximum per feature, and the query map with
the key frame folded in. Identities against the raw maps, prefix-only frames, and gradient checks."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.features.hyperbolic import (
    hyperbolic_features, hyperbolic_features_stable_bwd, hyperbolic_features_stable_fwd,
    hyperbolic_key_features_stable_bwd, hyperbolic_key_features_stable_fwd)
from refattn.features.key_frames import (
    positive_key_features_stable, positive_key_features_stable_bwd, positive_key_features_stable_fwd)
from refattn.features.positive import (
    positive_features, positive_features_stable, positive_features_stable_bwd, positive_features_stable_fwd)
from tests.helpers import asxp, to_numpy
from validation import check_vjp


def _xw(xp, rng, shape=(2, 7, 4), m=5, scale=0.7):
    return asxp(xp, rng.standard_normal(shape) * scale), asxp(xp, rng.standard_normal((m, shape[-1])))


@pytest.mark.parametrize("causal", [False, True])
def test_key_map_identity_and_frames(xp, dtype, rng, causal):
    x, w = _xw(xp, rng)
    x, w = xp.astype(x, dtype), xp.astype(w, dtype)
    phi, kls = positive_key_features_stable(x, w, causal=causal)
    phi, kls = to_numpy(phi), to_numpy(kls)
    raw = to_numpy(positive_features(x, w))
    assert kls.shape == ((2, 7, 5) if causal else (2, 1, 5))
    tol = 1e-5 if dtype == xp.float32 else 1e-12
    np.testing.assert_allclose(phi * np.exp(kls), raw, rtol=tol)
    assert np.all(phi <= 1)
    xn, wn = to_numpy(x).astype(np.float64), to_numpy(w).astype(np.float64)
    ell = xn @ wn.T - 0.5 * np.sum(xn * xn, -1, keepdims=True)
    P = np.maximum.accumulate(ell, axis=-2) if causal else ell.max(-2, keepdims=True)
    np.testing.assert_allclose(kls, P - 0.5 * np.log(5), rtol=tol, atol=tol)


def test_causal_key_frames_are_prefix_only(xp, rng):
    """Appending keys with larger exponents (equal to a row of omega: l = |omega_2|^2 / 2 in feature 2, its
    largest possible value) leaves the prefix's features and frames unchanged bitwise."""
    x, w = _xw(xp, rng, shape=(1, 9, 4))
    w = 3.0 * w
    wn = to_numpy(w)
    late = np.broadcast_to(wn[2], (1, 4, 4))
    x_long = xp.concat([x, asxp(xp, late.copy())], axis=-2)
    phi0, kls0 = positive_key_features_stable(x, w, causal=True)
    phi1, kls1 = positive_key_features_stable(x_long, w, causal=True)
    assert np.array_equal(to_numpy(phi1)[..., :9, :], to_numpy(phi0))
    assert np.array_equal(to_numpy(kls1)[..., :9, :], to_numpy(kls0))
    # a column maximum over all positions would not be prefix-only: the bidirectional frame moves
    _, b0 = positive_key_features_stable(x, w)
    _, b1 = positive_key_features_stable(x_long, w)
    assert to_numpy(b1)[0, 0, 2] > to_numpy(b0)[0, 0, 2] + 1.0


@pytest.mark.parametrize("frame_rows", ["one", "per_position"])
def test_query_map_with_folded_frame(xp, rng, frame_rows):
    x, w = _xw(xp, rng)
    F = 1 if frame_rows == "one" else 7
    frame = asxp(xp, rng.standard_normal((2, F, 5)) * 30.0)
    phi, ls = positive_features_stable(x, w, k_log_scale=frame)
    phi, ls, fr = to_numpy(phi), to_numpy(ls), to_numpy(frame)
    raw = to_numpy(positive_features(x, w))
    np.testing.assert_allclose(phi * np.exp(ls[..., None] - fr), raw, rtol=1e-10)
    assert np.all(phi.max(-1) == 1)
    fr2 = asxp(xp, np.concatenate([fr, fr], -1))
    ph, lh = (to_numpy(a) for a in hyperbolic_features_stable_fwd(x, w, k_log_scale=fr2)[0])
    np.testing.assert_allclose(ph * np.exp(lh[..., None] - np.concatenate([fr, fr], -1)),
                               to_numpy(hyperbolic_features(x, w)), rtol=1e-10)


def test_frame_shape_errors(rng):
    x, w = _xw(np, rng)
    with pytest.raises(ValueError, match=r"k_log_scale: expected shape \(\.\.\., 1, m\) \(one frame\) or "
                                         r"\(\.\.\., L, m\) with L = 7"):
        positive_features_stable(x, w, k_log_scale=np.zeros((2, 3, 5)))
    with pytest.raises(ValueError, match=r"k_log_scale: expected shape \(\.\.\., F, m\) with .*m = 5"):
        positive_features_stable(x, w, k_log_scale=np.zeros((2, 1, 4)))
    with pytest.raises(ValueError, match=r"k_log_scale: expected finite values"):
        positive_features_stable(x, w, k_log_scale=np.full((2, 1, 5), np.inf))
    with pytest.raises(TypeError, match=r"causal: expected a bool"):
        positive_key_features_stable(x, w, causal=1)


# ----------------------------------------------------------------------------------------------------------
# gradients (float64, central differences; every input)


@pytest.mark.parametrize("causal", [False, True])
def test_key_map_gradients(xp, rng, causal):
    x, w = _xw(xp, rng)
    check_vjp(lambda x, omega: positive_key_features_stable_fwd(x, omega, causal=causal),
              positive_key_features_stable_bwd, {"x": x, "omega": w})


@pytest.mark.parametrize("causal", [False, True])
def test_hyperbolic_key_map_gradients(rng, causal):
    x, w = _xw(np, rng)
    check_vjp(lambda x, omega: hyperbolic_key_features_stable_fwd(x, omega, causal=causal),
              hyperbolic_key_features_stable_bwd, {"x": x, "omega": w})


@pytest.mark.parametrize("frame_rows", [1, 7])
def test_query_map_with_frame_gradients(xp, rng, frame_rows):
    x, w = _xw(xp, rng)
    frame = asxp(xp, rng.standard_normal((2, frame_rows, 5)))
    check_vjp(lambda x, omega, k_log_scale: positive_features_stable_fwd(x, omega, k_log_scale=k_log_scale),
              positive_features_stable_bwd, {"x": x, "omega": w, "k_log_scale": frame})
    frame2 = asxp(xp, rng.standard_normal((2, frame_rows, 10)))
    check_vjp(lambda x, omega, k_log_scale: hyperbolic_features_stable_fwd(x, omega, k_log_scale=k_log_scale),
              hyperbolic_features_stable_bwd, {"x": x, "omega": w, "k_log_scale": frame2})


@pytest.mark.parametrize("causal", [False, True])
def test_key_map_gradient_check_must_fail(rng, causal):
    """A backward that forgets what the maximiser carries (dl = g only) is caught."""
    x, w = _xw(np, rng)

    def bad_bwd(dout, cache):
        dphi, _ = dout
        g = positive_key_features_stable_bwd((dphi, None), cache)
        good = positive_key_features_stable_bwd(dout, cache)
        return g._replace(omega=good.omega)            # x's gradient misses the routed dk_log_scale

    with pytest.raises(AssertionError, match="gradient for x"):
        check_vjp(lambda x, omega: positive_key_features_stable_fwd(x, omega, causal=causal), bad_bwd,
                  {"x": x, "omega": w})
