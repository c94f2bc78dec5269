"""``omega_grad=False`` in the rpe backwards (S1, S2, FLT with FAVOR+ features), used by the model kinds whose
omega is drawn: every other gradient is unchanged to the last bit and omega's is not computed (``None``); the
default still returns it."""

import numpy as np
import pytest

from refattn.random import draw_flt_noise, draw_gaussian
from refattn.rpe import (flt_attention_bwd, flt_attention_fwd, s1_attention_bwd, s1_attention_fwd,
                         s2_attention_bwd, s2_attention_fwd)
from refattn.tree import tree_paths
from tests.rpe.test_flt import cases
from tests.rpe.test_s1_rotation import _params, _positions
from tests.rpe.test_s2_clipped import _inputs


def _assert_same_except_omega(full, lean):
    assert lean.omega is None and full.omega is not None
    a = dict(tree_paths(full._replace(omega=None)))
    b = dict(tree_paths(lean))
    assert a.keys() == b.keys() and a
    for path in a:
        np.testing.assert_array_equal(a[path], b[path], err_msg=path)


@pytest.mark.parametrize("causal", [False, True])
def test_s1(rng, causal):
    A, S, d = 2, 2, 3
    p = _params(rng, np, A=A, S=S, batch=(3,))
    q, k, v = rng.standard_normal((3, 2, 3, 6, d))
    omega = draw_gaussian(rng, 8, d + 2 * A * S)
    y, c = s1_attention_fwd(q, k, v, _positions(np, 6, A), p, omega=omega, causal=causal)
    dy = rng.standard_normal(y.shape)
    _assert_same_except_omega(s1_attention_bwd(dy, c), s1_attention_bwd(dy, c, omega_grad=False))


def test_s2(rng):
    q, v, w, omega = _inputs(rng, np, 11, None, 3)
    y, c = s2_attention_fwd(q, v, w, k=3, omega=omega)
    dy = rng.standard_normal(y.shape)
    _assert_same_except_omega(s2_attention_bwd(dy, c), s2_attention_bwd(dy, c, omega_grad=False))


@pytest.mark.parametrize("causal", [False, True])
def test_flt(rng, causal):
    spec, prop = cases(1)["shifted-gauss"]
    q, k, v = (rng.standard_normal((2, 6, 4)) * 0.5 for _ in range(3))
    pos = np.arange(6)[:, None]
    eps, omega = draw_flt_noise(rng, 3, 1), draw_gaussian(rng, 7, 6 + 4)
    y, c = flt_attention_fwd(q, k, v, pos, eps, spec, prop, omega, causal=causal, chunk_size=4)
    dy = rng.standard_normal(y.shape)
    _assert_same_except_omega(flt_attention_bwd(dy, c), flt_attention_bwd(dy, c, omega_grad=False))
