"""NumPy-only edge: initial parameters of the ``refattn.layers`` layers and dropout masks.

Every function returns NumPy arrays inside the layers' NamedTuples (``DenseParams``, ``LayerNormParams``,
...); move a whole tree with :func:`refattn.random.tree_as_xp` (``tree_as_xp(params, like=x)``). Functions
that draw take the required ``rng`` (a ``numpy.random.Generator``) first; the deterministic ones (layer/batch
norm: ones and zeros) take none.

Conventions (stated, so that a torch model can be built with the same parameters):

* ``init_dense``: Glorot/Xavier uniform ``W ~ U(-a, a)``, ``a = sqrt(6 / (d_in + d_out))``; ``b = 0``.
* ``init_embedding``: ``N(0, scale^2)`` entries (default ``scale = 0.02``, GPT-2's).
* ``init_layernorm`` / ``init_batchnorm``: ``gamma = 1``, ``beta = 0``; batch-norm running mean 0, variance 1.
* ``draw_dropout_mask``: inverted dropout, entries ``0`` w.p. ``rate`` and ``1/(1 - rate)`` otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from .. import limits
from .._xp import check_positive_int
from ..layers.batchnorm import BatchNormParams, BatchNormState
from ..layers.dense import DenseParams
from ..layers.layernorm import LayerNormParams
from .common import check_dtype_arg, check_rng

__all__ = ["init_dense", "init_layernorm", "init_batchnorm", "init_embedding", "draw_dropout_mask"]


def init_dense(rng, d_in, d_out, *, dtype=np.float64):
    """``DenseParams(W: (d_in, d_out) Glorot-uniform, b: (d_out,) zeros)`` as NumPy arrays."""
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    d_in, d_out = check_positive_int(d_in, "d_in"), check_positive_int(d_out, "d_out")
    limits.check_nbytes(2 * d_in * d_out * 8, f"d_in * d_out (init_dense({d_in}, {d_out}))")
    a = math.sqrt(6.0 / (d_in + d_out))
    W = rng.uniform(-a, a, size=(d_in, d_out)).astype(dt)
    return DenseParams(W=W, b=np.zeros(d_out, dtype=dt))


def init_layernorm(d, *, dtype=np.float64):
    """``LayerNormParams(gamma = ones(d), beta = zeros(d))`` (deterministic)."""
    dt = check_dtype_arg(dtype)
    d = check_positive_int(d, "d")
    limits.check_nbytes(2 * d * 8, f"d (init_layernorm({d}))")
    return LayerNormParams(gamma=np.ones(d, dtype=dt), beta=np.zeros(d, dtype=dt))


def init_batchnorm(d, *, dtype=np.float64):
    """``(BatchNormParams(ones, zeros), BatchNormState(mean = zeros, var = ones))`` (deterministic)."""
    dt = check_dtype_arg(dtype)
    d = check_positive_int(d, "d")
    limits.check_nbytes(4 * d * 8, f"d (init_batchnorm({d}))")
    return (BatchNormParams(gamma=np.ones(d, dtype=dt), beta=np.zeros(d, dtype=dt)),
            BatchNormState(mean=np.zeros(d, dtype=dt), var=np.ones(d, dtype=dt)))


def init_embedding(rng, n, d, *, scale=0.02, dtype=np.float64):
    """An ``(n, d)`` table with ``N(0, scale^2)`` entries (token or learned position embedding)."""
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    n, d = check_positive_int(n, "n"), check_positive_int(d, "d")
    limits.check_nbytes(2 * n * d * 8, f"n * d (init_embedding({n}, {d}))")
    if not (isinstance(scale, (int, float)) and scale > 0):
        raise ValueError(f"scale: expected a positive number; got {scale!r}")
    return (scale * rng.standard_normal((n, d))).astype(dt)


def draw_dropout_mask(rng, shape, rate, *, dtype=np.float64):
    """Inverted-dropout mask of `shape`: ``0`` with probability `rate`, ``1/(1 - rate)`` otherwise."""
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    if not (isinstance(rate, (int, float)) and 0 <= rate < 1):
        raise ValueError(f"rate: expected a dropout probability in [0, 1); got {rate!r}")
    shape = tuple(check_positive_int(n, f"shape[{i}]") if n != 0 else 0 for i, n in enumerate(shape))
    limits.check_nbytes(3 * math.prod(shape) * 8, f"shape {shape}")
    keep = rng.random(shape) >= rate
    return (keep / (1.0 - rate)).astype(dt)
