r"""The FastFood projection ``u = x V^T`` with learnable diagonals (KL-Transformer Eq. 6; Le et al. 2013).

The projection matrix is never formed: every block of D rows is

    V = (1 / (sigma sqrt(D))) S H G Pi H B                                        (Eq. 6)

with H the *unnormalised* Walsh-Hadamard matrix (:mod:`refattn.features.fwht`), B a +-1 diagonal, Pi a
permutation, G a Gaussian diagonal and S a scaling diagonal. ``x V^T`` costs O(D log D) per row and block
through the fast transform, so the projections of L rows onto M = n_blocks D frequencies cost O(L M log D)
time and O(M) parameters.

Conventions fixed here (the paper leaves them open or states them reversed):

* d is zero-padded to D, the next power of two; the normaliser is 1/(sigma sqrt(D)).
* M is a multiple of D (n_blocks independent blocks stacked); the paper's "M | d_q" is reversed.
* The law of S (``refattn.random.draw_fastfood``): ``S_ii = s_i / ||G||_F`` with ``s_i ~ chi(D)`` (Le et al.):
  every row of V is then exactly N(0, I / sigma^2), rows' norms independent. With ``S = I`` every row is still
  N(0, I / sigma^2) *marginally* (so the estimators stay unbiased), but all rows of a block share one norm
  ``||G||_F / sigma``: a different joint law, hence a different variance (measured in the tests).
* Appendix D variants: ``variant="SGB"`` (S, G, B learnable, the paper's main model), ``"S"`` (only S) and
  ``"fixed"`` (basic FastFood, nothing learnable). Frozen diagonals get ``None`` gradients.

The feature maps on these projections are in :mod:`refattn.features.fastfood`.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` head width, ``D`` padded width (power of two),
``n_blocks`` stacked blocks, ``M = n_blocks * D`` frequencies.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_choice, check_finite, check_shape, device_of, namespace
from .projection import check_cotangent
from .fwht import fwht_core

__all__ = ["FastFoodParams", "FASTFOOD_VARIANTS", "padded_dim", "fastfood_projection",
           "fastfood_projection_fwd", "fastfood_projection_bwd", "FastFoodGrads", "fastfood_matrix"]

Array = Any

#: Appendix D's variants: variant name -> the diagonals that get gradients (the forward is the same).
FASTFOOD_VARIANTS = {"SGB": ("S", "G", "B"), "S": ("S",), "fixed": ()}

FASTFOOD_PARAMETERS = """
Parameters
----------
x : (..., L, d) array
    Queries or keys. Real floating (float32 or float64), finite.
params : FastFoodParams
    ``S, G, B`` of shape (n_blocks, D), same namespace and dtype as `x`, and integer ``perm`` (n_blocks, D),
    each row a permutation of 0..D-1; D = ``padded_dim(d)``. Draw with ``refattn.random.draw_fastfood``.
sigma : float, default 1.0
    Bandwidth: rows of V have the law N(0, I / sigma^2) at initialisation.
"""
VARIANT_PARAMETER = """
variant : {"SGB", "S", "fixed"}, default "SGB"
    Which diagonals get gradients (Appendix D; ``FASTFOOD_VARIANTS``); the forward is the same.
"""
FASTFOOD_RAISES = """
Raises
------
ValueError
    If the shapes disagree (``params`` not (n_blocks, D) with D = ``padded_dim(d)``), a ``perm`` row is not a
    permutation, `sigma` is not positive and finite, or an input is not finite.
TypeError
    If `params` is not a :class:`FastFoodParams`, ``perm`` is not integer, or the arrays differ in namespace
    or dtype.
"""
FASTFOOD_FWD_RAISES = """
Raises
------
ValueError
    As :func:`fastfood_projection`, or if `variant` is unknown.
TypeError
    As :func:`fastfood_projection`.
"""
FASTFOOD_BWD_RETURNS = """
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


class ProjectionCache(NamedTuple):
    """What :func:`fastfood_projection_bwd` needs from :func:`fastfood_projection_fwd`."""

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
    D, nb = check_fastfood_params_struct(params, d, x, xp)
    for name in ("S", "G", "B"):
        check_finite(f"params.{name}", getattr(params, name), xp=xp)
    check_fastfood_perm(params, D, xp)
    return D, nb


def check_fastfood_params_struct(params: Any, d: int, x: Array, xp: Any) -> tuple[int, int]:
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


def check_fastfood_perm(params: Any, D: int, xp: Any) -> None:
    """The value check of the integer parameter ``perm`` (each row a permutation of 0..D-1): one sync."""
    ref = xp.arange(D, dtype=params.perm.dtype, device=device_of(params.perm))
    if not bool(xp.all(xp.sort(params.perm, axis=-1) == ref)):
        raise ValueError(f"params.perm: expected each row to be a permutation of 0..{D - 1}; "
                         f"got another array")


@fill_doc(params=FASTFOOD_PARAMETERS, variant=VARIANT_PARAMETER, fwd_raises=FASTFOOD_FWD_RAISES)
def fastfood_projection_fwd(x: Array, params: FastFoodParams, *, sigma: float = 1.0,
                            variant: str = "SGB") -> tuple[Array, ProjectionCache]:
    """:func:`fastfood_projection` and the cache for its backward (equations and shapes there).

    {params}
    {variant}

    Returns
    -------
    u : (..., L, M) array
        ``u[..., b * D + i] = (V_b x_pad)_i``, M = n_blocks D (block-major).
    cache : NamedTuple
        Opaque, for :func:`fastfood_projection_bwd`.

    {fwd_raises}
    """
    xp = namespace(x, names=("x",))
    check_shape("x", x, "..., L, d")
    check_finite("x", x, xp=xp)
    _check_options(sigma, variant)
    _check_params(params, x.shape[-1], x, xp)
    return fastfood_projection_fwd_core(x, params, sigma=sigma, variant=variant, xp=xp)


def _check_options(sigma, variant):
    """The option checks of the FastFood maps (`variant`, `sigma`)."""
    check_choice(variant, "variant", tuple(FASTFOOD_VARIANTS))
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma: expected a positive finite number; got {sigma!r}")


def check_fastfood_struct(x, params, sigma, variant):
    """The structural checks of :func:`fastfood_projection_fwd` (no data read; the permutation's values are
    not checked here: :func:`check_fastfood_perm`). Returns the namespace."""
    xp = namespace(x, names=("x",))
    check_shape("x", x, "..., L, d")
    _check_options(sigma, variant)
    check_fastfood_params_struct(params, x.shape[-1], x, xp)
    return xp


# u = x_pad V^T,  V_b = S_b H G_b Pi_b H B_b / (sigma sqrt(D)),  x_pad = [x, 0]                      (Eq. 6)
# backward in reverse order: dS, H, dG, Pi^T, H, dB, dx = (sum_b B_b du0_b)[:d]   (H^T = H, Pi^-1 = Pi^T)
def fastfood_projection_fwd_core(x, params, *, sigma=1.0, variant="SGB", xp):
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
    u1 = fwht_core(u0, xp=xp)                                                       # (..., L, nb, D)  H B x
    offsets = xp.reshape(xp.arange(nb, dtype=params.perm.dtype, device=device_of(x)) * D, (nb, 1))  # (nb, 1)
    index = xp.reshape(params.perm + offsets, (nb * D,))                            # (nb D,)
    u2 = xp.reshape(xp.take(xp.reshape(u1, batch + (nb * D,)), index, axis=-1),
                    batch + (nb, D))  # (..., L, nb, D)  Pi H B x
    u3 = fwht_core(u2 * params.G, xp=xp)  # (..., L, nb, D)  H G Pi H B x
    u = xp.reshape(u3 * (params.S * scale), batch + (nb * D,))                      # (..., L, M)  Eq. 6
    inv_index = xp.argsort(index)                                                   # (nb D,)
    return u, ProjectionCache(x_pad, u1, u2, u3, params, inv_index, scale, d, variant)


@fill_doc(bwd_returns=FASTFOOD_BWD_RETURNS)
def fastfood_projection_bwd(du: Array, cache: ProjectionCache) -> FastFoodGrads:
    """Gradients of :func:`fastfood_projection` (equations there): x and the variant's learnable diagonals.

    Parameters
    ----------
    du : (..., L, M) array
        Cotangent of the projections; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`fastfood_projection_fwd` (it records the variant).

    {bwd_returns}
    """
    xp = namespace(du, cache.x_pad, names=("du", "cache"))
    nb, D = cache.params.S.shape
    check_cotangent("du", du, tuple(cache.x_pad.shape[:-1]) + (nb * D,), xp=xp)
    return fastfood_projection_bwd_core(du, cache, xp=xp)


def fastfood_projection_bwd_core(du, cache, *, xp):
    """Unchecked core of :func:`fastfood_projection_bwd`."""
    c = cache
    p = c.params
    batch = tuple(c.x_pad.shape[:-1])
    nb, D = p.S.shape
    red = tuple(range(len(batch)))                        # the (..., L) axes a diagonal's gradient sums over
    du3 = xp.reshape(du, batch + (nb, D))                                            # (..., L, nb, D)
    learn = FASTFOOD_VARIANTS[c.variant]
    dS = xp.sum(du3 * c.u3, axis=red) * c.scale if "S" in learn else None          # (nb, D)
    dv = fwht_core(du3 * (p.S * c.scale), xp=xp)  # (..., L, nb, D)  d(G Pi H B x)
    dG = xp.sum(dv * c.u2, axis=red) if "G" in learn else None                      # (nb, D)
    du2 = dv * p.G                                                                  # (..., L, nb, D)
    du1 = xp.reshape(xp.take(xp.reshape(du2, batch + (nb * D,)), c.inv_index, axis=-1),
                     batch + (nb, D))                                               # (..., L, nb, D)  Pi^T
    du0 = fwht_core(du1, xp=xp)                                                     # (..., L, nb, D)  H^T = H
    dB = xp.sum(du0 * xp.expand_dims(c.x_pad, axis=-2), axis=red) if "B" in learn else None  # (nb, D)
    dx_pad = xp.sum(du0 * p.B, axis=-2)                                             # (..., L, D)
    dx = dx_pad[..., :c.d] if c.d < D else dx_pad                                   # (..., L, d)
    return FastFoodGrads(x=dx, params=FastFoodParams(S=dS, G=dG, B=dB, perm=None))


@fill_doc(params=FASTFOOD_PARAMETERS, raises=FASTFOOD_RAISES)
def fastfood_projection(x: Array, params: FastFoodParams, *, sigma: float = 1.0) -> Array:
    """FastFood projections ``u = x V^T``, ``V = S H G Pi H B / (sigma sqrt(D))``, never forming V (Eq. 6).

    Chowdhury et al. Eq. (6) (Le et al. 2013) with d zero-padded to D: O(L M log D) time and O(M) parameters.
    The backward runs Eq. 6 in reverse: ``dS``, then the second transform, ``dG``, the inverse permutation,
    the first transform, ``dB`` and ``dx`` (padding dropped).

    {params}

    Returns
    -------
    u : (..., L, M) array
        ``u[..., b * D + i] = (V_b x_pad)_i``, M = n_blocks D (block-major); same namespace, dtype and device
        as `x`.

    {raises}

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


@fill_doc(raises=FASTFOOD_RAISES)
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

    {raises}

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
