"""Shared core of the random feature maps: argument checks, the projection ``x omega^T`` and its backward,
and the docstring blocks the maps share.

The forward is one matmul of ``x: (..., L, d)`` against ``omega^T: (d, m)`` over the batch axes: `x` is often
a strided view (the heads of a wider projection, scaled), which flattening to ``(N, d)`` would copy first. The
backward flattens the fresh cotangent ``du: (..., L, m)`` (no copy): ``dx = du omega`` is one 2-D GEMM, and
``domega = du^T x`` is formed only when asked (a drawn omega takes no gradient).
"""

from __future__ import annotations

from typing import Any

from .._xp import check_finite, check_shape, contract_rows, namespace

Array = Any

# Docstring sections shared by the feature maps (filled in with refattn._docs.fill_doc): a block that starts
# with a section header replaces the whole section, header included.
X_OMEGA_PARAMETERS = """
Parameters
----------
x : (..., L, d) array
    Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
    float64), finite.
omega : (m, d) array
    Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and dtype as
    `x`.
"""
X_OMEGA_RAISES = """
Raises
------
ValueError
    If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
TypeError
    If `x` and `omega` differ in namespace or dtype, or are not real floating.
"""
OMEGA_GRAD_PARAMETER = """
omega_grad : bool, default True
    ``False``: ``domega`` is not computed and is ``None`` (a drawn, non-learnable omega).
"""
BWD_RAISES = """
Raises
------
ValueError
    If a cotangent's shape differs from its output's or a cotangent is not finite.
TypeError
    If the cotangents and the cache differ in namespace or dtype.
"""


def check_x_omega(x, omega, *, x_name: str = "x"):
    """Validate a feature map's input and projections; return ``(xp, m)``.

    ``x: (..., L, d)`` and ``omega: (m, d)`` must share namespace and dtype, be finite, and m >= 1.
    """
    xp, m = check_x_omega_struct(x, omega, x_name=x_name)
    check_finite(x_name, x, xp=xp)
    check_finite("omega", omega, xp=xp)
    return xp, m


def check_x_omega_struct(x, omega, *, x_name: str = "x"):
    """The structural half of :func:`check_x_omega` (namespaces, dtypes, shapes, m >= 1): no data read;
    returns ``(xp, m)``."""
    xp = namespace(x, omega, names=(x_name, "omega"))
    sizes = check_shape(x_name, x, "..., L, d")
    check_shape("omega", omega, "m, d", sizes)
    m = omega.shape[0]
    if m < 1:
        raise ValueError(f"omega: expected at least one projection row, shape (m, d) with m >= 1; "
                         f"got {tuple(omega.shape)}")
    return xp, m


def project(x, omega, *, xp):
    """``x omega^T`` for ``x: (..., L, d)``, ``omega: (m, d)`` -> ``(..., L, m)``, a fresh array.

    One matmul over the batch axes: `x` may be a strided view (per-head slices of a wider array), which a
    2-D reshape would copy first."""
    return x @ xp.matrix_transpose(omega)                                         # (..., L, m)


def project_bwd(du, x, omega, *, xp, omega_grad=True):
    """Cotangents of :func:`project`: ``dx = du omega: (..., L, d)`` and ``domega = du^T x: (m, d)``
    (``None`` without computing it when ``omega_grad=False``: a drawn, non-learnable omega)."""
    d, m = x.shape[-1], omega.shape[0]
    du2 = xp.reshape(du, (-1, m))                                                 # (N, m)
    dx = xp.reshape(du2 @ omega, tuple(x.shape))                                  # (..., L, d)
    if not omega_grad:
        return dx, None
    x2 = xp.reshape(x, (-1, d))                                                   # (N, d), a copy if strided
    return dx, contract_rows(du2, x2)                                             # (m, d)


def check_cotangent(name, a, shape, *, xp):
    """A backward's incoming gradient: exactly the forward output's `shape` (never broadcast), finite."""
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"{name}: expected the forward output's shape {tuple(shape)}; got {tuple(a.shape)}")
    check_finite(name, a, xp=xp)


def sq_norm_half(x, *, xp):
    """``|x|^2 / 2`` per row: ``(..., L, d)`` -> ``(..., L)``."""
    return 0.5 * xp.sum(x * x, axis=-1)                                           # (..., L)
