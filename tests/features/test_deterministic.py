"""Deterministic feature maps (elu + 1, relu + eps): formulas, positivity, linear attention with them is
exactly kernel attention with the kernel they define (both modes), gradients, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from refattn import kernel_attention, linear_attention
from refattn.features import (
    elu_features,
    elu_features_bwd,
    elu_features_fwd,
    elu_kernel,
    relu_features,
    relu_features_bwd,
    relu_features_fwd,
    relu_kernel,
)
from tests.helpers import asxp, to_numpy
from validation import assert_close, check_vjp


def test_formulas(xp, dtype, rng):
    xn = rng.standard_normal((2, 5, 4))
    x = asxp(xp, xn, dtype)
    elu = np.where(xn > 0, xn + 1, np.exp(xn))
    assert_close(elu_features(x), asxp(xp, elu, dtype))
    assert_close(relu_features(x), asxp(xp, np.maximum(xn, 0) + 1e-3, dtype))
    assert_close(relu_features(x, eps=0.0), asxp(xp, np.maximum(xn, 0), dtype), atol=0)
    assert np.all(to_numpy(elu_features(x)) > 0) and np.all(to_numpy(relu_features(x)) > 0)


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("name", ["elu", "relu"])
def test_linear_equals_kernel_attention(xp, causal, name, rng):
    fmap, kern = {"elu": (elu_features, elu_kernel), "relu": (relu_features, relu_kernel)}[name]
    q, k, v = (asxp(xp, rng.standard_normal((2, 9, 4))) for _ in range(3))
    assert_close(linear_attention(fmap(q), fmap(k), v, causal=causal, chunk_size=4),
                 kernel_attention(q, k, v, kern, causal=causal), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("pair",
                         [(elu_features_fwd, elu_features_bwd), (relu_features_fwd, relu_features_bwd)],
                         ids=["elu", "relu"])
def test_gradients(xp, pair, rng):
    xn = rng.standard_normal((2, 5, 4))
    xn[np.abs(xn) < 1e-3] = 0.5          # keep finite differences away from the kink of relu / elu at 0
    check_vjp(pair[0], pair[1], {"x": asxp(xp, xn)})


def test_gradient_check_must_fail(rng):
    x = rng.standard_normal((3, 4))

    def bad_bwd(dphi, cache):
        g = elu_features_bwd(dphi, cache)
        return g._replace(x=g.x * (1 + 1e-4))

    with pytest.raises(AssertionError, match="gradient for x"):
        check_vjp(elu_features_fwd, bad_bwd, {"x": x})


def test_bad_input():
    with pytest.raises(ValueError, match=r"x: expected finite values"):
        elu_features(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match=r"x: expected shape \(\.\.\., L, d\)"):
        relu_features(np.ones(3))
    with pytest.raises(ValueError, match=r"eps: expected a non-negative number; got -1"):
        relu_features(np.ones((2, 3)), eps=-1)
    with pytest.raises(TypeError, match=r"x: expected a real floating dtype"):
        elu_features(np.ones((2, 3), dtype=np.int32))
