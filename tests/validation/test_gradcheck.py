"""The gradient check itself: it passes on a correct pair and fails on each kind of wrong backward."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from validation import check_vjp, jacobian_fd


class PairGrads(NamedTuple):
    x: np.ndarray
    params: dict


def pair_fwd(x, params):
    """y = tanh(x W) + b, a nested-parameter pair."""
    h = x @ params["W"]
    y = np.tanh(h) + params["b"]
    return y, (x, params, h)


def pair_bwd(dy, cache):
    x, params, h = cache
    dh = dy * (1 - np.tanh(h) ** 2)
    return PairGrads(x=dh @ params["W"].T, params={"W": x.T @ dh, "b": dy.sum(0)})


@pytest.fixture
def args(rng):
    return dict(
        x=rng.standard_normal((5, 3)), params={"W": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}
    )


def test_passes_on_correct_pair(args):
    worst = check_vjp(pair_fwd, pair_bwd, args)
    assert set(worst) == {"x", "params['W']", "params['b']", "params", "x+params"}
    assert max(worst.values()) < 1e-8


@pytest.mark.parametrize("which, factor", [("x", 1 + 1e-4), ("W", 1 + 1e-4), ("b", 0.0)])
def test_catches_wrong_gradient(args, which, factor):
    def bad(dy, cache):
        g = pair_bwd(dy, cache)
        if which == "x":
            return g._replace(x=g.x * factor)
        p = dict(g.params)
        p[which] = p[which] * factor
        return g._replace(params=p)

    with pytest.raises(
        AssertionError, match="gradient for " + ("x" if which == "x" else f"params\\['{which}'\\]")
    ):
        check_vjp(pair_fwd, bad, args)


def test_catches_missing_and_misshaped_gradient(args):
    with pytest.raises(AssertionError, match="no gradient for 'x'"):
        check_vjp(pair_fwd, lambda dy, c: PairGrads(x=None, params=pair_bwd(dy, c).params), args)
    with pytest.raises(AssertionError, match="has shape"):
        check_vjp(pair_fwd, lambda dy, c: pair_bwd(dy, c)._replace(x=np.zeros((3, 5))), args)


def test_rejects_float32(args):
    args["x"] = args["x"].astype(np.float32)
    with pytest.raises(TypeError, match="must be float64"):
        check_vjp(pair_fwd, pair_bwd, args)


def test_jacobian_fd_matches_analytic(rng):
    x = rng.standard_normal(4)
    J = jacobian_fd(np.tanh, x)
    np.testing.assert_allclose(J, np.diag(1 - np.tanh(x) ** 2), atol=1e-9)


def test_small_wrong_leaf_cannot_hide_behind_large_ones(rng):
    """A 1e-4 relative error in a tiny leaf (b scaled down) next to a large W is still caught."""
    args = dict(x=rng.standard_normal((5, 3)),
                params={"W": 100.0 * rng.standard_normal((3, 4)), "b": 1e-3 * rng.standard_normal(4)})

    def bad(dy, cache):
        g = pair_bwd(dy, cache)
        return g._replace(params={"W": g.params["W"], "b": g.params["b"] * (1 + 1e-4)})

    with pytest.raises(AssertionError, match=r"gradient for params\['b'\]"):
        check_vjp(pair_fwd, bad, args)


def test_alone_selects_the_leaves_with_their_own_directions(rng):
    """`alone` decides which leaves get their own directions: a 3e-5 error in the gradient of b, about a
    hundred times smaller than W's (inputs x 100, W x 0.01: tanh stays near its linear range), is caught
    when b is selected and hides behind W's share of the joint tolerance when it is not (the joint
    directions still move b)."""
    args = dict(x=100.0 * rng.standard_normal((5, 3)),
                params={"W": 0.01 * rng.standard_normal((3, 4)), "b": rng.standard_normal(4)})

    def bad(dy, cache):
        g = pair_bwd(dy, cache)
        return g._replace(params={"W": g.params["W"], "b": g.params["b"] * (1 + 3e-5)})

    with pytest.raises(AssertionError, match=r"gradient for params\['b'\]"):
        check_vjp(pair_fwd, bad, args, alone=lambda name, path: path == "b")
    worst = check_vjp(pair_fwd, bad, args, alone=lambda name, path: path == "W")
    assert "params['W']" in worst and "params['b']" not in worst and "params" in worst
