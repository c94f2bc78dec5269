r"""Hyperbolic positive random features: the positive maps on the antithetic projections ``[omega; -omega]``.

Each is its :mod:`~refattn.features.positive` / :mod:`~refattn.features.key_frames` counterpart on width 2m
(derivation in :func:`hyperbolic_features`); axes as in :mod:`refattn.features.positive`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import namespace
from .trig import MSE_SECTIONS, mse_terms, nonneg
from .projection import BWD_RAISES, OMEGA_GRAD_PARAMETER, X_OMEGA_PARAMETERS, X_OMEGA_RAISES, check_x_omega
from .key_frames import check_causal, positive_key_features_stable_bwd, positive_key_features_stable_fwd_core
from .positive import (GRADS_RETURNS, PositiveFeaturesCache, PositiveFeaturesGrads, check_frame,
                       positive_features_bwd, positive_features_fwd, positive_features_stable_bwd,
                       positive_features_stable_fwd_core)

__all__ = [
    "hyperbolic_features", "hyperbolic_features_fwd", "hyperbolic_features_bwd",
    "hyperbolic_features_stable", "hyperbolic_features_stable_fwd", "hyperbolic_features_stable_bwd",
    "hyperbolic_key_features_stable", "hyperbolic_key_features_stable_fwd",
    "hyperbolic_key_features_stable_bwd", "HyperbolicFeaturesCache", "hyperbolic_mse",
]

Array = Any

_FRAME_DOC = """
k_log_scale : (..., 1, 2m) or (..., L, 2m) array, optional
    A key frame to fold into the exponent (queries of FAVOR+; from :func:`hyperbolic_key_features_stable`),
    with the batch axes of `x`, same namespace and dtype, finite. ``None`` (default): no frame.
"""
_CAUSAL_DOC = """
causal : bool, default False
    Prefix maxima instead of maxima over all positions.
"""
#: the stable query maps' and the key maps' parameters: x and omega, then the frame resp. `causal`
_STABLE_PARAMETERS = X_OMEGA_PARAMETERS.rstrip("\n") + _FRAME_DOC
_KEY_PARAMETERS = X_OMEGA_PARAMETERS.rstrip("\n") + _CAUSAL_DOC
_DOUT_DOC = """
Parameters
----------
dout : tuple of ((..., L, 2m) array, (..., L) array or None)
    ``(dphi, dlog_scale)``; ``dlog_scale`` may be ``None`` (queries). Same namespace and dtype as the cache,
    finite.
"""
_STABLE_RAISES_DOC = """
Raises
------
ValueError
    If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, `k_log_scale` has another shape
    than ``(..., 1, 2m)`` or ``(..., L, 2m)``, or an input is not finite.
TypeError
    If `x`, `omega` and `k_log_scale` differ in namespace or dtype, or are not real floating.
"""
_KEY_RAISES_DOC = """
Raises
------
ValueError
    If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
TypeError
    If `x` and `omega` differ in namespace or dtype or are not real floating, or `causal` is not a bool.
"""


class HyperbolicFeaturesCache(NamedTuple):
    """Cache of the hyperbolic maps: the positive map's cache on the stacked ``[omega; -omega]``."""

    inner: PositiveFeaturesCache  # cache of the positive map on [omega; -omega]


def antithetic(omega, *, xp):
    """The stacked projections ``[omega; -omega]``: ``(m, d)`` -> ``(2m, d)``."""
    return xp.concat([omega, -omega], axis=0)                                     # (2m, d)


def antithetic_grad(domega2, m):
    """Fold the gradient of ``[omega; -omega]`` back onto omega: ``domega_+ - domega_-`` (None stays None)."""
    if domega2 is None:                                                           # not requested
        return None
    return domega2[:m, :] - domega2[m:, :]                                        # (m, d)


def _fold(g, cache, *, frame=True):
    """The positive map's gradients on ``[omega; -omega]`` as the hyperbolic map's."""
    return PositiveFeaturesGrads(x=g.x, omega=antithetic_grad(g.omega, cache.inner.omega.shape[0] // 2),
                                 k_log_scale=g.k_log_scale if frame else None)


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, raises=X_OMEGA_RAISES)
def hyperbolic_features(x, omega):
    r"""Hyperbolic positive features ``[exp(u), exp(-u)] exp(-|x|^2/2) / sqrt(2m)``, ``u = x omega^T``.

    With antithetic projections ``+-omega``, ``phi(q) . phi(k)`` is unbiased for ``exp(q . k)``
    (:func:`~refattn.features.trig.softmax_kernel`; Choromanski et al. 2021, Lemma 1, hyperbolic form) with a
    smaller MSE than :func:`positive_features`, both derived in :func:`hyperbolic_mse`. Backward: that of
    :func:`positive_features` on ``[omega; -omega]``, then ``domega = domega_+ - domega_-``. Raw: attention
    should use :func:`hyperbolic_features_stable`.

    {x_omega_parameters}

    Returns
    -------
    phi : (..., L, 2m) array
        ``exp(+u)`` half first; positive; same namespace, dtype and device as `x`.

    {raises}

    See Also
    --------
    hyperbolic_features_fwd, hyperbolic_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import hyperbolic_features as phi, softmax_kernel
    >>> from refattn.random import draw_gaussian
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)
    >>> bool(np.allclose(phi(q, omega) @ phi(k, omega).T, softmax_kernel(q, k), atol=0.1))
    True
    """
    return hyperbolic_features_fwd(x, omega)[0]


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS)
def hyperbolic_features_fwd(x, omega):
    """:func:`hyperbolic_features` and the cache for its backward (equations, shapes and errors there).

    {x_omega_parameters}

    Returns
    -------
    (phi, cache) : ((..., L, 2m) array, HyperbolicFeaturesCache)
    """
    xp, _ = check_x_omega(x, omega)
    phi, cache = positive_features_fwd(x, antithetic(omega, xp=xp))               # (..., L, 2m)
    return phi, HyperbolicFeaturesCache(cache)


@fill_doc(returns=GRADS_RETURNS, raises=BWD_RAISES)
def hyperbolic_features_bwd(dphi, cache: HyperbolicFeaturesCache) -> PositiveFeaturesGrads:
    """Gradients of :func:`hyperbolic_features` (equations there) from the features' cotangent.

    Parameters
    ----------
    dphi : (..., L, 2m) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : HyperbolicFeaturesCache

    {returns}

    {raises}
    """
    return _fold(positive_features_bwd(dphi, cache.inner), cache)


# phi, log_scale = positive_features_stable(x, [omega; -omega], k_log_scale)       (width 2m)
# backward: positive_features_stable_bwd on [omega; -omega], then domega = domega_+ - domega_-
def hyperbolic_features_stable_fwd_core(x, omega, k_log_scale, *, xp):
    """Unchecked core of :func:`hyperbolic_features_stable_fwd`."""
    out, cache = positive_features_stable_fwd_core(x, antithetic(omega, xp=xp), k_log_scale, xp=xp)
    return out, HyperbolicFeaturesCache(cache)


@fill_doc(parameters=_STABLE_PARAMETERS, raises=_STABLE_RAISES_DOC)
def hyperbolic_features_stable(x, omega, *, k_log_scale=None):
    r"""Row-stabilised :func:`hyperbolic_features`: :func:`positive_features_stable` on ``[omega; -omega]``.

    {parameters}

    Returns
    -------
    phi : (..., L, 2m) array
    log_scale : (..., L) array
        As in :func:`positive_features_stable`; the pair is ``hyperbolic_features_stable_fwd`` / ``_bwd``.

    {raises}
    """
    return hyperbolic_features_stable_fwd(x, omega, k_log_scale=k_log_scale)[0]


@fill_doc(parameters=_STABLE_PARAMETERS)
def hyperbolic_features_stable_fwd(x, omega, *, k_log_scale=None):
    """:func:`hyperbolic_features_stable` and the cache for its backward (equations, shapes and errors there).

    {parameters}

    Returns
    -------
    ((phi, log_scale), cache) : (((..., L, 2m), (..., L)) arrays, HyperbolicFeaturesCache)
    """
    xp, m = check_x_omega(x, omega)
    if k_log_scale is not None:
        namespace(x, k_log_scale, names=("x", "k_log_scale"))
        check_frame(k_log_scale, x, 2 * m, xp=xp)
    return hyperbolic_features_stable_fwd_core(x, omega, k_log_scale, xp=xp)


@fill_doc(dout=_DOUT_DOC, omega_grad=OMEGA_GRAD_PARAMETER, returns=GRADS_RETURNS, raises=BWD_RAISES)
def hyperbolic_features_stable_bwd(dout, cache: HyperbolicFeaturesCache, *,
                                   omega_grad=True) -> PositiveFeaturesGrads:
    """Gradients of :func:`hyperbolic_features_stable` (equations there) from ``(dphi, dlog_scale)``.

    {dout}
    cache : HyperbolicFeaturesCache
    {omega_grad}

    {returns}

    {raises}
    """
    return _fold(positive_features_stable_bwd(dout, cache.inner, omega_grad=omega_grad), cache)


# phi, k_log_scale = positive_key_features_stable(x, [omega; -omega])                (width 2m)
# backward: positive_key_features_stable_bwd on [omega; -omega], then domega = domega_+ - domega_-
def hyperbolic_key_features_stable_fwd_core(x, omega, *, causal=False, xp):
    """Unchecked core of :func:`hyperbolic_key_features_stable_fwd`."""
    out, cache = positive_key_features_stable_fwd_core(x, antithetic(omega, xp=xp), causal=causal, xp=xp)
    return out, HyperbolicFeaturesCache(cache)


@fill_doc(parameters=_KEY_PARAMETERS, raises=_KEY_RAISES_DOC)
def hyperbolic_key_features_stable(x, omega, *, causal=False):
    r""":func:`positive_key_features_stable` on ``[omega; -omega]``: keys' features, per-feature frames.

    {parameters}

    Returns
    -------
    phi : (..., L, 2m) array
        ``phi * exp(k_log_scale) == hyperbolic_features(x, omega)``, entries in (0, 1].
    k_log_scale : (..., 1, 2m) or (..., L, 2m) array
        Per-feature frame (causal: ``(..., L, 2m)``), to fold into ``hyperbolic_features_stable(q, ...)``.

    {raises}
    """
    return hyperbolic_key_features_stable_fwd(x, omega, causal=causal)[0]


@fill_doc(parameters=_KEY_PARAMETERS)
def hyperbolic_key_features_stable_fwd(x, omega, *, causal=False):
    """:func:`hyperbolic_key_features_stable` and the cache for its backward (maths and errors there).

    {parameters}

    Returns
    -------
    ((phi, k_log_scale), cache) : (((..., L, 2m), (..., 1|L, 2m)) arrays, HyperbolicFeaturesCache)
    """
    xp, _ = check_x_omega(x, omega)
    check_causal(causal)
    return hyperbolic_key_features_stable_fwd_core(x, omega, causal=causal, xp=xp)


@fill_doc(omega_grad=OMEGA_GRAD_PARAMETER, returns=GRADS_RETURNS, raises=BWD_RAISES)
def hyperbolic_key_features_stable_bwd(dout, cache: HyperbolicFeaturesCache, *,
                                       omega_grad=True) -> PositiveFeaturesGrads:
    """Gradients of :func:`hyperbolic_key_features_stable` (equations there) from ``(dphi, dk_log_scale)``.

    Parameters
    ----------
    dout : tuple of ((..., L, 2m) array, (..., 1, 2m) or (..., L, 2m) array or None)
        ``(dphi, dk_log_scale)`` (the latter may be ``None``); the cache's namespace and dtype, finite.
    cache : HyperbolicFeaturesCache
    {omega_grad}

    {returns}

    {raises}
    """
    g = positive_key_features_stable_bwd(dout, cache.inner, omega_grad=omega_grad)
    return _fold(g, cache, frame=False)


@fill_doc(sections=MSE_SECTIONS)
def hyperbolic_mse(q, k, m):
    r"""MSE of :func:`hyperbolic_features`' softmax-kernel estimate,
    ``exp(-|q|^2 - |k|^2) (exp(|q + k|^2) - 1)^2 / (2m)``.

    Derivation (iid ``omega_i ~ N(0, I_d)``, m projections, 2m features, ``s = q + k``): ``phi(q) . phi(k)``
    is the mean of m iid ``Y_i = cosh(omega_i . s) exp(-|q|^2/2 - |k|^2/2)``, unbiased for ``exp(q . k)``:
    ``E cosh(omega . s) = exp(|s|^2/2)``; and ``E cosh^2(omega . s) = (1 + E cosh(2 omega . s)) / 2 =
    (1 + exp(2|s|^2)) / 2``, so ``Var cosh = (exp(|s|^2) - 1)^2 / 2`` and ``Var Y = exp(-|q|^2 - |k|^2)
    (exp(|s|^2) - 1)^2 / 2``, over m. Equal to ``positive_mse(q, k, m) (1 - exp(-|s|^2)) / 2``: below the
    positive map's at the same m (Choromanski et al. 2021, Lemma 2, hyperbolic form).

    {sections}

    See Also
    --------
    refattn.features.positive_mse : the one-sided positive map's MSE.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import hyperbolic_mse
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> hyperbolic_mse(q, k, 64)
    array([[0.00480913, 0.21798452],
           [0.03303824, 0.04315931]])
    """
    xp, qk, qq, kk, m = mse_terms(q, k, m)
    ss = nonneg(qq + kk + 2.0 * qk, xp=xp)                                        # (..., Lq, Lk) |q + k|^2
    return xp.exp(-(qq + kk)) * xp.expm1(ss) ** 2 / (2.0 * m)
