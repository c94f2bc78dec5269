"""Generative spectra (KL Eqs. 8, 11): unbiasedness in evaluation mode against a large-sample Monte Carlo of
the same generator, gradients for x, noise and every generator weight (dense and batch norm), bad inputs. The
generator itself: tests/features/test_generator_network.py."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.features.generative import (
    generative_prf_features, generative_prf_features_bwd, generative_prf_features_fwd,
    generative_prf_features_stable, generative_prf_features_stable_bwd, generative_prf_features_stable_fwd,
    generative_rks_features, generative_rks_features_bwd, generative_rks_features_fwd)
from refattn.features.generator_network import GeneratorParams, generator
from refattn.features.positive import gaussian_positive_features
from refattn.random import draw_generator_noise, init_generator
from validation import assert_mean_within_se, check_vjp, mean_test


def _trained_state(rng, params, state, d_noise):
    """Running statistics after a few training-mode passes (evaluation mode is then non-trivial)."""
    for _ in range(20):
        state = generator(draw_generator_noise(rng, 64, d_noise), params, state, train=True).state
    return state


@pytest.mark.parametrize("kind", ["rks", "prf"])
def test_eval_mode_unbiased_for_the_generators_kernel(rng, kind):
    d, M, n, big = 3, 8, 4000, 400_000
    params, state = init_generator(rng, d)
    state = _trained_state(rng, params, state, d)
    q, k = 0.8 * rng.standard_normal((2, d)), 0.8 * rng.standard_normal((2, d))
    fmap = generative_rks_features if kind == "rks" else generative_prf_features
    noise = draw_generator_noise(rng, n * M, d)
    pq = fmap(q, noise, params, state, train=False).phi
    pk = fmap(k, noise, params, state, train=False).phi
    parts = 2 if kind == "rks" else 1
    a, b = pq.reshape(2, parts, n, M), pk.reshape(2, parts, n, M)
    est = np.einsum("ipbj,kpbj->bik", a, b) * n                               # (n, Lq, Lk) replicates
    # reference: the same generator's kernel from 100 x more frequencies (its SE is ~1/10 of the test's)
    omega = generator(draw_generator_noise(rng, big, d), params, state, train=False).omega
    if kind == "rks":
        ref = np.cos((q[:, None, :] - k[None, :, :]) @ omega.T).mean(-1)
        gauss = np.exp(-0.5 * ((q[:, None] - k[None]) ** 2).sum(-1))
    else:
        ref = gaussian_positive_features(q, omega) @ gaussian_positive_features(k, omega).T
        gauss = np.exp(-0.5 * ((q[:, None] - k[None]) ** 2).sum(-1))
    assert_mean_within_se(est, ref, label=f"Generative-{kind}")
    # must fail: the Gaussian kernel (omega ~ N(0, I)), which the bounded tanh frequencies do not estimate
    assert not mean_test(est, gauss).passed


# ------------------------------------------------------------------------------------------------------------
# gradients


def _setup(rng, d=3, M=6):
    params, state = init_generator(rng, d, width=5)
    state = _trained_state(rng, params, state, d)
    return params, state, draw_generator_noise(rng, M, d), 0.5 * rng.standard_normal((2, 3, d))


def _leaf_split(fwd, bwd, params):
    """Each generator weight as its own argument (checked on its own scale)."""
    names = []
    for i in range(len(params.hidden)):
        names += [(f"W{i}", ("hidden", i, "W")), (f"b{i}", ("hidden", i, "b")),
                  (f"gamma{i}", ("norms", i, "gamma")), (f"beta{i}", ("norms", i, "beta"))]
    names += [("W_out", ("out", "W")), ("b_out", ("out", "b"))]

    def get(tree, path):
        for p in path:
            tree = tree[p] if isinstance(p, int) else getattr(tree, p)
        return tree

    def build(leaves):
        hidden = tuple(dp._replace(W=leaves[f"W{i}"], b=leaves[f"b{i}"])
                       for i, dp in enumerate(params.hidden))
        norms = tuple(bp._replace(gamma=leaves[f"gamma{i}"], beta=leaves[f"beta{i}"])
                      for i, bp in enumerate(params.norms))
        return GeneratorParams(hidden, norms, params.out._replace(W=leaves["W_out"], b=leaves["b_out"]))

    def f(x, noise, **leaves):
        return fwd(x, noise, build(leaves), _STATE[0], train=True)

    def b(dy, cache):
        g = bwd(dy, cache)
        return {"x": g.x, "noise": g.noise, **{n: get(g.params, p) for n, p in names}}

    return f, b, {n: get(params, p) for n, p in names}


_STATE = [None]


@pytest.mark.parametrize("kind", ["rks", "prf", "prf_stable"])
def test_feature_gradients_every_weight(rng, kind):
    params, state, noise, x = _setup(rng)
    _STATE[0] = state
    if kind == "rks":
        fwd, bwd, out = generative_rks_features_fwd, generative_rks_features_bwd, (lambda o: o.phi)
    elif kind == "prf":
        fwd, bwd, out = generative_prf_features_fwd, generative_prf_features_bwd, (lambda o: o.phi)
    else:
        fwd, bwd, out = (generative_prf_features_stable_fwd, generative_prf_features_stable_bwd,
                         (lambda o: o[:2]))
    f, b, leaves = _leaf_split(fwd, bwd, params)
    errs = check_vjp(f, b, {"x": x, "noise": noise, **leaves}, output=out)
    assert {"gamma0", "beta3", "W_out", "noise", "x"} <= set(errs)


def test_gradient_check_catches_a_wrong_batchnorm_gradient(rng):
    params, state, noise, x = _setup(rng)
    _STATE[0] = state
    f, b, leaves = _leaf_split(generative_rks_features_fwd, generative_rks_features_bwd, params)

    def bad(dy, cache):
        g = b(dy, cache)
        g["gamma1"] = g["gamma1"] * (1 + 1e-4)
        return g

    with pytest.raises(AssertionError, match="gamma1"):
        check_vjp(f, bad, {"x": x, "noise": noise, **leaves}, output=lambda o: o.phi)


def test_stable_prf_equals_raw(rng):
    params, state, noise, x = _setup(rng)
    phi, ls, st = generative_prf_features_stable(x, noise, params, state, train=False)
    raw = generative_prf_features(x, noise, params, state, train=False).phi
    np.testing.assert_allclose(phi * np.exp(ls)[..., None], raw, rtol=1e-12)
    big = 50.0 * x / np.linalg.norm(x, axis=-1, keepdims=True)
    phi_b, ls_b, _ = generative_prf_features_stable(big, noise, params, state, train=False)
    assert np.all(np.isfinite(phi_b)) and np.all(np.isfinite(ls_b)) and np.all(phi_b > 0)


# ------------------------------------------------------------------------------------------------------------
# bad inputs


def test_bad_inputs(rng):
    params, state = init_generator(rng, 3)
    noise = draw_generator_noise(rng, 4, 3)
    with pytest.raises(ValueError, match=r"omega: expected shape \(m, d\) with .*d = 5 \(from x\)"):
        generative_rks_features(rng.standard_normal((2, 5)), noise, params, state, train=False)
    with pytest.raises(TypeError, match="rng"):
        init_generator(None, 3)
