"""NumPy-only edge: initialisations for positional encodings, one family per section: Horn et al. S1
(:func:`init_s1_params`) and FLT (:func:`draw_flt_noise`, the noise of ``xi = loc + scale eps``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import limits
from ..rpe.s1_rotation import S1Params
from .._docs import fill_doc
from .common import check_dtype_arg, check_rng

__all__ = ["init_s1_params", "draw_flt_noise", "FLT_NOISE_KINDS"]

_RNG = """
rng : numpy.random.Generator
    Required (``None`` is rejected).
"""
_DTYPE = """
dtype : float32 or float64
    Dtype of the returned arrays.
"""


# ----------------------------------------------------------------------------------------------------------
# Horn et al. Strategy 1


@fill_doc(rng=_RNG, dtype=_DTYPE)
def init_s1_params(rng: np.random.Generator, n_axes: int = 1, n_lengthscales: int = 4, *,
                   base: float = 10000.0, alpha: float = 1.0, beta_std: float = 0.1, batch_shape: tuple = (),
                   dtype: Any = np.float64):
    r"""Initial Horn et al. S1 parameters ``S1Params(freqs, alpha, beta)``, each ``(*batch_shape, A, S)``.

    ``freqs[..., a, s] = base ** (-s / S)`` on every axis (the sinusoid ladder of Vaswani et al., d_model
    = 2S, as Horn et al. App. A.2); ``alpha`` constant, so the logit ``sum alpha cos(omega Delta)`` peaks
    at Delta = 0 (a locality prior); ``beta ~ N(0, beta_std^2)`` iid, the only random part (it breaks
    Delta -> -Delta).

    Parameters
    ----------
    {rng}
    n_axes, n_lengthscales : int
        A (1 for sequences, 2 for image grids) and S (the paper: 4).
    base : float
        Ladder base (10000 as in Vaswani et al.; a smaller base suits short grids such as 32 x 32).
    alpha, beta_std : float
        Initial value of every alpha (cosine weight); standard deviation of the initial betas (sine weights).
    batch_shape : tuple
        Leading axes, e.g. ``(H,)`` for per-head parameters (broadcast against the batch axes ``(..., H)``).
    {dtype}

    Returns
    -------
    refattn.rpe.S1Params

    Raises
    ------
    ValueError
        Non-positive `n_axes`/`n_lengthscales`, or a non-positive `base` (a bad `rng`/`dtype`: TypeError).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.random import init_s1_params
    >>> p = init_s1_params(np.random.default_rng(0), n_axes=1, n_lengthscales=2)
    >>> p.freqs, p.alpha                           # base ** (-s / S) for s = 0, 1
    (array([[1.  , 0.01]]), array([[1., 1.]]))
    """
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    for name, val in (("n_axes", n_axes), ("n_lengthscales", n_lengthscales)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val <= 0:
            raise ValueError(f"{name}: expected a positive integer; got {val!r}")
    if not (np.isfinite(base) and base > 0):
        raise ValueError(f"base: expected a positive finite number; got {base!r}")
    shape = tuple(int(s) for s in batch_shape) + (int(n_axes), int(n_lengthscales))
    limits.check_nbytes(4 * math.prod(shape) * 8, f"n_axes, n_lengthscales (init_s1_params: shape {shape})")
    ladder = float(base) ** (-np.arange(n_lengthscales) / n_lengthscales)               # (S,)
    freqs = np.broadcast_to(ladder, shape).astype(dt)                                   # (*b, A, S)
    alpha_arr = np.full(shape, float(alpha), dtype=dt)
    beta_arr = (float(beta_std) * rng.standard_normal(shape)).astype(dt)
    return S1Params(freqs=freqs, alpha=alpha_arr, beta=beta_arr)


# ----------------------------------------------------------------------------------------------------------
# FLT (Choromanski et al., FourierLearner-Transformers): proposal noise for the frequencies xi

#: The standard densities the FLT proposals are built on (``refattn.rpe.spectra.Proposal.kind``).
FLT_NOISE_KINDS = ("gaussian", "laplace", "cauchy", "mv_cauchy", "uniform")


@fill_doc(rng=_RNG, dtype=_DTYPE)
def draw_flt_noise(rng: np.random.Generator, r: int, D: int, kind: str = "gaussian", *,
                   dtype: Any = np.float64):
    r"""Standard noise ``eps: (r, D)`` for the FLT frequencies ``xi = loc + scale * eps``.

    FLT Theorem 4.1's iid ``xi_1..xi_r ~ p`` with a learnable loc and scale
    (:func:`refattn.rpe.flt_frequencies`; log-densities: ``refattn.rpe.spectra.proposal_log_density``).

    Parameters
    ----------
    {rng}
    r, D : int
        Number of frequencies and position dimension, >= 1.
    kind : {"gaussian", "laplace", "cauchy", "mv_cauchy", "uniform"}
        ``"gaussian"`` N(0, I_D) (the paper's, App. B); ``"laplace"``, ``"cauchy"``: iid standard;
        ``"mv_cauchy"``: ``z / |chi_1|`` (z ~ N(0, I_D), one chi per row: multivariate t_1); ``"uniform"``:
        the cube [-1, 1]^D.
    {dtype}

    Returns
    -------
    eps : (r, D) numpy.ndarray

    Raises
    ------
    ValueError
        Non-positive `r`/`D`, or an unknown `kind` (a bad `rng`/`dtype`: TypeError).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.random import draw_flt_noise
    >>> eps = draw_flt_noise(np.random.default_rng(0), 4, 2, "uniform")
    >>> eps.shape, bool(np.all(np.abs(eps) <= 1))
    ((4, 2), True)
    """
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    for name, val in (("r", r), ("D", D)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val <= 0:
            raise ValueError(f"{name}: expected a positive integer; got {val!r}")
    shape = (int(r), int(D))
    limits.check_nbytes(2 * shape[0] * shape[1] * 8, f"r, D (draw_flt_noise: r = {r} rows of width D = {D})")
    if kind == "gaussian":
        eps = rng.standard_normal(shape)
    elif kind == "laplace":
        eps = rng.laplace(0.0, 1.0, shape)
    elif kind == "cauchy":
        eps = rng.standard_cauchy(shape)
    elif kind == "mv_cauchy":
        eps = rng.standard_normal(shape) / np.abs(rng.standard_normal((shape[0], 1)))
    elif kind == "uniform":
        eps = rng.uniform(-1.0, 1.0, shape)
    else:
        raise ValueError(f"kind: expected one of {', '.join(repr(k) for k in FLT_NOISE_KINDS)}; got {kind!r}")
    return eps.astype(dt)
