r"""Fourier spectra g of RPE functions f for FourierLearner-Transformers (FLT), with their proposals.

Choromanski et al., *Learning a Fourier Transform for Linear Relative Positional Encodings in Transformers*
(FLT), Sec. 4.1 (Theorem 4.1), Sec. 4.3, Sec. 5.3, App. A and B. The Fourier convention is the paper's:

    g(xi) = int f(x) exp(-2 pi i x . xi) dx,        f(x) = int g(xi) exp(2 pi i x . xi) dxi.

A *spectrum* is a NamedTuple of parameter arrays (the learnable ones) plus static integers; its type says
which family it is. Each family lives in its own module (its container, g, the gradient of g, f, its tail
class and so its proposal facts, side by side) and implements one protocol,
``refattn.rpe.spectra._common.Family``; the generic functions in ``core`` look the family up once in
``core.FAMILIES``: ``spectrum_g(spectrum, xi)`` (g at ``xi: (r, D)`` as ``(g_re, g_im)``, ``g_im``
``None`` for a real g) and its backward (to the parameters and ``xi``); ``spectrum_f(spectrum, delta)``, the
RPE function at offsets ``delta: (..., D)`` (``Re f`` where f is complex, which refattn's real features
estimate; the exact mask ``N = [f(r_i - r_j)]`` of Definition 3.1 is :func:`rpe_mask`); and the tail class
that :func:`check_proposal` uses to reject a proposal that does not cover the support of g (a truncated
proposal is silently *biased*) or whose importance weights have infinite variance (``int |g|^2 / p = inf``).

Families (``T`` mixture components, ``D`` position dimension; module in brackets):

=====================  ==============================================  ====================================
family [module]        g(xi)                                           f(Delta)
=====================  ==============================================  ====================================
GaussianMixture        sum_t w_t exp(-|xi - mu_t|^2 / 2 sigma_t^2)     Re f = sum_t w_t (2 pi sigma_t^2)^(D/2)
[gaussian_mixture]     (Sec. 4.3)                                      exp(-2 pi^2 sigma_t^2 |D|^2)
                                                                       cos(2 pi mu_t.D)
GaussianKernel         C (2 pi l^2)^(D/2) exp(-2 pi^2 l^2 |xi|^2)      C exp(-|D|^2 / 2 l^2)
[gaussian_kernel]
LaplaceKernel          C (2 pi l)^D c_D (1 + (2 pi l |xi|)^2)^-(D+1)/2  C exp(-|D| / l)
[laplace_kernel]                                                       (Matern-1/2, isotropic)
CauchyKernel           C prod_j pi l exp(-2 pi l |xi_j|)               C prod_j 1 / (1 + D_j^2 / l^2)
[cauchy_kernel]
Box [box]              sum_t w_t prod_j sin(2 pi v_tj xi_j)/(pi xi_j)  sum_t w_t prod_j 1[|D_j| <= v_tj]
                                                                       (Eq. 4, 20; C outside the product)
SinPower [sin_power]   C prod_j sin^k(2 pi v_j xi_j) / (pi xi_j)       printed Sec. 4.3 form; odd k only
BSpline [bspline]      C prod_j [sin(2 pi v_j xi_j) / (pi xi_j)]^k     C prod_j (1_[-v_j, v_j])^{*k}(D_j)
GaussianBasis          sum_t w_t exp(-2 pi^2 sigma_t^2 |xi|^2)         sum_t w_t (sqrt(2 pi) sigma_t)^-D
[gaussian_basis]       (Sec. 5.3, D = 3 in the paper)                  exp(-|D|^2 / 2 sigma_t^2)
Shifted(base, s)       exp(-2 pi i s . xi) g_base(xi)  (Hermitian)     f_base(D - s): a real f, not even
[shifted]
=====================  ==============================================  ====================================

``c_D = Gamma((D + 1)/2) / pi^((D + 1)/2)``. Each shift-invariant kernel's g is ``C`` times a probability
density (Bochner), and :func:`kernel_proposal` returns that density as the proposal, for which the importance
weight ``g/p`` is the constant C (the optimal proposal of App. A.4).

**Boxes, the printed sin^k form and** ``BSpline`` **with k = 1 have no Monte Carlo estimator** (``int |g| =
inf``): :func:`check_proposal` rejects them unless ``allow_truncation=True``; at the jump ``|Delta| = v``
``spectrum_f`` returns the midpoint C/2. The argument, and why the printed sin^k form is no RPE mask for even
k: ``docs/guide/flt.md``.
"""

from .box import Box
from .bspline import BSpline
from .cauchy_kernel import CauchyKernel
from .core import (
    SpectrumGCache,
    SpectrumGGrads,
    check_spectrum,
    rpe_mask,
    spectrum_arrays,
    spectrum_dim,
    spectrum_f,
    spectrum_g,
    spectrum_g_bwd,
    spectrum_g_fwd,
)
from .gaussian_basis import GaussianBasis
from .gaussian_kernel import GaussianKernel
from .gaussian_mixture import GaussianMixture
from .laplace_kernel import LaplaceKernel
from .proposals import PROPOSAL_KINDS, Proposal, check_proposal, check_proposal_shape, kernel_proposal
from .proposals import proposal_log_density, scale_floor
from .shifted import Shifted
from .sin_power import SinPower

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
    "scale_floor",
    "spectrum_dim",
    "spectrum_arrays",
    "check_proposal_shape",
    "SpectrumGCache",
    "SpectrumGGrads",
]
