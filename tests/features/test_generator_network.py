"""The generator network of the generative spectra (KL Eq. 7): against a NumPy forward, train/eval batch-norm
semantics (state returned, never mutated; evaluation rows independent), the paper's parameter count, gradients
of the noise and every weight, bad inputs naming the layer."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.features.generator_network import (
    GeneratorState, generator, generator_bwd, generator_fwd, generator_param_count)
from refattn.random import draw_generator_noise, init_generator
from refattn.random import tree_as_xp
from tests.features.test_generative import _setup
from tests.helpers import asxp
from validation import assert_close, check_vjp


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


@pytest.mark.parametrize("train", [True, False])
def test_generator_gradients(rng, train):
    params, state, noise, _ = _setup(rng)
    check_vjp(generator_fwd, generator_bwd, {"noise": noise, "params": params},
              kwargs={"state": state, "train": train}, output=lambda o: o.omega)


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


def test_generator_fwd_names_the_layer_of_a_bad_parameter():
    """generator_fwd checks its trees once and names the layer: a wrong container type, a non-finite weight,
    a negative running variance."""
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
