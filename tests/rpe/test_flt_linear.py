"""FLT Algorithm 1 (refattn.rpe.flt_linear): gradients of every input and parameter (both modes), the Eq. (3)
concatenation identity, convergence to the exact RPE oracle as r and m grow (both modes), namespaces, bad
input."""

from __future__ import annotations

import numpy as np
import pytest

from refattn import softmax_attention
from refattn.random import draw_flt_noise, draw_gaussian, draw_orthogonal
from refattn.rpe.flt import flt_features, flt_mask_estimate
from refattn.rpe.flt_linear import flt_attention, flt_attention_bwd, flt_attention_fwd
from refattn.rpe.spectra import GaussianMixture, Proposal, rpe_mask
from tests.rpe.test_flt import cases
from validation import assert_close, check_vjp

A = np.array


@pytest.mark.parametrize("causal", [False, True])
def test_algorithm_1_gradients(causal):
    spec, prop = cases(1)["shifted-gauss"]
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((2, 6, 4)) * 0.5 for _ in range(3))
    pos = np.arange(6)[:, None]
    eps, omega = draw_flt_noise(rng, 3, 1), draw_gaussian(rng, 7, 6 + 4)
    check_vjp(lambda q, k, v, spectrum, proposal, omega: flt_attention_fwd(
        q, k, v, pos, eps, spectrum, proposal, omega, causal=causal, chunk_size=4), flt_attention_bwd,
        dict(q=q, k=k, v=v, spectrum=spec, proposal=prop, omega=omega))


# ----------------------------------------------------------------------------------------------------------
# Algorithm 1 against the exact RPE oracle


def test_eq3_concatenation_identity():
    """Eq. (3): Q_hat K_hat^T = N_hat + Q K^T / sqrt(d) exactly (the concatenated inner product)."""
    spec, prop = cases(2)["gm"]
    rng = np.random.default_rng(2)
    q, k = rng.standard_normal((5, 8)), rng.standard_normal((5, 8))
    pos, eps = rng.standard_normal((5, 2)), draw_flt_noise(rng, 6, 2)
    N1, N2 = flt_features(pos, eps, spec, prop)
    qh, kh = np.concatenate([N1, q * 8 ** -0.25], -1), np.concatenate([N2, k * 8 ** -0.25], -1)
    assert_close(qh @ kh.T, flt_mask_estimate(pos, eps, spec, prop) + q @ k.T / np.sqrt(8), rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_algorithm_1_converges_to_exact_rpe_attention(causal):
    """Mean absolute error against softmax_attention(q, k, v, mask_add=N) over 4 seeds falls as r and m grow;
    at the largest size it is well below the error of ignoring the mask."""
    rng = np.random.default_rng(0)
    L, d, D = 24, 8, 1
    q, k, v = (rng.standard_normal((2, L, d)) * 0.3 for _ in range(3))
    pos = np.arange(L)[:, None]
    spec = GaussianMixture(A([12.0]), A([[0.0]]), A([0.05]))    # f = 1.5 exp(-2 pi^2 0.05^2 D^2): width ~ 4.5
    prop = Proposal("gaussian", A([0.0]), A(0.06))
    exact = softmax_attention(q, k, v, mask_add=np.asarray(rpe_mask(pos, spec)), causal=causal)
    no_mask = np.abs(softmax_attention(q, k, v, causal=causal) - exact).mean()
    errs = []
    for r, m in [(2, 16), (16, 128), (128, 1024)]:
        e = []
        for s in range(4):
            g = np.random.default_rng([s, r, m])
            y = flt_attention(q, k, v, pos, draw_flt_noise(g, r, D), spec, prop,
                              draw_orthogonal(g, m, 2 * r + d), causal=causal)
            e.append(np.abs(y - exact).mean())
        errs.append(float(np.mean(e)))
    assert errs[0] > errs[1] > errs[2], errs
    assert errs[2] < 0.5 * errs[0] and errs[2] < 0.5 * no_mask, (errs, no_mask)


def test_algorithm_1_namespaces(xp):
    spec, prop = cases(1)["gm"]
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((5, 4)) for _ in range(3))
    pos, eps, omega = np.arange(5)[:, None], draw_flt_noise(rng, 3, 1), draw_gaussian(rng, 6, 10)
    ref = flt_attention(q, k, v, pos, eps, spec, prop, omega, causal=True)
    X = xp.asarray
    got = flt_attention(X(q), X(k), X(v), X(pos), X(eps),
                        GaussianMixture(X(spec.w), X(spec.mu), X(spec.sigma)),
                        Proposal("gaussian", X(prop.loc), X(prop.scale)), X(omega), causal=True)
    assert_close(got, X(ref), rtol=1e-12)


def test_bad_inputs():
    spec, prop = cases(2)["gm"]
    rng = np.random.default_rng(0)
    pos, eps = rng.standard_normal((4, 2)), draw_flt_noise(rng, 5, 2)
    q = rng.standard_normal((4, 8))
    with pytest.raises(ValueError, match=r"omega: expected shape \(m, 18\)"):
        flt_attention(q, q, q, pos, eps, spec, prop, draw_gaussian(rng, 6, 8))
    with pytest.raises(ValueError, match=r"pos: expected shape \(L, D\) or \(\.\.\., L, D\) with L = 4"):
        flt_attention(q, q, q, pos[:3], eps, spec, prop, draw_gaussian(rng, 6, 18))
