r"""Batch normalisation (Ioffe & Szegedy 2015) in training and evaluation mode, as a forward/backward pair.

Training mode normalises with the statistics of the batch (all leading axes of ``x: (..., d)``, i.e. the
``N = prod(...)`` rows), and updates the running statistics; evaluation mode normalises with the running
statistics::

    train:  y = gamma (x - mean_B) / sqrt(var_B + eps) + beta,           var_B biased (divides by N)
            running_mean <- (1 - momentum) running_mean + momentum mean_B
            running_var  <- (1 - momentum) running_var  + momentum var_B N / (N - 1)   (unbiased, as torch)
    eval:   y = gamma (x - running_mean) / sqrt(running_var + eps) + beta

**State is explicit and never mutated**: ``batchnorm_fwd(x, params, state, train=...)`` returns
``(BatchNormOutput(y, state), cache)`` where ``state`` is a *new* :class:`BatchNormState` (the input one is
returned unchanged in evaluation mode). The backward takes the cotangent of ``y`` only: the running statistics
are not learnable and get no gradient (``BatchNormGrads(x, params)``; in a gradient check use
``output=lambda o: o.y``).

Defaults ``momentum = 0.1``, ``eps = 1e-5`` as torch's ``BatchNorm1d``. Axes: ``...`` batch, ``d`` features.
Initialise with ``refattn.random.init_batchnorm(d)`` -> ``(BatchNormParams, BatchNormState)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_choice, check_finite, check_shape, namespace
from .checks import check_dy, check_finite_all
from ._norm import normalize_bwd

__all__ = ["BatchNormParams", "BatchNormState", "BatchNormOutput", "BatchNormCache", "BatchNormGrads",
           "batchnorm", "batchnorm_fwd", "batchnorm_bwd"]

Array = Any


class BatchNormParams(NamedTuple):
    """Parameters of :func:`batchnorm`: scale ``gamma: (d,)`` and shift ``beta: (d,)``."""

    gamma: Array  # (d,)
    beta: Array   # (d,)


class BatchNormState(NamedTuple):
    """Running statistics of :func:`batchnorm`: ``mean: (d,)`` and unbiased ``var: (d,)`` (not learnable)."""

    mean: Array   # (d,) running mean
    var: Array    # (d,) running (unbiased) variance


class BatchNormOutput(NamedTuple):
    """What :func:`batchnorm_fwd` returns besides its cache: ``y: (..., d)`` and the new ``state``."""

    y: Array               # (..., d)
    state: BatchNormState  # the updated running statistics (train) or the input ones (eval)


class BatchNormCache(NamedTuple):
    """What :func:`batchnorm_bwd` needs from :func:`batchnorm_fwd` (fields commented in the source)."""

    xhat: Array   # (N, d) normalised input, leading axes flattened
    rstd: Array   # (1, d) or (d,): 1/sqrt(var + eps) of the statistics used
    gamma: Array  # (d,)
    train: bool
    shape: tuple  # x.shape


class BatchNormGrads(NamedTuple):
    """Gradients of :func:`batchnorm`: ``x`` and ``params`` (the running statistics get none)."""

    x: Array                  # (..., d)
    params: BatchNormParams   # gamma: (d,), beta: (d,)


_PARAMS = """
x : (..., d) array
    Real floating (float32 or float64), finite. At least 2 rows in training mode (the unbiased running
    variance divides by N - 1).
params : BatchNormParams
    ``gamma: (d,)``, ``beta: (d,)``, same namespace and dtype as `x`.
state : BatchNormState
    Running ``mean: (d,)`` and ``var: (d,)`` (non-negative; ``refattn.random.init_batchnorm(d)``); not
    modified.
train : bool
    Batch statistics and an updated state (True) or the running statistics (False). Required: no silent
    default mode.
momentum : float in [0, 1], default 0.1
    Weight of the batch statistics in the running-statistics update.
eps : float > 0, default 1e-5
    Added to the variance.
"""

_RAISES = """
ValueError
    Mismatched shapes, non-finite input, parameters or state, a negative running variance, fewer than 2 rows
    in training mode, `momentum` outside [0, 1] or a non-positive `eps`.
TypeError
    `params` or `state` of the wrong type, `train` not a bool, or mixed namespaces or dtypes.
"""


@fill_doc(params=_PARAMS, raises=_RAISES)
def batchnorm_fwd(x, params: BatchNormParams, state: BatchNormState, *, train: bool, momentum=0.1, eps=1e-5):
    r"""Forward of :func:`batchnorm` (see it for the equations), with the cache for :func:`batchnorm_bwd`.

    Parameters
    ----------
    {params}

    Returns
    -------
    out : BatchNormOutput
        ``y: (..., d)`` (same namespace and dtype as `x`) and ``state``: a new :class:`BatchNormState` in
        training mode, the input `state` in evaluation mode.
    cache : BatchNormCache
        For :func:`batchnorm_bwd`.

    Raises
    ------
    {raises}
    """
    xp = check_batchnorm(x, params, state, train)
    check_finite("x", x, xp=xp)
    check_finite_all(xp, **{"params.gamma": params.gamma, "params.beta": params.beta,
                            "state.mean": state.mean, "state.var": state.var})
    check_running_var(state, xp=xp)
    check_batchnorm_options(momentum, eps)
    return batchnorm_fwd_core(x, params, state, train=train, momentum=momentum, eps=eps, xp=xp)


def check_batchnorm(x, params, state, train):
    """Structural checks of :func:`batchnorm_fwd` (containers, `train`, namespaces, dtypes, shapes)."""
    if not (isinstance(params, tuple) and hasattr(params, "gamma")):
        raise TypeError(f"params: expected BatchNormParams(gamma, beta); got {type(params).__name__}")
    if not (isinstance(state, tuple) and hasattr(state, "var")):
        raise TypeError(f"state: expected BatchNormState(mean, var); got {type(state).__name__}")
    check_choice(train, "train", (True, False))
    xp = namespace(x, params.gamma, params.beta, state.mean, state.var,
                   names=("x", "params.gamma", "params.beta", "state.mean", "state.var"))
    sizes = check_shape("x", x, "..., d")
    for n, a in (("params.gamma", params.gamma), ("params.beta", params.beta), ("state.mean", state.mean),
                 ("state.var", state.var)):
        check_shape(n, a, "d", sizes)
    return xp


def check_running_var(state, *, xp):
    """The value check of a running state beyond finiteness: a non-negative variance (one sync)."""
    if not bool(xp.all(state.var >= 0)):
        raise ValueError("state.var: expected a non-negative running variance; got a negative entry")


def check_batchnorm_options(momentum, eps):
    """The option checks of :func:`batchnorm_fwd` (`momentum`, `eps`)."""
    if isinstance(momentum, bool) or not (isinstance(momentum, (int, float)) and 0 <= momentum <= 1):
        raise ValueError(f"momentum: expected a number in [0, 1]; got {momentum!r}")
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and 0 < eps < float("inf")):
        raise ValueError(f"eps: expected a positive number; got {eps!r}")


# train: y = gamma (x - mean_B) / sqrt(var_B + eps) + beta;  eval: the running statistics instead
# train: dx = rstd (g - mean_N(g) - xhat mean_N(g xhat)), g = dy gamma;  eval: dx = g rstd
def batchnorm_fwd_core(x, params, state, *, train, momentum, eps, xp):
    """Unchecked core of :func:`batchnorm_fwd` (see :func:`batchnorm`; ``d = 0`` gives empty outputs)."""
    d = x.shape[-1]
    x2 = xp.reshape(x, (-1, d))                                                     # (N, d)
    N = x2.shape[0]
    if train:
        if N < 2:
            raise ValueError(f"x: training-mode batch norm needs at least 2 rows; got {N} "
                             f"(shape {tuple(x.shape)})")
        mean = xp.mean(x2, axis=0, keepdims=True)                                   # (1, d)
        xc = x2 - mean                                                              # (N, d)
        var = xp.mean(xc * xc, axis=0, keepdims=True)                               # (1, d) biased
        rstd = 1.0 / xp.sqrt(var + eps)                                             # (1, d)
        xhat = xc * rstd                                                            # (N, d)
        new_state = BatchNormState(
            mean=(1 - momentum) * state.mean + momentum * mean[0, :],
            var=(1 - momentum) * state.var + momentum * var[0, :] * (N / (N - 1)),
        )
    else:
        rstd = 1.0 / xp.sqrt(state.var + eps)                                       # (d,)
        xhat = (x2 - state.mean) * rstd                                             # (N, d)
        new_state = state
    y = xp.reshape(params.gamma * xhat + params.beta, tuple(x.shape))               # (..., d)
    cache = BatchNormCache(xhat=xhat, rstd=rstd, gamma=params.gamma, train=bool(train), shape=tuple(x.shape))
    return BatchNormOutput(y=y, state=new_state), cache


def batchnorm_bwd(dy, cache: BatchNormCache) -> BatchNormGrads:
    r"""Gradients of :func:`batchnorm` (see it for the equations) for `x`, ``gamma`` and ``beta``.

    Parameters
    ----------
    dy : (..., d) array
        Cotangent of ``y`` (not of the state): exactly its shape, same namespace and dtype; finite.
    cache : BatchNormCache
        From :func:`batchnorm_fwd`.

    Returns
    -------
    BatchNormGrads
        ``x: (..., d)``, ``params.gamma: (d,)``, ``params.beta: (d,)``.

    Raises
    ------
    ValueError
        If `dy` is not exactly of the output's shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    return batchnorm_bwd_core(dy, cache, xp=check_dy(dy, cache.xhat, cache.shape))


def batchnorm_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`batchnorm_bwd` (see :func:`batchnorm`)."""
    c = cache
    d = c.xhat.shape[-1]
    dy2 = xp.reshape(dy, (-1, d))                                                   # (N, d)
    dxhat = dy2 * c.gamma                                                           # (N, d)
    if c.train:
        dx2 = normalize_bwd(dxhat, c.xhat, c.rstd, 0, xp=xp)                        # (N, d)
    else:
        dx2 = dxhat * c.rstd                                                        # (N, d)
    dgamma = xp.sum(dy2 * c.xhat, axis=0)                                           # (d,)
    dbeta = xp.sum(dy2, axis=0)                                                     # (d,)
    return BatchNormGrads(x=xp.reshape(dx2, c.shape), params=BatchNormParams(gamma=dgamma, beta=dbeta))


@fill_doc(params=_PARAMS, raises=_RAISES)
def batchnorm(x, params: BatchNormParams, state: BatchNormState, *, train: bool, momentum=0.1, eps=1e-5):
    """Batch norm (Ioffe & Szegedy 2015) in training or evaluation mode, with explicit running statistics.

    Rows are all leading axes of `x` (the module docstring has the statistics). The gradients: training mode
    ``dx = rstd (g - mean_N(g) - xhat mean_N(g xhat))`` with ``g = dy gamma`` (the batch statistics depend on
    x), evaluation mode ``dx = g rstd``; ``dgamma = sum dy xhat``, ``dbeta = sum dy``. The running statistics
    get no gradient.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., d) array
        Same namespace and dtype as `x`.
    new_state : BatchNormState
        The updated running statistics (training) or `state` itself (evaluation).

    Raises
    ------
    {raises}

    See Also
    --------
    batchnorm_fwd, batchnorm_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import BatchNormParams, BatchNormState, batchnorm
    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])                                  # (N, d) = (2, 2)
    >>> params = BatchNormParams(gamma=np.ones(2), beta=np.zeros(2))
    >>> state = BatchNormState(mean=np.zeros(2), var=np.ones(2))
    >>> y, new_state = batchnorm(x, params, state, train=True)
    >>> y.round(4)
    array([[-1., -1.],
           [ 1.,  1.]])
    >>> new_state.mean.round(4), new_state.var.round(4)
    (array([0.2, 0.3]), array([1.1, 1.1]))
    """
    out, _ = batchnorm_fwd(x, params, state, train=train, momentum=momentum, eps=eps)
    return out.y, out.state
