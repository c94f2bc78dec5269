r"""FastFood random features with learnable diagonals (KL-Transformer Eqs. 6 and 12; Le et al. 2013).

The projection matrix is never formed: every block of D rows is

    V = (1 / (sigma sqrt(D))) S H G Pi H B                                        (Eq. 6)

with H the *unnormalised* Walsh-Hadamard matrix (Sylvester order, entries +-1, symmetric, H H = D I), B a
+-1 diagonal, Pi a permutation, G a Gaussian diagonal and S a scaling diagonal. ``x V^T`` costs
O(D log D) per row and block through the fast Walsh-Hadamard transform :func:`fwht`, so the projections of L
rows onto M = n_blocks D frequencies cost O(L M log D) time and O(M) parameters (design.md trap 6).

Conventions fixed here (the paper leaves them open or states them reversed):

* d is zero-padded to D, the next power of two; the normaliser is 1/(sigma sqrt(D)).
* M is a multiple of D (n_blocks independent blocks stacked); the paper's "M | d_q" is reversed.
* The law of S (``refattn.random.draw_fastfood``): ``S_ii = s_i / ||G||_F`` with ``s_i ~ chi(D)`` (Le et al.):
  every row of V is then exactly N(0, I / sigma^2), rows' norms independent. With ``S = I`` every row is still
  N(0, I / sigma^2) *marginally* (so the estimators below stay unbiased), but all rows of a block share one
  norm
  ``||G||_F / sigma`` -- a different joint law, hence a different variance (measured in the tests).
* Appendix D variants: ``variant="SGB"`` (S, G, B learnable, the paper's main model), ``"S"`` (only S) and
  ``"fixed"`` (basic FastFood, nothing learnable). Frozen diagonals get ``None`` gradients.

Feature maps on the projections ``u = x V^T``:

* FastFood-RKS (Eq. 6 with Eq. 3): ``[cos u, sin u] / sqrt(M)`` estimates ``exp(-|q - k|^2 / (2 sigma^2))``;
* FastFood-PRF (Eq. 12 with Eq. 9): ``exp(u - |x|^2) / sqrt(M)`` estimates
  ``exp(-|q|^2 - |k|^2 + |q + k|^2 / (2 sigma^2))``, the Gaussian kernel ``exp(-|q - k|^2 / 2)`` at sigma = 1
  (design.md trap 1: the offset is |x|^2, not |x|^2 / 2). A row-stabilised version returns ``(phi,
  log_scale)``.

The kernels are those of the *initial* law of (S, G, B, Pi); once S, G, B are trained the map estimates
whatever
kernel the learned diagonals define (no closed form).

Axes: ``...`` batch and heads, ``L`` positions, ``d`` head width, ``D`` padded width (power of two),
``n_blocks`` stacked blocks, ``M = n_blocks * D`` frequencies.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._dispatch import define, kernel_for
from .._xp import check_choice, check_finite, check_shape, device_of, namespace
from .trig import _check_qk

__all__ = [
    "fwht", "fwht_fwd", "fwht_bwd", "FwhtGrads",
    "FastFoodParams", "FASTFOOD_VARIANTS", "padded_dim",
    "fastfood_projection", "fastfood_projection_fwd", "fastfood_projection_bwd", "FastFoodGrads",
    "fastfood_matrix",
    "fastfood_rks_features", "fastfood_rks_features_fwd", "fastfood_rks_features_bwd",
    "fastfood_prf_features", "fastfood_prf_features_fwd", "fastfood_prf_features_bwd",
    "fastfood_prf_features_stable", "fastfood_prf_features_stable_fwd", "fastfood_prf_features_stable_bwd",
    "fastfood_rks_kernel", "fastfood_prf_kernel",
]

Array = Any

#: Which diagonals are learnable in each Appendix D variant.
FASTFOOD_VARIANTS = {"SGB": ("S", "G", "B"), "S": ("S",), "fixed": ()}


# ------------------------------------------------------------------------------------------------------------
# The fast Walsh-Hadamard transform
# ------------------------------------------------------------------------------------------------------------

class FwhtGrads(NamedTuple):
    """Gradient of :func:`fwht` (returned by :func:`fwht_bwd`)."""

    x: Array  # (..., D)


def _is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def padded_dim(d: int) -> int:
    """The smallest power of two >= d: the width D FastFood pads the head width d to (Chowdhury et al. Eq. 6).

    Parameters
    ----------
    d : int
        Head width, >= 1.

    Returns
    -------
    D : int
        ``2 ** ceil(log2(d))``.

    Raises
    ------
    ValueError
        If ``d < 1``.

    Examples
    --------
    >>> from refattn.features import padded_dim
    >>> padded_dim(5), padded_dim(8)
    (8, 8)
    """
    if d < 1:
        raise ValueError(f"d: expected a positive integer; got {d}")
    return 1 << (d - 1).bit_length()


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


def _fwht(x: Array, *, xp: Any) -> Array:
    """The hot primitive: an accel kernel when one is switched in (``kernel_for("fwht")``), else
    the reference."""
    kernel = kernel_for("fwht")
    if kernel is not None:
        return kernel(x)
    return _fwht_reference(x, xp=xp)


def fwht_fwd(x: Array) -> tuple[Array, None]:
    r"""Fast Walsh-Hadamard transform ``y = x H`` along the last axis (unnormalised, Sylvester order).

    Parameters
    ----------
    x : (..., D) array
        Real floating; D must be a power of two (1, 2, 4, ...). Non-powers of two are *rejected*, not padded:
        padding changes the transform; :func:`fastfood_projection` pads the head width itself.

    Returns
    -------
    y : (..., D) array
        ``x @ scipy.linalg.hadamard(D)``; same namespace, dtype and device. ``fwht(fwht(x)) = D x``.
    cache : None
        H is symmetric, so the transform is self-adjoint and its backward is itself.

    Raises
    ------
    ValueError
        If D is not a power of two or x is not finite.
    TypeError
        If `x` is not a real floating array.
    """
    xp = namespace(x, names=("x",))
    check_shape("x", x, "..., D")
    D = x.shape[-1]
    if not _is_pow2(D):
        raise ValueError(f"x: expected a last axis whose length D is a power of two (1, 2, 4, ...); "
                         f"got D = {D}. "
                         "Pad with zeros to the next power of two (FastFood does) or use a smaller width")
    check_finite("x", x, xp=xp)
    return _fwht(x, xp=xp), None


def fwht_bwd(dy: Array, cache: None) -> FwhtGrads:
    """Backward of :func:`fwht`: ``dx = dy H^T = fwht(dy)`` (H is symmetric).

    Parameters
    ----------
    dy : (..., D) array
        Cotangent of the transform, D a power of two; real floating, finite.
    cache : None
        From :func:`fwht_fwd` (the transform needs nothing).

    Returns
    -------
    FwhtGrads
        ``x : (..., D)``.

    Raises
    ------
    ValueError
        If D is not a power of two or `dy` is not finite.
    TypeError
        If `dy` is not a real floating array.
    """
    xp = namespace(dy, names=("dy",))
    check_shape("dy", dy, "..., D")
    if not _is_pow2(dy.shape[-1]):
        raise ValueError(f"dy: expected a last axis whose length is a power of two; got {dy.shape[-1]}")
    check_finite("dy", dy, xp=xp)
    return FwhtGrads(x=_fwht(dy, xp=xp))


def fwht(x: Array) -> Array:
    """Fast Walsh-Hadamard transform ``x @ H`` along the last axis, in O(D log D) (FastFood's H, Eq. 6).

    H is the unnormalised Sylvester-order Hadamard matrix (entries +-1, ``H H = D I``).

    Parameters
    ----------
    x : (..., D) array
        Real floating, finite; D must be a power of two (not padded: see :func:`fwht_fwd`).

    Returns
    -------
    y : (..., D) array
        ``x @ scipy.linalg.hadamard(D)``; same namespace, dtype and device as `x`.

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
    >>> fwht(fwht(np.array([1.0, 2.0, 3.0, 4.0])))                      # H H = D I
    array([ 4.,  8., 12., 16.])
    """
    return fwht_fwd(x)[0]


# ------------------------------------------------------------------------------------------------------------
# The FastFood projection u = x V^T
# ------------------------------------------------------------------------------------------------------------

class FastFoodParams(NamedTuple):
    """One FastFood draw: learnable diagonals S, G, B (real floating) and the fixed permutations (integer)."""

    S: Array     # (n_blocks, D)  row scales
    G: Array     # (n_blocks, D)  Gaussian diagonal
    B: Array     # (n_blocks, D)  +-1 diagonal
    perm: Array  # (n_blocks, D)  integer: block b applies x -> x[perm[b]] between the two transforms


class FastFoodGrads(NamedTuple):
    """Gradients of the FastFood maps: ``x`` and ``params`` (a :class:`FastFoodParams`; frozen parts None)."""

    x: Array                 # (..., L, d)
    params: FastFoodParams   # S, G, B as params (None where frozen by the variant); perm None


class _ProjCache(NamedTuple):
    x_pad: Array    # (..., L, D)
    u1: Array       # (..., L, nb, D)  after B and the first transform
    u2: Array       # (..., L, nb, D)  after the permutation
    u3: Array       # (..., L, nb, D)  after G and the second transform
    params: FastFoodParams
    inv_index: Array  # (nb * D,)    inverse of the flat permutation index
    scale: float    # 1 / (sigma sqrt(D))
    d: int
    variant: str


def _check_params(params: Any, d: int, x: Array, xp: Any) -> tuple[int, int]:
    D, nb = _check_params_struct(params, d, x, xp)
    for name in ("S", "G", "B"):
        check_finite(f"params.{name}", getattr(params, name), xp=xp)
    _check_perm(params, D, xp)
    return D, nb


def _check_params_struct(params: Any, d: int, x: Array, xp: Any) -> tuple[int, int]:
    """Structural checks of :class:`FastFoodParams` against ``x: (..., L, d)`` (type, namespaces, dtypes,
    shapes): no data read. Returns ``(D, n_blocks)``."""
    if not isinstance(params, FastFoodParams):
        raise TypeError(f"params: expected a FastFoodParams(S, G, B, perm); got {type(params).__name__}")
    D = padded_dim(d)
    namespace(x, params.S, params.G, params.B, params.perm,
              names=("x", "params.S", "params.G", "params.B", "params.perm"), allow_int=("params.perm",))
    sizes = {"D": (D, f"x: d = {d} padded to a power of two")}
    check_shape("params.S", params.S, "n_blocks, D", sizes)
    check_shape("params.G", params.G, "n_blocks, D", sizes)
    check_shape("params.B", params.B, "n_blocks, D", sizes)
    check_shape("params.perm", params.perm, "n_blocks, D", sizes)
    if not xp.isdtype(params.perm.dtype, "integral"):
        raise TypeError(f"params.perm: expected an integer dtype (a permutation per block); got "
                        f"{params.perm.dtype}")
    return D, params.S.shape[0]


def _check_perm(params: Any, D: int, xp: Any) -> None:
    """The value check of the integer parameter ``perm`` (each row a permutation of 0..D-1): one sync."""
    ref = xp.arange(D, dtype=params.perm.dtype, device=device_of(params.perm))
    if not bool(xp.all(xp.sort(params.perm, axis=-1) == ref)):
        raise ValueError(f"params.perm: expected each row to be a permutation of 0..{D - 1}; "
                         f"got another array")


def fastfood_projection_fwd(x: Array, params: FastFoodParams, *, sigma: float = 1.0,
                            variant: str = "SGB") -> tuple[Array, _ProjCache]:
    r"""Projections ``u = x V^T`` onto the M FastFood frequencies, without forming V (Eq. 6).

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    params : FastFoodParams
        ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm``
        (n_blocks, D), each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with
        ``refattn.random.draw_fastfood``.
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.
    variant : {"SGB", "S", "fixed"}, default "SGB"
        Which diagonals get gradients (Appendix D; ``FASTFOOD_VARIANTS``); the forward is the same.

    Returns
    -------
    u : (..., L, M) array
        ``u[..., b * D + i] = (V_b x_pad)_i``, M = n_blocks D (block-major).
    cache : NamedTuple
        Opaque, for :func:`fastfood_projection_bwd`.

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, `variant` is unknown, or an input is not
        finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.
    """
    xp = namespace(x, names=("x",))
    check_shape("x", x, "..., L, d")
    check_finite("x", x, xp=xp)
    _check_options(sigma, variant)
    _check_params(params, x.shape[-1], x, xp)
    return _projection_core(x, params, sigma, variant, xp=xp)


def _check_options(sigma, variant):
    """The option checks of the FastFood maps (`variant`, `sigma`)."""
    check_choice(variant, "variant", tuple(FASTFOOD_VARIANTS))
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma: expected a positive finite number; got {sigma!r}")


def _check_struct(x, params, sigma, variant):
    """The structural checks of :func:`fastfood_projection_fwd` (no data read; the permutation's values are
    not checked here: :func:`_check_perm`). Returns the namespace."""
    xp = namespace(x, names=("x",))
    check_shape("x", x, "..., L, d")
    _check_options(sigma, variant)
    _check_params_struct(params, x.shape[-1], x, xp)
    return xp


def _projection_core(x, params, sigma, variant, *, xp):
    """Unchecked core of :func:`fastfood_projection_fwd`."""
    d = x.shape[-1]
    D, nb = padded_dim(d), params.S.shape[0]
    batch = tuple(x.shape[:-1])
    if D > d:
        pad = xp.zeros(batch + (D - d,), dtype=x.dtype, device=device_of(x))
        x_pad = xp.concat((x, pad), axis=-1)                                          # (..., L, D)
    else:
        x_pad = x
    scale = 1.0 / (sigma * math.sqrt(D))
    u0 = xp.expand_dims(x_pad, axis=-2) * params.B                                  # (..., L, nb, D)  B x
    u1 = _fwht(u0, xp=xp)                                                           # (..., L, nb, D)  H B x
    offsets = xp.reshape(xp.arange(nb, dtype=params.perm.dtype, device=device_of(x)) * D, (nb, 1))  # (nb, 1)
    index = xp.reshape(params.perm + offsets, (nb * D,))                            # (nb D,)
    u2 = xp.reshape(xp.take(xp.reshape(u1, batch + (nb * D,)), index, axis=-1),
                    batch + (nb, D))  # (..., L, nb, D)  Pi H B x
    u3 = _fwht(u2 * params.G, xp=xp)  # (..., L, nb, D)  H G Pi H B x
    u = xp.reshape(u3 * (params.S * scale), batch + (nb * D,))                      # (..., L, M)  Eq. 6
    inv_index = xp.argsort(index)                                                   # (nb D,)
    return u, _ProjCache(x_pad, u1, u2, u3, params, inv_index, scale, d, variant)


def fastfood_projection_bwd(du: Array, cache: _ProjCache) -> FastFoodGrads:
    """Backward of :func:`fastfood_projection`: gradients for x and the learnable diagonals of the variant.

    Runs Eq. 6 in reverse: ``dS``, then the second transform, ``dG``, the inverse permutation, the first
    transform, ``dB`` and ``dx`` (padding dropped).

    Parameters
    ----------
    du : (..., L, M) array
        Cotangent of the projections; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`fastfood_projection_fwd` (it records the variant).

    Returns
    -------
    FastFoodGrads
        ``x : (..., L, d)`` and ``params``: a :class:`FastFoodParams` with ``S, G, B`` gradients of shape
        (n_blocks, D) for the variant's learnable diagonals (``None`` for frozen ones) and ``perm=None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    xp = namespace(du, cache.x_pad, names=("du", "cache"))
    nb, D = cache.params.S.shape
    _check_cotangent("du", du, tuple(cache.x_pad.shape[:-1]) + (nb * D,), xp=xp)
    return _projection_bwd_core(du, cache, xp=xp)


def _projection_bwd_core(du, cache, *, xp):
    """Unchecked core of :func:`fastfood_projection_bwd`."""
    c = cache
    p = c.params
    batch = tuple(c.x_pad.shape[:-1])
    nb, D = p.S.shape
    red = tuple(range(len(batch)))                        # the (..., L) axes a diagonal's gradient sums over
    du3 = xp.reshape(du, batch + (nb, D))                                            # (..., L, nb, D)
    learn = FASTFOOD_VARIANTS[c.variant]
    dS = xp.sum(du3 * c.u3, axis=red) * c.scale if "S" in learn else None          # (nb, D)
    dv = _fwht(du3 * (p.S * c.scale), xp=xp)  # (..., L, nb, D)  d(G Pi H B x)
    dG = xp.sum(dv * c.u2, axis=red) if "G" in learn else None                      # (nb, D)
    du2 = dv * p.G                                                                  # (..., L, nb, D)
    du1 = xp.reshape(xp.take(xp.reshape(du2, batch + (nb * D,)), c.inv_index, axis=-1),
                     batch + (nb, D))                                               # (..., L, nb, D)  Pi^T
    du0 = _fwht(du1, xp=xp)                                                         # (..., L, nb, D)  H^T = H
    dB = xp.sum(du0 * xp.expand_dims(c.x_pad, axis=-2), axis=red) if "B" in learn else None  # (nb, D)
    dx_pad = xp.sum(du0 * p.B, axis=-2)                                             # (..., L, D)
    dx = dx_pad[..., :c.d] if c.d < D else dx_pad                                   # (..., L, d)
    return FastFoodGrads(x=dx, params=FastFoodParams(S=dS, G=dG, B=dB, perm=None))


def fastfood_projection(x: Array, params: FastFoodParams, *, sigma: float = 1.0) -> Array:
    """FastFood projections ``u = x V^T``, ``V = S H G Pi H B / (sigma sqrt(D))``, never forming V (Eq. 6).

    Chowdhury et al. Eq. (6) (Le et al. 2013) with d zero-padded to D: O(L M log D) time and O(M) parameters.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    params : FastFoodParams
        ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm``
        (n_blocks, D), each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with
        ``refattn.random.draw_fastfood``.
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.

    Returns
    -------
    u : (..., L, M) array
        ``u[..., b * D + i] = (V_b x_pad)_i``, M = n_blocks D (block-major); same namespace, dtype and device
        as `x`.

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, or an input is not finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.

    See Also
    --------
    fastfood_projection_fwd, fastfood_projection_bwd : the differentiable pair.
    fastfood_matrix : the explicit V.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_matrix, fastfood_projection
    >>> from refattn.random import draw_fastfood
    >>> params = draw_fastfood(np.random.default_rng(0), 8, 3)           # M = 8 frequencies, d = 3 (D = 4)
    >>> x = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5]])                # (L, d)
    >>> u = fastfood_projection(x, params)
    >>> u.shape                                                         # (L, M)
    (2, 8)
    >>> bool(np.allclose(u, x @ fastfood_matrix(params, 3).T))
    True
    """
    return fastfood_projection_fwd(x, params, sigma=sigma)[0]


def fastfood_matrix(params: FastFoodParams, d: int, *, sigma: float = 1.0) -> Array:
    """The explicit (M, d) frequency matrix V (rows omega_i) of a FastFood draw (Eq. 6).

    The projection of the identity. For tests and for the dense path ``trig_features(x, V)``; costs
    O(M d log D).

    Parameters
    ----------
    params : FastFoodParams
        A draw (``refattn.random.draw_fastfood``) for head width `d`.
    d : int
        Head width; ``params`` has shape (n_blocks, ``padded_dim(d)``).
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.

    Returns
    -------
    V : (M, d) array
        ``fastfood_projection(x, params) == x @ V^T``; same namespace and dtype as ``params.S``.

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, or an input is not finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_matrix
    >>> from refattn.random import draw_fastfood
    >>> fastfood_matrix(draw_fastfood(np.random.default_rng(0), 8, 3), 3).shape
    (8, 3)
    """
    xp = namespace(params.S, names=("params.S",))
    eye = xp.eye(d, dtype=params.S.dtype)                                            # (d, d)
    return xp.matrix_transpose(fastfood_projection(eye, params, sigma=sigma))        # (M, d)


# ------------------------------------------------------------------------------------------------------------
# Nonlinearities on the projections (the RKS map of Eq. 3 and the PRF map of Eq. 9, applied to u = x V^T)
# ------------------------------------------------------------------------------------------------------------

def _rks_from_projection(u: Array, *, xp: Any) -> Array:
    M = u.shape[-1]
    return xp.concat((xp.cos(u), xp.sin(u)), axis=-1) / math.sqrt(M)               # (..., L, 2M)  Eq. 3


def _rks_from_projection_bwd(dphi: Array, u: Array, *, xp: Any) -> Array:
    M = u.shape[-1]
    dcos, dsin = dphi[..., :M], dphi[..., M:]                                       # (..., L, M) each
    return (xp.cos(u) * dsin - xp.sin(u) * dcos) / math.sqrt(M)                     # (..., L, M)


def _prf_exponent(u: Array, x: Array, *, xp: Any) -> Array:
    return u - xp.sum(x * x, axis=-1, keepdims=True)  # (..., L, M)  w.x - |x|^2


def _prf_exponent_bwd(de: Array, x: Array, *, xp: Any) -> tuple[Array, Array]:
    """(du, dx) of e = u - |x|^2 given de."""
    return de, -2.0 * x * xp.sum(de, axis=-1, keepdims=True)


def _stable_exp_fwd(e: Array, *, xp: Any) -> tuple[Array, Array]:
    """``phi = exp(e - max_m e)`` in (0, 1] and ``log_scale = max_m e - log(M)/2``: raw map
    ``exp(e) / sqrt(M) = phi * exp(log_scale)`` (the convention of ``positive_features_stable``)."""
    M = e.shape[-1]
    row_max = xp.max(e, axis=-1)                                                     # (..., L)
    phi = xp.exp(e - xp.expand_dims(row_max, axis=-1))                               # (..., L, M), row max 1
    return phi, row_max - 0.5 * math.log(M)


def _stable_exp_bwd(dphi: Array, dlog_scale: Array | None, e: Array, phi: Array, log_scale: Array, *,
                    xp: Any) -> Array:
    """de for (phi, log_scale) = stable_exp(e): the row max has gradient one-hot(argmax) (ties split)."""
    at_max = xp.astype(phi == 1.0, e.dtype)                                          # (..., L, M) argmax of e
    at_max = at_max / xp.sum(at_max, axis=-1, keepdims=True)  # ties share the gradient
    g = dphi * phi                                                                   # (..., L, M)
    dls = -xp.sum(g, axis=-1)  # (..., L)  phi depends on -ls
    if dlog_scale is not None:
        dls = dls + dlog_scale
    return g + at_max * xp.expand_dims(dls, axis=-1)                                 # (..., L, M)


# ------------------------------------------------------------------------------------------------------------
# FastFood-RKS and FastFood-PRF
# ------------------------------------------------------------------------------------------------------------

class _FeatCache(NamedTuple):
    proj: _ProjCache
    u: Array          # (..., L, M)
    x: Array          # (..., L, d)
    e: Array | None   # (..., L, M)  PRF exponent
    phi: Array | None
    log_scale: Array | None


def fastfood_rks_features_fwd(x: Array, params: FastFoodParams, *, sigma: float = 1.0,
                              variant: str = "SGB") -> tuple[Array, _FeatCache]:
    r"""FastFood-RKS (Eq. 6): ``phi(x) = [cos(x V^T), sin(x V^T)] / sqrt(M)``.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    params : FastFoodParams
        ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm``
        (n_blocks, D), each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with
        ``refattn.random.draw_fastfood``.
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.
    variant : {"SGB", "S", "fixed"}, default "SGB"
        Which diagonals get gradients (Appendix D; ``FASTFOOD_VARIANTS``); the forward is the same.

    Returns
    -------
    phi : (..., L, 2M) array
        ``phi(q) . phi(k)`` is unbiased, over the initial law of the draw, for
        :func:`fastfood_rks_kernel` ``= exp(-|q - k|^2 / (2 sigma^2))``.
    cache : NamedTuple
        Opaque, for :func:`fastfood_rks_features_bwd`.

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, `variant` is unknown, or an input is not
        finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.
    """
    u, pc = fastfood_projection_fwd(x, params, sigma=sigma, variant=variant)
    xp = namespace(u)
    return _rks_from_projection(u, xp=xp), _FeatCache(pc, u, x, None, None, None)


def fastfood_rks_features_bwd(dphi: Array, cache: _FeatCache) -> FastFoodGrads:
    """Backward of :func:`fastfood_rks_features` (Chowdhury et al. Eqs. 3 and 6).

    Parameters
    ----------
    dphi : (..., L, 2M) array
        Cotangent of the features (cosine half first); same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`fastfood_rks_features_fwd`.

    Returns
    -------
    FastFoodGrads
        ``x : (..., L, d)`` and ``params``: a :class:`FastFoodParams` with ``S, G, B`` gradients of shape
        (n_blocks, D) for the variant's learnable diagonals (``None`` for frozen ones) and ``perm=None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    xp = namespace(dphi, cache.u, names=("dphi", "cache"))
    _check_cotangent("dphi", dphi, tuple(cache.u.shape[:-1]) + (2 * cache.u.shape[-1],), xp=xp)
    return fastfood_projection_bwd(_rks_from_projection_bwd(dphi, cache.u, xp=xp), cache.proj)


def _rks_core(x, params, *, sigma=1.0, variant="SGB"):
    """Unchecked core of :func:`fastfood_rks_features_fwd`: its structural checks, no value checks (the
    permutation's included: :func:`_check_perm`)."""
    xp = _check_struct(x, params, sigma, variant)
    u, pc = _projection_core(x, params, sigma, variant, xp=xp)
    return _rks_from_projection(u, xp=xp), _FeatCache(pc, u, x, None, None, None)


def _rks_bwd_core(dphi, cache):
    """Unchecked core of :func:`fastfood_rks_features_bwd`."""
    xp = namespace(dphi, cache.u, names=("dphi", "cache"))
    return _projection_bwd_core(_rks_from_projection_bwd(dphi, cache.u, xp=xp), cache.proj, xp=xp)


def fastfood_rks_features(x: Array, params: FastFoodParams, *, sigma: float = 1.0) -> Array:
    """FastFood-RKS features ``[cos(x V^T), sin(x V^T)] / sqrt(M)`` (Chowdhury et al. Eq. 6 with Eq. 3).

    Unbiased, over the initial law of the draw, for :func:`fastfood_rks_kernel`
    ``exp(-|q - k|^2 / (2 sigma^2))``; once S, G, B are trained the map estimates the kernel they define.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    params : FastFoodParams
        ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm``
        (n_blocks, D), each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with
        ``refattn.random.draw_fastfood``.
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.

    Returns
    -------
    phi : (..., L, 2M) array
        Cosines then sines; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, or an input is not finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.

    See Also
    --------
    fastfood_rks_features_fwd, fastfood_rks_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_matrix, fastfood_rks_features, trig_features
    >>> from refattn.random import draw_fastfood
    >>> params = draw_fastfood(np.random.default_rng(0), 8, 3)           # M = 8 frequencies, d = 3 (D = 4)
    >>> x = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5]])                # (L, d)
    >>> phi = fastfood_rks_features(x, params)
    >>> phi.shape                                                       # (L, 2M)
    (2, 16)
    >>> bool(np.allclose(phi, trig_features(x, fastfood_matrix(params, 3))))   # the dense path
    True
    """
    return fastfood_rks_features_fwd(x, params, sigma=sigma)[0]


def fastfood_prf_features_fwd(x: Array, params: FastFoodParams, *, sigma: float = 1.0,
                              variant: str = "SGB") -> tuple[Array, _FeatCache]:
    r"""FastFood-PRF (Eq. 12 with Eq. 9): ``phi(x) = exp(x V^T - |x|^2) / sqrt(M)``, unstabilised.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    params : FastFoodParams
        ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm``
        (n_blocks, D), each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with
        ``refattn.random.draw_fastfood``.
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.
    variant : {"SGB", "S", "fixed"}, default "SGB"
        Which diagonals get gradients (Appendix D; ``FASTFOOD_VARIANTS``); the forward is the same.

    Returns
    -------
    phi : (..., L, M) array
        Positive; ``phi(q) . phi(k)`` is unbiased, over the initial law, for :func:`fastfood_prf_kernel`
        (the Gaussian kernel at sigma = 1). Overflows for large ``|x|``: use
        :func:`fastfood_prf_features_stable` in attention.
    cache : NamedTuple
        Opaque, for :func:`fastfood_prf_features_bwd`.

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, `variant` is unknown, or an input is not
        finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.
    """
    u, pc = fastfood_projection_fwd(x, params, sigma=sigma, variant=variant)
    xp = namespace(u)
    e = _prf_exponent(u, x, xp=xp)                                                   # (..., L, M)
    phi = xp.exp(e) / math.sqrt(u.shape[-1])                                         # (..., L, M)  Eq. 9
    return phi, _FeatCache(pc, u, x, e, phi, None)


def fastfood_prf_features_bwd(dphi: Array, cache: _FeatCache) -> FastFoodGrads:
    """Backward of :func:`fastfood_prf_features` (Chowdhury et al. Eq. 12 with Eq. 9).

    ``de = dphi * phi``; ``du = de`` goes through :func:`fastfood_projection_bwd`, and ``-|x|^2`` adds
    ``-2 x sum_M(de)`` to ``dx``.

    Parameters
    ----------
    dphi : (..., L, M) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`fastfood_prf_features_fwd`.

    Returns
    -------
    FastFoodGrads
        ``x : (..., L, d)`` and ``params``: a :class:`FastFoodParams` with ``S, G, B`` gradients of shape
        (n_blocks, D) for the variant's learnable diagonals (``None`` for frozen ones) and ``perm=None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    xp = namespace(dphi, cache.u, names=("dphi", "cache"))
    _check_cotangent("dphi", dphi, cache.u.shape, xp=xp)
    du, dx_direct = _prf_exponent_bwd(dphi * cache.phi, cache.x, xp=xp)
    g = fastfood_projection_bwd(du, cache.proj)
    return FastFoodGrads(x=g.x + dx_direct, params=g.params)


def fastfood_prf_features(x: Array, params: FastFoodParams, *, sigma: float = 1.0) -> Array:
    """FastFood-PRF features ``exp(x V^T - |x|^2) / sqrt(M)`` (Chowdhury et al. Eq. 12 with Eq. 9).

    Unbiased, over the initial law of the draw, for :func:`fastfood_prf_kernel` (the Gaussian kernel
    ``exp(-|q - k|^2 / 2)`` at sigma = 1; design.md trap 1: the offset is ``|x|^2``). Unstabilised: overflows
    for large inputs; attention should use :func:`fastfood_prf_features_stable`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    params : FastFoodParams
        ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm``
        (n_blocks, D), each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with
        ``refattn.random.draw_fastfood``.
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.

    Returns
    -------
    phi : (..., L, M) array
        Positive; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, or an input is not finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.

    See Also
    --------
    fastfood_prf_features_fwd, fastfood_prf_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_matrix, fastfood_prf_features, gaussian_positive_features
    >>> from refattn.random import draw_fastfood
    >>> params = draw_fastfood(np.random.default_rng(0), 8, 3)           # M = 8 frequencies, d = 3 (D = 4)
    >>> x = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5]])                # (L, d)
    >>> phi = fastfood_prf_features(x, params)
    >>> phi.shape                                                       # (L, M)
    (2, 8)
    >>> bool(np.allclose(phi, gaussian_positive_features(x, fastfood_matrix(params, 3))))
    True
    """
    return fastfood_prf_features_fwd(x, params, sigma=sigma)[0]


def fastfood_prf_features_stable_fwd(x: Array, params: FastFoodParams, *, sigma: float = 1.0,
                                     variant: str = "SGB") -> tuple[tuple[Array, Array], _FeatCache]:
    r"""Row-stabilised FastFood-PRF ``(phi, log_scale)``, raw map ``phi * exp(log_scale)``, and the cache.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    params : FastFoodParams
        ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm``
        (n_blocks, D), each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with
        ``refattn.random.draw_fastfood``.
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.
    variant : {"SGB", "S", "fixed"}, default "SGB"
        Which diagonals get gradients (Appendix D; ``FASTFOOD_VARIANTS``); the forward is the same.

    Returns
    -------
    (phi, log_scale) : ((..., L, M), (..., L)) arrays
        ``phi`` in (0, 1]: the row maximum of the exponent is factored out (design.md trap 3).
        ``log_scale``: row maximum of the exponent minus log(M)/2; pass as ``k_log_scale`` for keys (a
        query's cancels in its row normalisation).
    cache : NamedTuple
        Opaque, for :func:`fastfood_prf_features_stable_bwd`.

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, `variant` is unknown, or an input is not
        finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.
    """
    u, pc = fastfood_projection_fwd(x, params, sigma=sigma, variant=variant)
    xp = namespace(u)
    e = _prf_exponent(u, x, xp=xp)                                                   # (..., L, M)
    phi, log_scale = _stable_exp_fwd(e, xp=xp)
    return (phi, log_scale), _FeatCache(pc, u, x, e, phi, log_scale)


def fastfood_prf_features_stable_bwd(dout: tuple[Array, Array | None], cache: _FeatCache) -> FastFoodGrads:
    """Backward of :func:`fastfood_prf_features_stable` from ``(dphi, dlog_scale)``.

    The row maximum's gradient goes to its argmax (ties share it equally).

    Parameters
    ----------
    dout : tuple of ((..., L, M) array, (..., L) array or None)
        ``(dphi, dlog_scale)``; ``dlog_scale`` may be ``None`` (queries). Same namespace and dtype as the
        cache, finite.
    cache : NamedTuple
        From :func:`fastfood_prf_features_stable_fwd`.

    Returns
    -------
    FastFoodGrads
        ``x : (..., L, d)`` and ``params``: a :class:`FastFoodParams` with ``S, G, B`` gradients of shape
        (n_blocks, D) for the variant's learnable diagonals (``None`` for frozen ones) and ``perm=None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    dphi, dlog_scale = dout
    xp = namespace(dphi, cache.u, dlog_scale, names=("dphi", "cache", "dlog_scale"))
    _check_cotangent("dphi", dphi, cache.u.shape, xp=xp)
    if dlog_scale is not None:
        _check_cotangent("dlog_scale", dlog_scale, cache.u.shape[:-1], xp=xp)
    de = _stable_exp_bwd(dphi, dlog_scale, cache.e, cache.phi, cache.log_scale, xp=xp)
    du, dx_direct = _prf_exponent_bwd(de, cache.x, xp=xp)
    g = fastfood_projection_bwd(du, cache.proj)
    return FastFoodGrads(x=g.x + dx_direct, params=g.params)


def _prf_stable_core(x, params, *, sigma=1.0, variant="SGB"):
    """Unchecked core of :func:`fastfood_prf_features_stable_fwd`: its structural checks, no value checks (the
    permutation's included: :func:`_check_perm`)."""
    xp = _check_struct(x, params, sigma, variant)
    u, pc = _projection_core(x, params, sigma, variant, xp=xp)
    e = _prf_exponent(u, x, xp=xp)                                                   # (..., L, M)
    phi, log_scale = _stable_exp_fwd(e, xp=xp)
    return (phi, log_scale), _FeatCache(pc, u, x, e, phi, log_scale)


def _prf_stable_bwd_core(dout, cache):
    """Unchecked core of :func:`fastfood_prf_features_stable_bwd`."""
    dphi, dlog_scale = dout
    xp = namespace(dphi, cache.u, dlog_scale, names=("dphi", "cache", "dlog_scale"))
    de = _stable_exp_bwd(dphi, dlog_scale, cache.e, cache.phi, cache.log_scale, xp=xp)
    du, dx_direct = _prf_exponent_bwd(de, cache.x, xp=xp)
    g = _projection_bwd_core(du, cache.proj, xp=xp)
    return FastFoodGrads(x=g.x + dx_direct, params=g.params)


def fastfood_prf_features_stable(x: Array, params: FastFoodParams, *,
                                 sigma: float = 1.0) -> tuple[Array, Array]:
    """Row-stabilised FastFood-PRF features: :func:`fastfood_prf_features` as ``phi * exp(log_scale)``.

    Chowdhury et al. Eq. 12 with the row maximum of the exponent and ``1/sqrt(M)`` factored into
    ``log_scale`` (design.md trap 3); never overflows.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    params : FastFoodParams
        ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm``
        (n_blocks, D), each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with
        ``refattn.random.draw_fastfood``.
    sigma : float, default 1.0
        Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.

    Returns
    -------
    phi : (..., L, M) array
        Entries in (0, 1], each row's maximum exactly 1; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        Keys: pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it (it cancels per row).

    Raises
    ------
    ValueError
        If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is
        not a permutation, `sigma` is not positive and finite, or an input is not finite.
    TypeError
        If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in
        namespace or dtype.

    See Also
    --------
    fastfood_prf_features_stable_fwd, fastfood_prf_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_prf_features, fastfood_prf_features_stable
    >>> from refattn.random import draw_fastfood
    >>> params = draw_fastfood(np.random.default_rng(0), 8, 3)           # M = 8 frequencies, d = 3 (D = 4)
    >>> x = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5]])                # (L, d)
    >>> phi, log_scale = fastfood_prf_features_stable(x, params)
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], fastfood_prf_features(x, params)))
    True
    """
    return fastfood_prf_features_stable_fwd(x, params, sigma=sigma)[0]


# ------------------------------------------------------------------------------------------------------------
# Closed forms (the kernels of the initial law)
# ------------------------------------------------------------------------------------------------------------

def _check_sigma(sigma):
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (0 < sigma < math.inf):
        raise ValueError(f"sigma: expected a positive finite number; got {sigma!r}")


def _check_cotangent(name, a, shape, *, xp):
    """A backward's incoming gradient: exactly the forward output's `shape` (never broadcast), finite."""
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"{name}: expected the forward output's shape {tuple(shape)}; got {tuple(a.shape)}")
    check_finite(name, a, xp=xp)


def _sqdist(q: Array, k: Array, *, xp: Any) -> Array:
    qq = xp.sum(q * q, axis=-1, keepdims=True)                                      # (..., Lq, 1)
    kk = xp.expand_dims(xp.sum(k * k, axis=-1), axis=-2)                              # (..., 1, Lk)
    return qq + kk - 2.0 * (q @ xp.matrix_transpose(k))                               # (..., Lq, Lk)


def fastfood_rks_kernel(q: Array, k: Array, *, sigma: float = 1.0) -> Array:
    """The Gaussian kernel ``exp(-|q - k|^2 / (2 sigma^2))``: what FastFood-RKS estimates at initialisation.

    Rows of V ~ N(0, I / sigma^2) (Chowdhury et al. Eq. 6 with Eq. 3; Bochner, Eq. 2).

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating, finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.
    sigma : float, default 1.0
        Bandwidth of the initial law (rows of V ~ N(0, I / sigma^2)).

    Returns
    -------
    K : (..., Lq, Lk) array
        Entries in (0, 1]; same namespace, dtype and device as `q`.

    Raises
    ------
    ValueError
        If the shapes disagree, an input is not finite, `sigma` is not positive and finite, or the result
        exceeds ``refattn.limits``.
    TypeError
        If `q` and `k` differ in namespace or dtype, or are not real floating.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_rks_kernel
    >>> fastfood_rks_kernel(np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]]))
    array([[0.76720595, 0.77880078],
           [0.69419665, 0.36787944]])
    """
    xp = _check_qk(q, k)
    _check_sigma(sigma)
    return xp.exp(-_sqdist(q, k, xp=xp) / (2.0 * sigma * sigma))


def fastfood_prf_kernel(q: Array, k: Array, *, sigma: float = 1.0) -> Array:
    """The kernel ``exp(-|q|^2 - |k|^2 + |q + k|^2 / (2 sigma^2))`` FastFood-PRF estimates at initialisation.

    Chowdhury et al. Eq. 12 with the Eq. 9 offset ``|x|^2``: the Gaussian kernel ``exp(-|q - k|^2 / 2)`` when
    sigma = 1, not shift-invariant otherwise.

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating, finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.
    sigma : float, default 1.0
        Bandwidth of the initial law (rows of V ~ N(0, I / sigma^2)).

    Returns
    -------
    K : (..., Lq, Lk) array
        Positive; same namespace, dtype and device as `q`.

    Raises
    ------
    ValueError
        If the shapes disagree, an input is not finite, `sigma` is not positive and finite, or the result
        exceeds ``refattn.limits``.
    TypeError
        If `q` and `k` differ in namespace or dtype, or are not real floating.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import fastfood_prf_kernel
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> fastfood_prf_kernel(q, k, sigma=2.0)
    array([[0.58347714, 0.30498277],
           [0.39111643, 0.17377394]])
    """
    xp = _check_qk(q, k)
    _check_sigma(sigma)
    qq = xp.sum(q * q, axis=-1, keepdims=True)                                      # (..., Lq, 1)
    kk = xp.expand_dims(xp.sum(k * k, axis=-1), axis=-2)                              # (..., 1, Lk)
    oo = qq + kk + 2.0 * (q @ xp.matrix_transpose(k))  # (..., Lq, Lk)  |q + k|^2
    return xp.exp(-qq - kk + oo / (2.0 * sigma * sigma))
