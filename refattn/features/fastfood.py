r"""FastFood random features: the RKS and PRF maps on the FastFood projections (KL-Transformer Eqs. 6, 12).

The projections ``u = x V^T`` (V never formed, its conventions and the Appendix D variants) are in
:mod:`refattn.features.fastfood_transform`; each map's kernel is stated in its docstring and computed by
:func:`fastfood_rks_kernel` / :func:`fastfood_prf_kernel`. These are the kernels of the *initial* law of
(S, G, B, Pi); once S, G, B are trained the map estimates whatever kernel the learned diagonals define (no
closed form). Axes: ``...`` batch and heads, ``L`` positions, ``d`` head width, ``M`` frequencies.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import namespace
from .projection import check_cotangent
from .fastfood_transform import (FASTFOOD_BWD_RETURNS, FASTFOOD_FWD_RAISES, FASTFOOD_PARAMETERS,
                                 FASTFOOD_RAISES, VARIANT_PARAMETER, FastFoodGrads, FastFoodParams,
                                 ProjectionCache, fastfood_projection_bwd,
                                 fastfood_projection_bwd_core, fastfood_projection_fwd,
                                 fastfood_projection_fwd_core)
from .trig import check_qk

__all__ = [
    "fastfood_rks_features", "fastfood_rks_features_fwd", "fastfood_rks_features_bwd",
    "fastfood_prf_features", "fastfood_prf_features_fwd", "fastfood_prf_features_bwd",
    "fastfood_prf_features_stable", "fastfood_prf_features_stable_fwd", "fastfood_prf_features_stable_bwd",
    "fastfood_rks_kernel", "fastfood_prf_kernel",
]

Array = Any

_QK_DOC = """
Parameters
----------
q : (..., Lq, d) array
    Queries. Real floating, finite.
k : (..., Lk, d) array
    Keys, with the batch axes and width of `q`; same namespace and dtype.
sigma : float, default 1.0
    Bandwidth of the initial law (rows of V ~ N(0, I / sigma^2)).
"""
_QK_RAISES_DOC = """
Raises
------
ValueError
    If the shapes disagree, an input is not finite, `sigma` is not positive and finite, or the result exceeds
    ``refattn.limits``.
TypeError
    If `q` and `k` differ in namespace or dtype, or are not real floating.
"""



# ------------------------------------------------------------------------------------------------------------
# Nonlinearities on the projections (the RKS map of Eq. 3 and the PRF map of Eq. 9, applied to u = x V^T)
# ------------------------------------------------------------------------------------------------------------

def _rks_from_projection(u: Array, *, xp: Any) -> Array:
    M = u.shape[-1]
    return xp.concat((xp.cos(u), xp.sin(u)), axis=-1) / math.sqrt(M)               # (..., L, 2M)  Eq. 3


def _rks_from_projection_bwd(dphi: Array, u: Array, *, xp: Any) -> Array:
    M = u.shape[-1]
    dcos, dsin = dphi[..., :M], dphi[..., M:]                                       # (..., L, M) each
    return (xp.cos(u) * dsin - xp.sin(u) * dcos) / math.sqrt(M)                     # (..., L, M)


def _prf_exponent(u: Array, x: Array, *, xp: Any) -> Array:
    return u - xp.sum(x * x, axis=-1, keepdims=True)  # (..., L, M)  w.x - |x|^2


def _prf_exponent_bwd(de: Array, x: Array, *, xp: Any) -> tuple[Array, Array]:
    """(du, dx) of e = u - |x|^2 given de."""
    return de, -2.0 * x * xp.sum(de, axis=-1, keepdims=True)


def _stable_exp_fwd(e: Array, *, xp: Any) -> tuple[Array, Array]:
    """``phi = exp(e - max_m e)`` in (0, 1] and ``log_scale = max_m e - log(M)/2``: raw map
    ``exp(e) / sqrt(M) = phi * exp(log_scale)`` (the convention of ``positive_features_stable``)."""
    M = e.shape[-1]
    row_max = xp.max(e, axis=-1)                                                     # (..., L)
    phi = xp.exp(e - xp.expand_dims(row_max, axis=-1))                               # (..., L, M), row max 1
    return phi, row_max - 0.5 * math.log(M)


def _stable_exp_bwd(dphi: Array, dlog_scale: Array | None, e: Array, phi: Array, log_scale: Array, *,
                    xp: Any) -> Array:
    """de for (phi, log_scale) = stable_exp(e): the row max has gradient one-hot(argmax) (ties split)."""
    at_max = xp.astype(phi == 1.0, e.dtype)                                          # (..., L, M) argmax of e
    at_max = at_max / xp.sum(at_max, axis=-1, keepdims=True)  # ties share the gradient
    g = dphi * phi                                                                   # (..., L, M)
    dls = -xp.sum(g, axis=-1)  # (..., L)  phi depends on -ls
    if dlog_scale is not None:
        dls = dls + dlog_scale
    return g + at_max * xp.expand_dims(dls, axis=-1)                                 # (..., L, M)


# ------------------------------------------------------------------------------------------------------------
# FastFood-RKS and FastFood-PRF
# ------------------------------------------------------------------------------------------------------------

class _FeatCache(NamedTuple):
    proj: ProjectionCache
    u: Array          # (..., L, M)
    x: Array          # (..., L, d)
    e: Array | None   # (..., L, M)  PRF exponent
    phi: Array | None
    log_scale: Array | None


@fill_doc(params=FASTFOOD_PARAMETERS, variant=VARIANT_PARAMETER, fwd_raises=FASTFOOD_FWD_RAISES)
def fastfood_rks_features_fwd(x: Array, params: FastFoodParams, *, sigma: float = 1.0,
                              variant: str = "SGB") -> tuple[Array, _FeatCache]:
    """:func:`fastfood_rks_features` and the cache for its backward (equations and shapes there).

    {params}
    {variant}

    Returns
    -------
    (phi, cache) : ((..., L, 2M) array, NamedTuple)
        The features and an opaque cache.

    {fwd_raises}
    """
    u, pc = fastfood_projection_fwd(x, params, sigma=sigma, variant=variant)
    xp = namespace(u)
    return _rks_from_projection(u, xp=xp), _FeatCache(pc, u, x, None, None, None)


@fill_doc(bwd_returns=FASTFOOD_BWD_RETURNS)
def fastfood_rks_features_bwd(dphi: Array, cache: _FeatCache) -> FastFoodGrads:
    """Gradients of :func:`fastfood_rks_features` (equations there) from the features' cotangent.

    Parameters
    ----------
    dphi : (..., L, 2M) array
        Cotangent of the features (cosine half first); same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From the forward.

    {bwd_returns}
    """
    xp = namespace(dphi, cache.u, names=("dphi", "cache"))
    check_cotangent("dphi", dphi, tuple(cache.u.shape[:-1]) + (2 * cache.u.shape[-1],), xp=xp)
    return fastfood_projection_bwd(_rks_from_projection_bwd(dphi, cache.u, xp=xp), cache.proj)


# phi = [cos u, sin u] / sqrt(M),  u = fastfood_projection(x)                          (Eq. 6 with Eq. 3)
# du = (cos u dphi_sin - sin u dphi_cos) / sqrt(M), then fastfood_projection_bwd
def fastfood_rks_features_fwd_core(x, params, *, sigma=1.0, variant="SGB", xp):
    """Unchecked core of :func:`fastfood_rks_features_fwd` (its structure: the caller's
    :func:`check_fastfood_struct`)."""
    u, pc = fastfood_projection_fwd_core(x, params, sigma=sigma, variant=variant, xp=xp)
    return _rks_from_projection(u, xp=xp), _FeatCache(pc, u, x, None, None, None)


def fastfood_rks_features_bwd_core(dphi, cache, *, xp):
    """Unchecked core of :func:`fastfood_rks_features_bwd`."""
    return fastfood_projection_bwd_core(_rks_from_projection_bwd(dphi, cache.u, xp=xp), cache.proj, xp=xp)


@fill_doc(params=FASTFOOD_PARAMETERS, raises=FASTFOOD_RAISES)
def fastfood_rks_features(x: Array, params: FastFoodParams, *, sigma: float = 1.0) -> Array:
    """FastFood-RKS features ``[cos(x V^T), sin(x V^T)] / sqrt(M)`` (Chowdhury et al. Eq. 6 with Eq. 3).

    Unbiased, over the initial law of the draw, for :func:`fastfood_rks_kernel`
    ``exp(-|q - k|^2 / (2 sigma^2))``; once S, G, B are trained the map estimates the kernel they define.

    {params}

    Returns
    -------
    phi : (..., L, 2M) array
        Cosines then sines; same namespace, dtype and device as `x`.

    {raises}

    See Also
    --------
    fastfood_rks_features_fwd, fastfood_rks_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_matrix, fastfood_rks_features, trig_features
    >>> from refattn.random import draw_fastfood
    >>> params = draw_fastfood(np.random.default_rng(0), 8, 3)           # M = 8 frequencies, d = 3 (D = 4)
    >>> x = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5]])                # (L, d)
    >>> phi = fastfood_rks_features(x, params)                          # (L, 2M) = (2, 16)
    >>> bool(np.allclose(phi, trig_features(x, fastfood_matrix(params, 3))))   # the dense path
    True
    """
    return fastfood_rks_features_fwd(x, params, sigma=sigma)[0]


@fill_doc(params=FASTFOOD_PARAMETERS, variant=VARIANT_PARAMETER, fwd_raises=FASTFOOD_FWD_RAISES)
def fastfood_prf_features_fwd(x: Array, params: FastFoodParams, *, sigma: float = 1.0,
                              variant: str = "SGB") -> tuple[Array, _FeatCache]:
    """:func:`fastfood_prf_features` and the cache for its backward (equations and shapes there).

    {params}
    {variant}

    Returns
    -------
    (phi, cache) : ((..., L, M) array, NamedTuple)
        The features and an opaque cache.

    {fwd_raises}
    """
    u, pc = fastfood_projection_fwd(x, params, sigma=sigma, variant=variant)
    xp = namespace(u)
    e = _prf_exponent(u, x, xp=xp)                                                   # (..., L, M)
    phi = xp.exp(e) / math.sqrt(u.shape[-1])                                         # (..., L, M)  Eq. 9
    return phi, _FeatCache(pc, u, x, e, phi, None)


@fill_doc(bwd_returns=FASTFOOD_BWD_RETURNS)
def fastfood_prf_features_bwd(dphi: Array, cache: _FeatCache) -> FastFoodGrads:
    """Gradients of :func:`fastfood_prf_features` (equations there) from the features' cotangent.

    Parameters
    ----------
    dphi : (..., L, M) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From the forward.

    {bwd_returns}
    """
    xp = namespace(dphi, cache.u, names=("dphi", "cache"))
    check_cotangent("dphi", dphi, cache.u.shape, xp=xp)
    du, dx_direct = _prf_exponent_bwd(dphi * cache.phi, cache.x, xp=xp)
    g = fastfood_projection_bwd(du, cache.proj)
    return FastFoodGrads(x=g.x + dx_direct, params=g.params)


@fill_doc(params=FASTFOOD_PARAMETERS, raises=FASTFOOD_RAISES)
def fastfood_prf_features(x: Array, params: FastFoodParams, *, sigma: float = 1.0) -> Array:
    """FastFood-PRF features ``exp(x V^T - |x|^2) / sqrt(M)`` (Chowdhury et al. Eq. 12 with Eq. 9).

    Unbiased, over the initial law of the draw, for :func:`fastfood_prf_kernel` (the Gaussian kernel
    ``exp(-|q - k|^2 / 2)`` at sigma = 1: the offset is ``|x|^2``, not ``|x|^2/2``). Unstabilised: overflows
    for large inputs; attention should use :func:`fastfood_prf_features_stable`. Backward: ``de = dphi * phi``
    goes through :func:`fastfood_projection_bwd` as ``du``, and ``-|x|^2`` adds ``-2 x sum_M(de)`` to ``dx``.

    {params}

    Returns
    -------
    phi : (..., L, M) array
        Positive; same namespace, dtype and device as `x`.

    {raises}

    See Also
    --------
    fastfood_prf_features_fwd, fastfood_prf_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_matrix, fastfood_prf_features, gaussian_positive_features
    >>> from refattn.random import draw_fastfood
    >>> params = draw_fastfood(np.random.default_rng(0), 8, 3)           # M = 8 frequencies, d = 3 (D = 4)
    >>> x = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5]])                # (L, d)
    >>> phi = fastfood_prf_features(x, params)                          # (L, M) = (2, 8)
    >>> bool(np.allclose(phi, gaussian_positive_features(x, fastfood_matrix(params, 3))))
    True
    """
    return fastfood_prf_features_fwd(x, params, sigma=sigma)[0]


@fill_doc(params=FASTFOOD_PARAMETERS, variant=VARIANT_PARAMETER, fwd_raises=FASTFOOD_FWD_RAISES)
def fastfood_prf_features_stable_fwd(x: Array, params: FastFoodParams, *, sigma: float = 1.0,
                                     variant: str = "SGB") -> tuple[tuple[Array, Array], _FeatCache]:
    """:func:`fastfood_prf_features_stable` and the cache for its backward (equations and shapes there).

    {params}
    {variant}

    Returns
    -------
    ((phi, log_scale), cache) : (((..., L, M), (..., L)) arrays, NamedTuple)
        The features, their row log-scales and an opaque cache.

    {fwd_raises}
    """
    u, pc = fastfood_projection_fwd(x, params, sigma=sigma, variant=variant)
    xp = namespace(u)
    e = _prf_exponent(u, x, xp=xp)                                                   # (..., L, M)
    phi, log_scale = _stable_exp_fwd(e, xp=xp)
    return (phi, log_scale), _FeatCache(pc, u, x, e, phi, log_scale)


@fill_doc(bwd_returns=FASTFOOD_BWD_RETURNS)
def fastfood_prf_features_stable_bwd(dout: tuple[Array, Array | None], cache: _FeatCache) -> FastFoodGrads:
    """Gradients of :func:`fastfood_prf_features_stable` (equations there) from ``(dphi, dlog_scale)``.

    Parameters
    ----------
    dout : tuple of ((..., L, M) array, (..., L) array or None)
        ``(dphi, dlog_scale)``, ``dlog_scale`` ``None`` for queries; cache's namespace and dtype, finite.
    cache : NamedTuple
        From the forward.

    {bwd_returns}
    """
    dphi, dlog_scale = dout
    xp = namespace(dphi, cache.u, dlog_scale, names=("dphi", "cache", "dlog_scale"))
    check_cotangent("dphi", dphi, cache.u.shape, xp=xp)
    if dlog_scale is not None:
        check_cotangent("dlog_scale", dlog_scale, cache.u.shape[:-1], xp=xp)
    de = _stable_exp_bwd(dphi, dlog_scale, cache.e, cache.phi, cache.log_scale, xp=xp)
    du, dx_direct = _prf_exponent_bwd(de, cache.x, xp=xp)
    g = fastfood_projection_bwd(du, cache.proj)
    return FastFoodGrads(x=g.x + dx_direct, params=g.params)


# e = u - |x|^2,  phi = exp(e - max_row e),  log_scale = max_row e - log(M)/2          (Eq. 12 with Eq. 9)
# de = g + e_argmax (dlog_scale - sum_M g), g = dphi * phi;  du = de;  dx += -2 x sum_M(de)
def fastfood_prf_features_stable_fwd_core(x, params, *, sigma=1.0, variant="SGB", xp):
    """Unchecked core of :func:`fastfood_prf_features_stable_fwd` (its structure: the caller's
    :func:`check_fastfood_struct`)."""
    u, pc = fastfood_projection_fwd_core(x, params, sigma=sigma, variant=variant, xp=xp)
    e = _prf_exponent(u, x, xp=xp)                                                   # (..., L, M)
    phi, log_scale = _stable_exp_fwd(e, xp=xp)
    return (phi, log_scale), _FeatCache(pc, u, x, e, phi, log_scale)


def fastfood_prf_features_stable_bwd_core(dout, cache, *, xp):
    """Unchecked core of :func:`fastfood_prf_features_stable_bwd`."""
    dphi, dlog_scale = dout
    de = _stable_exp_bwd(dphi, dlog_scale, cache.e, cache.phi, cache.log_scale, xp=xp)
    du, dx_direct = _prf_exponent_bwd(de, cache.x, xp=xp)
    g = fastfood_projection_bwd_core(du, cache.proj, xp=xp)
    return FastFoodGrads(x=g.x + dx_direct, params=g.params)


@fill_doc(params=FASTFOOD_PARAMETERS, raises=FASTFOOD_RAISES)
def fastfood_prf_features_stable(x: Array, params: FastFoodParams, *,
                                 sigma: float = 1.0) -> tuple[Array, Array]:
    """Row-stabilised FastFood-PRF features: :func:`fastfood_prf_features` as ``phi * exp(log_scale)``.

    Chowdhury et al. Eq. 12 with the row maximum of the exponent and ``1/sqrt(M)`` factored into
    ``log_scale``; never overflows. Backward: the row maximum's gradient goes to its argmax
    (ties share it equally).

    {params}

    Returns
    -------
    phi : (..., L, M) array
        Entries in (0, 1], each row's maximum exactly 1; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        Keys: pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it (it cancels per row).

    {raises}

    See Also
    --------
    fastfood_prf_features_stable_fwd, fastfood_prf_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_prf_features, fastfood_prf_features_stable
    >>> from refattn.random import draw_fastfood
    >>> params = draw_fastfood(np.random.default_rng(0), 8, 3)           # M = 8 frequencies, d = 3 (D = 4)
    >>> x = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5]])                # (L, d)
    >>> phi, log_scale = fastfood_prf_features_stable(x, params)
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], fastfood_prf_features(x, params)))
    True
    """
    return fastfood_prf_features_stable_fwd(x, params, sigma=sigma)[0]


# ------------------------------------------------------------------------------------------------------------
# Closed forms (the kernels of the initial law)
# ------------------------------------------------------------------------------------------------------------

def _check_sigma(sigma):
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (0 < sigma < math.inf):
        raise ValueError(f"sigma: expected a positive finite number; got {sigma!r}")


def _sqdist(q: Array, k: Array, *, xp: Any) -> Array:
    qq = xp.sum(q * q, axis=-1, keepdims=True)                                      # (..., Lq, 1)
    kk = xp.expand_dims(xp.sum(k * k, axis=-1), axis=-2)                              # (..., 1, Lk)
    return qq + kk - 2.0 * (q @ xp.matrix_transpose(k))                               # (..., Lq, Lk)


@fill_doc(qk=_QK_DOC, qk_raises=_QK_RAISES_DOC)
def fastfood_rks_kernel(q: Array, k: Array, *, sigma: float = 1.0) -> Array:
    """The Gaussian kernel ``exp(-|q - k|^2 / (2 sigma^2))``: what FastFood-RKS estimates at initialisation.

    Rows of V ~ N(0, I / sigma^2) (Chowdhury et al. Eq. 6 with Eq. 3; Bochner, Eq. 2).

    {qk}

    Returns
    -------
    K : (..., Lq, Lk) array
        Entries in (0, 1]; same namespace, dtype and device as `q`.

    {qk_raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_rks_kernel
    >>> fastfood_rks_kernel(np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]]))
    array([[0.76720595, 0.77880078],
           [0.69419665, 0.36787944]])
    """
    xp = check_qk(q, k)
    _check_sigma(sigma)
    return xp.exp(-_sqdist(q, k, xp=xp) / (2.0 * sigma * sigma))


@fill_doc(qk=_QK_DOC, qk_raises=_QK_RAISES_DOC)
def fastfood_prf_kernel(q: Array, k: Array, *, sigma: float = 1.0) -> Array:
    """The kernel ``exp(-|q|^2 - |k|^2 + |q + k|^2 / (2 sigma^2))`` FastFood-PRF estimates at initialisation.

    Chowdhury et al. Eq. 12 with the Eq. 9 offset ``|x|^2``: the Gaussian kernel ``exp(-|q - k|^2 / 2)`` when
    sigma = 1, not shift-invariant otherwise.

    {qk}

    Returns
    -------
    K : (..., Lq, Lk) array
        Positive; same namespace, dtype and device as `q`.

    {qk_raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_prf_kernel
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> fastfood_prf_kernel(q, k, sigma=2.0)
    array([[0.58347714, 0.30498277],
           [0.39111643, 0.17377394]])
    """
    xp = check_qk(q, k)
    _check_sigma(sigma)
    qq = xp.sum(q * q, axis=-1, keepdims=True)                                      # (..., Lq, 1)
    kk = xp.expand_dims(xp.sum(k * k, axis=-1), axis=-2)                              # (..., 1, Lk)
    oo = qq + kk + 2.0 * (q @ xp.matrix_transpose(k))  # (..., Lq, Lk)  |q + k|^2
    return xp.exp(-qq - kk + oo / (2.0 * sigma * sigma))
