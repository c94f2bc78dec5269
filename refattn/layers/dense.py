r"""Dense (fully connected) layer ``y = x W + b`` as a forward/backward pair.

Axes: ``...`` any leading batch axes (batch, positions), ``d_in`` input width, ``d_out`` output width.

Parameters are a :class:`DenseParams` NamedTuple ``(W: (d_in, d_out), b: (d_out,))``; initialise with
``refattn.random.init_dense(rng, d_in, d_out)`` (NumPy arrays; move with ``refattn.random.tree_as_xp``).

Gradient layout (walked by ``validation.check_vjp`` by argument name): ``dense_bwd`` returns
``DenseGrads(x=dL/dx, params=DenseParams(W=dL/dW, b=dL/db))`` -- the ``params`` field mirrors the ``params``
argument, so a nested parameter container is matched leaf by leaf.

The weight gradient is a 2-D contraction over all leading axes flattened, ``x2^T dy2`` with
``x2: (N, d_in)`` (a broadcast batched matmul followed by a sum would run as many small products);
on NumPy its long row axis is summed in blocks of :data:`ROWS_PER_BLOCK` rows, one GEMM each, which keeps
OpenBLAS's operands in the cache.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from array_api_compat import is_numpy_array

from .._docs import fill_doc
from .._xp import check_finite, check_shape, namespace
from .checks import check_dy, check_finite_all

__all__ = ["DenseParams", "DenseCache", "DenseGrads", "dense", "dense_fwd", "dense_bwd"]

Array = Any


class DenseParams(NamedTuple):
    """Parameters of :func:`dense`: weight ``W: (d_in, d_out)`` and bias ``b: (d_out,)``."""

    W: Array  # (d_in, d_out)
    b: Array  # (d_out,)


class DenseCache(NamedTuple):
    """What :func:`dense_bwd` needs from :func:`dense_fwd`: the input ``x`` and the weight ``W``."""

    x: Array  # (..., d_in)
    W: Array  # (d_in, d_out)


class DenseGrads(NamedTuple):
    """Gradients of :func:`dense`: ``x`` and ``params`` (a :class:`DenseParams` of gradients)."""

    x: Array               # (..., d_in)
    params: DenseParams    # W: (d_in, d_out), b: (d_out,)


_PARAMS = """
x : (..., d_in) array
    Real floating input (float32 or float64, finite). Empty axes are allowed: zero rows give zero rows;
    ``d_in = 0`` gives ``y = b`` (the empty sum is zero).
params : DenseParams
    ``W: (d_in, d_out)``, ``b: (d_out,)``, same namespace and dtype as `x`, finite
    (``refattn.random.init_dense(rng, d_in, d_out)``).
"""

_RAISES = """
ValueError
    Shapes that do not match (``x.shape[-1] != W.shape[0]``, ``b`` not ``(d_out,)``), or non-finite input or
    parameters.
TypeError
    `params` not a ``DenseParams``-like container, or mixed namespaces or dtypes.
"""


def check_dense(x, params, *, width=None):
    """Structural checks of :func:`dense_fwd` (container, namespaces, dtypes, shapes): no data read.

    The model runs them before its cores and checks values once at its boundary. `width`, if given, is the
    layer input's last axis (a later layer checked before its input exists: `x` then gives only the
    namespace and dtype).
    """
    if not (isinstance(params, tuple) and hasattr(params, "W") and hasattr(params, "b")):
        raise TypeError(f"params: expected DenseParams(W, b); got {type(params).__name__}")
    xp = namespace(x, params.W, params.b, names=("x", "params.W", "params.b"))
    sizes = check_shape("params.W", params.W, "d_in, d_out")
    check_shape("params.b", params.b, "d_out", sizes)
    if width is None:
        check_shape("x", x, "..., d_in", sizes)
    elif width != params.W.shape[0]:
        raise ValueError(f"params.W: expected shape (d_in, d_out) with d_in = {width} (the layer input's "
                         f"width); got {tuple(params.W.shape)}")
    return xp


def _validate(x, params):
    xp = check_dense(x, params)
    check_finite("x", x, xp=xp)
    check_finite_all(xp, **{"params.W": params.W, "params.b": params.b})
    return xp


@fill_doc(params=_PARAMS, raises=_RAISES)
def dense_fwd(x, params: DenseParams):
    r"""Forward of :func:`dense` (see it for the equations), with the cache for :func:`dense_bwd`.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., d_out) array
        Same namespace and dtype as `x`.
    cache : DenseCache
        ``(x, W)``, for :func:`dense_bwd`.

    Raises
    ------
    {raises}
    """
    return dense_fwd_core(x, params, xp=_validate(x, params))


# y = x W + b
# dx = dy W^T,  dW = x^T dy,  db = sum of dy over the leading axes (one 2-D GEMM, axes flattened)
def dense_fwd_core(x, params, *, xp):
    """Unchecked core of :func:`dense_fwd` (see :func:`dense`)."""
    y = x @ params.W                                                                # (..., d_out)
    y += params.b
    return y, DenseCache(x=x, W=params.W)


def dense_bwd(dy, cache: DenseCache) -> DenseGrads:
    r"""Gradients of :func:`dense` (see it for the equations).

    Parameters
    ----------
    dy : (..., d_out) array
        Cotangent of the output `y`: exactly its shape, same namespace and dtype; finite.
    cache : DenseCache
        From :func:`dense_fwd`.

    Returns
    -------
    DenseGrads
        ``x: (..., d_in)``, ``params.W: (d_in, d_out)``, ``params.b: (d_out,)``.

    Raises
    ------
    ValueError
        If `dy` is not exactly of the output's shape ``(..., d_out)`` or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    x, W = cache
    return dense_bwd_core(dy, cache, xp=check_dy(dy, x, tuple(x.shape[:-1]) + (W.shape[1],)))


def dense_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`dense_bwd` (see :func:`dense`)."""
    x, W = cache
    d_in, d_out = W.shape
    dx = dy @ xp.matrix_transpose(W)                                                # (..., d_in)
    x2 = xp.reshape(x, (-1, d_in))                                                  # (N, d_in)
    dy2 = xp.reshape(dy, (-1, d_out))                                               # (N, d_out)
    dW = _rows_contraction(x2, dy2, xp=xp)                                          # (d_in, d_out)
    db = xp.sum(dy2, axis=0)                                                        # (d_out,)
    return DenseGrads(x=dx, params=DenseParams(W=dW, b=db))


#: Rows per block of :func:`_rows_contraction`'s sum on NumPy.
ROWS_PER_BLOCK = 512


def _rows_contraction(a, b, *, xp):
    """``a^T b: (p, r)`` for ``a: (N, p)``, ``b: (N, r)``: the weight gradient's sum over the N rows.

    NumPy (OpenBLAS) is slow at one GEMM with a long inner axis and a small output (the operands' panels do
    not stay in the cache), so on NumPy the rows are summed in blocks of :data:`ROWS_PER_BLOCK` (one GEMM
    each, accumulated), with the wider operand transposed on the left; other namespaces take one GEMM.
    """
    n, p, r = a.shape[0], a.shape[1], b.shape[1]
    if not is_numpy_array(a) or n < 2 * ROWS_PER_BLOCK:
        return xp.matrix_transpose(a) @ b                                           # (p, r)
    if r > p:                                                                       # (b^T a)^T, wide left
        return xp.matrix_transpose(_rows_contraction(b, a, xp=xp))
    out = xp.matrix_transpose(a[:ROWS_PER_BLOCK]) @ b[:ROWS_PER_BLOCK]              # (p, r)
    for i in range(ROWS_PER_BLOCK, n, ROWS_PER_BLOCK):
        out += xp.matrix_transpose(a[i:i + ROWS_PER_BLOCK]) @ b[i:i + ROWS_PER_BLOCK]
    return out


@fill_doc(params=_PARAMS, raises=_RAISES)
def dense(x, params: DenseParams):
    """Dense (fully connected) layer ``y = x W + b``.

    The gradients are ``dx = dy W^T``, ``dW = x^T dy`` and ``db = sum dy`` (sums over the leading axes).

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., d_out) array
        Same namespace and dtype as `x`.

    Raises
    ------
    {raises}

    See Also
    --------
    dense_fwd, dense_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import DenseParams, dense
    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])                                   # (N, d_in) = (2, 2)
    >>> params = DenseParams(W=np.array([[1.0, 0.0, -1.0], [0.5, 1.0, 2.0]]),    # (d_in, d_out) = (2, 3)
    ...                      b=np.array([0.0, 1.0, 0.0]))
    >>> dense(x, params)
    array([[2., 3., 3.],
           [5., 5., 5.]])
    """
    return dense_fwd(x, params)[0]
