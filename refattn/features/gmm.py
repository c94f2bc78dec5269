r"""GMM-RKS and GMM-PRF: the RKS and PRF maps on GMM frequencies, their kernels and errors (Chowdhury et al.
Eqs. 4-5, 9-10, Theorem 3).

The frequencies, their convention (``Sigma_c = S_c S_c^T``) and the deterministic assignment of M/C
frequencies per component are in :mod:`refattn.features.gmm_spectrum`.

**Kernels** (closed forms, :func:`gmm_rks_kernel`, :func:`gmm_prf_kernel`), with p = q - k and o = q + k:

    RKS (Eq. 4):            sum_c pi_c exp(-||S_c^T p||^2 / 2) cos(mu_c^T p)
    PRF (Eq. 9 offset):     sum_c pi_c exp(-|q|^2 - |k|^2 + mu_c^T o + ||S_c^T o||^2 / 2)

(PRF: the Gaussian kernel exp(-|q - k|^2 / 2) at mu = 0, S = I.)

**Mean squared error** (Theorem 3 re-derived for this estimator; the printed Eqs. 13-14 are checked in
``paper_checks/chowdhury/theorem3.py``). With s_c = ||S_c^T p||^2 and t_c = ||S_c^T o||^2:

    MSE_RKS = sum_c (C pi_c^2 / M) [ (1 + cos(2 mu_c^T p) e^{-2 s_c}) / 2 - cos^2(mu_c^T p) e^{-s_c} ]
    MSE_RKS (antithetic C = 2, mu_2 = -mu_1, S_1 = S_2, same noise) = (1/M) cos^2(mu^T p) (1 - e^{-s})^2
    MSE_PRF = sum_c (C pi_c^2 / M) e^{-2(|q|^2 + |k|^2 - mu_c^T o)} (e^{2 t_c} - e^{t_c})

Axes: ``...`` batch and heads, ``L`` positions, ``d`` head width, ``C`` components, ``M`` frequencies
(``Mc = M / C`` per component), ``Lq``/``Lk`` query/key positions.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_shape, namespace
from .projection import check_cotangent
from .gmm_spectrum import (GMM_PARAMS_DOC, FrequenciesCache, GMMParams, check_gmm_params,
                           check_gmm_params_struct, gmm_antithetic_params, gmm_frequencies_bwd,
                           gmm_frequencies_bwd_core, gmm_frequencies_fwd, gmm_frequencies_fwd_core,
                           gmm_weights_core)
from .positive import (gaussian_positive_features_bwd, gaussian_positive_features_fwd,
                       positive_features_stable_bwd, positive_features_stable_bwd_core,
                       positive_features_stable_fwd, positive_features_stable_fwd_core)
from .trig import (check_qk, trig_features_bwd, trig_features_bwd_core, trig_features_fwd,
                   trig_features_fwd_core)

__all__ = [
    "gmm_rks_features", "gmm_rks_features_fwd", "gmm_rks_features_bwd",
    "gmm_prf_features", "gmm_prf_features_fwd", "gmm_prf_features_bwd",
    "gmm_prf_features_stable", "gmm_prf_features_stable_fwd", "gmm_prf_features_stable_bwd",
    "GMMFeaturesGrads",
    "gmm_rks_kernel", "gmm_prf_kernel", "gmm_rks_mse", "gmm_rks_antithetic_mse", "gmm_prf_mse",
]

Array = Any

_X_NOISE_DOC = """
Parameters
----------
x : (..., L, d) array
    Queries or keys. Real floating (float32 or float64), finite; same namespace and dtype as `params`.
noise : (C, Mc, d) array
    ``N(0, I)`` draws, component-major (``refattn.random.draw_gmm_noise``, or ``draw_gmm_antithetic_noise``
    for Theorem 3's case); same namespace and dtype as `params`.
"""
_RAISES_DOC = """
Raises
------
ValueError
    If the shapes disagree (C, d between `x`, `noise` and `params`), C = 0, or an input is not finite.
TypeError
    If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype or are not real
    floating.
"""
_BWD_RETURNS_DOC = """
Returns
-------
GMMFeaturesGrads
    ``x : (..., L, d)``, ``noise : (C, Mc, d)`` and ``params`` as a :class:`GMMParams` of gradients
    (``logits (C,)``, ``mu (C, d)``, ``S`` with the factor's shape).

Raises
------
ValueError
    If a cotangent's shape differs from its output's or a cotangent is not finite.
TypeError
    If the cotangents and the cache differ in namespace or dtype.
"""
_QK_DOC = """
Parameters
----------
q : (..., Lq, d) array
    Queries. Real floating, finite.
k : (..., Lk, d) array
    Keys, with the batch axes and width of `q`; same namespace and dtype.
"""
_QK_RAISES_DOC = """
Raises
------
ValueError
    If the shapes disagree, an input is not finite, or the ``(..., Lq, Lk, d)`` intermediate exceeds
    ``refattn.limits``.
TypeError
    If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.
"""
_PARAMS_Q_DOC = """
params : GMMParams
    ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or ``(C,
    d)`` diagonal factor (``refattn.random.init_gmm``). Same namespace and dtype as `q`, finite.
"""
_M_DOC = """
M : int
    Total number of frequencies, a positive multiple of C (M/C frequencies per component).
"""
_EXAMPLE_PARAMS = """
>>> import numpy as np
>>> from refattn.features import GMMParams
>>> params = GMMParams(logits=np.array([0.0, np.log(3.0)]),           # pi = (1/4, 3/4)
...                    mu=np.array([[0.5, 0.0], [0.0, -1.0]]),        # (C, d) = (2, 2)
...                    S=np.array([[1.0, 0.5], [0.2, 0.2]]))          # diagonal factors (C, d)
"""


class GMMFeaturesGrads(NamedTuple):
    """Gradients of the GMM feature maps: ``x``, ``noise`` and ``params`` (a :class:`GMMParams`)."""

    x: Array            # (..., L, d)
    noise: Array        # (C, Mc, d)
    params: GMMParams


class _FeatCache(NamedTuple):
    freq: FrequenciesCache
    inner: Any          # cache of the trig / positive map
    phi0: Array         # (..., L, width) the unweighted features
    col_scale: Array    # (width,)
    x: Array | None     # (..., L, d) (stable PRF: for the -|x|^2/2 log-scale shift)


def _check_x(x: Array, params: GMMParams, noise: Array = None) -> None:
    if not isinstance(params, GMMParams):
        raise TypeError(f"params: expected GMMParams(logits, mu, S); got {type(params).__name__}")
    namespace(x, params.mu, names=("x", "params.mu"))
    sizes = check_shape("x", x, "..., L, d")
    check_gmm_params(params, sizes={"d": sizes["d"]})
    if noise is not None and getattr(noise, "ndim", 0) == 3 and noise.shape[1] < 1:   # features need M >= 1
        raise ValueError(f"noise: expected at least one draw per component, shape (C, Mc, d) with Mc >= 1; "
                         f"got {tuple(noise.shape)}")


def check_gmm_features_struct(x, noise, params):
    """The structural checks of the GMM feature maps (``_check_x`` and the frequencies' shapes), no data
    read; returns the namespace. The model runs them before the cores."""
    if not isinstance(params, GMMParams):
        raise TypeError(f"params: expected GMMParams(logits, mu, S); got {type(params).__name__}")
    namespace(x, params.mu, names=("x", "params.mu"))
    sizes = check_shape("x", x, "..., L, d")
    xp, _, sizes = check_gmm_params_struct(params, sizes={"d": sizes["d"]})
    namespace(noise, params.mu, names=("noise", "params.mu"))
    check_shape("noise", noise, "C, Mc, d", sizes)
    return xp


def _weighted_bwd(dphi: Array, cache: _FeatCache, *, xp: Any) -> tuple[Array, Array]:
    """(dphi0, dcol_scale) of phi = phi0 * col_scale."""
    red = tuple(range(dphi.ndim - 1))
    return dphi * cache.col_scale, xp.sum(dphi * cache.phi0, axis=red)


# ------------------------------------------------------------------------------------------------------------
# GMM-RKS and GMM-PRF feature maps


# phi = [cos(x omega^T), sin(x omega^T)] * sqrt(C pi_c) / sqrt(M),  omega, sqrt(C pi) = gmm_frequencies(noise)
# dphi0 = dphi * col;  dcol = sum(dphi * phi0);  RKS backward, then gmm_frequencies_bwd(domega, dcol)
def gmm_rks_features_fwd_core(x, noise, params, *, xp):
    """Unchecked core of :func:`gmm_rks_features_fwd` (its structure: the caller's
    :func:`check_gmm_features_struct`)."""
    (omega, scale), fc = gmm_frequencies_fwd_core(noise, params, diagonal=params.S.ndim == 2, xp=xp)
    phi0, tc = trig_features_fwd_core(x, omega, xp=xp)                              # (..., L, 2M)
    col = xp.concat((scale, scale))                                                   # (2M,)
    return phi0 * col, _FeatCache(fc, tc, phi0, col, None)


def gmm_rks_features_bwd_core(dphi, cache, *, xp):
    """Unchecked core of :func:`gmm_rks_features_bwd`."""
    dphi0, dcol = _weighted_bwd(dphi, cache, xp=xp)
    M = dcol.shape[0] // 2
    g = trig_features_bwd_core(dphi0, cache.inner, xp=xp)
    gf = gmm_frequencies_bwd_core((g.omega, dcol[:M] + dcol[M:]), cache.freq, xp=xp)
    return GMMFeaturesGrads(x=g.x, noise=gf.noise, params=gf.params)


@fill_doc(x_noise=_X_NOISE_DOC, params=GMM_PARAMS_DOC, raises=_RAISES_DOC, example_params=_EXAMPLE_PARAMS)
def gmm_rks_features(x: Array, noise: Array, params: GMMParams) -> Array:
    """GMM-RKS features: the RKS map on GMM frequencies, scaled by ``sqrt(C pi_c)`` (Chowdhury et al. Eq. 5).

    ``phi(x) = [cos(x omega^T), sin(x omega^T)] * sqrt(C pi_c) / sqrt(M)``: the RKS map (Eq. (3)) on
    frequencies drawn from a learnable Gaussian mixture (Eq. (5), :func:`gmm_frequencies`), unbiased for
    :func:`gmm_rks_kernel` (Eq. (4)), MSE :func:`gmm_rks_mse`. Backward: the column scales' gradient goes to
    the logits, the RKS backward's ``domega`` to ``mu``, ``S`` and the noise (:func:`gmm_frequencies_bwd`).

    {x_noise}
    {params}

    Returns
    -------
    phi : (..., L, 2M) array
        Cosines then sines; same namespace, dtype and device as `x`.

    {raises}

    See Also
    --------
    gmm_rks_features_fwd, gmm_rks_features_bwd : the differentiable pair.

    Examples
    --------
    {example_params}
    >>> from refattn.features import gmm_rks_features
    >>> noise = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])                 # (C, Mc, d) = (2, 1, 2)
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5]])                          # (L, d)
    >>> gmm_rks_features(x, noise, params)                              # (L, 2M)
    array([[ 0.5       ,  0.8660254 ,  0.        ,  0.        ],
           [ 0.0353686 ,  0.82734567,  0.49874749, -0.25592801]])
    """
    return gmm_rks_features_fwd(x, noise, params)[0]


@fill_doc(x_noise=_X_NOISE_DOC, params=GMM_PARAMS_DOC)
def gmm_rks_features_fwd(x: Array, noise: Array, params: GMMParams) -> tuple[Array, _FeatCache]:
    """:func:`gmm_rks_features` and the cache for its backward (equations, shapes and errors there).

    {x_noise}
    {params}

    Returns
    -------
    phi : (..., L, 2M) array
    cache : NamedTuple
        Opaque, for :func:`gmm_rks_features_bwd`.
    """
    _check_x(x, params, noise)
    (omega, scale), fc = gmm_frequencies_fwd(noise, params)
    xp = namespace(x)
    phi0, tc = trig_features_fwd(x, omega)                                           # (..., L, 2M)
    col = xp.concat((scale, scale))                                                   # (2M,)
    return phi0 * col, _FeatCache(fc, tc, phi0, col, None)


@fill_doc(returns=_BWD_RETURNS_DOC)
def gmm_rks_features_bwd(dphi: Array, cache: _FeatCache) -> GMMFeaturesGrads:
    """Gradients of :func:`gmm_rks_features` (equations there) from the features' cotangent.

    Parameters
    ----------
    dphi : (..., L, 2M) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`gmm_rks_features_fwd`.

    {returns}
    """
    xp = namespace(dphi, cache.phi0, names=("dphi", "cache"))
    check_cotangent("dphi", dphi, cache.phi0.shape, xp=xp)
    dphi0, dcol = _weighted_bwd(dphi, cache, xp=xp)
    M = dcol.shape[0] // 2
    g = trig_features_bwd(dphi0, cache.inner)
    gf = gmm_frequencies_bwd((g.omega, dcol[:M] + dcol[M:]), cache.freq)
    return GMMFeaturesGrads(x=g.x, noise=gf.noise, params=gf.params)


@fill_doc(x_noise=_X_NOISE_DOC, params=GMM_PARAMS_DOC, raises=_RAISES_DOC, example_params=_EXAMPLE_PARAMS)
def gmm_prf_features(x: Array, noise: Array, params: GMMParams) -> Array:
    """GMM-PRF features ``exp(x omega^T - |x|^2) * sqrt(C pi_c) / sqrt(M)`` (Chowdhury et al. Eq. (10)).

    The PRF map of Eq. (9) (offset ``|x|^2``, :func:`gaussian_positive_features`) on frequencies drawn from a
    learnable Gaussian mixture: unbiased for :func:`gmm_prf_kernel` (the Gaussian kernel at mu = 0, S = I),
    MSE :func:`gmm_prf_mse`. Unstabilised: overflows for large inputs; attention should use
    :func:`gmm_prf_features_stable`. The backward is that of :func:`gmm_rks_features` with the PRF map's.

    {x_noise}
    {params}

    Returns
    -------
    phi : (..., L, M) array
        Positive; same namespace, dtype and device as `x`.

    {raises}

    See Also
    --------
    gmm_prf_features_fwd, gmm_prf_features_bwd : the differentiable pair.

    Examples
    --------
    {example_params}
    >>> from refattn.features import gmm_prf_features
    >>> noise = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])                 # (C, Mc, d) = (2, 1, 2)
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5]])                          # (L, d)
    >>> gmm_prf_features(x, noise, params)                              # (L, M)
    array([[0.5       , 0.8660254 ],
           [0.64201271, 0.18381214]])
    """
    return gmm_prf_features_fwd(x, noise, params)[0]


@fill_doc(x_noise=_X_NOISE_DOC, params=GMM_PARAMS_DOC)
def gmm_prf_features_fwd(x: Array, noise: Array, params: GMMParams) -> tuple[Array, _FeatCache]:
    """:func:`gmm_prf_features` and the cache for its backward (equations, shapes and errors there).

    {x_noise}
    {params}

    Returns
    -------
    phi : (..., L, M) array
    cache : NamedTuple
        Opaque, for :func:`gmm_prf_features_bwd`.
    """
    _check_x(x, params, noise)
    (omega, scale), fc = gmm_frequencies_fwd(noise, params)
    phi0, pc = gaussian_positive_features_fwd(x, omega)                              # (..., L, M)  Eq. 9
    return phi0 * scale, _FeatCache(fc, pc, phi0, scale, None)


@fill_doc(returns=_BWD_RETURNS_DOC)
def gmm_prf_features_bwd(dphi: Array, cache: _FeatCache) -> GMMFeaturesGrads:
    """Gradients of :func:`gmm_prf_features` (equations there) from the features' cotangent.

    Parameters
    ----------
    dphi : (..., L, M) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`gmm_prf_features_fwd`.

    {returns}
    """
    xp = namespace(dphi, cache.phi0, names=("dphi", "cache"))
    check_cotangent("dphi", dphi, cache.phi0.shape, xp=xp)
    dphi0, dscale = _weighted_bwd(dphi, cache, xp=xp)
    g = gaussian_positive_features_bwd(dphi0, cache.inner)
    gf = gmm_frequencies_bwd((g.omega, dscale), cache.freq)
    return GMMFeaturesGrads(x=g.x, noise=gf.noise, params=gf.params)


# (phi0, ls0) = positive_features_stable(x, omega);  phi = phi0 sqrt(C pi_c);  log_scale = ls0 - |x|^2/2
# stable backward on (dphi * sqrt(C pi), dlog_scale), dx -= dlog_scale x, then gmm_frequencies_bwd
def gmm_prf_features_stable_fwd_core(x, noise, params, *, xp):
    """Unchecked core of :func:`gmm_prf_features_stable_fwd` (its structure: the caller's
    :func:`check_gmm_features_struct`)."""
    (omega, scale), fc = gmm_frequencies_fwd_core(noise, params, diagonal=params.S.ndim == 2, xp=xp)
    (phi0, ls0), pc = positive_features_stable_fwd_core(x, omega, None, xp=xp)     # (..., L, M), (..., L)
    log_scale = ls0 - 0.5 * xp.sum(x * x, axis=-1)                                    # (..., L)  offset |x|^2
    return (phi0 * scale, log_scale), _FeatCache(fc, pc, phi0, scale, x)


def gmm_prf_features_stable_bwd_core(dout, cache, *, xp):
    """Unchecked core of :func:`gmm_prf_features_stable_bwd`."""
    dphi, dls = dout
    dphi0, dscale = _weighted_bwd(dphi, cache, xp=xp)
    g = positive_features_stable_bwd_core(dphi0, dls, cache.inner, omega_grad=True, xp=xp)
    dx = g.x if dls is None else g.x - xp.expand_dims(dls, axis=-1) * cache.x          # d(-|x|^2/2) = -x
    gf = gmm_frequencies_bwd_core((g.omega, dscale), cache.freq, xp=xp)
    return GMMFeaturesGrads(x=dx, noise=gf.noise, params=gf.params)


@fill_doc(x_noise=_X_NOISE_DOC, params=GMM_PARAMS_DOC, raises=_RAISES_DOC, example_params=_EXAMPLE_PARAMS)
def gmm_prf_features_stable(x: Array, noise: Array, params: GMMParams) -> tuple[Array, Array]:
    """Row-stabilised GMM-PRF features: :func:`gmm_prf_features` as ``phi * exp(log_scale)``.

    Chowdhury et al. Eq. (10) on :func:`positive_features_stable` (offset ``|x|^2/2``): the row maximum of the
    exponent, the extra ``-|x|^2/2`` of Eq. (9) and the ``1/sqrt(M)`` factored into ``log_scale``; never
    overflows.

    {x_noise}
    {params}

    Returns
    -------
    phi : (..., L, M) array
        ``exp(x omega^T - max_row) * sqrt(C pi_c)``; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        Keys: pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it (it cancels per row).

    {raises}

    See Also
    --------
    gmm_prf_features_stable_fwd, gmm_prf_features_stable_bwd : the differentiable pair.

    Examples
    --------
    {example_params}
    >>> from refattn.features import gmm_prf_features, gmm_prf_features_stable
    >>> noise = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])                 # (C, Mc, d) = (2, 1, 2)
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5]])                          # (L, d)
    >>> phi, log_scale = gmm_prf_features_stable(x, noise, params)
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], gmm_prf_features(x, noise, params)))
    True
    """
    return gmm_prf_features_stable_fwd(x, noise, params)[0]


@fill_doc(x_noise=_X_NOISE_DOC, params=GMM_PARAMS_DOC)
def gmm_prf_features_stable_fwd(x: Array, noise: Array, params: GMMParams
                                ) -> tuple[tuple[Array, Array], _FeatCache]:
    """:func:`gmm_prf_features_stable` and the cache for its backward (equations, shapes and errors there).

    {x_noise}
    {params}

    Returns
    -------
    (phi, log_scale) : ((..., L, M), (..., L)) arrays
    cache : NamedTuple
        Opaque, for :func:`gmm_prf_features_stable_bwd`.
    """
    _check_x(x, params, noise)
    (omega, scale), fc = gmm_frequencies_fwd(noise, params)
    xp = namespace(x)
    (phi0, ls0), pc = positive_features_stable_fwd(x, omega)                        # (..., L, M), (..., L)
    log_scale = ls0 - 0.5 * xp.sum(x * x, axis=-1)                                    # (..., L)  offset |x|^2
    return (phi0 * scale, log_scale), _FeatCache(fc, pc, phi0, scale, x)


@fill_doc(returns=_BWD_RETURNS_DOC)
def gmm_prf_features_stable_bwd(dout: tuple[Array, Array | None], cache: _FeatCache) -> GMMFeaturesGrads:
    """Gradients of :func:`gmm_prf_features_stable` (equations there) from ``(dphi, dlog_scale)``.

    Parameters
    ----------
    dout : tuple of ((..., L, M) array, (..., L) array or None)
        ``(dphi, dlog_scale)``; ``dlog_scale`` may be ``None`` (queries). Same namespace and dtype as the
        cache, finite.
    cache : NamedTuple
        From :func:`gmm_prf_features_stable_fwd`.

    {returns}
    """
    dphi, dls = dout
    xp = namespace(dphi, cache.phi0, dls, names=("dphi", "cache", "dlog_scale"))
    check_cotangent("dphi", dphi, cache.phi0.shape, xp=xp)
    if dls is not None:
        check_cotangent("dlog_scale", dls, cache.phi0.shape[:-1], xp=xp)
    dphi0, dscale = _weighted_bwd(dphi, cache, xp=xp)
    g = positive_features_stable_bwd((dphi0, dls), cache.inner)
    dx = g.x if dls is None else g.x - xp.expand_dims(dls, axis=-1) * cache.x          # d(-|x|^2/2) = -x
    gf = gmm_frequencies_bwd((g.omega, dscale), cache.freq)
    return GMMFeaturesGrads(x=dx, noise=gf.noise, params=gf.params)


# ------------------------------------------------------------------------------------------------------------
# Closed forms: kernels and mean squared errors

def _pairs(q: Array, k: Array, params: GMMParams, sign: float):
    """``q_i + sign k_j``: (..., Lq, Lk, d), after validation."""
    xp = namespace(q, k, params.mu, names=("q", "k", "params.mu"))
    sizes = check_shape("q", q, "..., Lq, d")
    check_shape("k", k, "..., Lk, d", sizes)
    check_qk(q, k, extra=max(1, q.shape[-1]))  # finite q, k; the (..., Lq, Lk, d) pairs within the bound
    _, diagonal, _ = check_gmm_params(params, sizes={"d": sizes["d"]})  # params finite
    v = xp.expand_dims(q, axis=-2) + sign * xp.expand_dims(k, axis=-3)              # (..., Lq, Lk, d)
    return xp, v, diagonal


def _quad(v: Array, S_c: Array, diagonal: bool, *, xp: Any) -> Array:
    """``||S_c^T v||^2 = v^T Sigma_c v`` over the last axis."""
    w = v * S_c if diagonal else v @ S_c                                 # (..., d)  (S^T v)^T = v^T S
    return xp.sum(w * w, axis=-1)


@fill_doc(qk=_QK_DOC, params=_PARAMS_Q_DOC, raises=_QK_RAISES_DOC, example_params=_EXAMPLE_PARAMS)
def gmm_rks_kernel(q: Array, k: Array, params: GMMParams) -> Array:
    r"""The GMM-RKS kernel (Eq. 4): ``sum_c pi_c exp(-||S_c^T p||^2 / 2) cos(mu_c^T p)``, p = q - k.

    Materialises ``(..., Lq, Lk, d)``: for tests and small inputs.

    {qk}
    {params}

    Returns
    -------
    K : (..., Lq, Lk) array
        What :func:`gmm_rks_features` estimates without bias.

    {raises}

    Examples
    --------
    {example_params}
    >>> from refattn.features import gmm_rks_kernel
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> gmm_rks_kernel(q, k, params)
    array([[0.79692256, 0.85882653],
           [0.73310337, 0.50677159]])
    """
    xp, p, diagonal = _pairs(q, k, params, -1.0)
    pi = gmm_weights_core(params.logits, xp=xp)
    out = 0.0
    for c in range(params.logits.shape[0]):
        s = _quad(p, params.S[c, ...], diagonal, xp=xp)                               # (..., Lq, Lk)
        out = out + pi[c] * xp.exp(-0.5 * s) * xp.cos(xp.sum(p * params.mu[c, :], axis=-1))
    return out


@fill_doc(qk=_QK_DOC, params=_PARAMS_Q_DOC, raises=_QK_RAISES_DOC, example_params=_EXAMPLE_PARAMS)
def gmm_prf_kernel(q: Array, k: Array, params: GMMParams) -> Array:
    r"""The GMM-PRF kernel: ``sum_c pi_c exp(-|q|^2 - |k|^2 + mu_c^T o + ||S_c^T o||^2 / 2)``, o = q + k.

    What GMM-PRF (Chowdhury et al. Eqs. (9)-(10)) estimates; the Gaussian kernel at mu = 0, S = I.
    Materialises ``(..., Lq, Lk, d)``: for tests and small inputs.

    {qk}
    {params}

    Returns
    -------
    K : (..., Lq, Lk) array
        What :func:`gmm_prf_features` estimates without bias.

    {raises}

    Examples
    --------
    {example_params}
    >>> from refattn.features import gmm_prf_kernel
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> gmm_prf_kernel(q, k, params)
    array([[0.82376107, 0.66535022],
           [0.19274192, 0.14307969]])
    """
    xp, o, diagonal = _pairs(q, k, params, 1.0)
    pi = gmm_weights_core(params.logits, xp=xp)
    qq = xp.sum(q * q, axis=-1, keepdims=True)                                        # (..., Lq, 1)
    kk = xp.expand_dims(xp.sum(k * k, axis=-1), axis=-2)                              # (..., 1, Lk)
    out = 0.0
    for c in range(params.logits.shape[0]):
        t = _quad(o, params.S[c, ...], diagonal, xp=xp)                               # (..., Lq, Lk)
        out = out + pi[c] * xp.exp(-qq - kk + xp.sum(o * params.mu[c, :], axis=-1) + 0.5 * t)
    return out


def _check_M(M: Any, C: int) -> int:  # noqa: N802  paper notation (M frequencies)
    if isinstance(M, bool) or not isinstance(M, int) or M <= 0 or M % C:
        raise ValueError(f"M: expected a positive multiple of C = {C}; got {M!r}")
    return M


@fill_doc(qk=_QK_DOC, params=_PARAMS_Q_DOC, M=_M_DOC)
def gmm_rks_mse(q: Array, k: Array, params: GMMParams, M: int) -> Array:
    r"""MSE of GMM-RKS with independent noise per component, ``(..., Lq, Lk)`` (derived in the module doc).

    ``sum_c (C pi_c^2 / M) [(1 + cos(2 mu_c^T p) e^{-2 s_c}) / 2 - cos^2(mu_c^T p) e^{-s_c}]``,
    ``s_c = ||S_c^T p||^2``: each component contributes M/C iid cosines ``Var cos(omega^T p)``, weighted
    ``(C pi_c / M)^2``: Chowdhury et al. Theorem 3 re-derived for this estimator (the printed Eq. (13) is the
    antithetic case, :func:`gmm_rks_antithetic_mse`).

    {qk}
    {params}
    {M}

    Returns
    -------
    mse : (..., Lq, Lk) array
        ``E[(phi(q) . phi(k) - gmm_rks_kernel(q, k))^2]`` for :func:`gmm_rks_features` with M frequencies.

    Raises
    ------
    ValueError
        If `M` is not a positive multiple of C, the shapes disagree, an input is not finite, or the
        ``(..., Lq, Lk, d)`` intermediate exceeds ``refattn.limits``.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.
    """
    xp, p, diagonal = _pairs(q, k, params, -1.0)
    C = params.logits.shape[0]
    _check_M(M, C)
    pi = gmm_weights_core(params.logits, xp=xp)
    out = 0.0
    for c in range(C):
        s = _quad(p, params.S[c, ...], diagonal, xp=xp)
        a = xp.sum(p * params.mu[c, :], axis=-1)
        var = 0.5 * (1.0 + xp.cos(2.0 * a) * xp.exp(-2.0 * s)) - xp.cos(a) ** 2 * xp.exp(-s)
        out = out + (C * pi[c] ** 2 / M) * var
    return out


@fill_doc(qk=_QK_DOC)
def gmm_rks_antithetic_mse(q: Array, k: Array, mu: Array, S: Array, M: int) -> Array:
    r"""MSE of GMM-RKS in Theorem 3's antithetic case (C = 2, +-mu, shared S and noise, equal weights).

    It is::

        (1 / M) cos^2(mu^T p) (1 - exp(-||S^T p||^2))^2,     p = q - k,  M = total frequencies = 2 x pairs.

    Derivation: ``phi(q).phi(k) = (2/M) sum_{j<=M/2} cos(mu^T p) cos(eta_j^T S^T p)`` and
    ``Var cos(eta^T a) = (1 - e^{-|a|^2})^2 / 2``. The printed Eq. 13 has 2/m (a factor 4
    larger with m = pairs).

    {qk}
    mu : (d,) array
        Mean of the first component (the second is ``-mu``); same namespace and dtype as `q`.
    S : (d, d) or (d,) array
        Shared covariance factor, full or diagonal.
    M : int
        Total number of frequencies, a positive multiple of C (2 x the number of antithetic pairs).

    Returns
    -------
    mse : (..., Lq, Lk) array
        MSE of :func:`gmm_rks_features` with :func:`gmm_antithetic_params` and antithetic noise.

    Raises
    ------
    ValueError
        If `M` is not a positive even integer, the shapes disagree, an input is not finite, or the
        ``(..., Lq, Lk, d)`` intermediate exceeds ``refattn.limits``.
    TypeError
        If the arrays differ in namespace or dtype.
    """
    params = gmm_antithetic_params(mu, S)
    xp, p, diagonal = _pairs(q, k, params, -1.0)
    _check_M(M, 2)
    s = _quad(p, S, diagonal, xp=xp)
    return xp.cos(xp.sum(p * mu, axis=-1)) ** 2 * (1.0 - xp.exp(-s)) ** 2 / M


@fill_doc(qk=_QK_DOC, params=_PARAMS_Q_DOC, M=_M_DOC, example_params=_EXAMPLE_PARAMS)
def gmm_prf_mse(q: Array, k: Array, params: GMMParams, M: int) -> Array:
    r"""MSE of GMM-PRF, ``(..., Lq, Lk)`` (derived; see module docstring).

    It is
    ``sum_c (C pi_c^2 / M) exp(-2(|q|^2 + |k|^2 - mu_c^T o)) (exp(2 ||S_c^T o||^2) - exp(||S_c^T o||^2))``,
    o = q + k. The printed Eq. 14 has unsquared norms in the last factor.

    {qk}
    {params}
    {M}

    Returns
    -------
    mse : (..., Lq, Lk) array
        ``E[(phi(q) . phi(k) - gmm_prf_kernel(q, k))^2]`` for :func:`gmm_prf_features` with M frequencies.

    Raises
    ------
    ValueError
        If `M` is not a positive multiple of C, the shapes disagree, an input is not finite, or the
        ``(..., Lq, Lk, d)`` intermediate exceeds ``refattn.limits``.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.

    Examples
    --------
    {example_params}
    >>> from refattn.features import gmm_prf_mse
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> gmm_prf_mse(q, k, params, M=64)
    array([[0.00252434, 0.04032799],
           [0.00025637, 0.00084916]])
    """
    xp, o, diagonal = _pairs(q, k, params, 1.0)
    C = params.logits.shape[0]
    _check_M(M, C)
    pi = gmm_weights_core(params.logits, xp=xp)
    qq = xp.sum(q * q, axis=-1, keepdims=True)
    kk = xp.expand_dims(xp.sum(k * k, axis=-1), axis=-2)
    out = 0.0
    for c in range(C):
        t = _quad(o, params.S[c, ...], diagonal, xp=xp)
        a = xp.sum(o * params.mu[c, :], axis=-1)
        out = out + (C * pi[c] ** 2 / M) * xp.exp(-2.0 * (qq + kk - a)) * (xp.exp(2.0 * t) - xp.exp(t))
    return out
