"""FLT features: real form == Re(complex reference) per draw, Theorem 4.1 (unbiased, D = 1, 2, 3) with a
must-fail companion, Lemma A.2 / Theorem A.3 variance bound, the truncated local-RPE estimator, gradients of
every learnable parameter, bad input. Algorithm 1: tests/rpe/test_flt_linear.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from refattn.random import draw_flt_noise
from refattn.rpe.flt import (
    flt_features,
    flt_features_bwd,
    flt_features_fwd,
    flt_frequencies,
    flt_importance_weights,
    flt_mask_estimate,
)
from refattn.rpe.spectra import (
    Box,
    BSpline,
    CauchyKernel,
    GaussianBasis,
    GaussianKernel,
    GaussianMixture,
    LaplaceKernel,
    Proposal,
    Shifted,
    kernel_proposal,
    rpe_mask,
)
from tests.rpe.flt_complex_reference import complex_mask_estimate, complex_single_sample
from validation import assert_close, assert_mean_within_se, check_vjp
from validation.montecarlo import mean_test

A = np.array


def cases(D):
    """Every finite-variance spectrum in dimension D, with a valid proposal."""
    z = np.zeros(D)
    lin = np.linspace(0.4, 0.9, D)
    out = {
        "gm": (GaussianMixture(A([0.8, -0.3]), np.stack([0.2 * lin, -0.1 * lin]), A([0.3, 0.5])),
               Proposal("gaussian", z, A(0.6))),
        "gauss-kernel": (GaussianKernel(A(1.2), A(0.8)), None),
        "laplace-kernel": (LaplaceKernel(A(1.2), A(0.8)), None),
        "cauchy-kernel": (CauchyKernel(A(1.2), A(0.8)), None),
        "bspline2": (BSpline(A(0.9), lin, 2), Proposal("cauchy", z, A(0.7))),
        "gauss-basis": (GaussianBasis(A([1.0, 0.5]), A([0.5, 0.9])), Proposal("gaussian", z, A(0.5))),
        "shifted-gauss": (Shifted(GaussianKernel(A(1.0), A(0.8)), 0.3 * lin),
                          Proposal("gaussian", z, A(0.3))),
    }
    return {k: (s, p if p is not None else kernel_proposal(s, D)) for k, (s, p) in out.items()}


def block_estimates(pos, eps_all, spec, prop, n):
    """n independent estimates N1 N2^T from one call: the r columns of each block come from its own draw."""
    N1, N2 = (np.asarray(x) for x in flt_features(pos, eps_all, spec, prop))
    L, two_rt = N1.shape
    rt = two_rt // 2
    r = rt // n
    C1 = N1.reshape(L, 2, n, r)
    C2 = N2.reshape(L, 2, n, r)
    return n * np.einsum("icbk,jcbk->bij", C1, C2)                        # (n, L, L), 1/r per block


# ----------------------------------------------------------------------------------------------------------
# real form == Re(paper's complex form), draw by draw


@pytest.mark.parametrize("D", [1, 2, 3])
def test_real_features_equal_real_part_of_complex_reference(D, xp):
    rng = np.random.default_rng(D)
    pos_np = rng.standard_normal((6, D))
    for name, (spec, prop) in cases(D).items():
        eps = draw_flt_noise(rng, 9, D, prop.kind)
        xi, _ = flt_frequencies(eps, prop)
        w_re, w_im = flt_importance_weights(eps, spec, prop)
        w = np.asarray(w_re) + (0 if w_im is None else 1j * np.asarray(w_im))
        ref = complex_mask_estimate(pos_np, np.asarray(xi), w).real
        if isinstance(spec, Shifted):
            spec_x = Shifted(type(spec.base)(*[xp.asarray(a) for a in spec.base]), xp.asarray(spec.shift))
        else:
            spec_x = type(spec)(*[xp.asarray(a) if isinstance(a, np.ndarray) else a for a in spec])
        prop_x = Proposal(prop.kind, xp.asarray(prop.loc), xp.asarray(prop.scale))
        got = flt_mask_estimate(xp.asarray(pos_np), xp.asarray(eps), spec_x, prop_x)
        assert_close(got, xp.asarray(ref), rtol=1e-12, atol=1e-13, label=name)


def test_integer_positions_and_batched_positions():
    spec, prop = cases(2)["gm"]
    eps = draw_flt_noise(np.random.default_rng(0), 5, 2)
    pos_i = np.arange(8).reshape(4, 2)
    a = flt_mask_estimate(pos_i, eps, spec, prop)
    b = flt_mask_estimate(pos_i.astype(np.float64), eps, spec, prop)
    assert_close(a, b, rtol=0, atol=0)
    batched = flt_mask_estimate(np.stack([pos_i, pos_i[::-1]]), eps, spec, prop)
    assert batched.shape == (2, 4, 4)
    assert_close(batched[1], b[::-1, ::-1], rtol=1e-14, atol=1e-15)


def test_kernel_proposal_makes_the_diagonal_exact():
    """With p = g/C the weights are the constant C, so N_hat_ii = |N1_i|^2 = C for every draw."""
    spec = GaussianKernel(A(1.7), A(0.5))
    eps = draw_flt_noise(np.random.default_rng(0), 7, 2)
    pos = np.random.default_rng(1).standard_normal((5, 2))
    N_hat = flt_mask_estimate(pos, eps, spec, kernel_proposal(spec, 2))
    assert_close(np.diag(N_hat), np.full(5, 1.7), rtol=1e-14)


# ----------------------------------------------------------------------------------------------------------
# Theorem 4.1: E[N1 N2^T] = N


@pytest.mark.parametrize("D", [1, 2, 3])
def test_theorem_4_1_unbiased(D, seed):
    rng = np.random.default_rng([seed, D])
    pos = rng.uniform(-1.5, 1.5, (5, D))
    n, r = 4000, 4
    for name, (spec, prop) in cases(D).items():
        est = block_estimates(pos, draw_flt_noise(rng, n * r, D, prop.kind), spec, prop, n)
        # The diagonal (f(0), exact in every draw for the kernels' own proposals) has SE ~1e-17 of rounding
        # noise: compared exactly (se_floor), the z statistics are over the off-diagonal entries.
        res = mean_test(est, np.asarray(rpe_mask(pos, spec)), n_se=5, atol=1e-12, se_floor=1e-12)
        assert res.passed, (f"{name} D={D}: max |z| {res.z:.2f} over {res.n_positive_se} positive-SE "
                            "entries, "
                            f"zero-SE max deviation {res.zero_se_max_dev:.2e}, seed {seed}")


def test_theorem_4_1_must_fail_with_g_off_by_2pi(seed):
    """Companion: the angular-frequency convention (xi -> 2 pi xi in g, i.e. a kernel length off by 2 pi) is
    rejected by the same test."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-1.5, 1.5, (5, 1))
    spec = GaussianKernel(A(1.2), A(0.8))
    wrong = GaussianKernel(A(1.2), A(0.8 * 2 * np.pi))
    n, r = 4000, 4
    est = block_estimates(pos, draw_flt_noise(rng, n * r, 1), spec, kernel_proposal(spec, 1), n)
    with pytest.raises(AssertionError, match="standard errors"):
        assert_mean_within_se(est, np.asarray(rpe_mask(pos, wrong)), n_se=5, atol=1e-12)


# ----------------------------------------------------------------------------------------------------------
# Lemma A.2 / Theorem A.3: Var <= (c^2 - f^2) / r


def _c_numeric(spec, prop, grid):
    """sup |g|/p on a fine grid (D = 1)."""
    from refattn.rpe.spectra import proposal_log_density, spectrum_g
    g = np.abs(np.asarray(spectrum_g(spec, grid[:, None])[0]))
    s = float(prop.scale)
    logp = np.asarray(proposal_log_density(prop.kind, (grid[:, None] - float(prop.loc[0])) / s)) - np.log(s)
    with np.errstate(divide="ignore"):
        return float(np.max(np.exp(np.log(g) - logp)))


@pytest.mark.parametrize("name", ["gauss-kernel", "gm", "gauss-basis"])
def test_variance_bound_a3(name, seed):
    """Measured Var[phi(x)^T psi(y)] of the complex estimator and of the real form are <= (c^2 - f^2)/r
    (within 5 standard errors of the sample variance); for the kernel's own proposal the complex variance
    equals the bound."""
    rng = np.random.default_rng([seed, 7])
    spec, prop = cases(1)[name]
    c = _c_numeric(spec, prop, float(prop.loc[0]) + float(prop.scale) * np.linspace(-12, 12, 200001))
    deltas = A([0.0, 0.3, 0.9, 2.0])
    f = np.asarray(rpe_mask(np.concatenate([[0.0], deltas])[:, None], spec))[1:, 0]  # f(delta)
    r, n = 8, 20000
    eps = draw_flt_noise(rng, n * r, 1, prop.kind)
    xi, _ = flt_frequencies(eps, prop)
    w_re, w_im = flt_importance_weights(eps, spec, prop)
    Z = complex_single_sample(deltas[:, None], np.asarray(xi), np.asarray(w_re))
    Z = Z.reshape(n, r, -1).mean(axis=1)
    bound = (c * c - f * f) / r
    for est in (Z, Z.real):                                        # complex (paper) and real (refattn) forms
        dev = np.abs(est - est.mean(axis=0)) ** 2
        var, se = dev.mean(axis=0), dev.std(axis=0, ddof=1) / np.sqrt(n)
        assert np.all(var <= bound + 5 * se), (name, var, bound, se)
    if name == "gauss-kernel":
        dev = np.abs(Z - Z.mean(axis=0)) ** 2
        # delta = 0: variance and bound are both 0 up to rounding (SE ~1e-30), compared exactly (se_floor)
        res = mean_test(dev, bound, n_se=5, atol=1e-12, se_floor=1e-12)
        assert res.passed, (f"complex variance vs the A.3 bound: max |z| {res.z:.2f}, zero-SE max deviation "
                            f"{res.zero_se_max_dev:.2e}, variance {dev.mean(axis=0)}, bound {bound}")
        with pytest.raises(AssertionError):                         # must-fail: half the bound is exceeded
            assert np.all(dev.mean(axis=0) <= 0.5 * bound + 5 * dev.std(axis=0, ddof=1) / np.sqrt(n))


# ----------------------------------------------------------------------------------------------------------
# local RPE: the truncated estimator converges to the truncated Fourier integral, not to f


def test_truncated_box_estimator_mean_is_the_truncated_integral(seed):
    """Uniform proposal on [-B, B]: E = (C/pi)[Si(2 pi B (v + D)) + Si(2 pi B (v - D))] (biased for f, C/2
    at |D| = v in the limit); the estimator's mean matches this and the bias is visible."""
    C, v, B = 1.3, 2.0, 0.5
    spec = Box(A([C]), A([[v]]))
    prop = Proposal("uniform", A([0.0]), A(B))
    pos = A([[0.0], [1.0], [2.0], [3.0]])
    n, r = 20000, 4
    rng = np.random.default_rng([seed, 11])
    N1, N2 = (np.asarray(x) for x in flt_features(pos, draw_flt_noise(rng, n * r, 1, "uniform"), spec, prop,
                                                   allow_truncation=True))
    # f(0 - pos)
    est = n * np.einsum("icbk,jcbk->bij", N1.reshape(4, 2, n, r), N2.reshape(4, 2, n, r))[:, 0, :]
    dlt = np.abs(pos[:, 0])
    trunc = C / np.pi * (special.sici(2 * np.pi * B * (v + dlt))[0]
                         + special.sici(2 * np.pi * B * (v - dlt))[0])
    res = assert_mean_within_se(est, trunc, n_se=5, seed=seed)
    f = np.asarray(rpe_mask(pos, spec))[0]
    assert f[2] == C / 2                                            # |D| = v: the inversion midpoint
    assert np.max(np.abs(trunc - f)) > 5 * np.max(res.se)          # the bias is real and measurable
    with pytest.raises(AssertionError):                             # must-fail: f itself is not the mean
        assert_mean_within_se(est, f, n_se=5)


# ----------------------------------------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("name", ["gm", "gauss-kernel", "laplace-kernel", "cauchy-kernel", "bspline2",
                                  "gauss-basis", "shifted-gauss"])
def test_feature_gradients_every_parameter(name):
    D = 2
    spec, prop = cases(D)[name]
    rng = np.random.default_rng(5)
    pos = rng.standard_normal((2, 4, D))
    eps = draw_flt_noise(rng, 5, D, prop.kind)
    check_vjp(lambda spectrum, proposal: flt_features_fwd(pos, eps, spectrum, proposal), flt_features_bwd,
              {"spectrum": spec, "proposal": prop})


def test_feature_gradients_box_family_and_per_axis_scale():
    """Learnable weights and radii of a sum of boxes (truncated proposal), per-axis proposal scale."""
    spec = Box(A([1.0, -0.4]), A([[0.5, 0.8], [1.1, 0.3]]))
    prop = Proposal("uniform", A([0.1, -0.2]), A([2.0, 3.0]))
    rng = np.random.default_rng(6)
    pos, eps = rng.standard_normal((4, 2)), draw_flt_noise(rng, 5, 2, "uniform")
    check_vjp(lambda spectrum, proposal: flt_features_fwd(pos, eps, spectrum, proposal,
                                                          allow_truncation=True),
              flt_features_bwd, {"spectrum": spec, "proposal": prop})


def test_feature_gradient_check_catches_a_wrong_backward():
    spec, prop = cases(1)["gm"]
    rng = np.random.default_rng(5)
    pos, eps = rng.standard_normal((4, 1)), draw_flt_noise(rng, 5, 1)

    def bad(dN, cache):
        g = flt_features_bwd(dN, cache)
        return g._replace(proposal=g.proposal._replace(scale=g.proposal.scale * (1 + 1e-4)))

    with pytest.raises(AssertionError, match="proposal"):
        check_vjp(lambda spectrum, proposal: flt_features_fwd(pos, eps, spectrum, proposal), bad,
                  {"spectrum": spec, "proposal": prop})


# ----------------------------------------------------------------------------------------------------------
# bad input


def test_bad_inputs():
    spec, prop = cases(2)["gm"]
    rng = np.random.default_rng(0)
    pos, eps = rng.standard_normal((4, 2)), draw_flt_noise(rng, 5, 2)
    with pytest.raises(ValueError, match=r"pos: expected shape \(\.\.\., L, D\) with .*D = 2 \(from "
                                          r"spectrum.mu\); got \(4, 3\)"):
        flt_features(rng.standard_normal((4, 3)), eps, spec, prop)
    with pytest.raises(ValueError, match=r"eps: expected shape \(r, D\) with .*D = 2 \(from spectrum.mu\); "
                                          r"got \(5, 1\)"):
        flt_features(pos, rng.standard_normal((5, 1)), spec, prop)
    with pytest.raises(ValueError, match=r"proposal.scale: expected positive values"):
        flt_features(pos, eps, spec, Proposal("gaussian", A([0.0, 0.0]), A(-0.5)))
    with pytest.raises(ValueError, match=r"spectrum.sigma: expected positive values"):
        flt_features(pos, eps, spec._replace(sigma=A([0.3, -0.5])), prop)
    with pytest.raises(ValueError, match=r"infinite variance"):
        flt_features(pos, eps, spec, Proposal("gaussian", A([0.0, 0.0]), A(0.2)))
    with pytest.raises(ValueError, match=r"no mean"):
        flt_features(pos, eps, Box(A([1.0]), A([[1.0, 1.0]])), Proposal("cauchy", A([0.0, 0.0]), A(1.0)))
    with pytest.raises(ValueError, match=r"eps: the 'uniform' proposal's noise must lie"):
        flt_features(pos, eps * 10, spec, Proposal("uniform", A([0.0, 0.0]), A(3.0)), allow_truncation=True)
    with pytest.raises(TypeError, match=r"differs from"):
        flt_features(pos, eps.astype(np.float32), spec, prop)
    with pytest.raises(TypeError, match=r"proposal: expected a refattn.rpe.spectra.Proposal"):
        flt_features(pos, eps, spec, ("gaussian", A([0.0, 0.0]), A(1.0)))
    with pytest.raises(ValueError, match=r"pos: expected finite values"):
        flt_features(np.full((4, 2), np.nan), eps, spec, prop)
    with pytest.raises(ValueError, match=r"kind: expected one of"):
        draw_flt_noise(rng, 3, 2, "student")
    with pytest.raises(TypeError, match=r"rng: expected a numpy.random.Generator"):
        draw_flt_noise(None, 3, 2)
