"""Helpers shared by the FLT (Choromanski et al.) claim modules: block estimates of N1 N2^T, the spectrum
cases and the divergence measurement of int |g| for the local RPE.

Functions the checks consume (``flt_features``, ``spectrum_g``, ...) are looked up in the calling module's
namespace at call time, so a power mutation (:mod:`paper_checks.power`) that wraps them there is seen."""

from __future__ import annotations

import math

import numpy as np

from refattn.rpe import (
    BSpline,
    CauchyKernel,
    GaussianBasis,
    GaussianKernel,
    GaussianMixture,
    LaplaceKernel,
    Proposal,
    kernel_proposal,
)

from ..rounding import log_density_bound, mean_of_equal_replicates, weight_depth
from ..rules import value

A = np.array
N_SE = 5.0
SE_FLOOR = 1e-14           # an SE at or below this is rounding noise: the entry is compared exactly


def blocks(features, pos, eps, spec, prop, n, **kw):
    """n independent estimates N1 N2^T from one call of `features` (refattn's ``flt_features``), block b using
    its own r columns: shape (n, L, L)."""
    N1, N2 = (np.asarray(x) for x in features(pos, eps, spec, prop, **kw))
    L = N1.shape[0]
    r = N1.shape[1] // 2 // n
    return n * np.einsum("icbk,jcbk->bij", N1.reshape(L, 2, n, r), N2.reshape(L, 2, n, r))


def block_tolerance(est, eps, kind: str, r: int) -> float:
    """The rounding bound of a zero-SE entry of :func:`blocks` (a kernel's own density on the diagonal, where
    every block equals C exactly): one block is n times an einsum of 2r products of the factors
    ``sqrt(|w|/r) cos a`` and ``sqrt(|w|/r) sin a`` (at most 2r + 8 roundings beyond the weight's,
    :func:`~paper_checks.rounding.weight_depth`; ``cos^2 + sin^2`` of one computed angle is 1 up to 2u, so
    the angle's own error cancels), and the mean over the n blocks adds ``gamma_n``
    (:func:`~paper_checks.rounding.mean_of_equal_replicates`, scale ``max |est|``)."""
    depth = 2 * r + 8 + weight_depth(log_density_bound(eps, kind))
    return mean_of_equal_replicates(est.shape[0], depth, np.max(np.abs(est)))


def cases(D):
    """(name, spectrum, proposal) for the unbiasedness checks: a Gaussian mixture, a B-spline under a Cauchy
    proposal, a Gaussian basis, and the three shift-invariant kernels under their own densities."""
    z, lin = np.zeros(D), np.linspace(0.4, 0.9, D)
    mix = GaussianMixture(A([0.8, -0.3]), np.stack([0.2 * lin, -0.1 * lin]), A([0.3, 0.5]))
    out = [("gaussian-mixture", mix,
            Proposal("gaussian", z, A(0.6))),
           ("bspline-k2", BSpline(A(0.9), lin, 2), Proposal("cauchy", z, A(0.7))),
           ("gaussian-basis", GaussianBasis(A([1.0, 0.5]), A([0.5, 0.9])), Proposal("gaussian", z, A(0.5)))]
    for spec in (GaussianKernel(A(1.2), A(0.8)), LaplaceKernel(A(1.2), A(0.8)), CauchyKernel(A(1.2), A(0.8))):
        out.append((type(spec).__name__, spec, kernel_proposal(spec, D)))
    return out


def abs_g_integral(g, v: float, B: float) -> float:
    """int_{-B}^{B} |g(xi)| dxi for an even g whose oscillation has half-period 1/(2v) (the sinc of a box of
    radius v): 32-point Gauss-Legendre on every half-period (exact to rounding for sinc; adaptive quadrature
    cannot follow 10^4 oscillations). `g` maps an (n, 1) array of frequencies to n values."""
    xg, wg = np.polynomial.legendre.leggauss(32)
    h = 1.0 / (2.0 * v)
    edges = np.minimum(np.arange(math.ceil(B / h) + 1) * h, B)
    lo, hi = edges[:-1], edges[1:]
    xi = (lo + hi) / 2 + (hi - lo) / 2 * xg[:, None]                               # (32, half-periods)
    vals = np.abs(np.asarray(g(xi.reshape(-1, 1)), dtype=np.float64)).reshape(xi.shape)
    return float(2 * np.sum((hi - lo) / 2 * wg[:, None] * vals))


def divergence(g, C: float, v: float) -> dict:
    """Does int_{-B}^{B} |g| keep growing (no mean under any proposal), for g oscillating like C sin(2 pi v
    xi)/(pi xi)? Measured at B = 10, 100, 1000 (quadrature exact to rounding, :func:`abs_g_integral`); returns
    the evidence items (numbers only; `g` is evaluated by the caller's ``spectrum_g``), decided by
    :func:`diverges`.

    Derivation of the tolerance. On half-period k (N = 2vB half-periods up to B), int |sin(2 pi v xi)|/(pi
    xi) = (1/pi) int_0^1 sin(pi s)/(k + s) ds = (2/pi^2)/k - (1/pi^2)/k^2 + O(1/k^3). Summed over a decade the
    1/(2N) end terms of the harmonic sum cancel the 1/k^2 sum to first order (Euler-Maclaurin), so an
    increment per decade from B0 equals (4C/pi^2) ln 10 up to a relative remainder below 1/(2 v B0)^2 (its
    coefficient, measured: 0.0077, so the bound has a margin of 100). Hence for log growth the ratio of
    the increments of two successive decades is 1 within ``ratio tolerance`` = 1/(2 v B0)^2 (B0 = 10, the
    first decade), and the last increment matches the law within (4C/pi^2) ln 10 / (2 v 100)^2 (``increment
    tolerance``). An integrable tail |g| ~ 1/|xi|^(1+e) gives a ratio 10^-e, outside the tolerance for every
    e > (2 v B0)^-2 / ln 10 (2.7e-4 at v = 2): the resolution of a range B <= 1000. The ratio is scale-free,
    so a g off by a constant still diverges; the match to the law is reported (refattn's g is the sinc)."""
    Bs = (10.0, 100.0, 1000.0)
    vals = [abs_g_integral(g, v, B) for B in Bs]
    inc = np.diff(vals)
    rate = 4 * C / math.pi ** 2 * math.log(10)
    ratio_tol = 1.0 / (2 * v * Bs[0]) ** 2
    law_tol = rate / (2 * v * Bs[1]) ** 2
    return {"int_{-B}^{B} |g| for B = 10, 100, 1000": vals, "increments per decade": inc.tolist(),
            "predicted increment (4C/pi^2) ln 10": rate, "increment tolerance": law_tol,
            "max |increment - predicted|": float(np.max(np.abs(inc - rate))),
            "last increment": float(inc[-1]),
            "increment ratio (last decade / first)": float(inc[-1] / inc[0]) if inc[0] > 0 else 0.0,
            "ratio tolerance 1/(2 v B0)^2": ratio_tol,
            "last increment matches the log law": bool(abs(inc[-1] - rate) <= law_tol)}


def diverges(ev: dict) -> bool:
    """int |g| = inf as measured by :func:`divergence`: the increments per decade do not shrink (the ratio of
    the last decade's to the first's is at least 1 - ratio tolerance, and positive). Reads the evidence
    through :func:`paper_checks.rules.value`."""
    return (value(ev, "last increment") > 0
            and value(ev, "increment ratio (last decade / first)")
            >= 1.0 - value(ev, "ratio tolerance 1/(2 v B0)^2"))
