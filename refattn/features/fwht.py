r"""The fast Walsh-Hadamard transform ``y = x H`` (FastFood's H, Chowdhury et al. Eq. 6), a hot primitive.

:mod:`refattn.features.fastfood` projects with it onto M frequencies without forming them; the maths is in
:func:`fwht`. Axes: ``...`` batch, ``D`` the transformed width (a power of two).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._dispatch import define, kernel_for
from .._xp import check_finite, check_shape, namespace

__all__ = ["fwht", "fwht_fwd", "fwht_bwd", "FwhtGrads"]

Array = Any


class FwhtGrads(NamedTuple):
    """Gradient of :func:`fwht` (returned by :func:`fwht_bwd`)."""

    x: Array  # (..., D)


def _is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


@define("fwht")
def _fwht_reference(x: Array, *, xp: Any) -> Array:
    """``x H`` for the unnormalised Sylvester Hadamard matrix H (D x D), along the last axis, O(D log D)."""
    D = x.shape[-1]
    batch = tuple(x.shape[:-1])
    y = x
    h = 1
    while h < D:
        # (..., D/2h, 2, h): pairs of already transformed halves
        y = xp.reshape(y, batch + (D // (2 * h), 2, h))
        a = y[..., 0, :]                                    # (..., D/2h, h)
        b = y[..., 1, :]                                    # (..., D/2h, h)
        y = xp.stack((a + b, a - b), axis=-2)  # (..., D/2h, 2, h): H_2h = [[H_h, H_h], [H_h, -H_h]]
        h *= 2
    return xp.reshape(y, batch + (D,))                      # (..., D)


# y = x H  (H symmetric, H H = D I)
# dx = dy H^T = fwht(dy): the transform is its own adjoint
def fwht_core(x: Array, *, xp: Any) -> Array:
    """Unchecked core of :func:`fwht` (and its backward): the kernel switched in, else the reference."""
    kernel = kernel_for("fwht")
    if kernel is not None:
        return kernel(x)
    return _fwht_reference(x, xp=xp)


def fwht(x: Array) -> Array:
    """Fast Walsh-Hadamard transform ``x @ H`` along the last axis, in O(D log D) (FastFood's H, Eq. 6).

    H is the unnormalised Sylvester-order Hadamard matrix, ``H_2h = [[H_h, H_h], [H_h, -H_h]]``: entries
    +-1, ``H H = D I``; each doubling is one butterfly pass, O(D log D) per row instead of O(D^2). H is
    symmetric, so the transform is self-adjoint: its backward is itself, ``dx = dy H^T = fwht(dy)``.

    Parameters
    ----------
    x : (..., D) array
        Real floating, finite; D must be a power of two (1, 2, 4, ...). Non-powers of two are *rejected*, not
        padded: padding changes the transform; :func:`fastfood_projection` pads the head width itself.

    Returns
    -------
    y : (..., D) array
        ``x @ scipy.linalg.hadamard(D)``; same namespace, dtype and device as `x`. ``fwht(fwht(x)) = D x``.

    Raises
    ------
    ValueError
        If D is not a power of two or `x` is not finite.
    TypeError
        If `x` is not a real floating array.

    See Also
    --------
    fwht_fwd, fwht_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fwht
    >>> fwht(np.array([1.0, 2.0, 3.0, 4.0]))
    array([10., -2., -4.,  0.])
    """
    return fwht_fwd(x)[0]


def fwht_fwd(x: Array) -> tuple[Array, None]:
    """:func:`fwht` and its (empty) cache (equations, shapes and errors there).

    Parameters
    ----------
    x : (..., D) array
        Real floating, finite; D a power of two.

    Returns
    -------
    y : (..., D) array
    cache : None
        The self-adjoint transform's backward needs nothing.
    """
    xp = namespace(x, names=("x",))
    check_shape("x", x, "..., D")
    D = x.shape[-1]
    if not _is_pow2(D):
        raise ValueError(f"x: expected a last axis whose length D is a power of two (1, 2, 4, ...); "
                         f"got D = {D}. "
                         "Pad with zeros to the next power of two (FastFood does) or use a smaller width")
    check_finite("x", x, xp=xp)
    return fwht_core(x, xp=xp), None


def fwht_bwd(dy: Array, cache: None) -> FwhtGrads:
    """Gradient of :func:`fwht` (equations, and errors for `dy`, there): ``dx = fwht(dy)``.

    Parameters
    ----------
    dy : (..., D) array
        Cotangent of the transform, D a power of two; real floating, finite.
    cache : None
        From :func:`fwht_fwd`.

    Returns
    -------
    FwhtGrads
        ``x : (..., D)``.
    """
    xp = namespace(dy, names=("dy",))
    check_shape("dy", dy, "..., D")
    if not _is_pow2(dy.shape[-1]):
        raise ValueError(f"dy: expected a last axis whose length is a power of two; got {dy.shape[-1]}")
    check_finite("dy", dy, xp=xp)
    return FwhtGrads(x=fwht_core(dy, xp=xp))
