r"""Fourier spectra g of RPE functions f for FourierLearner-Transformers (FLT), with their proposals.

Choromanski et al., *Learning a Fourier Transform for Linear Relative Positional Encodings in Transformers*
(FLT), Sec. 4.1 (Theorem 4.1), Sec. 4.3, Sec. 5.3, App. A and B. The Fourier convention is the paper's:

    g(xi) = int f(x) exp(-2 pi i x . xi) dx,        f(x) = int g(xi) exp(2 pi i x . xi) dxi.

A *spectrum* is a NamedTuple of parameter arrays (the learnable ones) plus static integers; its type says which
family it is. For every family this module gives

* ``spectrum_g(spectrum, xi)``: g at frequencies ``xi: (r, D)`` as ``(g_re, g_im)`` (``g_im`` is ``None`` for a
  real g) and its backward (to the parameters and to ``xi``);
* ``spectrum_f(spectrum, delta)``: the RPE function itself at offsets ``delta: (..., D)`` (the exact mask
  ``N = [f(r_i - r_j)]`` of Definition 3.1 is :func:`rpe_mask`); for a real g that is not even, f is complex and
  refattn's real features estimate ``Re f``, which is what ``spectrum_f`` returns (see ``GaussianMixture``);
* a tail class used by :func:`check_proposal`, which rejects a proposal that does not cover the support of g
  (a truncated proposal is silently *biased*) or whose importance weights have infinite variance
  (``int |g|^2 / p = inf``), with a message that says why.

Families (``T`` mixture components, ``D`` position dimension):

==================  ===============================================  ============================================
family              g(xi)                                            f(Delta)
==================  ===============================================  ============================================
GaussianMixture     sum_t w_t exp(-|xi - mu_t|^2 / 2 sigma_t^2)      Re f = sum_t w_t (2 pi sigma_t^2)^(D/2)
                    (Sec. 4.3)                                       exp(-2 pi^2 sigma_t^2 |D|^2) cos(2 pi mu_t.D)
GaussianKernel      C (2 pi l^2)^(D/2) exp(-2 pi^2 l^2 |xi|^2)       C exp(-|D|^2 / 2 l^2)
LaplaceKernel       C (2 pi l)^D c_D (1 + (2 pi l |xi|)^2)^-(D+1)/2  C exp(-|D| / l)         (Matern-1/2, isotropic)
CauchyKernel        C prod_j pi l exp(-2 pi l |xi_j|)                C prod_j 1 / (1 + D_j^2 / l^2)
Box                 sum_t w_t prod_j sin(2 pi v_tj xi_j) / (pi xi_j) sum_t w_t prod_j 1[|D_j| <= v_tj]  (Eq. 4, 20)
SinPower            C prod_j sin^k(2 pi v_j xi_j) / (pi xi_j)        (printed Sec. 4.3 form; odd k only, below)
BSpline             C prod_j [sin(2 pi v_j xi_j) / (pi xi_j)]^k      C prod_j (1_[-v_j, v_j])^{*k}(D_j)
GaussianBasis       sum_t w_t exp(-2 pi^2 sigma_t^2 |xi|^2)          sum_t w_t (sqrt(2 pi) sigma_t)^-D
                    (Sec. 5.3, D = 3 in the paper)                   exp(-|D|^2 / 2 sigma_t^2)
Shifted(base, s)    exp(-2 pi i s . xi) g_base(xi)  (Hermitian)      f_base(D - s)   (a real f that is not even)
==================  ===============================================  ============================================

``c_D = Gamma((D + 1)/2) / pi^((D + 1)/2)``. Each shift-invariant kernel's g is ``C`` times a probability density
(Bochner), and :func:`kernel_proposal` returns that density as the proposal, for which the importance weight
``g/p`` is the constant C (the optimal proposal of App. A.4).

**Boxes have no Monte Carlo estimator.** The local RPE's spectrum C sin(2 pi v xi)/(pi xi) is not absolutely
integrable, so ``E|g(xi)/p(xi)| = int |g| = inf`` under *every* proposal p: the estimator of Theorem 4.1 has no
mean, and by Cauchy-Schwarz ``(int |g|)^2 <= int |g|^2/p`` it has no variance either. The same holds for the
printed sin^k form and for ``BSpline`` with k = 1. :func:`check_proposal` rejects these unless the caller opts
into a truncated (uniform) proposal with ``allow_truncation=True``, which estimates the truncated Fourier integral
(biased, finite variance). Fourier inversion at the jump |Delta| = v gives the midpoint C/2, not the C of Eq. (4):
``spectrum_f`` returns C/2 there (which integer positions hit when v is an integer).

**The printed sin^k form** g = C prod sin^k(2 pi v xi)/(pi xi) is odd in each xi_j for even k, so its f is purely
imaginary and odd (not an RPE mask: rejected); for odd k its f is piecewise *constant* and discontinuous
(sin^k expands into sines of multiples of the angle, i.e. a signed sum of boxes). The claims (a)-(d) of Sec. 4.3
(continuous, symmetric, compact support, piecewise polynomial of degree k - 1) hold for the B-spline form.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._xp import check_finite, check_shape, namespace

__all__ = [
    "GaussianMixture",
    "GaussianKernel",
    "LaplaceKernel",
    "CauchyKernel",
    "Box",
    "SinPower",
    "BSpline",
    "GaussianBasis",
    "Shifted",
    "Proposal",
    "PROPOSAL_KINDS",
    "spectrum_g",
    "spectrum_g_fwd",
    "spectrum_g_bwd",
    "spectrum_f",
    "rpe_mask",
    "proposal_log_density",
    "check_spectrum",
    "check_proposal",
    "kernel_proposal",
    "spectrum_dim",
]

Array = Any
_TWO_PI = 2.0 * math.pi


# ----------------------------------------------------------------------------------------------------------
# parameter containers


class GaussianMixture(NamedTuple):
    """g = sum_t w_t exp(-|xi - mu_t|^2 / (2 sigma_t^2)) (FLT Sec. 4.3). f is complex unless the mixture is
    symmetric under xi -> -xi; refattn's real features estimate ``Re f``, which is the f of the symmetrised
    mixture (g(xi) + g(-xi))/2 (each component paired with its mirror at -mu_t, weight w_t/2)."""

    w: Array      # (T,)
    mu: Array     # (T, D)
    sigma: Array  # (T,)  > 0


class GaussianKernel(NamedTuple):
    """f = C exp(-|Delta|^2 / (2 l^2)), the Gaussian (RBF) kernel; g = C times its spectral density."""

    C: Array       # ()
    length: Array  # ()  > 0


class LaplaceKernel(NamedTuple):
    """f = C exp(-|Delta| / l), the isotropic Laplace / Matern-1/2 kernel; g = C times a multivariate Cauchy
    density of scale 1/(2 pi l)."""

    C: Array       # ()
    length: Array  # ()  > 0


class CauchyKernel(NamedTuple):
    """f = C prod_j 1 / (1 + Delta_j^2 / l^2) (product Cauchy kernel); g = C times a product Laplace density of
    scale 1/(2 pi l)."""

    C: Array       # ()
    length: Array  # ()  > 0


class Box(NamedTuple):
    """Local RPE (FLT Eq. 4, its D-dimensional product form, and the footnoted sum of indicators, Eq. 20/21):
    f = sum_t w_t prod_j 1[|Delta_j| <= v_tj], g = sum_t w_t prod_j sin(2 pi v_tj xi_j) / (pi xi_j).
    Learnable weights and radii. int |g| = inf: no proposal gives a finite mean (module docstring)."""

    w: Array  # (T,)
    v: Array  # (T, D)  > 0


class SinPower(NamedTuple):
    """The printed Sec. 4.3 generalisation g = C prod_j sin^k(2 pi v_j xi_j) / (pi xi_j) (k = 1: a box)."""

    C: Array  # ()
    v: Array  # (D,)  > 0
    k: int    # odd positive integer (even k gives an imaginary, odd f)


class BSpline(NamedTuple):
    """g = C prod_j [sin(2 pi v_j xi_j) / (pi xi_j)]^k, f = C prod_j B_k(Delta_j) with B_k the k-fold
    self-convolution of 1_[-v_j, v_j]: continuous (k >= 2), even, supported on [-k v_j, k v_j], piecewise a
    polynomial of degree k - 1 (the properties claimed in Sec. 4.3). int |g| < inf for k >= 2."""

    C: Array  # ()
    v: Array  # (D,)  > 0
    k: int    # positive integer


class GaussianBasis(NamedTuple):
    """FLT Sec. 5.3: f = sum_t w_t / (sqrt(2 pi) sigma_t)^D exp(-|Delta|^2 / (2 sigma_t^2)),
    g = sum_t w_t exp(-2 pi^2 sigma_t^2 |xi|^2) (the paper's D = 3, any D here)."""

    w: Array      # (T,)
    sigma: Array  # (T,)  > 0


class Shifted(NamedTuple):
    """f(Delta) = f_base(Delta - shift): a real RPE function that is not even, with the Hermitian spectrum
    g = exp(-2 pi i shift . xi) g_base(xi) (complex). ``base`` is any real-spectrum family above."""

    base: Any      # a spectrum NamedTuple with a real g
    shift: Array   # (D,)


class Proposal(NamedTuple):
    """A location-scale proposal density for the frequencies: xi = loc + scale * eps with eps drawn from the
    standard density of `kind` (``refattn.random.draw_flt_noise``), so p(xi) = p_0(eps) / prod_j scale_j.

    ``kind``: ``"gaussian"`` (N(0, I)), ``"laplace"`` (product of standard Laplace), ``"cauchy"`` (product of
    standard Cauchy), ``"mv_cauchy"`` (isotropic multivariate Cauchy, Student t with 1 degree of freedom),
    ``"uniform"`` (the cube [-1, 1]^D: a *truncated* proposal, accepted only with ``allow_truncation=True``).
    ``loc`` and ``scale`` are learnable (App. A.4, B.3: "Gaussian with learnable means and variances")."""

    kind: str
    loc: Array    # (D,)
    scale: Array  # () or (D,)  > 0


PROPOSAL_KINDS = ("gaussian", "laplace", "cauchy", "mv_cauchy", "uniform")

_REAL_FAMILIES = (GaussianMixture, GaussianKernel, LaplaceKernel, CauchyKernel, Box, SinPower, BSpline,
                  GaussianBasis)


# ----------------------------------------------------------------------------------------------------------
# validation


def _arrays(spectrum):
    """(name, array) pairs of a spectrum's parameter arrays (nested for Shifted)."""
    if isinstance(spectrum, Shifted):
        return [("base." + n, a) for n, a in _arrays(spectrum.base)] + [("shift", spectrum.shift)]
    return [(n, getattr(spectrum, n)) for n in spectrum._fields if n != "k"]


def _positive(name, x, *, xp):
    if not bool(xp.all(x > 0)):
        raise ValueError(f"{name}: expected positive values; got minimum {float(xp.min(x)):.6g}")


def spectrum_dim(spectrum) -> int | None:
    """The position dimension D fixed by a spectrum's parameter shapes (None when any D fits)."""
    if isinstance(spectrum, Shifted):
        return int(spectrum.shift.shape[-1])
    if isinstance(spectrum, GaussianMixture):
        return int(spectrum.mu.shape[-1])
    if isinstance(spectrum, Box):
        return int(spectrum.v.shape[-1])
    if isinstance(spectrum, (SinPower, BSpline)):
        return int(spectrum.v.shape[-1])
    return None


def check_spectrum(spectrum, sizes: dict | None = None, name: str = "spectrum") -> dict:
    """Validate a spectrum's type, parameter shapes (binding ``D`` and ``T`` in `sizes`), finiteness and signs.

    Raises ``TypeError`` for an unknown family and ``ValueError`` naming the parameter otherwise.
    """
    sizes = {} if sizes is None else sizes
    if isinstance(spectrum, Shifted):
        if not isinstance(spectrum.base, _REAL_FAMILIES):
            raise TypeError(f"{name}.base: expected a real-spectrum family ({', '.join(f.__name__ for f in _REAL_FAMILIES)}); "
                            f"got {type(spectrum.base).__name__}")
        check_spectrum(spectrum.base, sizes, name + ".base")
        check_shape(f"{name}.shift", spectrum.shift, "D", sizes)
        xp = namespace(spectrum.shift, names=(f"{name}.shift",))
        check_finite(f"{name}.shift", spectrum.shift, xp=xp)
        return sizes
    if not isinstance(spectrum, _REAL_FAMILIES):
        raise TypeError(f"{name}: expected a spectrum ({', '.join(f.__name__ for f in _REAL_FAMILIES + (Shifted,))}); "
                        f"got {type(spectrum).__name__}")
    fam = type(spectrum).__name__
    arrays = _arrays(spectrum)
    xp = namespace(*[a for _, a in arrays], names=tuple(f"{name}.{n}" for n, _ in arrays))
    for n, a in arrays:
        check_finite(f"{name}.{n}", a, xp=xp)
    if isinstance(spectrum, GaussianMixture):
        check_shape(f"{name}.w", spectrum.w, "T", sizes)
        check_shape(f"{name}.mu", spectrum.mu, "T, D", sizes)
        check_shape(f"{name}.sigma", spectrum.sigma, "T", sizes)
        _positive(f"{name}.sigma", spectrum.sigma, xp=xp)
    elif isinstance(spectrum, (GaussianKernel, LaplaceKernel, CauchyKernel)):
        check_shape(f"{name}.C", spectrum.C, "", sizes)
        check_shape(f"{name}.length", spectrum.length, "", sizes)
        _positive(f"{name}.length", spectrum.length, xp=xp)
    elif isinstance(spectrum, Box):
        check_shape(f"{name}.w", spectrum.w, "T", sizes)
        check_shape(f"{name}.v", spectrum.v, "T, D", sizes)
        _positive(f"{name}.v", spectrum.v, xp=xp)
    elif isinstance(spectrum, (SinPower, BSpline)):
        check_shape(f"{name}.C", spectrum.C, "", sizes)
        check_shape(f"{name}.v", spectrum.v, "D", sizes)
        _positive(f"{name}.v", spectrum.v, xp=xp)
        k = spectrum.k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"{name}.k: expected a positive integer; got {k!r}")
        if isinstance(spectrum, SinPower) and k % 2 == 0:
            raise ValueError(
                f"{name}.k: the printed form sin^k(2 pi v xi)/(pi xi) with even k = {k} is odd in xi, so its f is "
                "purely imaginary and odd: not a real RPE mask (use BSpline for the properties of Sec. 4.3)")
    elif isinstance(spectrum, GaussianBasis):
        check_shape(f"{name}.w", spectrum.w, "T", sizes)
        check_shape(f"{name}.sigma", spectrum.sigma, "T", sizes)
        _positive(f"{name}.sigma", spectrum.sigma, xp=xp)
    del fam
    return sizes


# ----------------------------------------------------------------------------------------------------------
# one-dimensional factors of the box family, with derivatives (safe at xi = 0)


def _h1(x, v, *, xp):
    """h(x) = sin(2 pi v x) / (pi x) (value 2 v at x = 0), dh/dv = 2 cos(2 pi v x), dh/dx.

    `x` and `v` broadcast together. Near x = 0 the quotient's derivative cancels catastrophically, so for
    |2 pi v x| < 1e-3 the series h' = -(2 pi v)^3 x / (3 pi) (+ O(x^3)) is used.
    """
    a = _TWO_PI * v
    ax = a * x
    small = xp.abs(ax) < 1e-3
    one = xp.ones_like(ax)
    x_safe = xp.where(small, one, x * one)
    h = xp.where(small, (a / math.pi) * (1.0 - ax * ax / 6.0), xp.sin(ax) / (math.pi * x_safe))
    dh_dv = 2.0 * xp.cos(ax)
    dh_dx = xp.where(small, -(a * a * a) * x / (3.0 * math.pi),
                     (a * xp.cos(ax) - xp.sin(ax) / x_safe) / (math.pi * x_safe))
    return h, dh_dv, dh_dx


def _sinpow(x, v, k, *, xp):
    """s(x) = sin^k(2 pi v x) / (pi x), ds/dv, ds/dx (series for |2 pi v x| < 1e-3)."""
    if k == 1:
        return _h1(x, v, xp=xp)
    a = _TWO_PI * v
    ax = a * x
    small = xp.abs(ax) < 1e-3
    one = xp.ones_like(ax)
    x_safe = xp.where(small, one, x * one)
    S, Cc = xp.sin(ax), xp.cos(ax)
    Skm1 = S ** (k - 1)
    s_big = Skm1 * S / (math.pi * x_safe)
    # series: sin^k(ax)/(pi x) = a^k x^(k-1) / pi * (1 - k (ax)^2 / 6 + ...)
    s_small = (a ** k) * (x ** (k - 1)) / math.pi * (1.0 - k * ax * ax / 6.0)
    s = xp.where(small, s_small, s_big)
    ds_dv = 2.0 * k * Skm1 * Cc                                             # d/dv of sin^k(2 pi v x)/(pi x)
    ds_dx_big = (k * Skm1 * Cc * a - Skm1 * S / x_safe) / (math.pi * x_safe)
    ds_dx_small = (a ** k) / math.pi * ((k - 1) * x ** (k - 2) - k * (k + 1) * a * a * x ** k / 6.0)
    ds_dx = xp.where(small, ds_dx_small, ds_dx_big)
    return s, ds_dv, ds_dx


def _prod_except(factors, j, *, xp):
    """prod over the last axis of `factors` leaving out index j (no division: factors may be zero)."""
    D = factors.shape[-1]
    out = None
    for i in range(D):
        if i == j:
            continue
        out = factors[..., i] if out is None else out * factors[..., i]
    return out if out is not None else xp.ones_like(factors[..., 0])


# ----------------------------------------------------------------------------------------------------------
# g and its backward


class SpectrumGCache(NamedTuple):
    spectrum: Any
    xi: Array       # (r, D)
    parts: tuple    # family-specific intermediates
    g_re: Array     # (r,)


class SpectrumGGrads(NamedTuple):
    spectrum: Any   # same structure as the spectrum (arrays; static ints kept)
    xi: Array       # (r, D)


def _sq_norm(x, *, xp):
    return xp.sum(x * x, axis=-1)


def _iso_const(D: int) -> float:
    """c_D = Gamma((D + 1)/2) / pi^((D + 1)/2): the standard multivariate Cauchy density at 0."""
    return math.exp(math.lgamma((D + 1) / 2.0) - (D + 1) / 2.0 * math.log(math.pi))


def _g_real(spectrum, xi, *, xp):
    """g(xi) for a real-spectrum family: ``(g (r,), parts)``."""
    D = xi.shape[-1]
    if isinstance(spectrum, GaussianMixture):
        diff = xp.expand_dims(xi, axis=1) - xp.expand_dims(spectrum.mu, axis=0)       # (r, T, D)
        d2 = _sq_norm(diff, xp=xp)                                                    # (r, T)
        e = xp.exp(-d2 / (2.0 * spectrum.sigma ** 2))                                 # (r, T)
        return e @ spectrum.w, (diff, d2, e)                                          # (r,)
    if isinstance(spectrum, GaussianKernel):
        l2 = spectrum.length ** 2
        g = spectrum.C * (_TWO_PI * l2) ** (D / 2.0) * xp.exp(-2.0 * math.pi ** 2 * l2 * _sq_norm(xi, xp=xp))
        return g, ()
    if isinstance(spectrum, LaplaceKernel):
        u2 = (_TWO_PI * spectrum.length) ** 2 * _sq_norm(xi, xp=xp)                  # (r,)
        base = (_TWO_PI * spectrum.length) ** D * _iso_const(D) * (1.0 + u2) ** (-(D + 1) / 2.0)
        return spectrum.C * base, (u2, base)
    if isinstance(spectrum, CauchyKernel):
        l1 = xp.sum(xp.abs(xi), axis=-1)                                              # (r,)
        base = (math.pi * spectrum.length) ** D * xp.exp(-_TWO_PI * spectrum.length * l1)
        return spectrum.C * base, (l1, base)
    if isinstance(spectrum, Box):
        h, dh_dv, dh_dx = _h1(xp.expand_dims(xi, axis=1), xp.expand_dims(spectrum.v, axis=0), xp=xp)  # (r, T, D)
        P = xp.prod(h, axis=-1)                                                       # (r, T)
        return P @ spectrum.w, (h, dh_dv, dh_dx, P)
    if isinstance(spectrum, (SinPower, BSpline)):
        if isinstance(spectrum, SinPower):
            s, ds_dv, ds_dx = _sinpow(xi, spectrum.v, spectrum.k, xp=xp)              # (r, D)
        else:
            h, dh_dv, dh_dx = _h1(xi, spectrum.v, xp=xp)
            k = spectrum.k
            hk1 = h ** (k - 1)
            s, ds_dv, ds_dx = hk1 * h, k * hk1 * dh_dv, k * hk1 * dh_dx             # (r, D)
        P = xp.prod(s, axis=-1)                                                       # (r,)
        return spectrum.C * P, (s, ds_dv, ds_dx, P)
    if isinstance(spectrum, GaussianBasis):
        n2 = _sq_norm(xi, xp=xp)                                                      # (r,)
        e = xp.exp(-2.0 * math.pi ** 2 * xp.expand_dims(n2, axis=1) * spectrum.sigma ** 2)  # (r, T)
        return e @ spectrum.w, (n2, e)
    raise TypeError(f"spectrum: unknown family {type(spectrum).__name__}")


def _g_real_bwd(dg, spectrum, xi, parts, g, *, xp):
    """Backward of :func:`_g_real`: ``(dspectrum, dxi)`` for the cotangent ``dg: (r,)``."""
    D = xi.shape[-1]
    if isinstance(spectrum, GaussianMixture):
        diff, d2, e = parts
        s2 = spectrum.sigma ** 2                                                      # (T,)
        dw = xp.matrix_transpose(e) @ dg                                              # (T,)
        de = xp.expand_dims(dg, axis=1) * spectrum.w * e                              # (r, T) dg w_t e_kt
        dmu = xp.matrix_transpose(de / s2) @ xi - xp.expand_dims(xp.sum(de / s2, axis=0), axis=1) * spectrum.mu
        dsigma = xp.sum(de * d2, axis=0) / spectrum.sigma ** 3                        # (T,)
        dxi = -xp.sum(xp.expand_dims(de / s2, axis=-1) * diff, axis=1)                # (r, D)
        return GaussianMixture(w=dw, mu=dmu, sigma=dsigma), dxi
    if isinstance(spectrum, GaussianKernel):
        l = spectrum.length
        n2 = _sq_norm(xi, xp=xp)
        dgg = dg * g                                                                  # (r,)
        base = (_TWO_PI * l * l) ** (D / 2.0) * xp.exp(-2.0 * math.pi ** 2 * l * l * n2)   # g / C
        dC = xp.sum(dg * base)
        dl = xp.sum(dgg * (D / l - 4.0 * math.pi ** 2 * l * n2))
        dxi = xp.expand_dims(dgg * (-4.0 * math.pi ** 2 * l * l), axis=1) * xi
        return GaussianKernel(C=dC, length=dl), dxi
    if isinstance(spectrum, LaplaceKernel):
        u2, base = parts
        l = spectrum.length
        dgg = dg * g
        dC = xp.sum(dg * base)
        dl = xp.sum(dgg * (D / l - (D + 1) * u2 / (l * (1.0 + u2))))
        dxi = xp.expand_dims(dgg * (-(D + 1) * (_TWO_PI * l) ** 2 / (1.0 + u2)), axis=1) * xi
        return LaplaceKernel(C=dC, length=dl), dxi
    if isinstance(spectrum, CauchyKernel):
        l1, base = parts
        l = spectrum.length
        dgg = dg * g
        dC = xp.sum(dg * base)
        dl = xp.sum(dgg * (D / l - _TWO_PI * l1))
        dxi = xp.expand_dims(dgg * (-_TWO_PI * l), axis=1) * xp.sign(xi)
        return CauchyKernel(C=dC, length=dl), dxi
    if isinstance(spectrum, Box):
        h, dh_dv, dh_dx, P = parts
        dw = xp.matrix_transpose(P) @ dg                                              # (T,)
        dP = xp.expand_dims(dg, axis=1) * spectrum.w                                  # (r, T)
        dv_cols, dxi_cols = [], []
        for j in range(D):
            dh = dP * _prod_except(h, j, xp=xp)                                       # (r, T)
            dv_cols.append(xp.sum(dh * dh_dv[..., j], axis=0))                        # (T,)
            dxi_cols.append(xp.sum(dh * dh_dx[..., j], axis=1))                       # (r,)
        return Box(w=dw, v=xp.stack(dv_cols, axis=-1)), xp.stack(dxi_cols, axis=-1)
    if isinstance(spectrum, (SinPower, BSpline)):
        s, ds_dv, ds_dx, P = parts
        dC = xp.sum(dg * P)
        dP = dg * spectrum.C                                                          # (r,)
        dv_cols, dxi_cols = [], []
        for j in range(D):
            ds = dP * _prod_except(s, j, xp=xp)                                       # (r,)
            dv_cols.append(xp.sum(ds * ds_dv[..., j]))
            dxi_cols.append(ds * ds_dx[..., j])
        dv = xp.stack(dv_cols)
        fam = type(spectrum)
        return fam(C=dC, v=dv, k=spectrum.k), xp.stack(dxi_cols, axis=-1)
    if isinstance(spectrum, GaussianBasis):
        n2, e = parts
        s2 = spectrum.sigma ** 2
        dw = xp.matrix_transpose(e) @ dg                                              # (T,)
        de = xp.expand_dims(dg, axis=1) * spectrum.w * e                              # (r, T)
        dsigma = -4.0 * math.pi ** 2 * spectrum.sigma * (xp.matrix_transpose(de) @ n2)  # (T,)
        dxi = xp.expand_dims(-4.0 * math.pi ** 2 * (de @ s2), axis=1) * xi           # (r, D)
        return GaussianBasis(w=dw, sigma=dsigma), dxi
    raise TypeError(f"spectrum: unknown family {type(spectrum).__name__}")


def spectrum_g_fwd(spectrum, xi):
    r"""g(xi) of a spectrum, real and imaginary parts, with a cache for :func:`spectrum_g_bwd`.

    Parameters
    ----------
    spectrum : a spectrum NamedTuple (see the module table)
    xi : (r, D) array
        Frequencies, real floating, same namespace and dtype as the spectrum's parameters.

    Returns
    -------
    (g_re, g_im) : ((r,) array, (r,) array or None)
        ``g_im`` is None for the real families (only :class:`Shifted` has a complex g).
    cache : SpectrumGCache
    """
    arrays = _arrays(spectrum)
    xp = namespace(xi, *[a for _, a in arrays], names=("xi",) + tuple(f"spectrum.{n}" for n, _ in arrays))
    sizes = check_spectrum(spectrum)
    check_shape("xi", xi, "r, D", sizes)
    check_finite("xi", xi, xp=xp)
    if isinstance(spectrum, Shifted):
        g0, parts0 = _g_real(spectrum.base, xi, xp=xp)
        theta = _TWO_PI * (xi @ spectrum.shift)                                      # (r,)
        g_re, g_im = xp.cos(theta) * g0, -xp.sin(theta) * g0                          # Hermitian g
        return (g_re, g_im), SpectrumGCache(spectrum, xi, (g0, parts0, theta), g_re)
    g, parts = _g_real(spectrum, xi, xp=xp)
    return (g, None), SpectrumGCache(spectrum, xi, parts, g)


def spectrum_g_bwd(dg, cache: SpectrumGCache) -> SpectrumGGrads:
    """Backward of :func:`spectrum_g_fwd`: ``dg = (dg_re, dg_im)`` (``dg_im`` may be None) -> grads of the
    spectrum's parameters (same container type) and of ``xi``."""
    dg_re, dg_im = dg
    spectrum, xi = cache.spectrum, cache.xi
    xp = namespace(xi, dg_re)
    if isinstance(spectrum, Shifted):
        g0, parts0, theta = cache.parts
        c, s = xp.cos(theta), xp.sin(theta)
        dg_im = xp.zeros_like(dg_re) if dg_im is None else dg_im
        dg0 = dg_re * c - dg_im * s                                                   # (r,)
        dtheta = -(dg_re * s + dg_im * c) * g0                                        # (r,)
        dbase, dxi0 = _g_real_bwd(dg0, spectrum.base, xi, parts0, g0, xp=xp)
        dshift = _TWO_PI * (dtheta @ xi)                                              # (D,)
        dxi = dxi0 + _TWO_PI * xp.expand_dims(dtheta, axis=1) * spectrum.shift
        return SpectrumGGrads(Shifted(base=dbase, shift=dshift), dxi)
    dspec, dxi = _g_real_bwd(dg_re, spectrum, xi, cache.parts, cache.g_re, xp=xp)
    return SpectrumGGrads(dspec, dxi)


def spectrum_g(spectrum, xi):
    """g(xi) as ``(g_re, g_im)`` (``g_im`` None for a real g). See :func:`spectrum_g_fwd`."""
    return spectrum_g_fwd(spectrum, xi)[0]


# ----------------------------------------------------------------------------------------------------------
# f: the RPE function itself (for the exact mask)


def _step(x, *, xp):
    """Heaviside with the Fourier-inversion midpoint: 1 for x > 0, 1/2 at 0, 0 below."""
    return xp.where(x > 0, xp.ones_like(x), xp.where(x == 0, 0.5 * xp.ones_like(x), xp.zeros_like(x)))


def _box1(delta, v, *, xp):
    """1[|delta| < v] with 1/2 at |delta| = v (what the inverse transform of sin(2 pi v xi)/(pi xi) gives)."""
    return _step(v - xp.abs(delta), xp=xp)


def _bspline1(x, v, k, *, xp):
    """k-fold self-convolution of 1_[-v, v] at x (truncated-power form; exactly 0 for |x| >= k v)."""
    if k == 1:
        return _box1(x, v, xp=xp)
    total = xp.zeros_like(x)
    for i in range(k + 1):
        t = x + (k - 2 * i) * v
        total = total + ((-1) ** i * math.comb(k, i)) * xp.where(t > 0, t, xp.zeros_like(t)) ** (k - 1)
    total = total / math.factorial(k - 1)
    return xp.where(xp.abs(x) < k * v, total, xp.zeros_like(x))


def _sinpow1_f(x, v, k, *, xp):
    """Inverse transform of sin^k(2 pi v xi)/(pi xi) for odd k: sin^k(a) = 2^(1-k) sum_i (-1)^((k-1)/2 - i)
    C(k, i) sin((k - 2i) a), and sin(2 pi n v xi)/(pi xi) <-> 1[|x| < n v]."""
    total = xp.zeros_like(x)
    for i in range((k - 1) // 2 + 1):
        coef = 2.0 ** (1 - k) * (-1) ** ((k - 1) // 2 - i) * math.comb(k, i)
        total = total + coef * _box1(x, (k - 2 * i) * v, xp=xp)
    return total


def _f_real(spectrum, delta, *, xp):
    D = delta.shape[-1]
    if isinstance(spectrum, GaussianMixture):
        n2 = xp.expand_dims(_sq_norm(delta, xp=xp), axis=-1)                          # (..., 1)
        s2 = spectrum.sigma ** 2
        amp = spectrum.w * (_TWO_PI * s2) ** (D / 2.0)                                # (T,)
        phase = _TWO_PI * (delta @ xp.matrix_transpose(spectrum.mu))                  # (..., T)
        return xp.sum(amp * xp.exp(-2.0 * math.pi ** 2 * s2 * n2) * xp.cos(phase), axis=-1)
    if isinstance(spectrum, GaussianKernel):
        return spectrum.C * xp.exp(-_sq_norm(delta, xp=xp) / (2.0 * spectrum.length ** 2))
    if isinstance(spectrum, LaplaceKernel):
        return spectrum.C * xp.exp(-xp.sqrt(_sq_norm(delta, xp=xp)) / spectrum.length)
    if isinstance(spectrum, CauchyKernel):
        return spectrum.C * xp.prod(1.0 / (1.0 + (delta / spectrum.length) ** 2), axis=-1)
    if isinstance(spectrum, Box):
        ind = _box1(xp.expand_dims(delta, axis=-2), spectrum.v, xp=xp)                # (..., T, D)
        return xp.sum(spectrum.w * xp.prod(ind, axis=-1), axis=-1)
    if isinstance(spectrum, SinPower):
        return spectrum.C * xp.prod(_sinpow1_f(delta, spectrum.v, spectrum.k, xp=xp), axis=-1)
    if isinstance(spectrum, BSpline):
        return spectrum.C * xp.prod(_bspline1(delta, spectrum.v, spectrum.k, xp=xp), axis=-1)
    if isinstance(spectrum, GaussianBasis):
        n2 = xp.expand_dims(_sq_norm(delta, xp=xp), axis=-1)                          # (..., 1)
        s = spectrum.sigma
        return xp.sum(spectrum.w / (math.sqrt(_TWO_PI) * s) ** D * xp.exp(-n2 / (2.0 * s * s)), axis=-1)
    raise TypeError(f"spectrum: unknown family {type(spectrum).__name__}")


def spectrum_f(spectrum, delta):
    """The RPE function f at offsets ``delta: (..., D)`` -> ``(...)`` (``Re f`` for a non-even real g).

    At the jumps of the box family (|Delta_j| = v) the value is the Fourier-inversion midpoint (C/2 for one
    box), not the C of the printed Eq. (4).
    """
    sizes = check_spectrum(spectrum)
    check_shape("delta", delta, "..., D", sizes)
    xp = namespace(delta, *[a for _, a in _arrays(spectrum)], names=("delta",) + tuple(n for n, _ in _arrays(spectrum)))
    if isinstance(spectrum, Shifted):
        return _f_real(spectrum.base, delta - spectrum.shift, xp=xp)
    return _f_real(spectrum, delta, xp=xp)


def rpe_mask(pos, spectrum):
    """The exact RPE mask ``N = [f(r_i - r_j)]_{ij}`` of Definition 3.1.

    Parameters
    ----------
    pos : (..., L, D) array
        Positions r_i (integer positions are indices by nature and allowed).
    spectrum : a spectrum NamedTuple

    Returns
    -------
    N : (..., L, L) array, dtype of the spectrum's parameters.
    """
    arrays = _arrays(spectrum)
    xp = namespace(pos, *[a for _, a in arrays], names=("pos",) + tuple(n for n, _ in arrays), allow_int=("pos",))
    sizes = check_spectrum(spectrum)
    check_shape("pos", pos, "..., L, D", sizes)
    dtype = arrays[0][1].dtype
    p = xp.astype(pos, dtype)
    delta = xp.expand_dims(p, axis=-2) - xp.expand_dims(p, axis=-3)                  # (..., L, L, D) r_i - r_j
    return spectrum_f(spectrum, delta)


# ----------------------------------------------------------------------------------------------------------
# proposals


def proposal_log_density(kind: str, eps, *, xp=None):
    """log p_0(eps) of the standard density of `kind` at ``eps: (r, D)`` -> ``(r,)``."""
    xp = xp or namespace(eps)
    D = eps.shape[-1]
    if kind == "gaussian":
        return -0.5 * _sq_norm(eps, xp=xp) - 0.5 * D * math.log(_TWO_PI)
    if kind == "laplace":
        return -xp.sum(xp.abs(eps), axis=-1) - D * math.log(2.0)
    if kind == "cauchy":
        return -xp.sum(xp.log(1.0 + eps * eps), axis=-1) - D * math.log(math.pi)
    if kind == "mv_cauchy":
        return math.log(_iso_const(D)) - 0.5 * (D + 1) * xp.log(1.0 + _sq_norm(eps, xp=xp))
    if kind == "uniform":
        return xp.zeros_like(eps[..., 0]) - D * math.log(2.0)
    raise ValueError(f"proposal.kind: expected one of {', '.join(repr(k) for k in PROPOSAL_KINDS)}; got {kind!r}")


def check_proposal_shape(proposal, sizes: dict, name: str = "proposal") -> Any:
    if not isinstance(proposal, Proposal):
        raise TypeError(f"{name}: expected a refattn.rpe.spectra.Proposal; got {type(proposal).__name__}")
    if proposal.kind not in PROPOSAL_KINDS:
        raise ValueError(f"{name}.kind: expected one of {', '.join(repr(k) for k in PROPOSAL_KINDS)}; "
                         f"got {proposal.kind!r}")
    xp = namespace(proposal.loc, proposal.scale, names=(f"{name}.loc", f"{name}.scale"))
    check_shape(f"{name}.loc", proposal.loc, "D", sizes)
    if proposal.scale.ndim != 0:
        check_shape(f"{name}.scale", proposal.scale, "D", sizes)
    check_finite(f"{name}.loc", proposal.loc, xp=xp)
    check_finite(f"{name}.scale", proposal.scale, xp=xp)
    _positive(f"{name}.scale", proposal.scale, xp=xp)
    return xp


def _tail(spectrum, D):
    """How fast |g| decays: ('gauss', tau) |g| <~ exp(-|xi|^2/(2 tau^2)); ('exp', b) |g| ~ exp(-b|xi_j|);
    ('iso_power', beta) |g| ~ |xi|^-beta; ('prod_power', k) |g| ~ prod_j |xi_j|^-k; ('not_integrable',)."""
    if isinstance(spectrum, Shifted):
        return _tail(spectrum.base, D)
    if isinstance(spectrum, GaussianMixture):
        return ("gauss", float(max(float(s) for s in _to_list(spectrum.sigma))))
    if isinstance(spectrum, GaussianKernel):
        return ("gauss", 1.0 / (_TWO_PI * float(spectrum.length)))
    if isinstance(spectrum, GaussianBasis):
        return ("gauss", 1.0 / (_TWO_PI * float(min(float(s) for s in _to_list(spectrum.sigma)))))
    if isinstance(spectrum, LaplaceKernel):
        return ("iso_power", D + 1)
    if isinstance(spectrum, CauchyKernel):
        return ("exp", _TWO_PI * float(spectrum.length))
    if isinstance(spectrum, (Box, SinPower)):
        return ("not_integrable",)
    if isinstance(spectrum, BSpline):
        return ("not_integrable",) if spectrum.k == 1 else ("prod_power", spectrum.k)
    raise TypeError(f"spectrum: unknown family {type(spectrum).__name__}")


def _to_list(x):
    xp = namespace(x)
    flat = xp.reshape(x, (-1,))
    return [float(flat[i]) for i in range(flat.shape[0])]


def check_proposal(spectrum, proposal, *, allow_truncation: bool = False) -> None:
    """Reject a spectrum/proposal pair whose estimator is silently biased or has infinite variance.

    Two conditions (FLT Theorem 4.1 needs the first, Lemma A.2 / Theorem A.3 the second):

    * **support**: p > 0 wherever g != 0. Every family here has g != 0 on an unbounded set, so the bounded
      ``"uniform"`` proposal truncates the Fourier integral: the estimator then converges to the truncated
      integral, not to f. Accepted only with ``allow_truncation=True`` (to measure that bias).
    * **finite variance**: int |g|^2 / p < inf, decided from the tails of g and p (documented per case in the
      message). Boxes (and the printed sin^k form, and BSpline with k = 1) fail under every proposal on R^D.

    Raises
    ------
    ValueError
        Saying which condition fails and why.
    """
    sizes = check_spectrum(spectrum)
    check_proposal_shape(proposal, sizes)
    D = int(proposal.loc.shape[-1])
    kind = proposal.kind
    scales = _to_list(proposal.scale)
    s_min = min(scales)
    fam = type(spectrum).__name__ if not isinstance(spectrum, Shifted) else f"Shifted({type(spectrum.base).__name__})"
    tail = _tail(spectrum, D)
    if kind == "uniform":
        if not allow_truncation:
            raise ValueError(
                f"proposal: the 'uniform' proposal has bounded support (loc +- scale) but g of {fam} is nonzero "
                "outside it: p must be positive wherever g != 0, otherwise the estimator is silently biased (it "
                "estimates the truncated Fourier integral, not f). Pass allow_truncation=True to measure that bias")
        return
    if tail[0] == "not_integrable":
        raise ValueError(
            f"proposal: {fam} has int |g| = inf (its g decays like 1/|xi|), so the importance weight g/p has "
            f"E|g/p| = int |g| = inf under every proposal ('{kind}' included): the estimator of Theorem 4.1 has no "
            "mean, and by Cauchy-Schwarz (int |g|)^2 <= int |g|^2/p its variance is infinite too. Use a truncated "
            "proposal (kind='uniform', allow_truncation=True: biased, finite variance) or BSpline with k >= 2")
    bad = None
    if tail[0] == "gauss":
        tau = tail[1]
        if kind == "gaussian" and not s_min > tau / math.sqrt(2.0):
            bad = (f"|g|^2 ~ exp(-|xi|^2/tau^2) with tau = {tau:.6g} and 1/p ~ exp(|xi|^2/(2 s^2)): "
                   f"int |g|^2/p < inf needs every scale s > tau/sqrt(2) = {tau / math.sqrt(2.0):.6g}; "
                   f"got min scale {s_min:.6g}")
    elif tail[0] == "exp":
        b = tail[1]
        if kind == "gaussian":
            bad = (f"|g| decays like exp(-{b:.6g}|xi_j|) but 1/p grows like exp(|xi|^2/(2 s^2)) for the Gaussian "
                   "proposal: use 'laplace' (scale > 1/(2 b)), 'cauchy' or 'mv_cauchy'")
        elif kind == "laplace" and not s_min > 1.0 / (2.0 * b):
            bad = (f"|g|^2 ~ exp(-2 b |xi_j|) with b = {b:.6g} and 1/p ~ exp(|xi_j|/s): needs every scale "
                   f"s > 1/(2 b) = {1.0 / (2.0 * b):.6g}; got min scale {s_min:.6g}")
    elif tail[0] == "iso_power":
        if kind in ("gaussian", "laplace"):
            bad = (f"|g| decays like |xi|^-{tail[1]} (a power) but 1/p grows exponentially for the '{kind}' "
                   "proposal: use 'mv_cauchy' (its own spectral density)")
        elif kind == "cauchy" and D >= 2:
            bad = (f"|g|^2/p ~ |xi|^-{2 * tail[1]} prod_j (1 + xi_j^2) ~ |xi|^-2 along the diagonal, not "
                   f"integrable in D = {D} >= 2: use 'mv_cauchy'")
    elif tail[0] == "prod_power":
        k = tail[1]
        if kind in ("gaussian", "laplace"):
            bad = (f"|g| decays like |xi_j|^-{k} (a power) but 1/p grows exponentially for the '{kind}' "
                   "proposal: use 'cauchy' (finite variance for k >= 2)")
        elif kind == "mv_cauchy" and not 2 * k > D + 2:
            bad = (f"along an axis |g|^2/p ~ |xi_1|^(D + 1 - 2k) = |xi_1|^{D + 1 - 2 * k}: not integrable unless "
                   f"2k > D + 2 (k = {k}, D = {D}): use 'cauchy' (product)")
    if bad is not None:
        raise ValueError(f"proposal: the importance weights of {fam} under the '{kind}' proposal have infinite "
                         f"variance (int |g|^2/p = inf): {bad}")


def kernel_proposal(spectrum, D: int) -> Proposal:
    """The optimal proposal p = |g| / int |g| of a shift-invariant kernel in D dimensions (its own spectral
    density; App. A.4): Gaussian of scale 1/(2 pi l) for GaussianKernel, isotropic multivariate Cauchy of scale
    1/(2 pi l) for LaplaceKernel, product Laplace of scale 1/(2 pi l) for CauchyKernel. The importance weight
    g/p is then the constant C, and c = sup |g|/p = C = int |g| is the smallest possible (Theorem 4.2's c).

    The scale is computed from the current length; when the length is learned, rebuild the proposal each step
    and chain its gradient: ``dlength += dscale * (-scale / length)``.
    """
    if not isinstance(spectrum, (GaussianKernel, LaplaceKernel, CauchyKernel)):
        raise TypeError(f"spectrum: kernel_proposal needs GaussianKernel, LaplaceKernel or CauchyKernel; "
                        f"got {type(spectrum).__name__}")
    from .._xp import check_positive_int, device_of

    D = check_positive_int(D, "D")
    check_spectrum(spectrum)
    xp = namespace(spectrum.length)
    kind = {GaussianKernel: "gaussian", LaplaceKernel: "mv_cauchy", CauchyKernel: "laplace"}[type(spectrum)]
    loc = xp.zeros((D,), dtype=spectrum.length.dtype, device=device_of(spectrum.length))
    return Proposal(kind, loc, 1.0 / (_TWO_PI * spectrum.length))
