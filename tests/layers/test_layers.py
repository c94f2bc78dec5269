"""nn primitives: values, gradient checks (float64, every input and parameter), errors, must-fail
companions."""

from __future__ import annotations

import math

import numpy as np
import pytest

import refattn.random as rr
from refattn.layers import activations as act
from refattn.layers.batchnorm import BatchNormState, batchnorm_bwd, batchnorm_fwd
from refattn.layers.dense import DenseGrads, DenseParams, dense, dense_bwd, dense_fwd
from refattn.layers.dropout import dropout_bwd, dropout_fwd
from refattn.layers.embeddings import (patch_embedding_bwd, patch_embedding_fwd, patchify,
                                       position_embedding_bwd,
                                  position_embedding_fwd, sinusoid_position_table, token_embedding_bwd,
                                  token_embedding_fwd, unpatchify)
from refattn.layers.layernorm import layernorm_bwd, layernorm_fwd
from refattn.layers.losses import mse_bwd, mse_fwd, softmax_cross_entropy, softmax_cross_entropy_bwd, \
    softmax_cross_entropy_fwd
from tests.helpers import asxp, randn, to_numpy
from validation import assert_close, check_vjp


def _params(xp, tree):
    return rr.tree_as_xp(tree, like=xp.zeros(1, dtype=xp.float64))


# ---- dense -------------------------------------------------------------------------------------------------
def test_dense_value_and_grad(xp, rng):
    x = randn(rng, xp, 2, 3, 4)
    p = _params(xp, rr.init_dense(rng, 4, 5))
    p = p._replace(b=randn(rng, xp, 5))
    expected = asxp(xp, to_numpy(x) @ to_numpy(p.W) + to_numpy(p.b))
    assert_close(dense(x, p), expected)
    check_vjp(dense_fwd, dense_bwd, {"x": x, "params": p})


def test_dense_must_fail(xp, rng):
    x = randn(rng, xp, 3, 4)
    p = _params(xp, rr.init_dense(rng, 4, 2))

    def bad_bwd(dy, cache):
        g = dense_bwd(dy, cache)
        return DenseGrads(x=g.x, params=DenseParams(W=g.params.W * (1 + 1e-4), b=g.params.b))

    with pytest.raises(AssertionError, match="params"):
        check_vjp(dense_fwd, bad_bwd, {"x": x, "params": p})


def test_dense_errors(xp, rng):
    p = _params(xp, rr.init_dense(rng, 4, 2))
    with pytest.raises(ValueError, match=r"x: expected shape \(\.\.\., d_in\) with d_in = 4"):
        dense(randn(rng, xp, 3, 5), p)
    with pytest.raises(TypeError, match="params: expected DenseParams"):
        dense(randn(rng, xp, 3, 4), {"W": p.W, "b": p.b})
    with pytest.raises(TypeError, match="rng: expected a numpy.random.Generator"):
        rr.init_dense(None, 4, 2)


# ---- activations -------------------------------------------------------------------------------------------
ACTS = {
    "relu": (act.relu_fwd, act.relu_bwd, {}),
    "leaky_relu": (act.leaky_relu_fwd, act.leaky_relu_bwd, {"negative_slope": 0.2}),
    "tanh": (act.tanh_fwd, act.tanh_bwd, {}),
    "gelu": (act.gelu_fwd, act.gelu_bwd, {}),
}


@pytest.mark.parametrize("name", list(ACTS))
def test_activation_grad(xp, rng, name):
    fwd, bwd, kw = ACTS[name]
    x = randn(rng, xp, 3, 7)
    x = xp.where(xp.abs(x) < 1e-3, x + 0.1, x)   # keep away from the kinks (FD would straddle them)
    check_vjp(fwd, bwd, {"x": x}, kwargs=kw)


def test_activation_values(xp):
    x = asxp(xp, [-2.0, -0.5, 0.0, 0.5, 2.0])
    xn = to_numpy(x)
    assert_close(act.relu(x), asxp(xp, np.maximum(xn, 0)), atol=0)
    assert_close(act.leaky_relu(x, negative_slope=0.1), asxp(xp, np.where(xn > 0, xn, 0.1 * xn)), atol=0)
    assert_close(act.tanh(x), asxp(xp, np.tanh(xn)), atol=0)
    # GELU tanh approximation vs the exact erf GELU: the approximation error is below 1e-3 on [-2, 2]
    from scipy.special import erf

    exact = 0.5 * xn * (1 + erf(xn / math.sqrt(2)))
    err = np.max(np.abs(to_numpy(act.gelu(x)) - exact))
    assert 0 < err < 1e-3, err


def test_gelu_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(-6, 6, 101)
    ref = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    np.testing.assert_allclose(act.gelu(x), ref, rtol=1e-14, atol=1e-15)


def test_activation_must_fail(rng):
    x = rng.standard_normal((3, 4)) + 0.5

    def bad(dy, cache):
        return act.ActivationGrads(x=act.gelu_bwd(dy, cache).x * (1 + 1e-4))

    with pytest.raises(AssertionError, match="x"):
        check_vjp(act.gelu_fwd, bad, {"x": x})


# ---- layer norm --------------------------------------------------------------------------------------------
def test_layernorm(xp, rng):
    x = randn(rng, xp, 2, 3, 6, scale=3.0) + 1.0
    p = _params(xp, rr.init_layernorm(6))
    y, _ = layernorm_fwd(x, p)
    yn = to_numpy(y)
    np.testing.assert_allclose(yn.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(yn.var(-1), 1, rtol=1e-4)   # var/(var + eps), eps = 1e-5
    p = p._replace(gamma=randn(rng, xp, 6), beta=randn(rng, xp, 6))
    check_vjp(layernorm_fwd, layernorm_bwd, {"x": x, "params": p})


# ---- batch norm --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("train", [True, False])
def test_batchnorm_grad(xp, rng, train):
    x = randn(rng, xp, 5, 3, 4, scale=2.0) + 0.5
    params, state = _params(xp, rr.init_batchnorm(4))
    params = params._replace(gamma=randn(rng, xp, 4), beta=randn(rng, xp, 4))
    state = BatchNormState(mean=randn(rng, xp, 4), var=xp.abs(randn(rng, xp, 4)) + 0.5)
    check_vjp(batchnorm_fwd, batchnorm_bwd, {"x": x, "params": params},
              kwargs={"state": state, "train": train},
              output=lambda o: o.y)


def test_batchnorm_state_explicit(xp, rng):
    x = randn(rng, xp, 8, 3) * 2.0 + 1.0
    params, state = _params(xp, rr.init_batchnorm(3))
    before = to_numpy(state.var).copy()
    out, _ = batchnorm_fwd(x, params, state, train=True, momentum=0.25)
    xn = to_numpy(x)
    np.testing.assert_array_equal(to_numpy(state.var), before)   # input state never mutated
    np.testing.assert_allclose(to_numpy(out.state.mean), 0.25 * xn.mean(0), rtol=1e-13)
    np.testing.assert_allclose(to_numpy(out.state.var), 0.75 + 0.25 * xn.var(0, ddof=1), rtol=1e-13)
    ev, _ = batchnorm_fwd(x, params, out.state, train=False)
    expected = (xn - to_numpy(out.state.mean)) / np.sqrt(to_numpy(out.state.var) + 1e-5)
    assert_close(ev.y, asxp(xp, expected))
    assert ev.state is out.state


def test_batchnorm_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((6, 4)) * 3 + 1
    params, state = rr.init_batchnorm(4)
    params = params._replace(gamma=rng.standard_normal(4), beta=rng.standard_normal(4))
    bn = torch.nn.BatchNorm1d(4, momentum=0.1, eps=1e-5).double()
    with torch.no_grad():
        bn.weight.copy_(torch.from_numpy(params.gamma))
        bn.bias.copy_(torch.from_numpy(params.beta))
    xt = torch.from_numpy(x).requires_grad_(True)
    yt = bn(xt)
    dy = rng.standard_normal((6, 4))
    yt.backward(torch.from_numpy(dy))
    out, cache = batchnorm_fwd(x, params, state, train=True)
    g = batchnorm_bwd(dy, cache)
    np.testing.assert_allclose(out.y, yt.detach().numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out.state.var, bn.running_var.numpy(), rtol=1e-13)
    np.testing.assert_allclose(g.x, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g.params.gamma, bn.weight.grad.numpy(), rtol=1e-12)


def test_batchnorm_errors(xp, rng):
    params, state = _params(xp, rr.init_batchnorm(3))
    with pytest.raises(ValueError, match="at least 2 rows"):
        batchnorm_fwd(randn(rng, xp, 1, 3), params, state, train=True)
    with pytest.raises(ValueError, match="train: expected one of True, False"):
        batchnorm_fwd(randn(rng, xp, 4, 3), params, state, train="yes")
    with pytest.raises(ValueError, match=r"state.mean: expected shape \(d\) with d = 2"):
        batchnorm_fwd(randn(rng, xp, 4, 2), params._replace(gamma=params.gamma[:2], beta=params.beta[:2]),
                      state, train=True)


# ---- dropout -----------------------------------------------------------------------------------------------
def test_dropout(xp, rng):
    x = randn(rng, xp, 4, 5)
    mask = rr.as_xp(rr.draw_dropout_mask(rng, (4, 5), 0.3), like=x)
    m = to_numpy(mask)
    assert set(np.unique(m)) <= {0.0, 1 / 0.7}
    check_vjp(dropout_fwd, dropout_bwd, {"x": x, "mask": mask})
    with pytest.raises(ValueError, match="draw_dropout_mask"):
        dropout_fwd(x, None)
    with pytest.raises(ValueError, match=r"rate: expected a dropout probability in \[0, 1\)"):
        rr.draw_dropout_mask(rng, (2,), 1.0)


def test_dropout_mask_unbiased(rng):
    from validation import assert_mean_within_se

    masks = rr.draw_dropout_mask(rng, (4000, 8), 0.25)
    assert_mean_within_se(masks, np.ones(8), n_se=5)
    with pytest.raises(AssertionError):   # must fail: a non-inverted mask (keep = 1) has mean 0.75
        assert_mean_within_se((masks > 0).astype(float), np.ones(8), n_se=5)


# ---- embeddings --------------------------------------------------------------------------------------------
def test_token_embedding(xp, rng):
    table = _params(xp, rr.init_embedding(rng, 7, 3, scale=1.0))
    ids = xp.asarray(np.array([[0, 6, 2, 2], [5, 5, 1, 0]]))
    y = token_embedding_fwd(ids, table)[0]
    assert_close(y, asxp(xp, to_numpy(table)[to_numpy(ids)]), atol=0, rtol=0)
    check_vjp(token_embedding_fwd, token_embedding_bwd, {"table": table}, kwargs={"ids": ids})
    with pytest.raises(ValueError, match=r"ids: expected token indices in \[0, 7\)"):
        token_embedding_fwd(xp.asarray(np.array([7])), table)


def test_patch_embedding(xp, rng):
    images = randn(rng, xp, 2, 4, 6, 3)
    t = patchify(images, 2)
    assert tuple(t.shape) == (2, 6, 12)
    im = to_numpy(images)
    np.testing.assert_array_equal(to_numpy(t)[1, 4], im[1, 2:4, 2:4, :].ravel())   # patch (row 1, col 1)
    assert_close(unpatchify(t, 2, (4, 6, 3)), images, rtol=0)
    p = _params(xp, rr.init_dense(rng, 12, 5))
    check_vjp(patch_embedding_fwd, patch_embedding_bwd, {"images": images, "params": p}, kwargs={"patch": 2})
    p1 = _params(xp, rr.init_dense(rng, 3, 5))
    check_vjp(patch_embedding_fwd, patch_embedding_bwd, {"images": images, "params": p1}, kwargs={"patch": 1})
    with pytest.raises(ValueError, match=r"patch: expected a divisor of the image height and width \(4, 6\)"):
        patchify(images, 4)


def test_positions(xp, rng):
    like = xp.zeros(1, dtype=xp.float64)
    P = to_numpy(sinusoid_position_table(5, 6, like=like))
    pos, i = np.arange(5)[:, None], np.arange(3)[None, :]
    np.testing.assert_allclose(P[:, 0::2], np.sin(pos / 10000 ** (2 * i / 6)), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(P[:, 1::2], np.cos(pos / 10000 ** (2 * i / 6)), rtol=1e-14, atol=1e-15)
    x = randn(rng, xp, 2, 3, 6)
    table = randn(rng, xp, 5, 6)
    check_vjp(position_embedding_fwd, position_embedding_bwd, {"x": x, "table": table})
    with pytest.raises(ValueError, match="exceeds the position table's L_max = 2"):
        position_embedding_fwd(x, table[:2, :])


# ---- losses ------------------------------------------------------------------------------------------------
def test_cross_entropy(xp, rng):
    logits = randn(rng, xp, 3, 4, 5, scale=2.0)
    labels = xp.asarray(rng.integers(0, 5, size=(3, 4)))
    z, lab = to_numpy(logits), to_numpy(labels)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    expected = -np.take_along_axis(logp, lab[..., None], -1).mean()
    assert_close(softmax_cross_entropy(logits, labels), asxp(xp, expected))
    check_vjp(softmax_cross_entropy_fwd, softmax_cross_entropy_bwd, {"logits": logits},
              kwargs={"labels": labels})
    big = logits * 1e3   # stabilised: finite at large logits
    assert math.isfinite(float(softmax_cross_entropy(big, labels)))
    with pytest.raises(ValueError, match=r"labels: expected class indices in \[0, 5\)"):
        softmax_cross_entropy(logits, labels + 5)
    with pytest.raises(TypeError, match="labels: expected an integer array"):
        softmax_cross_entropy(logits, xp.astype(labels, xp.float64))


def test_mse(xp, rng):
    a, b = randn(rng, xp, 3, 4), randn(rng, xp, 3, 4)
    assert_close(mse_fwd(a, b)[0], asxp(xp, np.mean((to_numpy(a) - to_numpy(b)) ** 2)))
    check_vjp(mse_fwd, mse_bwd, {"pred": a, "target": b})
