r"""Layer normalisation over the last axis (Ba et al. 2016) as a forward/backward pair; see :func:`layernorm`.

Axes: ``...`` batch and positions, ``d`` the normalised width. ``eps = 1e-5`` as in torch.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, check_shape, namespace
from .checks import check_dy, check_finite_all
from ._norm import normalize_bwd

__all__ = ["LayerNormParams", "LayerNormCache", "LayerNormGrads", "layernorm", "layernorm_fwd",
           "layernorm_bwd"]

Array = Any


class LayerNormParams(NamedTuple):
    """Parameters of :func:`layernorm`: scale ``gamma: (d,)`` and shift ``beta: (d,)``."""

    gamma: Array  # (d,)
    beta: Array   # (d,)


class LayerNormCache(NamedTuple):
    """What :func:`layernorm_bwd` needs: the normalised input, ``1/sqrt(var + eps)`` and ``gamma``."""

    xhat: Array   # (..., d) normalised input
    rstd: Array   # (..., 1) 1/sqrt(var + eps)
    gamma: Array  # (d,)


class LayerNormGrads(NamedTuple):
    """Gradients of :func:`layernorm`: ``x`` and ``params`` (a :class:`LayerNormParams` of gradients)."""

    x: Array                  # (..., d)
    params: LayerNormParams   # gamma: (d,), beta: (d,)


_PARAMS = """
x : (..., d) array
    Real floating (float32 or float64), finite; ``d >= 1``.
params : LayerNormParams
    ``gamma: (d,)``, ``beta: (d,)``, same namespace and dtype as `x` (``refattn.random.init_layernorm(d)``:
    ones and zeros).
eps : float, default 1e-5
    Added to the variance; positive.
"""

_RAISES = """
ValueError
    ``d = 0`` (the mean and variance of an empty row are undefined), non-finite `x` or parameters, mismatched
    shapes, or a non-positive `eps`. Zero rows (an empty leading axis) give an empty `y`.
TypeError
    `params` not a ``LayerNormParams``, or mixed namespaces or dtypes.
"""


@fill_doc(params=_PARAMS, raises=_RAISES)
def layernorm_fwd(x, params: LayerNormParams, *, eps=1e-5):
    r"""Forward of :func:`layernorm` (see it for the equations), with the cache for :func:`layernorm_bwd`.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., d) array
        Same namespace and dtype as `x`.
    cache : LayerNormCache
        ``xhat: (..., d)``, ``rstd: (..., 1)`` and ``gamma``, for :func:`layernorm_bwd`.

    Raises
    ------
    {raises}
    """
    xp = check_layernorm(x, params, eps)
    check_finite("x", x, xp=xp)
    check_finite_all(xp, **{"params.gamma": params.gamma, "params.beta": params.beta})
    return layernorm_fwd_core(x, params, eps, xp=xp)


def check_layernorm(x, params, eps=1e-5):
    """Structural checks of :func:`layernorm_fwd` (container, namespaces, dtypes, shapes, the width and
    `eps`): no data read; returns the namespace. The model runs them where the layer is used."""
    if not (isinstance(params, tuple) and hasattr(params, "gamma")):
        raise TypeError(f"params: expected LayerNormParams(gamma, beta); got {type(params).__name__}")
    xp = namespace(x, params.gamma, params.beta, names=("x", "params.gamma", "params.beta"))
    sizes = check_shape("x", x, "..., d")
    check_shape("params.gamma", params.gamma, "d", sizes)
    check_shape("params.beta", params.beta, "d", sizes)
    if x.shape[-1] == 0:
        raise ValueError("x: expected a non-empty last axis d (layer norm over d = 0 entries is undefined); "
                         f"got shape {tuple(x.shape)}")
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps: expected a positive number; got {eps!r}")
    return xp


# y = gamma xhat + beta,  xhat = (x - mean(x)) rstd,  rstd = 1/sqrt(var(x) + eps)      (last axis)
# dx = rstd (g - mean(g) - xhat mean(g xhat)),  g = dy gamma;  dgamma = sum dy xhat,  dbeta = sum dy
def layernorm_fwd_core(x, params, eps, *, xp):
    """Unchecked core of :func:`layernorm_fwd` (see :func:`layernorm`)."""
    mean = xp.mean(x, axis=-1, keepdims=True)                                       # (..., 1)
    xc = x - mean                                                                   # (..., d)
    rstd = 1.0 / xp.sqrt(xp.mean(xc * xc, axis=-1, keepdims=True) + eps)           # (..., 1)
    xhat = xc * rstd                                                                # (..., d)
    y = params.gamma * xhat + params.beta                                           # (..., d)
    return y, LayerNormCache(xhat=xhat, rstd=rstd, gamma=params.gamma)


def layernorm_bwd(dy, cache: LayerNormCache) -> LayerNormGrads:
    r"""Gradients of :func:`layernorm` (see it for the equations) for `x`, ``gamma`` and ``beta``.

    Parameters
    ----------
    dy : (..., d) array
        Cotangent of the output `y`: exactly its shape, same namespace and dtype; finite.
    cache : LayerNormCache
        From :func:`layernorm_fwd`.

    Returns
    -------
    LayerNormGrads
        ``x: (..., d)``, ``params.gamma: (d,)``, ``params.beta: (d,)``.

    Raises
    ------
    ValueError
        If `dy` is not exactly of the output's shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    return layernorm_bwd_core(dy, cache, xp=check_dy(dy, cache.xhat))


def layernorm_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`layernorm_bwd` (see :func:`layernorm`)."""
    c = cache
    d = c.xhat.shape[-1]
    dxhat = dy * c.gamma                                                            # (..., d)
    dx = normalize_bwd(dxhat, c.xhat, c.rstd, -1, xp=xp)                            # (..., d)
    dgamma = xp.sum(xp.reshape(dy * c.xhat, (-1, d)), axis=0)                       # (d,)
    dbeta = xp.sum(xp.reshape(dy, (-1, d)), axis=0)                                 # (d,)
    return LayerNormGrads(x=dx, params=LayerNormParams(gamma=dgamma, beta=dbeta))


@fill_doc(params=_PARAMS, raises=_RAISES)
def layernorm(x, params: LayerNormParams, *, eps=1e-5):
    """Layer norm over the last axis (Ba et al. 2016).

    ``y = gamma * xhat + beta`` with ``xhat = (x - mean(x)) * rstd``, ``rstd = 1/sqrt(var(x) + eps)``,
    statistics over the last axis (biased variance). The gradients are ``dgamma = sum dy xhat``,
    ``dbeta = sum dy`` (over the leading axes) and ``dx = rstd (g - mean(g) - xhat mean(g xhat))`` with
    ``g = dy gamma`` (means over the last axis; the mean and variance terms of the chain rule, simplified as
    in llm.c's layernorm derivation).

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., d) array
        Same namespace and dtype as `x`.

    Raises
    ------
    {raises}

    See Also
    --------
    layernorm_fwd, layernorm_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import LayerNormParams, layernorm
    >>> x = np.array([[1.0, 3.0], [2.0, 6.0]])
    >>> layernorm(x, LayerNormParams(gamma=np.ones(2), beta=np.zeros(2))).round(4)
    array([[-1.,  1.],
           [-1.,  1.]])
    """
    return layernorm_fwd(x, params, eps=eps)[0]
