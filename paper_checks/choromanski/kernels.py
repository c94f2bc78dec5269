"""FLT (Choromanski et al.) Sec. 4.3 (Gaussian-mixture RPE, shift-invariant kernels) and Sec. 5.3 (the 3-D
Gaussian basis): transform pairs by quadrature and the kernel estimator by Monte Carlo, through refattn's
``spectrum_f``, ``spectrum_g``, ``flt_features`` and ``flt_importance_weights``."""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy import integrate

from refattn.random import draw_flt_noise
from refattn.rpe import (
    CauchyKernel,
    GaussianBasis,
    GaussianKernel,
    GaussianMixture,
    LaplaceKernel,
    Proposal,
    flt_features,
    flt_importance_weights,
    kernel_proposal,
    spectrum_f,
    spectrum_g,
)
from validation.montecarlo import mean_test

from ..mutations import mutation, negated_half, scaled, scaled_arg, shifted_arg
from ..registry import CHOROMANSKI, Context, Result, claim, must_fail, stat_evidence
from ..rules import per_reading, value, with_rule
from ..rounding import gamma, log_density_bound, weight_depth
from ._common import N_SE, SE_FLOOR, A, block_tolerance, blocks

# mutations wrap the refattn functions (and the derived f) this module looks up
_HERE = sys.modules[__name__]


def gm_f(D, w, sigma, mu, sign=1.0):
    """The derived T = 1 transform: w (2 pi sigma^2)^{1/2} exp(-2 pi^2 sigma^2 D^2) e^{sign 2 pi i mu D}."""
    return (w * math.sqrt(2 * math.pi * sigma ** 2) * math.exp(-2 * math.pi ** 2 * sigma ** 2 * D ** 2)
            * complex(math.cos(2 * math.pi * mu * D), sign * math.sin(2 * math.pi * mu * D)))


def _same_width_f(D, w, sigma, mu, sign=1.0):
    """The companion's wrong f: 'another Gaussian kernel' read as g's own width, w exp(-D^2/(2 sigma^2))."""
    return complex(w * math.exp(-D ** 2 / (2 * sigma ** 2)), 0.0)


#: Tolerance of the transform comparisons. QUADPACK's error estimate on these Gaussians is below 1e-12
#: (reported as 'quadrature error estimate'), the tail beyond |xi| = 12 is below e^{-(11.4)^2/0.32}
#: (negligible), while a wrong constant, width or unit (the companion, the mutations) moves f by >= 1e-2:
#: 1e-8 leaves a factor >= 1e4 on each side.
GM_TOL = 1e-8
_MU0, _MU6 = "mu = 0 (real f, Definition 3.1)", "mu = 0.6 (f complex: outside Definition 3.1)"


def _gm_case(mu: float, sigma: float, f_of) -> dict:
    """Quadrature of g = exp(-(xi - mu)^2/(2 sigma^2)) (e^{+2 pi i D xi}, Thm 4.1's convention) at four D
    against `f_of` (the derived f), and refattn's spectrum_f against the derived Re f."""
    spec = GaussianMixture(A([1.0]), A([[mu]]), A([sigma]))
    deltas = (0.0, 0.3, 0.8, 1.5)
    f_core = np.asarray(spectrum_f(spec, A([[d] for d in deltas])))
    err, err_core, im_quad, quad_err = 0.0, 0.0, [], 0.0
    for d_, fc in zip(deltas, f_core, strict=True):
        def gfun(t):
            return math.exp(-(t - mu) ** 2 / (2 * sigma ** 2))
        re, e_re = (integrate.quad(gfun, -12, 12, weight="cos", wvar=2 * math.pi * d_) if d_
                    else integrate.quad(gfun, -12, 12))
        im, e_im = integrate.quad(gfun, -12, 12, weight="sin", wvar=2 * math.pi * d_)
        f = f_of(d_, 1.0, sigma, mu)
        err = max(err, abs(re - f.real), abs(im - f.imag))
        err_core = max(err_core, abs(float(fc) - gm_f(d_, 1.0, sigma, mu).real))
        im_quad.append(im)
        quad_err = max(quad_err, e_re, e_im)
    return {"max |derived f - quadrature| (Re and Im)": err, "max |refattn Re f - derived Re f|": err_core,
            "Im f by quadrature at D = 0, .3, .8, 1.5": im_quad, "max |Im f|": max(abs(v) for v in im_quad),
            "refattn Re f at 0, .3, .8, 1.5": f_core.tolist(), "quadrature error estimate (max)": quad_err}


def _gm_pair(ctx: Context, wrong: bool = False) -> dict:
    """The T = 1 pair decided where Definition 3.1 puts it (a real f: g even, mu = 0), and the other choice
    (mu = 0.6: f complex, outside the definition) reported. `wrong`: the companion's f with g's own width."""
    sigma = 0.4
    f_of = _same_width_f if wrong else gm_f
    ev = {**stat_evidence(n=8, seed=ctx.seed, detectable=GM_TOL), "tolerance": GM_TOL, "sigma": sigma,
          _MU0: _gm_case(0.0, sigma, f_of), _MU6: _gm_case(0.6, sigma, f_of)}
    ev["readings"] = per_reading(_GM_READINGS, ev)
    return ev


def _at(ev: dict, case: str, key: str) -> float:
    return value(ev[case], key)


def _decide_gm(ev: dict) -> str:
    tol = value(ev, "tolerance")
    ok = (_at(ev, _MU0, "max |Im f|") <= tol
          and _at(ev, _MU0, "max |derived f - quadrature| (Re and Im)") <= tol
          and _at(ev, _MU0, "max |refattn Re f - derived Re f|") <= tol)
    return "holds" if ok else "fails"


_GM_READINGS = {
    "mu = 0: the premise as stated (g a renormalised Gaussian kernel, f real as Definition 3.1 wants)":
        _decide_gm,
    "mu = 0.6: g a shifted Gaussian, f complex": lambda ev: (
        "f = Gaussian envelope x e^{2 pi i mu D}: not real, outside Definition 3.1"
        if _at(ev, _MU6, "max |Im f|") > value(ev, "tolerance")
        and _at(ev, _MU6, "max |derived f - quadrature| (Re and Im)") <= value(ev, "tolerance")
        else "not shown"),
}


@claim("flt.gm-pair", paper=CHOROMANSKI, section="Sec. 4.3 (Gaussian mixture RPE)",
       statement="g = sum_t w_t exp(-|xi - mu_t|^2/(2 sigma_t^2)); for T = 1 'the FT becomes a renormalized "
                 "Gaussian kernel and as such defines f as another Gaussian kernel'.",
       expected="holds",
       derivation="f(D) = sum_t w_t (2 pi sigma_t^2)^{l/2} exp(-2 pi^2 sigma_t^2 |D|^2) e^{2 pi i mu_t . D}. "
                  "Definition 3.1 (on which Theorem 4.1 and this section build) wants a real f: R^l -> R, so "
                  "g(-xi) = conj g(xi), which for T = 1 means mu = 0 -- the sentence's premise, g a "
                  "(renormalised) Gaussian kernel; then f = w (2 pi sigma^2)^{l/2} exp(-2 pi^2 sigma^2 "
                  "|D|^2), a Gaussian kernel of length 1/(2 pi sigma). The sentence is decided there. For mu "
                  "!= 0 (a shifted Gaussian, not a kernel) f is complex and outside Definition 3.1: reported "
                  "(real features then estimate Re f, the f of the +-mu symmetrised mixture). Checked by "
                  "quadrature (tolerance GM_TOL = 1e-8).",
       decide=with_rule(_decide_gm,
                        "decided at mu = 0, where Definition 3.1's real f puts a T = 1 mixture: holds iff f "
                        "(quadrature of g) is real (max |Im f| <= 1e-8) and equals the derived Gaussian "
                        f"kernel w (2 pi sigma^2)^{1/2} exp(-2 pi^2 sigma^2 D^2) and refattn's spectrum_f "
                        "(1e-8); fails otherwise. The mu = 0.6 case (f complex) is reported, not decided."))
def gm_pair(ctx: Context) -> Result:
    ev = _gm_pair(ctx)
    err0 = _at(ev, _MU0, "max |derived f - quadrature| (Re and Im)")
    return Result(ctx.decide(ev), ev,
                  summary=f"at mu = 0 (Definition 3.1: f real) f is the Gaussian kernel c exp(-2 pi^2 "
                          f"sigma^2 D^2) (quadrature err {err0:.0e}); the other choice, mu = 0.6, gives a "
                          f"complex f (max |Im f| {_at(ev, _MU6, 'max |Im f|'):.2f}), a modulated Gaussian "
                          "outside Definition 3.1")


@must_fail("flt.gm-pair")
def gm_pair_wrong(ctx: Context) -> Result:
    """'Another Gaussian kernel' read as g's own width, exp(-D^2/(2 sigma^2)), must fail."""
    ev = _gm_pair(ctx, wrong=True)
    return Result(ctx.decide(ev), ev, summary="f with g's own width")


mutation("flt.gm-pair", "refattn spectrum_f x 0.5", kind="refattn")(lambda: scaled(_HERE, "spectrum_f", 0.5))
mutation("flt.gm-pair", "derived f x 2", kind="target")(lambda: scaled(_HERE, "gm_f", 2.0))
mutation("flt.gm-pair", "derived f with D x 2 pi (angular units)", kind="target")(
    lambda: scaled_arg(_HERE, "gm_f", 0, 2 * math.pi))


# ------------------------------------------------------------------------------------------------------
# Sec. 5.3: the 3-D Gaussian basis


def _gb3(ctx: Context, angular: bool = False) -> dict:
    """3-D radial quadrature of the printed f against the printed g (the companion: g in the angular
    convention exp(-sigma^2 |xi|^2 / 2)); refattn's spectrum_f / spectrum_g against the printed forms."""
    w, sig = A([1.0, 2.5]), A([0.3, 0.7])
    spec = GaussianBasis(w, sig)

    def f_printed(rho):
        return float(np.sum(w / (np.sqrt(2 * np.pi) * sig) ** 3 * np.exp(-rho ** 2 / (2 * sig ** 2))))

    def g_printed(rho):
        if angular:
            return float(np.sum(w * np.exp(-sig ** 2 * rho ** 2 / 2)))
        return float(np.sum(w * np.exp(-2 * np.pi ** 2 * sig ** 2 * rho ** 2)))

    errs, core = [], []
    for rho in (0.1, 0.5, 1.3):
        num = 2.0 / rho * integrate.quad(lambda s_: f_printed(s_) * s_, 0, np.inf, weight="sin",
                                         wvar=2 * np.pi * rho)[0]
        errs.append(abs(num - g_printed(rho)))
        core.append(abs(float(np.asarray(spectrum_g(spec, A([[0.0, 0.0, rho]]))[0])[0]) - g_printed(rho)))
        core.append(abs(float(np.asarray(spectrum_f(spec, A([[rho, 0.0, 0.0]])))[0]) - f_printed(rho)))
    tol = 1e-8
    return {**stat_evidence(n=len(errs), seed=ctx.seed, detectable=tol), "tolerance": tol,
            "max radial-quadrature error": max(errs), "refattn vs printed f, g": max(core)}


def _decide_gb3(ev: dict) -> str:
    err = max(value(ev, "max radial-quadrature error"), value(ev, "refattn vs printed f, g"))
    ok = err <= value(ev, "tolerance")
    return "holds" if ok else "fails"


@claim("flt.gaussian-basis-3d-pair", paper=CHOROMANSKI, section="Sec. 5.3",
       statement="f(r) = sum_t w_t/(sqrt(2 pi) sigma_t)^3 exp(-|r|^2/(2 sigma_t^2)) has FT g = sum_t w_t "
                 "exp(-2 pi^2 sigma_t^2 |xi|^2) in R^3.",
       expected="holds",
       derivation="The FT of the N(0, sigma^2 I_3) density is exp(-2 pi^2 sigma^2 |xi|^2). Checked by the "
                  "radial formula g(rho) = (2/rho) int_0^inf f(s) s sin(2 pi rho s) ds "
                  "(quadrature, tolerance 1e-8).",
       decide=with_rule(_decide_gb3, "holds iff the radial quadrature of the printed f equals the printed g "
                                     "and refattn's spectrum_f / spectrum_g equal the printed forms, all "
                                     "within 1e-8; fails otherwise."))
def gb3(ctx: Context) -> Result:
    ev = _gb3(ctx)
    return Result(ctx.decide(ev), ev,
                  summary=f"3-D radial quadrature of the printed f vs the printed g: max err "
                          f"{ev['max radial-quadrature error']:.0e}; refattn f, g vs printed "
                          f"{ev['refattn vs printed f, g']:.0e} (tolerance 1e-8)")


@must_fail("flt.gaussian-basis-3d-pair")
def gb3_wrong(ctx: Context) -> Result:
    """g in the angular-frequency convention, exp(-sigma^2 |xi|^2 / 2), must fail."""
    ev = _gb3(ctx, angular=True)
    return Result(ctx.decide(ev), ev, summary="g in the angular convention")


mutation("flt.gaussian-basis-3d-pair", "refattn spectrum_g x 0.5", kind="refattn")(
    lambda: scaled(_HERE, "spectrum_g", 0.5, output=0))
mutation("flt.gaussian-basis-3d-pair", "refattn spectrum_f with D x 2 pi",
         kind="refattn", bug="normalisation")(
    lambda: scaled_arg(_HERE, "spectrum_f", 1, 2 * math.pi))


# ------------------------------------------------------------------------------------------------------
# shift-invariant kernels


def _shift_inv(ctx: Context, two_pi: float = 2 * math.pi) -> dict:
    """Gaussian kernel K(s, s') = exp(-(s - s')^2 / 2) through FLT with r_j = s_j / `two_pi` (the companion
    uses 1: positions not rescaled) and g = C p_K (p_K = N(0, 1) in the angular convention), Monte Carlo
    against K; then c = sup w = C exactly under the kernel's own density."""
    rng = ctx.rng()
    n, r = ctx.pick(1000, 4000), 4
    s = rng.uniform(-4, 4, (5, 1))
    spec = GaussianMixture(A([1.0 / math.sqrt(2 * math.pi)]), A([[0.0]]), A([1.0]))   # g = C p_K, C = 1
    eps = draw_flt_noise(rng, n * r, 1)
    est = blocks(flt_features, s / two_pi, eps, spec, Proposal("gaussian", A([0.0]), A(1.0)), n)
    tol = block_tolerance(est, eps, "gaussian", r)
    t = mean_test(est, np.exp(-(s - s.T) ** 2 / 2), n_se=N_SE, atol=tol, se_floor=SE_FLOOR)
    ev = {**stat_evidence(n=n, seed=ctx.seed, detectable=t.detectable, r=r, n_se=N_SE),
          "z_kernel": t.z, "zero_se_entries": t.zero_se_count, "zero_se_max_dev": t.zero_se_max_dev,
          "zero_se_rounding_bound": tol, "zero_se_dev_over_rounding_bound": t.zero_se_max_dev / tol}
    werr, wratio = 0.0, 0.0
    for spec in (GaussianKernel(A(1.3), A(0.6)), LaplaceKernel(A(1.3), A(0.6)), CauchyKernel(A(1.3), A(0.6))):
        prop = kernel_proposal(spec, 2)
        eps_w = draw_flt_noise(rng, 1000, 2, prop.kind)
        w = np.asarray(flt_importance_weights(eps_w, spec, prop)[0])
        ev[f"{type(spec).__name__}: c = sup w (own density)"] = float(w.max())
        rel = float(np.max(np.abs(w - 1.3))) / 1.3
        # one weight is C (1 + d) with |d| <= gamma_{weight_depth(E)} (E from these draws), and the
        # literal 1.3 is itself rounded (u)
        werr, wratio = max(werr, rel), max(wratio, rel / gamma(weight_depth(log_density_bound(eps_w,
                                                                                             prop.kind)) + 1))
    ev["max_rel_err_weights_vs_C"] = werr
    ev["weights_rel_err_over_rounding_bound"] = wratio
    return ev


def _decide_shift(ev: dict) -> str:
    ok = (value(ev, "z_kernel") < N_SE and value(ev, "zero_se_dev_over_rounding_bound") <= 1
          and value(ev, "weights_rel_err_over_rounding_bound") <= 1)
    return "holds" if ok else "fails"


@claim("flt.shift-invariant-kernels", paper=CHOROMANSKI, section="Sec. 4.3 + App. A.4",
       statement="For K(x, y) = C int e^{i(x-y).xi} p_K(xi) dxi, r_j = s_j/(2 pi) and g = C p_K give an "
                 "unbiased estimate of [K(s_i, s_k)]; p = p_K minimises c (optimal sample complexity).",
       expected="holds",
       derivation="f(r_i - r_j) = int C p_K(xi) e^{2 pi i (s_i - s_j).xi/(2 pi)} dxi = K(s_i, s_j). For any "
                  "p, c = sup |g|/p >= int |g| = C, with equality iff p = |g|/C. Monte Carlo (5 SE) and the "
                  "exact weights under p = p_K.",
       decide=with_rule(_decide_shift,
                        f"holds iff the FLT estimate of [K(s_i, s_k)] is unbiased (max |z| < {N_SE:g} over "
                        "positive-SE entries, the zero-SE diagonal within its rounding bound "
                        "gamma_{n + depth} max|est|) and the importance weights under each kernel's own "
                        "density equal C within their rounding bound gamma_{8E + 7} (E the largest |log p_0| "
                        "of the draws; paper_checks.rounding); fails otherwise."))
def shift_inv(ctx: Context) -> Result:
    ev = _shift_inv(ctx)
    return Result(ctx.decide(ev), ev,
                  summary=f"unbiased via r = s/(2 pi) (max z {ev['z_kernel']:.1f} over positive-SE entries, "
                          f"{ev['zero_se_entries']} zero-SE diagonal entries exact); own density gives c = C")


@must_fail("flt.shift-invariant-kernels")
def shift_inv_wrong(ctx: Context) -> Result:
    """Positions not divided by 2 pi (r_j = s_j) must fail."""
    ev = _shift_inv(ctx, two_pi=1.0)
    return Result(ctx.decide(ev), ev, summary="positions not divided by 2 pi")


mutation("flt.shift-invariant-kernels", "flt_features N2 x 0.5", kind="refattn")(
    lambda: scaled(_HERE, "flt_features", 0.5, output=1))
mutation("flt.shift-invariant-kernels", "positions x 0.5 (flt_features)", kind="refattn")(
    lambda: scaled_arg(_HERE, "flt_features", 0, 0.5))
mutation("flt.shift-invariant-kernels", "importance weights x 2", kind="refattn")(
    lambda: scaled(_HERE, "flt_importance_weights", 2.0, output=0))
mutation("flt.shift-invariant-kernels", "N2 sin half negated: cos(a_i + a_j) for cos(a_i - a_j) "
                                        "(flt_features)", kind="refattn", bug="sign")(
    lambda: negated_half(_HERE, "flt_features", 1))
mutation("flt.shift-invariant-kernels", "N2 at positions + 1: f(D - 1) for f(D) (flt_features)",
         kind="refattn",
         bug="off-by-one")(lambda: shifted_arg(_HERE, "flt_features", 0, 1.0, 1))

mutation("flt.gm-pair", "refattn spectrum_f with D x 2 pi (angular units)", kind="refattn",
         bug="normalisation")(lambda: scaled_arg(_HERE, "spectrum_f", 1, 2 * math.pi))
