"""NumPy-only edge: initial parameters of the ``refattn.layers`` layers (NumPy arrays in their NamedTuples;
move them with ``tree_as_xp``) and dropout masks. Each first line states its convention."""

from __future__ import annotations

import math

import numpy as np

from .. import limits
from .._xp import check_positive_int
from ..layers.batchnorm import BatchNormParams, BatchNormState
from ..layers.dense import DenseParams
from ..layers.layernorm import LayerNormParams
from .._docs import fill_doc
from .common import check_dtype_arg, check_rng

__all__ = ["init_dense", "init_layernorm", "init_batchnorm", "init_embedding", "draw_dropout_mask"]

_RNG = """
rng : numpy.random.Generator
    Required (``None`` is rejected).
"""
_DTYPE = """
dtype : float32 or float64
    Dtype of the arrays (drawn in float64, then cast).
"""
_WIDTH = """
d : int
    Normalised width, >= 1.
"""
_RAISES = """
TypeError
    `rng` not a ``numpy.random.Generator``, or a bad `dtype`.
ValueError
    Non-positive sizes.
MemoryError
    The arrays over :mod:`refattn.limits`' memory bound.
"""


@fill_doc(rng=_RNG, dtype=_DTYPE, raises=_RAISES)
def init_dense(rng, d_in, d_out, *, dtype=np.float64):
    r"""Glorot/Xavier-uniform dense parameters: ``W ~ U(-a, a)``, ``a = sqrt(6 / (d_in + d_out))``, ``b = 0``.

    Parameters
    ----------
    {rng}
    d_in, d_out : int
        Input and output widths, >= 1.
    {dtype}

    Returns
    -------
    DenseParams
        ``W: (d_in, d_out)``, ``b: (d_out,)`` zeros, NumPy arrays.

    Raises
    ------
    {raises}
    """
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    d_in, d_out = check_positive_int(d_in, "d_in"), check_positive_int(d_out, "d_out")
    limits.check_nbytes(2 * d_in * d_out * 8, f"d_in * d_out (init_dense({d_in}, {d_out}))")
    a = math.sqrt(6.0 / (d_in + d_out))
    W = rng.uniform(-a, a, size=(d_in, d_out)).astype(dt)
    return DenseParams(W=W, b=np.zeros(d_out, dtype=dt))


@fill_doc(width=_WIDTH, dtype=_DTYPE)
def init_layernorm(d, *, dtype=np.float64):
    r"""Layer-norm parameters ``gamma = ones(d)``, ``beta = zeros(d)`` (deterministic).

    Parameters
    ----------
    {width}
    {dtype}

    Returns
    -------
    LayerNormParams
    """
    dt = check_dtype_arg(dtype)
    d = check_positive_int(d, "d")
    limits.check_nbytes(2 * d * 8, f"d (init_layernorm({d}))")
    return LayerNormParams(gamma=np.ones(d, dtype=dt), beta=np.zeros(d, dtype=dt))


@fill_doc(width=_WIDTH, dtype=_DTYPE)
def init_batchnorm(d, *, dtype=np.float64):
    r"""Batch-norm parameters and running statistics (deterministic).

    Parameters
    ----------
    {width}
    {dtype}

    Returns
    -------
    params : BatchNormParams
        ``gamma = ones(d)``, ``beta = zeros(d)``.
    state : BatchNormState
        Running ``mean = zeros(d)``, ``var = ones(d)``.
    """
    dt = check_dtype_arg(dtype)
    d = check_positive_int(d, "d")
    limits.check_nbytes(4 * d * 8, f"d (init_batchnorm({d}))")
    return (BatchNormParams(gamma=np.ones(d, dtype=dt), beta=np.zeros(d, dtype=dt)),
            BatchNormState(mean=np.zeros(d, dtype=dt), var=np.ones(d, dtype=dt)))


@fill_doc(rng=_RNG, dtype=_DTYPE, raises=_RAISES)
def init_embedding(rng, n, d, *, scale=0.02, dtype=np.float64):
    r"""An ``(n, d)`` embedding table with ``N(0, scale^2)`` entries (token or learned position embedding).

    Parameters
    ----------
    {rng}
    n, d : int
        Number of rows (vocabulary size or max length) and width, >= 1.
    scale : float
        Standard deviation, > 0 (default 0.02, GPT-2's; a ValueError otherwise).
    {dtype}

    Returns
    -------
    (n, d) numpy.ndarray

    Raises
    ------
    {raises}
    """
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    n, d = check_positive_int(n, "n"), check_positive_int(d, "d")
    limits.check_nbytes(2 * n * d * 8, f"n * d (init_embedding({n}, {d}))")
    if not (isinstance(scale, (int, float)) and scale > 0):
        raise ValueError(f"scale: expected a positive number; got {scale!r}")
    return (scale * rng.standard_normal((n, d))).astype(dt)


@fill_doc(rng=_RNG, dtype=_DTYPE)
def draw_dropout_mask(rng, shape, rate, *, dtype=np.float64):
    r"""Inverted-dropout mask of `shape`: ``0`` with probability `rate`, ``1/(1 - rate)`` otherwise.

    Parameters
    ----------
    {rng}
    shape : tuple of int
        Shape of the mask (the activation's shape); a negative size raises ``ValueError``.
    rate : float
        Drop probability in [0, 1) (else ``ValueError``).
    {dtype}

    Returns
    -------
    numpy.ndarray
        The mask, of `shape`; its expectation is 1 entrywise.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.random import draw_dropout_mask
    >>> draw_dropout_mask(np.random.default_rng(0), (8,), 0.5)
    array([2., 0., 0., 0., 2., 2., 2., 2.])
    """
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    if not (isinstance(rate, (int, float)) and 0 <= rate < 1):
        raise ValueError(f"rate: expected a dropout probability in [0, 1); got {rate!r}")
    shape = tuple(check_positive_int(n, f"shape[{i}]") if n != 0 else 0 for i, n in enumerate(shape))
    limits.check_nbytes(3 * math.prod(shape) * 8, f"shape {shape}")
    keep = rng.random(shape) >= rate
    return (keep / (1.0 - rate)).astype(dt)
