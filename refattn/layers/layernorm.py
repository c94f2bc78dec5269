r"""Layer normalisation over the last axis (Ba et al. 2016), as a forward/backward pair.

    y = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta     (statistics over the last axis, biased variance)

Axes: ``...`` batch and positions, ``d`` the normalised width. Parameters ``LayerNormParams(gamma: (d,),
beta: (d,))`` (``refattn.random.init_layernorm(d)``: ones and zeros). ``eps = 1e-5`` as in torch.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._xp import check_finite, check_shape, namespace
from ._check import check_dy, check_finite_all
from ._norm import normalize_bwd

__all__ = ["LayerNormParams", "LayerNormCache", "LayerNormGrads", "layernorm", "layernorm_fwd",
           "layernorm_bwd"]

Array = Any


class LayerNormParams(NamedTuple):
    gamma: Array  # (d,)
    beta: Array   # (d,)


class LayerNormCache(NamedTuple):
    xhat: Array   # (..., d) normalised input
    rstd: Array   # (..., 1) 1/sqrt(var + eps)
    gamma: Array  # (d,)


class LayerNormGrads(NamedTuple):
    x: Array                  # (..., d)
    params: LayerNormParams   # gamma: (d,), beta: (d,)


def layernorm_fwd(x, params: LayerNormParams, *, eps=1e-5):
    r"""Layer norm of `x` over its last axis and the cache for :func:`layernorm_bwd`.

    Parameters
    ----------
    x : (..., d) array
    params : LayerNormParams
        ``gamma: (d,)``, ``beta: (d,)``.
    eps : float
        Added to the variance.

    Returns
    -------
    y : (..., d) array
    cache : LayerNormCache

    Raises
    ------
    ValueError
        ``d = 0`` (the mean and variance of an empty row are undefined), non-finite `x` or parameters.
        Zero rows (an empty leading axis) give an empty `y`.
    """
    if not (isinstance(params, tuple) and hasattr(params, "gamma")):
        raise TypeError(f"params: expected LayerNormParams(gamma, beta); got {type(params).__name__}")
    xp = namespace(x, params.gamma, params.beta, names=("x", "params.gamma", "params.beta"))
    sizes = check_shape("x", x, "..., d")
    check_shape("params.gamma", params.gamma, "d", sizes)
    check_shape("params.beta", params.beta, "d", sizes)
    check_finite("x", x, xp=xp)
    check_finite_all(xp, **{"params.gamma": params.gamma, "params.beta": params.beta})
    if x.shape[-1] == 0:
        raise ValueError("x: expected a non-empty last axis d (layer norm over d = 0 entries is undefined); "
                         f"got shape {tuple(x.shape)}")
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps: expected a positive number; got {eps!r}")
    return _layernorm_fwd(x, params, eps, xp=xp)


def _layernorm_fwd(x, params, eps, *, xp):
    """Unchecked core of :func:`layernorm_fwd`."""
    mean = xp.mean(x, axis=-1, keepdims=True)                                       # (..., 1)
    xc = x - mean                                                                   # (..., d)
    rstd = 1.0 / xp.sqrt(xp.mean(xc * xc, axis=-1, keepdims=True) + eps)           # (..., 1)
    xhat = xc * rstd                                                                # (..., d)
    y = params.gamma * xhat + params.beta                                           # (..., d)
    return y, LayerNormCache(xhat=xhat, rstd=rstd, gamma=params.gamma)


def layernorm_bwd(dy, cache: LayerNormCache) -> LayerNormGrads:
    r"""Gradients of :func:`layernorm`: ``dgamma = sum dy xhat``, ``dbeta = sum dy`` (over leading axes) and
    ``dx = rstd (g - mean(g) - xhat mean(g xhat))`` with ``g = dy gamma`` (means over the last axis)."""
    check_dy(dy, cache.xhat)
    return _layernorm_bwd(dy, cache)


def _layernorm_bwd(dy, cache):
    """Unchecked core of :func:`layernorm_bwd`."""
    c = cache
    xp = namespace(dy, c.xhat, names=("dy", "cache.xhat"))
    d = c.xhat.shape[-1]
    dxhat = dy * c.gamma                                                            # (..., d)
    dx = normalize_bwd(dxhat, c.xhat, c.rstd, -1, xp=xp)                            # (..., d)
    dgamma = xp.sum(xp.reshape(dy * c.xhat, (-1, d)), axis=0)                       # (d,)
    dbeta = xp.sum(xp.reshape(dy, (-1, d)), axis=0)                                 # (d,)
    return LayerNormGrads(x=dx, params=LayerNormParams(gamma=dgamma, beta=dbeta))


def layernorm(x, params: LayerNormParams, *, eps=1e-5):
    """Layer norm over the last axis. ``x: (..., d)`` -> ``(..., d)``."""
    return layernorm_fwd(x, params, eps=eps)[0]
