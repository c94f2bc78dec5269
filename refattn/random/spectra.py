"""NumPy-only edge: draws and initialisations for the KL-Transformer's learnable spectra (Chowdhury §2.1):
GMM (Eqs. 4-5, 10), FastFood (Eqs. 6, 12), generative (Eqs. 7, 11); move them with :func:`gmm_as_xp` etc."""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy as np

from ..features.fastfood_transform import FastFoodParams, padded_dim
from ..features.generator_network import GeneratorParams, GeneratorState
from ..features.gmm_spectrum import GMMParams
from .. import limits
from .._docs import fill_doc
from .common import as_xp, check_dtype_arg, check_real_draw, check_rng
from .layers import init_batchnorm, init_dense

__all__ = ["init_gmm", "init_gmm_authors",
           "draw_gmm_noise", "draw_gmm_antithetic_noise", "gmm_as_xp", "draw_fastfood",
           "fastfood_as_xp", "draw_generator_noise", "init_generator"]

_RNG = """
rng : numpy.random.Generator
    Required (``None`` is rejected).
"""
_C = """
C : int
    Number of components, > 0.
"""
_HEAD = """
d : int
    Head width.
"""
_DTYPE = """
dtype : float32 or float64
    Returned dtype.
"""
_SIZES = """
ValueError
    Non-positive sizes.
"""
_AS_XP = """
like : array
    An array of the target namespace, dtype and device.
"""
_NOT_REAL = """
TypeError
    A parameter that is not a real array (a complex or bool cast would lose information).
"""


def _pos_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name}: expected a positive integer; got {v!r}")
    if v <= 0:
        raise ValueError(f"{name}: expected a positive integer; got {v}")
    return int(v)


@fill_doc(head=_HEAD, rng=_RNG, c=_C, dtype=_DTYPE)
def init_gmm(rng: np.random.Generator, C: int, d: int, *, covariance: str = "full", mu_scale: float = 0.0,
             s_scale: float = 1.0, dtype: Any = np.float64) -> GMMParams:
    """Initial GMM spectrum parameters: equal weights, means ``mu_scale * N(0, I)``, factors ``s_scale * I``.

    Parameters
    ----------
    {rng}
    {c}
    {head}
    covariance : {"full", "diagonal"}
        ``"full"``: S of shape (C, d, d) (Sigma_c = S_c S_c^T); ``"diagonal"``: S of shape (C, d) holding the
        standard deviations (Sigma_c = diag(S_c^2)), the GMM-PRF setting of the paper's complexity analysis.
    mu_scale, s_scale : float
        Scales of the initial means and factors (mu = 0, S = I gives the Gaussian kernel at start).
    {dtype}

    Returns
    -------
    GMMParams
        ``logits (C,)`` zeros (pi = 1/C, the paper's assumption), ``mu (C, d)``, ``S``.
    """
    check_rng(rng)
    C, d = _pos_int("C", C), _pos_int("d", d)
    limits.check_nbytes(2 * C * (d * d + 2 * d + 1) * 8, f"C, d (init_gmm: C = {C}, d = {d})")
    dt = check_dtype_arg(dtype)
    if covariance not in ("full", "diagonal"):
        raise ValueError(f"covariance: expected 'full' or 'diagonal'; got {covariance!r}")
    logits = np.zeros(C, dtype=dt)
    mu = (mu_scale * rng.standard_normal((C, d))).astype(dt)
    if covariance == "full":
        S = np.broadcast_to(s_scale * np.eye(d), (C, d, d)).astype(dt)
    else:
        S = np.full((C, d), s_scale, dtype=dt)
    return GMMParams(logits=logits, mu=mu, S=S)


@fill_doc(head=_HEAD, rng=_RNG, c=_C, dtype=_DTYPE)
def init_gmm_authors(rng: np.random.Generator, C: int, d: int, *, features: str, heads: int,
                     covariance: str = "full", dtype: Any = np.float64) -> GMMParams:
    r"""The KL authors' random GMM start (their ``fast_transformers/feature_maps/fourier_features.py``) for C
    components: equal weights, and per component the law of one of their heads, H (`heads`) in the fans.

    * ``"rks"`` (l. 989-996, ``xavier_uniform_`` of their ``(H, d, d)`` factor): entries ``U(+-b)``, ``b^2 =
      6 / (d^2 + H d)``, so ``E[S S^T] = 2 / (d + H) I``; means ``U(+-1/d)``. Full factors only.
    * ``"prf"`` (l. 559-566; l. 615 scales the noise by ``exp(sigma / 2)``, a log-variance): ``S = exp(s /
      2)``, ``s ~ U(+-sqrt(6 / (d + H)))``, (d,) or as a (d, d) diagonal; means ``U(+-1/sqrt(d))``.

    Parameters
    ----------
    {rng}
    {c}
    {head}
    features : {"rks", "prf"}
    heads : int
        The model's heads H.
    covariance : {"full", "diagonal"}
        As :func:`init_gmm`.
    {dtype}

    Returns
    -------
    GMMParams
        ``logits (C,)`` zeros, ``mu (C, d)``, ``S (C, d, d)`` or ``(C, d)`` (S drawn first, then mu).

    Raises
    ------
    ValueError
        Bad sizes, `features` or `covariance`, or ``"rks"`` with ``"diagonal"``.
    """
    check_rng(rng)
    C, d, H = _pos_int("C", C), _pos_int("d", d), _pos_int("heads", heads)
    limits.check_nbytes(2 * C * (d * d + 2 * d + 1) * 8,
                        f"C, d (init_gmm_authors: C = {C}, d = {d})")
    dt = check_dtype_arg(dtype)
    if features not in ("rks", "prf"):
        raise ValueError(f"features: expected 'rks' or 'prf'; got {features!r}")
    if covariance not in ("full", "diagonal"):
        raise ValueError(f"covariance: expected 'full' or 'diagonal'; got {covariance!r}")
    if features == "rks" and covariance == "diagonal":
        raise ValueError("covariance: the authors' GMM-RKS start is a full (d, d) factor per component; "
                         "got covariance='diagonal' with features='rks' (expected 'full')")
    logits = np.zeros(C, dtype=dt)
    if features == "rks":
        b = np.sqrt(6.0 / (d * d + H * d))
        S = rng.uniform(-b, b, size=(C, d, d))                                       # (C, d, d)
        mu = rng.uniform(-1.0 / d, 1.0 / d, size=(C, d))                             # (C, d)
    else:
        b = np.sqrt(6.0 / (d + H))
        std = np.exp(rng.uniform(-b, b, size=(C, d)) / 2)                            # (C, d)
        S = std if covariance == "diagonal" else std[:, :, None] * np.eye(d)         # (C, d) or (C, d, d)
        mu = rng.uniform(-1.0 / np.sqrt(d), 1.0 / np.sqrt(d), size=(C, d))           # (C, d)
    return GMMParams(logits=logits, mu=mu.astype(dt), S=S.astype(dt))


@fill_doc(dtype=_DTYPE, head=_HEAD, rng=_RNG, c=_C)
def draw_gmm_noise(rng: np.random.Generator, C: int, M: int, d: int, *,
                   dtype: Any = np.float64) -> np.ndarray:
    r"""Reparameterisation noise ``n ~ N(0, I_d)`` for the GMM spectrum (Chowdhury et al. Eq. (5)).

    Component c's rows give ``omega = mu_c + S_c n`` (the factor convention of :mod:`refattn.features.gmm`).

    Parameters
    ----------
    {rng}
    {c}
    M : int
        Number of frequencies, a multiple of C (each component gets M/C).
    {head}
    {dtype}

    Returns
    -------
    (C, M/C, d) numpy.ndarray

    Raises
    ------
    ValueError
        Non-positive sizes, or M not a multiple of C (non-integer sizes, a bad `rng`/`dtype`: TypeError).
    """
    check_rng(rng)
    C, M, d = _pos_int("C", C), _pos_int("M", M), _pos_int("d", d)
    limits.check_nbytes(2 * M * d * 8, f"M, d (draw_gmm_noise: M = {M} rows of width d = {d})")
    if M % C:
        raise ValueError(f"M: expected a multiple of C = {C} (M/C frequencies per component); got M = {M}")
    return rng.standard_normal((C, M // C, d)).astype(check_dtype_arg(dtype))


@fill_doc(dtype=_DTYPE, head=_HEAD, rng=_RNG)
def draw_gmm_antithetic_noise(rng: np.random.Generator, M: int, d: int, *,
                              dtype: Any = np.float64) -> np.ndarray:
    r"""Antithetic GMM noise (Chowdhury et al. Theorem 3's special case): two slices of the *same* draw.

    With ``gmm_antithetic_params(mu, S)`` (``mu_1 = -mu_2 = mu``, ``S_1 = S_2 = S``, equal weights) the
    frequencies are ``omega_j = mu + S eta_j`` and ``chi_j = -mu + S eta_j``, and
    ``cos(omega^T p) + cos(chi^T p) = 2 cos(mu^T p) cos(eta^T S^T p)``.

    Parameters
    ----------
    {rng}
    M : int
        Number of frequencies, even (M/2 antithetic pairs; odd or non-positive: ``ValueError``).
    {head}
    {dtype}

    Returns
    -------
    (2, M/2, d) numpy.ndarray
        Both slices equal.
    """
    check_rng(rng)
    M, d = _pos_int("M", M), _pos_int("d", d)
    limits.check_nbytes(2 * M * d * 8, f"M, d (draw_gmm_antithetic_noise: M = {M} rows of width d = {d})")
    if M % 2:
        raise ValueError(f"M: expected an even number (M/2 antithetic pairs); got M = {M}")
    eta = rng.standard_normal((M // 2, d)).astype(check_dtype_arg(dtype))
    return np.stack([eta, eta])


@fill_doc(like=_AS_XP, not_real=_NOT_REAL)
def gmm_as_xp(params: GMMParams, *, like: Any) -> GMMParams:
    r"""GMM parameters (NumPy) as arrays of `like`'s namespace, dtype and device.

    Parameters
    ----------
    params : GMMParams
        From :func:`init_gmm`.
    {like}

    Returns
    -------
    GMMParams

    Raises
    ------
    {not_real}
    """
    for n, a in zip(params._fields, params, strict=True):
        check_real_draw(a, f"params.{n}")
    return GMMParams(*(as_xp(a, like=like) for a in params))


@fill_doc(rng=_RNG)
def draw_fastfood(rng: np.random.Generator, M: int, d: int, *, s_law: str = "chi",
                  dtype: Any = np.float64) -> FastFoodParams:
    r"""One FastFood draw for M frequencies of width d (Le et al. 2013; Chowdhury et al. Eq. (6)).

    d is padded to D = next power of two; M / D independent blocks (the paper's "M | d_q" reversed), each with
    ``B ~ uniform{-1, +1}``, ``G ~ N(0, 1)``, ``perm`` a uniform permutation, and ``S`` by `s_law`:
    ``"chi"``: ``S_ii = s_i / ||G||_F``, ``s_i ~ chi(D)`` iid (rows exactly ``N(0, I / sigma^2)``,
    independent); ``"identity"``: ``S = I`` (rows Gaussian only marginally; a block's rows share the norm
    ``||G||_F / sigma``).

    Parameters
    ----------
    {rng}
    M : int
        Number of frequencies, a multiple of D.
    d : int
        Input width (padded to D).
    s_law : {"chi", "identity"}
        The law of the scaling diagonal S.
    dtype : float32 or float64
        Dtype of S, G and B.

    Returns
    -------
    FastFoodParams
        ``S, G, B`` float (n_blocks, D); ``perm`` int64 (n_blocks, D).

    Raises
    ------
    ValueError
        Non-positive sizes, M not a multiple of D, or an unknown `s_law`.
    """
    check_rng(rng)
    M, d = _pos_int("M", M), _pos_int("d", d)
    limits.check_nbytes(8 * M * 8, f"M (draw_fastfood: M = {M} frequencies, 4 arrays of M entries)")
    dt = check_dtype_arg(dtype)
    D = padded_dim(d)
    if M % D:
        raise ValueError(f"M: expected a multiple of the padded width D = {D} (d = {d} padded to a power of "
                         f"two; M / D blocks are stacked); got M = {M}")
    if s_law not in ("chi", "identity"):
        raise ValueError(f"s_law: expected 'chi' or 'identity'; got {s_law!r}")
    nb = M // D
    B = rng.choice(np.array([-1.0, 1.0]), size=(nb, D))
    G = rng.standard_normal((nb, D))
    perm = np.stack([rng.permutation(D) for _ in range(nb)]).astype(np.int64)
    if s_law == "chi":
        s = np.sqrt(rng.chisquare(D, size=(nb, D)))                                # chi(D)
        S = s / np.linalg.norm(G, axis=1, keepdims=True)                            # / ||G||_F per block
    else:
        S = np.ones((nb, D))
    return FastFoodParams(S=S.astype(dt), G=G.astype(dt), B=B.astype(dt), perm=perm)


@fill_doc(like=_AS_XP, not_real=_NOT_REAL)
def fastfood_as_xp(params: FastFoodParams, *, like: Any) -> FastFoodParams:
    r"""FastFood parameters (NumPy) in `like`'s namespace: S, G, B with `like`'s dtype, perm as int64.

    Parameters
    ----------
    params : FastFoodParams
        From :func:`draw_fastfood`.
    {like}

    Returns
    -------
    FastFoodParams

    Raises
    ------
    {not_real}
    """
    xp = array_api_compat.array_namespace(like)
    for n in ("S", "G", "B"):
        check_real_draw(getattr(params, n), f"params.{n}")
    perm = check_real_draw(params.perm, "params.perm", integer=True)
    perm = xp.asarray(np.asarray(perm, dtype=np.int64), device=array_api_compat.device(like))
    return FastFoodParams(S=as_xp(params.S, like=like), G=as_xp(params.G, like=like),
                          B=as_xp(params.B, like=like), perm=perm)


@fill_doc(dtype=_DTYPE, rng=_RNG, sizes=_SIZES)
def draw_generator_noise(rng: np.random.Generator, M: int, d_noise: int, *,
                         dtype: Any = np.float64) -> np.ndarray:
    r"""Generator input noise ``n ~ N(0, I)`` (rho_0 of Chowdhury et al. Eqs. (7), (11)).

    Parameters
    ----------
    {rng}
    M, d_noise : int
        Number of frequencies (rows) and noise width (the generator's input width).
    {dtype}

    Returns
    -------
    (M, d_noise) numpy.ndarray

    Raises
    ------
    {sizes}
    """
    check_rng(rng)
    M, d_noise = _pos_int("M", M), _pos_int("d_noise", d_noise)
    limits.check_nbytes(2 * M * d_noise * 8, f"M, d_noise (draw_generator_noise: {M} x {d_noise})")
    return rng.standard_normal((M, d_noise)).astype(check_dtype_arg(dtype))


@fill_doc(rng=_RNG, sizes=_SIZES, dtype=_DTYPE)
def init_generator(rng: np.random.Generator, d: int, *, d_noise: int | None = None, width: int | None = None,
                   n_hidden: int = 4, dtype: Any = np.float64):
    r"""Weights of the generator MLP of Generative-RKS/PRF (Chowdhury et al. Eqs. (7), (11)).

    n_hidden x (FC + BatchNorm + LeakyReLU), then FC + tanh, from :func:`init_dense` and
    :func:`init_batchnorm`; widths d_noise -> width (x n_hidden) -> d. The defaults are the paper's
    "4 + 1 layer constant width generator".

    Parameters
    ----------
    {rng}
    d : int
        Output width (the head width).
    d_noise, width : int, optional
        Input and hidden widths (default d).
    n_hidden : int
        Number of hidden layers.
    {dtype}

    Returns
    -------
    (GeneratorParams, GeneratorState)
        See :mod:`refattn.features.generative`.

    Raises
    ------
    {sizes}
    """
    check_rng(rng)
    d = _pos_int("d", d)
    d_noise = _pos_int("d_noise", d if d_noise is None else d_noise)
    width = _pos_int("width", d if width is None else width)
    n_hidden = _pos_int("n_hidden", n_hidden)
    dense, norms, states = [], [], []
    fan_in = d_noise
    for _ in range(n_hidden):
        dense.append(init_dense(rng, fan_in, width, dtype=dtype))
        bp, bs = init_batchnorm(width, dtype=dtype)
        norms.append(bp)
        states.append(bs)
        fan_in = width
    out = init_dense(rng, fan_in, d, dtype=dtype)
    params = GeneratorParams(hidden=tuple(dense), norms=tuple(norms), out=out)
    return params, GeneratorState(norms=tuple(states))
