r"""Losses as forward/backward pairs: softmax cross-entropy with integer labels, and mean squared error.

Both return a scalar (0-d array): the **mean** over rows (``logits: (..., C)``, ``labels: (...)`` integer
class indices, which get no gradient) or entries (``pred``, ``target``: any shape). The one-hot of the labels
is an ``arange`` comparison (the standard has no fancy indexing).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import limits
from .._docs import fill_doc
from .._xp import check_finite, check_nonneg_int, check_shape, device_of, namespace
from .checks import check_dy, check_index_range

__all__ = ["CrossEntropyCache", "CrossEntropyGrads", "softmax_cross_entropy", "softmax_cross_entropy_fwd",
           "softmax_cross_entropy_bwd", "MseGrads", "mse", "mse_fwd", "mse_bwd", "one_hot"]

Array = Any


class CrossEntropyCache(NamedTuple):
    """What :func:`softmax_cross_entropy_bwd` needs: probabilities, one-hot labels ``(N, C)``, the shape."""

    p: Array       # (N, C) softmax probabilities
    onehot: Array  # (N, C)
    shape: tuple   # logits.shape


class CrossEntropyGrads(NamedTuple):
    """Gradient of :func:`softmax_cross_entropy`: ``logits: (..., C)`` (labels get none)."""

    logits: Array  # (..., C)


class MseGrads(NamedTuple):
    """Gradients of :func:`mse`: ``pred`` and ``target`` (``dtarget = -dpred``)."""

    pred: Array
    target: Array


_CE_PARAMS = """
logits : (..., C) array
    Real floating (float32 or float64), finite.
labels : (...) integer array
    Class indices in ``[0, C)``; same namespace as `logits`.
"""

_CE_RAISES = """
ValueError
    No rows (the mean over zero examples is undefined), ``C = 0``, labels out of range, non-finite logits, or
    mismatched leading shapes.
TypeError
    `labels` not an integer array, or mixed namespaces.
"""

_MSE_PARAMS = """
pred : (...) array
    Real floating (float32 or float64), finite, at least one entry.
target : (...) array
    Same shape, namespace and dtype as `pred`; finite.
"""

_MSE_RAISES = """
ValueError
    Shapes that differ, non-finite input, or empty `pred` (the mean over no entries is undefined).
TypeError
    Mixed namespaces or dtypes.
"""

_DLOSS = """
dloss : () array
    Cotangent of the loss: 0-d, same namespace and dtype as the forward's input; finite.
"""

_DLOSS_RAISES = """
ValueError
    If `dloss` is not 0-d or not finite.
TypeError
    If `dloss` differs from the cache in namespace or dtype.
"""

_LOSS = """
loss : () array
    0-d, same namespace and dtype as the input.
"""


def one_hot(labels, C, *, dtype, xp):
    """One-hot rows of integer `labels`, by comparison with ``arange(C)``.

    Parameters
    ----------
    labels : (...) integer array
        Class indices, every entry in ``[0, C)`` (a negative, too large or non-integer label would give a zero
        row: ``ValueError``/``TypeError``). Empty `labels` give ``(..., C)`` with no rows.
    C : int
        Number of classes, non-negative; ``C = 0`` is allowed only with empty `labels`.
    dtype : dtype
        ``xp.float32`` or ``xp.float64``.
    xp : array namespace
        The namespace of `labels` (``array_api_compat.array_namespace(labels)``).

    Returns
    -------
    onehot : (..., C) array
        ``onehot[..., c] = 1`` where ``labels == c``, else 0; of `dtype`, in `xp`.

    Raises
    ------
    ValueError
        A label outside ``[0, C)``, or a negative `C`.
    TypeError
        `xp` not an array namespace, `labels` not an integer array, or `dtype` not float32/float64.
    MemoryError
        If the one-hot exceeds the allocation bound (:mod:`refattn.limits`).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import one_hot
    >>> one_hot(np.array([0, 2]), 3, dtype=np.float64, xp=np)
    array([[1., 0., 0.],
           [0., 0., 1.]])
    """
    if not hasattr(xp, "isdtype"):
        raise TypeError(f"xp: expected an array namespace (array_api_compat.array_namespace(x)); got {xp!r}")
    C = check_nonneg_int(C, "C")
    namespace(labels, names=("labels",), allow_int=("labels",))
    if not xp.isdtype(labels.dtype, "integral"):
        raise TypeError(f"labels: expected an integer array of class indices; got dtype {labels.dtype}")
    if dtype not in (xp.float32, xp.float64):
        raise TypeError(f"dtype: expected xp.float32 or xp.float64; got {dtype!r}")
    size = 1
    for n in labels.shape:
        size *= int(n)
    if size and (int(xp.min(labels)) < 0 or int(xp.max(labels)) >= C):
        raise ValueError(f"labels: expected class indices in [0, {C}); got values in "
                         f"[{int(xp.min(labels))}, {int(xp.max(labels))}]")
    limits.check_nbytes(size * C * 8, "labels x C (the one-hot array)")
    return one_hot_core(labels, C, dtype=dtype, xp=xp)


def one_hot_core(labels, C, *, dtype, xp):
    """Unchecked core of :func:`one_hot`."""
    classes = xp.arange(C, dtype=labels.dtype, device=device_of(labels))               # (C,)
    return xp.astype(xp.expand_dims(labels, axis=-1) == classes, dtype)            # (..., C)


@fill_doc(params=_CE_PARAMS, loss=_LOSS, raises=_CE_RAISES)
def softmax_cross_entropy_fwd(logits, labels):
    r"""Forward of :func:`softmax_cross_entropy` (see it for the equations), with the cache for the backward.

    Parameters
    ----------
    {params}

    Returns
    -------
    {loss}
    cache : CrossEntropyCache
        Softmax probabilities and one-hot labels ``(N, C)``, for :func:`softmax_cross_entropy_bwd`.

    Raises
    ------
    {raises}
    """
    xp = namespace(logits, labels, names=("logits", "labels"), allow_int=("labels",))
    if not xp.isdtype(labels.dtype, "integral"):
        raise TypeError(f"labels: expected an integer array of class indices; got dtype {labels.dtype}")
    sizes = check_shape("logits", logits, "..., C")
    check_shape("labels", labels, "...", sizes)
    check_finite("logits", logits, xp=xp)
    C = logits.shape[-1]
    if C == 0 or math.prod(logits.shape[:-1]) == 0:
        raise ValueError(f"logits: expected at least one row and one class (the mean loss over no examples "
                         f"is undefined); got shape {tuple(logits.shape)}")
    check_index_range("labels", labels, C, f"class indices in [0, {C})", xp=xp)     # one sync
    z = xp.reshape(logits, (-1, C))                                                 # (N, C)
    N = z.shape[0]
    zmax = xp.max(z, axis=-1, keepdims=True)                                        # (N, 1) stabiliser
    e = xp.exp(z - zmax)                                                            # (N, C)
    s = xp.sum(e, axis=-1, keepdims=True)                                           # (N, 1)
    lse = zmax + xp.log(s)                                                          # (N, 1)
    onehot = one_hot_core(xp.reshape(labels, (-1,)), C, dtype=logits.dtype, xp=xp)       # (N, C)
    picked = xp.sum(z * onehot, axis=-1, keepdims=True)                             # (N, 1)
    loss = xp.sum(lse - picked) / N                                                 # ()
    return loss, CrossEntropyCache(p=e / s, onehot=onehot, shape=tuple(logits.shape))


@fill_doc(dloss=_DLOSS, raises=_DLOSS_RAISES)
def softmax_cross_entropy_bwd(dloss, cache: CrossEntropyCache) -> CrossEntropyGrads:
    """Gradient of :func:`softmax_cross_entropy` (see it for the equations).

    Parameters
    ----------
    {dloss}
    cache : CrossEntropyCache
        From :func:`softmax_cross_entropy_fwd`.

    Returns
    -------
    CrossEntropyGrads
        ``logits: (..., C)``.

    Raises
    ------
    {raises}
    """
    return softmax_cross_entropy_bwd_core(dloss, cache, xp=check_dy(dloss, cache.p, (), name="dloss"))


# loss = mean_n [logsumexp(logits_n) - logits_n[labels_n]]      (forward: softmax_cross_entropy_fwd)
# dlogits = dloss (softmax(logits) - onehot(labels)) / N
def softmax_cross_entropy_bwd_core(dloss, cache, *, xp):
    """Unchecked core of :func:`softmax_cross_entropy_bwd` (see :func:`softmax_cross_entropy`)."""
    N = cache.p.shape[0]
    return CrossEntropyGrads(logits=xp.reshape(dloss * (cache.p - cache.onehot) / N, cache.shape))


@fill_doc(params=_CE_PARAMS, loss=_LOSS, raises=_CE_RAISES)
def softmax_cross_entropy(logits, labels):
    """Mean softmax cross-entropy of integer labels: ``mean_n [logsumexp(logits_n) - logits_n[labels_n]]``.

    The mean runs over the ``N = prod(...)`` rows; the gradient is
    ``dlogits = dloss (softmax(logits) - onehot(labels)) / N`` (labels get none).

    Parameters
    ----------
    {params}

    Returns
    -------
    {loss}

    Raises
    ------
    {raises}

    See Also
    --------
    softmax_cross_entropy_fwd, softmax_cross_entropy_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import softmax_cross_entropy
    >>> logits = np.array([[2.0, 0.0], [0.0, 0.0]])               # (N, C) = (2, 2)
    >>> round(float(softmax_cross_entropy(logits, np.array([0, 1]))), 4)
    0.41
    """
    return softmax_cross_entropy_fwd(logits, labels)[0]


@fill_doc(params=_MSE_PARAMS, loss=_LOSS, raises=_MSE_RAISES)
def mse_fwd(pred, target):
    """Forward of :func:`mse` (see it for the equations), with the cache for :func:`mse_bwd`.

    Parameters
    ----------
    {params}

    Returns
    -------
    {loss}
    cache : array
        ``pred - target``, for :func:`mse_bwd`.

    Raises
    ------
    {raises}
    """
    xp = namespace(pred, target, names=("pred", "target"))
    if tuple(pred.shape) != tuple(target.shape):
        raise ValueError(f"target: expected the shape of pred {tuple(pred.shape)}; got {tuple(target.shape)}")
    check_finite("pred", pred, xp=xp)
    check_finite("target", target, xp=xp)
    if math.prod(pred.shape) == 0:
        raise ValueError(f"pred: expected at least one entry (the mean over no entries is undefined); "
                         f"got shape {tuple(pred.shape)}")
    diff = pred - target
    return xp.mean(diff * diff), diff


@fill_doc(dloss=_DLOSS, raises=_DLOSS_RAISES)
def mse_bwd(dloss, cache) -> MseGrads:
    """Gradients of :func:`mse` (see it for the equations).

    Parameters
    ----------
    {dloss}
    cache : array
        From :func:`mse_fwd` (``pred - target``).

    Returns
    -------
    MseGrads
        ``pred`` and ``target``, each of `pred`'s shape.

    Raises
    ------
    {raises}
    """
    diff = cache
    check_dy(dloss, diff, (), name="dloss")
    g = (2.0 / math.prod(diff.shape)) * dloss * diff
    return MseGrads(pred=g, target=-g)


@fill_doc(params=_MSE_PARAMS, loss=_LOSS, raises=_MSE_RAISES)
def mse(pred, target):
    """Mean squared error ``mean((pred - target)^2)``, a 0-d array.

    The gradients are ``dpred = 2 dloss (pred - target) / n = -dtarget``, n the number of entries.

    Parameters
    ----------
    {params}

    Returns
    -------
    {loss}

    Raises
    ------
    {raises}

    See Also
    --------
    mse_fwd, mse_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import mse
    >>> float(mse(np.array([1.0, 2.0]), np.array([0.0, 0.0])))
    2.5
    """
    return mse_fwd(pred, target)[0]
