"""Generative spectra (KL Eqs. 7-8, 11): the generator MLP against a NumPy forward, train/eval batch-norm
semantics, unbiasedness in evaluation mode against a large-sample Monte Carlo of the same generator, gradients
for x, noise and every generator weight (dense and batch norm), bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.features.generative import (
    generative_prf_features, generative_prf_features_bwd, generative_prf_features_fwd,
    generative_prf_features_stable, generative_prf_features_stable_bwd, generative_prf_features_stable_fwd,
    generative_rks_features, generative_rks_features_bwd, generative_rks_features_fwd)
from refattn.features.generator_network import (
    GeneratorParams, GeneratorState, generator, generator_bwd, generator_fwd, generator_param_count)
from refattn.features.positive import gaussian_positive_features
from refattn.random import draw_generator_noise, init_generator
from refattn.random import tree_as_xp
from tests.helpers import asxp
from validation import assert_close, assert_mean_within_se, check_vjp, mean_test


def _numpy_generator(noise, params, state, train, slope=0.01, eps=1e-5):
    h = noise
    for dp, bp, bs in zip(params.hidden, params.norms, state.norms, strict=True):
        z = h @ dp.W + dp.b
        if train:
            mean, var = z.mean(0), z.var(0)
        else:
            mean, var = bs.mean, bs.var
        y = bp.gamma * (z - mean) / np.sqrt(var + eps) + bp.beta
        h = np.where(y > 0, y, slope * y)
    return np.tanh(h @ params.out.W + params.out.b)


@pytest.mark.parametrize("train", [True, False])
def test_generator_matches_numpy(xp, rng, train):
    params, state = init_generator(rng, 4, d_noise=3, width=6)
    if not train:   # non-trivial running statistics
        state = GeneratorState(tuple(s._replace(mean=0.1 * rng.standard_normal(6), var=0.5 + rng.random(6))
                                     for s in state.norms))
    noise = draw_generator_noise(rng, 10, 3)
    x = asxp(xp, noise)
    out = generator(x, tree_as_xp(params, like=x), tree_as_xp(state, like=x), train=train)
    assert_close(out.omega, asxp(xp, _numpy_generator(noise, params, state, train)), rtol=1e-12, atol=1e-14)
    assert out.omega.shape == (10, 4)


def test_state_semantics_and_eval_rows_are_independent(rng):
    params, state = init_generator(rng, 4)
    noise = draw_generator_noise(rng, 16, 4)
    out_t = generator(noise, params, state, train=True)
    assert not np.allclose(out_t.state.norms[0].mean, state.norms[0].mean)    # running stats updated ...
    np.testing.assert_array_equal(state.norms[0].mean, np.zeros(4))          # ... and the input not mutated
    out_e = generator(noise, params, out_t.state, train=False)
    assert out_e.state is out_t.state
    # evaluation mode: each frequency depends on its own noise row only (iid draws of g(rho_0))
    np.testing.assert_allclose(generator(noise[:5], params, out_t.state, train=False).omega, out_e.omega[:5],
                               rtol=1e-13)
    # training mode: rows are coupled through the batch statistics
    assert not np.allclose(generator(noise[:5], params, state, train=True).omega, out_t.omega[:5])
    assert np.all(np.abs(out_t.omega) <= 1.0)


def test_param_count_is_the_papers_5d2_plus_5d(rng):
    for d in (4, 16, 64):
        params, _ = init_generator(rng, d)
        n = generator_param_count(params)
        assert n["dense"] == 5 * d * d + 5 * d and n["batchnorm"] == 8 * d


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


@pytest.mark.parametrize("train", [True, False])
def test_generator_gradients(rng, train):
    params, state, noise, _ = _setup(rng)
    check_vjp(generator_fwd, generator_bwd, {"noise": noise, "params": params},
              kwargs={"state": state, "train": train}, output=lambda o: o.omega)


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
    with pytest.raises(TypeError, match="params: expected GeneratorParams"):
        generator(noise, tuple(params), state, train=True)
    with pytest.raises(TypeError, match="state: expected GeneratorState"):
        generator(noise, params, state.norms, train=True)
    with pytest.raises(ValueError, match="expected as many dense layers as batch norms"):
        generator(noise, params._replace(norms=params.norms[:3]), state, train=True)
    with pytest.raises(ValueError, match=r"noise: expected shape \(M, d_noise\)"):
        generator(noise[0], params, state, train=True)
    with pytest.raises(ValueError, match="training-mode batch norm needs at least 2 rows"):
        generator(noise[:1], params, state, train=True)
    with pytest.raises(ValueError, match="train: expected one of"):
        generator(noise, params, state, train="yes")
    bad = noise.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="noise: expected finite values"):
        generator(bad, params, state, train=False)
    with pytest.raises(ValueError, match=r"omega: expected shape \(m, d\) with .*d = 5 \(from x\)"):
        generative_rks_features(rng.standard_normal((2, 5)), noise, params, state, train=False)
    with pytest.raises(TypeError, match="rng"):
        init_generator(None, 3)


def test_generator_fwd_names_the_layer_of_a_bad_parameter():
    """generator_fwd checks its trees once and names the layer: a wrong container type, a non-finite weight,
    a negative running variance."""
    from refattn.features.generator_network import generator_fwd
    from refattn.random import init_generator

    rng = np.random.default_rng(0)
    p, s = init_generator(rng, 4, dtype=np.float64)
    noise = rng.standard_normal((6, 4))
    with pytest.raises(TypeError, match=r"^params.hidden\[0\]: expected DenseParams; got tuple"):
        generator_fwd(noise, p._replace(hidden=(tuple(p.hidden[0]),) + p.hidden[1:]), s, train=True)
    with pytest.raises(TypeError, match=r"^state.norms\[0\]: expected BatchNormState"):
        generator_fwd(noise, p, s._replace(norms=((1, 2),) + s.norms[1:]), train=True)
    W = p.hidden[1].W.copy()
    W[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"^params.hidden\[1\].W: expected finite values"):
        generator_fwd(noise, p._replace(hidden=(p.hidden[0], p.hidden[1]._replace(W=W)) + p.hidden[2:]), s,
                      train=True)
    var = s.norms[0].var.copy()
    var[0] = -1.0
    with pytest.raises(ValueError, match=r"state.var: expected a non-negative running variance"):
        generator_fwd(noise, p, s._replace(norms=(s.norms[0]._replace(var=var),) + s.norms[1:]), train=False)
