r"""Deterministic feature maps for generalized (linear) attention.

* ``elu_features(x) = elu(x) + 1`` (Katharopoulos et al.), positive everywhere, estimating nothing: it
*defines*
  the kernel ``K(q, k) = phi(q) . phi(k)`` (:func:`elu_kernel`);
* ``relu_features(x) = relu(x) + eps`` (Choromanski et al. "Performer-ReLU" style; the small constant
  ``eps = 1e-3`` by default keeps every normaliser positive, since relu alone gives all-zero rows for inputs
  with no positive coordinate).

Axes: ``...`` batch and heads, ``L`` positions, ``d`` width (the feature width m equals d).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, check_shape, namespace
from .trig import check_qk

__all__ = [
    "elu_features", "elu_features_fwd", "elu_features_bwd", "elu_kernel", "EluFeaturesGrads",
    "relu_features", "relu_features_fwd", "relu_features_bwd", "relu_kernel", "ReluFeaturesGrads",
]

Array = Any

#: Default additive constant of the ReLU map.
RELU_EPS = 1e-3

_X_DOC = """
Parameters
----------
x : (..., L, d) array
    Queries or keys. Real floating (float32 or float64), finite.
"""
_X_RAISES_DOC = """
Raises
------
ValueError
    If `x` has fewer than 2 axes or non-finite entries.
TypeError
    If `x` is not a real floating array.
"""
_EPS_DOC = """
eps : float, default 1e-3
    Non-negative constant added to every feature (``RELU_EPS``); 0 gives plain ``relu``.
"""
_EPS_RAISES_DOC = """
Raises
------
ValueError
    If `eps` is negative or not a number, `x` has fewer than 2 axes or non-finite entries.
TypeError
    If `x` is not a real floating array.
"""
_BWD_DOC = """
Parameters
----------
dphi : (..., L, d) array
    Cotangent of the features; exactly the features' shape, same namespace and dtype, finite.
cache : array
    The cache of the forward (its input ``x``).
"""
_BWD_RAISES_DOC = """
Raises
------
ValueError
    If ``dphi.shape`` differs from the features' shape or `dphi` is not finite.
TypeError
    If `dphi` and the cache differ in namespace or dtype.
"""
_QK_DOC = """
Parameters
----------
q : (..., Lq, d) array
    Queries. Real floating, finite.
k : (..., Lk, d) array
    Keys, with the batch axes and width of `q`; same namespace and dtype.
"""


class EluFeaturesGrads(NamedTuple):
    """Gradient of :func:`elu_features` (returned by :func:`elu_features_bwd`)."""

    x: Array  # (..., L, d)


class ReluFeaturesGrads(NamedTuple):
    """Gradient of :func:`relu_features` (returned by :func:`relu_features_bwd`)."""

    x: Array  # (..., L, d)


def _check_x(x):
    xp = namespace(x, names=("x",))
    check_shape("x", x, "..., L, d")
    check_finite("x", x, xp=xp)
    return xp


def _check_dphi(dphi, x):
    """A deterministic map's backward boundary: `dphi` exactly the features' (= the input's) shape, finite."""
    xp = namespace(dphi, x, names=("dphi", "cache"))
    if tuple(dphi.shape) != tuple(x.shape):
        raise ValueError(f"dphi: expected the features' shape {tuple(x.shape)}; got {tuple(dphi.shape)}")
    check_finite("dphi", dphi, xp=xp)
    return xp


# phi = x + 1 (x > 0),  exp(x) (x <= 0)                                  (Katharopoulos et al. Eq. (7))
# dx = dphi * (1 if x > 0 else exp(x))
def elu_features_fwd_core(x, *, xp):
    """Unchecked core of :func:`elu_features_fwd`."""
    phi = xp.where(x > 0, x + 1, xp.exp(xp.minimum(x, xp.zeros_like(x))))       # (..., L, d) > 0
    return phi, x


def elu_features_bwd_core(dphi, cache, *, xp):
    """Unchecked core of :func:`elu_features_bwd`."""
    x = cache
    dphi_dx = xp.where(x > 0, xp.ones_like(x), xp.exp(xp.minimum(x, xp.zeros_like(x))))
    return EluFeaturesGrads(x=dphi * dphi_dx)


@fill_doc(x=_X_DOC, raises=_X_RAISES_DOC)
def elu_features(x):
    """The elu+1 feature map ``elu(x) + 1`` of linear attention (Katharopoulos et al. 2020, Eq. (7)).

    ``phi(x) = x + 1`` for x > 0 and ``exp(x)`` otherwise, elementwise: positive everywhere, so every
    normaliser of linear attention is positive. Deterministic: it estimates nothing, it *defines* the kernel
    ``phi(q) . phi(k)`` (:func:`elu_kernel`). Backward: ``dx = dphi * (1 if x > 0 else exp(x))``.

    {x}

    Returns
    -------
    phi : (..., L, d) array
        ``x + 1`` where x > 0, ``exp(x)`` elsewhere; same namespace, dtype and device as `x` (width m = d).

    {raises}

    See Also
    --------
    elu_features_fwd, elu_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import elu_features
    >>> elu_features(np.array([[-1.0, 0.0, 2.0]]))
    array([[0.36787944, 1.        , 3.        ]])
    """
    return elu_features_fwd(x)[0]


@fill_doc(x=_X_DOC)
def elu_features_fwd(x):
    """:func:`elu_features` and the cache for its backward (equations, shapes and errors there).

    {x}

    Returns
    -------
    phi : (..., L, d) array
    cache : array
        The input `x` itself, for :func:`elu_features_bwd`.
    """
    return elu_features_fwd_core(x, xp=_check_x(x))


@fill_doc(bwd=_BWD_DOC, raises=_BWD_RAISES_DOC)
def elu_features_bwd(dphi, cache) -> EluFeaturesGrads:
    """Gradient of :func:`elu_features` (equations there) from the features' cotangent.

    {bwd}

    Returns
    -------
    EluFeaturesGrads
        ``x : (..., L, d)``, the gradient with respect to the input.

    {raises}
    """
    xp = _check_dphi(dphi, cache)
    return elu_features_bwd_core(dphi, cache, xp=xp)


@fill_doc(qk=_QK_DOC)
def elu_kernel(q, k):
    """The kernel matrix the elu+1 map defines, ``K(q, k) = (elu(q) + 1)^T (elu(k) + 1)``.

    {qk}

    Returns
    -------
    K : (..., Lq, Lk) array
        ``elu_features(q) @ elu_features(k)^T``; entries > 0.

    Raises
    ------
    ValueError
        If the shapes disagree, an input is not finite, or the result exceeds ``refattn.limits``.
    TypeError
        If `q` and `k` differ in namespace or dtype, or are not real floating.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import elu_kernel
    >>> elu_kernel(np.array([[1.0, -1.0]]), np.array([[0.0, 0.5], [2.0, -3.0]]))
    array([[2.55181916, 6.01831564]])
    """
    xp = check_qk(q, k)
    return elu_features(q) @ xp.matrix_transpose(elu_features(k))


# phi = max(x, 0) + eps                                              (Performer-ReLU style, on x itself)
# dx = dphi where x > 0, else 0 (subgradient 0 at x = 0)
def relu_features_fwd_core(x, *, eps=RELU_EPS, xp):
    """Unchecked core of :func:`relu_features_fwd`."""
    return xp.maximum(x, xp.zeros_like(x)) + eps, x


def relu_features_bwd_core(dphi, cache, *, xp):
    """Unchecked core of :func:`relu_features_bwd`."""
    x = cache
    return ReluFeaturesGrads(x=xp.where(x > 0, dphi, xp.zeros_like(dphi)))


@fill_doc(x=_X_DOC, eps=_EPS_DOC, raises=_EPS_RAISES_DOC)
def relu_features(x, *, eps=RELU_EPS):
    """The ReLU feature map ``relu(x) + eps`` (Performer-ReLU style, Choromanski et al. 2021).

    Performer-ReLU's generalized attention (``f = relu``) on the inputs themselves (no random projections),
    plus a small constant so that no feature row is all zero. Deterministic: it *defines* the kernel
    ``phi(q) . phi(k)`` (:func:`relu_kernel`); the default ``eps = 1e-3`` keeps every normaliser of linear
    attention positive. Backward: ``dx = dphi`` where x > 0, else 0 (the subgradient 0 at x = 0, as NumPy and
    torch use); `eps` is not differentiated.

    {x}
    {eps}

    Returns
    -------
    phi : (..., L, d) array
        Same namespace, dtype and device as `x`; entries >= eps.

    {raises}

    See Also
    --------
    relu_features_fwd, relu_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import relu_features
    >>> relu_features(np.array([[-1.0, 0.0, 2.0]]))
    array([[1.000e-03, 1.000e-03, 2.001e+00]])
    """
    return relu_features_fwd(x, eps=eps)[0]


@fill_doc(x=_X_DOC, eps=_EPS_DOC)
def relu_features_fwd(x, *, eps=RELU_EPS):
    """:func:`relu_features` and the cache for its backward (equations, shapes and errors there).

    {x}
    {eps}

    Returns
    -------
    phi : (..., L, d) array
    cache : array
        The input `x` itself, for :func:`relu_features_bwd`.
    """
    xp = _check_x(x)
    if not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"eps: expected a non-negative number; got {eps!r}")
    return relu_features_fwd_core(x, eps=eps, xp=xp)


@fill_doc(bwd=_BWD_DOC, raises=_BWD_RAISES_DOC)
def relu_features_bwd(dphi, cache) -> ReluFeaturesGrads:
    """Gradient of :func:`relu_features` (equations there) from the features' cotangent.

    {bwd}

    Returns
    -------
    ReluFeaturesGrads
        ``x : (..., L, d)``, the gradient with respect to the input.

    {raises}
    """
    xp = _check_dphi(dphi, cache)
    return relu_features_bwd_core(dphi, cache, xp=xp)


@fill_doc(qk=_QK_DOC)
def relu_kernel(q, k, *, eps=RELU_EPS):
    """The kernel matrix the ReLU map defines, ``K(q, k) = (relu(q) + eps)^T (relu(k) + eps)``.

    {qk}
    eps : float, default 1e-3
        Non-negative constant of :func:`relu_features`.

    Returns
    -------
    K : (..., Lq, Lk) array
        ``relu_features(q) @ relu_features(k)^T``; entries >= d eps^2.

    Raises
    ------
    ValueError
        If the shapes disagree, an input is not finite, `eps` is negative, or the result exceeds
        ``refattn.limits``.
    TypeError
        If `q` and `k` differ in namespace or dtype, or are not real floating.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import relu_kernel
    >>> relu_kernel(np.array([[1.0, -1.0]]), np.array([[0.0, 0.5], [2.0, -3.0]]), eps=0.0)
    array([[0., 2.]])
    """
    xp = check_qk(q, k)
    return relu_features(q, eps=eps) @ xp.matrix_transpose(relu_features(k, eps=eps))
