"""Horn S1: Lemma 1 in both directions, the relative term, the softmax oracle with the mask S1 produces, shift
invariance (exact: to float tolerance; FAVOR: in distribution only, by the rotation coupling, with mean and
second moment unchanged over draws, and a single draw not invariant), gradients, bad input, the init."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.attention.favor import favor_attention
from refattn.attention.softmax import softmax_attention
from refattn.random.performer import draw_gaussian, draw_orthogonal
from refattn.random.positional import init_s1_params
from refattn.rpe.s1_rotation import (
    S1AttentionGrads,
    S1Params,
    s1_attention,
    s1_attention_bwd,
    s1_attention_fwd,
    s1_augment_bwd,
    s1_augment_fwd,
    s1_positional,
    s1_positional_bwd,
    s1_positional_fwd,
    s1_relative_matrix,
    s1_relative_term,
)
from tests.helpers import asxp, randn, to_numpy
from validation import assert_close, assert_mean_within_se, check_vjp


def _params(rng, xp, A=1, S=3, batch=(), dtype=None):
    p = init_s1_params(rng, n_axes=A, n_lengthscales=S, base=10.0, batch_shape=batch)
    return S1Params(*(asxp(xp, a + 0.7 * rng.standard_normal(a.shape), dtype) for a in p))


def _positions(xp, L, A):
    if A == 1:
        return xp.arange(L)
    W = 3
    return xp.asarray(np.stack([np.arange(L) // W, np.arange(L) % W], -1))


# ------------------------------------------------------------------------------------------------------
# Lemma 1


def _phi(z, omega):
    return np.stack([np.sin(omega * z), np.cos(omega * z)], -1)                   # (..., 2) row vectors


def _pair(z, zp, omega, Wq, Wk):
    return np.einsum("...i,...i->...", _phi(z, omega) @ Wq, _phi(zp, omega) @ Wk)


def test_lemma1_constrained_form_is_relative(rng):
    """W_q W_k^T = [[a, b], [-b, a]] (W_k generic invertible, W_q = M W_k^{-T}): the inner product is
    alpha cos(omega (z - z')) + beta sin(omega (z - z')) for every shift, random frequencies."""
    n = 200
    omega, z, zp, tau = (rng.standard_normal(n) * 3 for _ in range(4))
    for _ in range(5):
        a, b = rng.standard_normal(2)
        M = np.array([[a, b], [-b, a]])
        Wk = rng.standard_normal((2, 2))
        Wq = M @ np.linalg.inv(Wk).T
        expected = a * np.cos(omega * (z - zp)) + b * np.sin(omega * (z - zp))
        np.testing.assert_allclose(_pair(z, zp, omega, Wq, Wk), expected, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(_pair(z - tau, zp - tau, omega, Wq, Wk), expected, rtol=1e-9, atol=1e-9)


def test_lemma1_converse_generic_w_is_not_relative(rng):
    """Converse: the decomposition into z - z' and z + z' terms holds for every M, and a symmetric part with
    unequal diagonal or an antisymmetric mismatch (c != -b) gives a shift-dependent inner product."""
    n = 200
    omega, z, zp = (rng.standard_normal(n) * 3 for _ in range(3))
    omega = np.where(np.abs(omega) < 0.3, 0.3, omega)
    tau = 0.8
    for M in (np.array([[1.0, 0.4], [0.4, 2.0]]),             # symmetric part, unequal diagonal
              np.array([[1.0, 0.5], [-0.2, 1.0]])):            # antisymmetric mismatch
        a, b, c, d = M.ravel()
        dm, sm = omega * (z - zp), omega * (z + zp)
        decomp = ((a + d) / 2 * np.cos(dm) + (b - c) / 2 * np.sin(dm)
                  + (d - a) / 2 * np.cos(sm) + (b + c) / 2 * np.sin(sm))
        np.testing.assert_allclose(_pair(z, zp, omega, M, np.eye(2)), decomp, rtol=1e-9, atol=1e-12)
        moved = np.abs(_pair(z - tau, zp - tau, omega, M, np.eye(2)) - _pair(z, zp, omega, M, np.eye(2)))
        assert np.max(moved) > 0.1, (f"M = {M.tolist()} should not be shift invariant (max change "
                                     f"{moved.max()})")


def test_lemma1_condition_is_on_wq_wkt_not_wqt_wk(rng):
    """Row-vector convention: W_q^T W_k of rotation form does not give invariance (the text's wording)."""
    A = np.diag([1.0, 2.0])
    R = np.array([[0.0, 1.0], [-1.0, 0.0]])
    Wq, Wk = A, np.linalg.inv(A).T @ R                                             # W_q^T W_k = R
    np.testing.assert_allclose(Wq.T @ Wk, R, atol=1e-15)
    z, zp, omega = rng.standard_normal((3, 50))
    moved = np.abs(_pair(z + 0.9, zp + 0.9, omega, Wq, Wk) - _pair(z, zp, omega, Wq, Wk))
    assert np.max(moved) > 0.1


def test_relative_term_equals_positional_inner_products(xp, rng):
    """Q_p K_p^T = s1_relative_matrix, and every entry is s1_relative_term(z_i - z_j) (1-D and 2-D)."""
    for A in (1, 2):
        p = _params(rng, xp, A=A)
        pos = _positions(xp, 9, A)
        Qp, Kp = s1_positional(pos, p)
        G = Qp @ xp.matrix_transpose(Kp)
        assert_close(G, s1_relative_matrix(pos, p), rtol=1e-12, atol=1e-12)
        pn = to_numpy(pos).reshape(9, A).astype(float)
        delta = asxp(xp, pn[3] - pn[7])
        assert_close(s1_relative_term(delta, p), G[3, 7], rtol=1e-12, atol=1e-12)


def test_relative_term_is_alpha_cos_plus_beta_sin(rng):
    p = S1Params(np.array([[0.7]]), np.array([[1.3]]), np.array([[-0.4]]))
    delta = np.linspace(-5, 5, 11)
    expected = 1.3 * np.cos(0.7 * delta) - 0.4 * np.sin(0.7 * delta)
    np.testing.assert_allclose(s1_relative_term(delta, p), expected,
                               rtol=1e-14, atol=1e-14)


# ------------------------------------------------------------------------------------------------------
# exact attention: the oracle and shift invariance


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("A", [1, 2])
def test_exact_equals_softmax_oracle_and_is_shift_invariant(xp, dtype, rng, A, causal):
    L, d, S = 9, 4, 3
    p = _params(rng, xp, A=A, S=S, batch=(3,), dtype=dtype)                         # per-head parameters
    q, k, v = (randn(rng, xp, 2, 3, L, d, dtype=dtype) for _ in range(3))
    pos = _positions(xp, L, A)
    y = s1_attention(q, k, v, pos, p, causal=causal)
    P = 2 * A * S
    N = s1_relative_matrix(pos, p) / (d + P) ** 0.5                                # (3, L, L)
    y_ref = softmax_attention(q, k, v, mask_add=N, scale=(d + P) ** -0.5, causal=causal)
    f64 = dtype == xp.float64
    assert_close(y, y_ref, rtol=1e-10 if f64 else 1e-4, atol=1e-12 if f64 else 1e-5)
    for tau in (5, 123.25):                                                        # integer and real shifts
        shifted = xp.astype(pos, dtype) + tau
        assert_close(s1_attention(q, k, v, shifted, p, causal=causal), y, rtol=1e-9 if f64 else 2e-3,
                     atol=1e-11 if f64 else 1e-4)


# ------------------------------------------------------------------------------------------------------
# FAVOR: invariant in distribution only


def _rotation(params, tau, d):
    """R = blockdiag(I_d, rotations): the augmented Q and K at positions z + tau are the ones at z times R."""
    fr = np.asarray(params.freqs).reshape(-1)                                      # (A S,) axis-major
    A = params.freqs.shape[-2]
    t = np.repeat(np.atleast_1d(tau), params.freqs.shape[-1]) if A > 1 else np.full(fr.shape, tau)
    P = 2 * fr.size
    R = np.eye(d + P)
    for b, (w, tt) in enumerate(zip(fr, t, strict=True)):
        c, s = np.cos(w * tt), np.sin(w * tt)
        R[d + 2 * b:d + 2 * b + 2, d + 2 * b:d + 2 * b + 2] = [[c, -s], [s, c]]    # [s, c] -> [s', c']
    return R


def _favor_setup(rng, L=8, d=4, A=1, S=2):
    p = _params(rng, np, A=A, S=S)
    q, k, v = (rng.standard_normal((L, d)) * 0.7 for _ in range(3))
    return p, q, k, v, np.arange(L), d + 2 * A * S


def test_favor_shift_equals_rotated_draw(rng):
    """y(z + tau; omega) = y(z; omega R^T) exactly (for one draw); and y(z + tau; omega) != y(z; omega)."""
    p, q, k, v, pos, D = _favor_setup(rng)
    tau = 1.3
    R = _rotation(p, tau, q.shape[-1])
    omega = draw_gaussian(rng, 16, D)
    y_shift = s1_attention(q, k, v, pos + tau, p, omega=omega)
    assert_close(y_shift, s1_attention(q, k, v, pos, p, omega=omega @ R.T), rtol=1e-9, atol=1e-12)
    y0 = s1_attention(q, k, v, pos, p, omega=omega)
    assert np.max(np.abs(y_shift - y0)) > 1e-3, "a single draw is not shift invariant"


def _paired_draws(rng, draw, n=600, tau=1.3):
    p, q, k, v, pos, D = _favor_setup(rng)
    y0, y1 = [], []
    for _ in range(n):
        omega = draw(rng, D)
        y0.append(s1_attention(q, k, v, pos, p, omega=omega))
        y1.append(s1_attention(q, k, v, pos + tau, p, omega=omega))
    return np.asarray(y0), np.asarray(y1)


@pytest.mark.parametrize("draw", ["gaussian", "orthogonal"])
def test_favor_shift_invariant_in_distribution(rng, draw):
    """Isotropic draws: mean and second moment of the FAVOR-S1 output are unchanged by a shift (paired test on
    the same draws: E[y(z) - y(z + tau)] = 0 and E[y(z)^2 - y(z + tau)^2] = 0)."""
    fn = {"gaussian": lambda r, D: draw_gaussian(r, 16, D),
          "orthogonal": lambda r, D: draw_orthogonal(r, 16, D)}[draw]
    y0, y1 = _paired_draws(rng, fn)
    assert np.max(np.abs(y0 - y1)) > 1e-3                                          # per draw they differ
    assert_mean_within_se(y0 - y1, 0.0, label="mean shift")
    assert_mean_within_se(y0 ** 2 - y1 ** 2, 0.0, label="second-moment shift")


def test_favor_anisotropic_draws_are_not_invariant(rng):
    """Must fail: draws with unequal scales on the sin and cos coordinates (an anisotropic spectrum) see the
    rotation, and the paired mean test rejects."""
    d = 4

    def aniso(r, D):
        om = draw_gaussian(r, 16, D)
        scale = np.ones(D)
        scale[d::2], scale[d + 1::2] = 2.0, 0.3                                  # sin coords wide, cos narrow
        return om * scale

    y0, y1 = _paired_draws(rng, aniso)
    with pytest.raises(AssertionError, match="Monte Carlo mean differs"):
        assert_mean_within_se(y0 - y1, 0.0)


# ------------------------------------------------------------------------------------------------------
# gradients


def test_positional_gradients(rng):
    p = _params(rng, np, A=2, batch=(2, 1, 1))
    pos = _positions(np, 6, 2)
    check_vjp(lambda params: s1_positional_fwd(pos, params), s1_positional_bwd, dict(params=p))


def test_augment_gradients(rng):
    p = _params(rng, np, A=1, batch=(3,))
    q, k = rng.standard_normal((2, 2, 3, 5, 4))
    check_vjp(lambda **a: s1_augment_fwd(positions=np.arange(5) * 0.5, **a), s1_augment_bwd,
              dict(q=q, k=k, params=p))


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("kernel", ["softmax", "favor", "favor-hyperbolic"])
def test_attention_gradients(rng, kernel, causal):
    A, S, d = 2, 2, 3
    p = _params(rng, np, A=A, S=S, batch=(3,))
    q, k, v = rng.standard_normal((3, 2, 3, 6, d))
    args = dict(q=q, k=k, v=v, params=p)
    features = "positive"
    if kernel != "softmax":
        args["omega"] = draw_gaussian(rng, 8, d + 2 * A * S)
        features = "hyperbolic" if kernel.endswith("hyperbolic") else "positive"
    pos6 = _positions(np, 6, A)
    check_vjp(lambda **a: s1_attention_fwd(positions=pos6, causal=causal, features=features, **a),
              s1_attention_bwd, args)


def test_gradient_check_catches_a_wrong_backward(rng):
    """Must fail: a 1e-4 error in dfreqs is caught."""
    p = _params(rng, np)
    q, k, v = rng.standard_normal((3, 5, 4))

    def bad_bwd(dy, cache):
        g = s1_attention_bwd(dy, cache)
        return S1AttentionGrads(g.q, g.k, g.v, g.params._replace(freqs=g.params.freqs * (1 + 1e-4)), g.omega)

    with pytest.raises(AssertionError, match="params"):
        check_vjp(lambda **a: s1_attention_fwd(positions=np.arange(5), **a), bad_bwd,
                  dict(q=q, k=k, v=v, params=p), wrt=("params",))


def test_favor_matches_favor_attention_on_augmented_inputs(rng):
    p, q, k, v, pos, D = _favor_setup(rng)
    omega = draw_gaussian(rng, 16, D)
    Qp, Kp = s1_positional(pos, p)
    y_ref = favor_attention(np.concatenate([q, Qp], -1), np.concatenate([k, Kp], -1), v, omega)
    assert_close(s1_attention(q, k, v, pos, p, omega=omega), y_ref, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------------------
# bad input and init


def test_bad_inputs(xp, rng):
    p = _params(rng, xp, A=2)
    q, k, v = (randn(rng, xp, 6, 4) for _ in range(3))
    with pytest.raises(ValueError, match=r"positions: expected shape \(L,\) or \(L, A\) with A = 2"):
        s1_attention(q, k, v, xp.arange(6), p)
    with pytest.raises(ValueError, match="positions: expected L = 6 rows"):
        s1_attention(q, k, v, _positions(xp, 5, 2), p)
    with pytest.raises(TypeError, match="params: expected an S1Params"):
        s1_attention(q, k, v, _positions(xp, 6, 2), tuple(p))
    with pytest.raises(ValueError, match=r"omega: expected shape \(m, d \+ P\) with d \+ P = 16"):
        s1_attention(q, k, v, _positions(xp, 6, 2), p, omega=randn(rng, xp, 8, 4))
    with pytest.raises(ValueError, match="params.alpha: expected shape"):
        s1_attention(q, k, v, _positions(xp, 6, 2), p._replace(alpha=p.alpha[:1, :]))
    with pytest.raises(ValueError, match="positions: expected finite"):
        s1_attention(q, k, v, asxp(xp, np.full((6, 2), np.nan)), p)
    with pytest.raises(TypeError, match="params.beta: dtype"):
        s1_attention(q, k, v, _positions(xp, 6, 2), p._replace(beta=xp.astype(p.beta, xp.float32)))


def test_init_s1_params():
    rng = np.random.default_rng(0)
    p = init_s1_params(rng, n_axes=2, n_lengthscales=4, batch_shape=(8,), dtype=np.float32)
    assert p.freqs.shape == p.alpha.shape == p.beta.shape == (8, 2, 4) and p.freqs.dtype == np.float32
    np.testing.assert_allclose(p.freqs[0, 0], 10000.0 ** (-np.arange(4) / 4), rtol=1e-6)
    assert np.all(p.alpha == 1.0) and np.std(p.beta) > 0
    with pytest.raises(TypeError, match="rng: expected a numpy.random.Generator"):
        init_s1_params(None)
    with pytest.raises(ValueError, match="n_lengthscales: expected a positive integer"):
        init_s1_params(rng, n_lengthscales=0)
