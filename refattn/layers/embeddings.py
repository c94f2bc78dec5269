r"""Input embeddings as forward/backward pairs: tokens, pixels/patches, absolute positions.

* **Token embedding** ``y = table[ids]``: ``ids: (..., L)`` integer indices, ``table: (V, d)``. Gathered
  with ``take``; the backward is the scatter-add ``dtable = onehot(ids)^T dy``, one GEMM with an ``(N, V)``
  one-hot (the standard has no scatter-add; O(N V d), fine for the reference tasks' vocabularies).
* **Patch embedding** (ViT, Dosovitskiy et al. 2021): ``images: (..., H, W, C)`` cut into non-overlapping
  ``p x p`` patches in row-major order, each flattened to ``p*p*C`` values (order (row in patch, column in
  patch, channel)), then a dense layer: ``(..., (H/p)(W/p), d)``; the gradient is the dense backward, then
  :func:`unpatchify` (the reshape's adjoint). **Pixel embedding** is ``patch = 1`` (each pixel a token;
  integer intensities can use the token embedding instead).
* **Absolute position embeddings** ``y = x + P[:L]`` with ``P: (L_max, d)`` either the sinusoid table of
  Vaswani et al. (:func:`sinusoid_position_table`), which a model keeps fixed, or a learned table (gradient
  ``dx = dy``, ``dP[:L] = dy`` summed over the batch, zero rows past L).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import limits
from .._docs import fill_doc
from .._xp import check_finite, check_positive_int, check_shape, device_of, namespace
from .checks import check_dy, check_dy_spec, check_finite_all, check_index_range
from .dense import DenseParams, dense_bwd_core, dense_fwd_core
from .losses import one_hot_core

__all__ = [
    "token_embedding", "token_embedding_fwd", "token_embedding_bwd", "TokenEmbeddingGrads",
    "patchify", "unpatchify",
    "patch_embedding", "patch_embedding_fwd", "patch_embedding_bwd", "PatchEmbeddingGrads",
    "sinusoid_position_table",
    "position_embedding", "position_embedding_fwd", "position_embedding_bwd", "PositionEmbeddingGrads",
]

Array = Any


class TokenEmbeddingGrads(NamedTuple):
    """Gradient of :func:`token_embedding`: ``table: (V, d)`` (token ids get none)."""

    table: Array  # (V, d)


class PatchEmbeddingGrads(NamedTuple):
    """Gradients of :func:`patch_embedding`: ``images`` and ``params`` (a ``DenseParams`` of gradients)."""

    images: Array         # (..., H, W, C)
    params: DenseParams   # W: (p*p*C, d), b: (d,)


class PositionEmbeddingGrads(NamedTuple):
    """Gradients of :func:`position_embedding`: ``x: (..., L, d)`` and ``table: (L_max, d)``."""

    x: Array      # (..., L, d)
    table: Array  # (L_max, d)


_DY_CACHE = """
dy : array
    Cotangent of the output `y`: exactly its shape (the forward's Returns), namespace and dtype; finite.
cache : tuple
    From the forward.
"""

_DY_RAISES = """
ValueError
    If `dy` is not of the output's shape or is not finite.
TypeError
    If `dy` differs from the forward in namespace or dtype.
"""

_TOKEN_PARAMS = """
ids : (..., L) integer array
    Token indices in ``[0, V)`` (indices by nature: no gradient); same namespace as `table`.
table : (V, d) array
    Embedding table, real floating (float32 or float64), finite (``refattn.random.init_embedding``).
"""

_TOKEN_RAISES = """
ValueError
    `table` not 2-D or not finite, or an index outside ``[0, V)``.
TypeError
    `ids` not an integer array, or mixed namespaces.
"""

_PATCH_PARAMS = """
images : (..., H, W, C) array
    Finite float32/float64.
params : DenseParams
    ``W: (patch*patch*C, d)``, ``b: (d,)``, same namespace and dtype as `images`
    (``refattn.random.init_dense(rng, patch*patch*C, d)``).
patch : int
    Patch side p; must divide H and W (1 for a pixel embedding).
"""

_PATCH_SIDE = """
patch : int
    Patch side p; a positive divisor of H and W.
"""

_PATCH_RAISES = """
ValueError
    `patch` not dividing H and W, ``params.W`` without ``p*p*C`` rows, or non-finite input.
TypeError
    Mixed namespaces or dtypes, or `params` not a ``DenseParams``.
"""

_POSITION_PARAMS = """
x : (..., L, d) array
    Token embeddings; real floating, finite.
table : (L_max, d) array
    Position table with ``L <= L_max`` (learned, or :func:`sinusoid_position_table`); same namespace and dtype
    as `x`.
"""

_PATCH_Y = """
y : (..., (H/p)(W/p), d) array
    One token per patch; same namespace and dtype as `images`.
"""

_POSITION_Y = """
y : (..., L, d) array
    Same namespace and dtype as `x`.
"""

_POSITION_RAISES = """
ValueError
    ``L > L_max``, mismatched widths, or non-finite input.
TypeError
    Mixed namespaces or dtypes.
"""


# ---- tokens ------------------------------------------------------------------------------------------------
@fill_doc(params=_TOKEN_PARAMS, raises=_TOKEN_RAISES)
def token_embedding_fwd(ids, table):
    r"""Forward of :func:`token_embedding` (see it for the equations), with the cache for the backward.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., L, d) array
        Rows of `table`; same namespace and dtype as `table`.
    cache : tuple
        ``(flat_ids, table.shape, table.dtype, y.shape)``, for :func:`token_embedding_bwd`.

    Raises
    ------
    {raises}
    """
    xp = check_token_embedding(ids, table)
    check_finite("table", table, xp=xp)
    return token_embedding_fwd_core(ids, table, xp=xp)


def check_token_embedding(ids, table):
    """The checks of :func:`token_embedding_fwd` but the table's finiteness (namespaces, dtypes, shapes, the
    ids' range: one reduction); returns the namespace. The model runs them where the layer is used."""
    xp = namespace(ids, table, names=("ids", "table"), allow_int=("ids",))
    if not xp.isdtype(ids.dtype, "integral"):
        raise TypeError(f"ids: expected an integer array of token indices; got dtype {ids.dtype}")
    check_shape("table", table, "V, d")
    V = table.shape[0]
    check_index_range("ids", ids, V, f"token indices in [0, {V}) (vocabulary of table)", xp=xp)
    return xp


# y = table[ids]                                                (a gather: take along the vocabulary axis)
# dtable = onehot(ids)^T dy                                     (a scatter-add, as one GEMM)
def token_embedding_fwd_core(ids, table, *, xp):
    """Unchecked core of :func:`token_embedding_fwd` (see :func:`token_embedding`)."""
    flat = xp.reshape(ids, (-1,))                                                   # (N,)
    y = xp.reshape(xp.take(table, flat, axis=0), tuple(ids.shape) + (table.shape[1],))   # (..., L, d)
    return y, (flat, table.shape, table.dtype, tuple(ids.shape) + (table.shape[1],))


@fill_doc(dy_cache=_DY_CACHE, raises=_DY_RAISES)
def token_embedding_bwd(dy, cache) -> TokenEmbeddingGrads:
    """Gradient of :func:`token_embedding` (see it for the equations) for `table`.

    Parameters
    ----------
    {dy_cache}

    Returns
    -------
    TokenEmbeddingGrads
        ``table: (V, d)`` (rows of unused tokens are zero).

    Raises
    ------
    {raises}
    MemoryError
        If the ``(N, V)`` one-hot exceeds the allocation bound (:mod:`refattn.limits`).
    """
    flat, (V, d), dtype, out_shape = cache
    xp = check_dy_spec(dy, out_shape, dtype)
    return token_embedding_bwd_core(dy, cache, xp=xp)


def token_embedding_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`token_embedding_bwd` (the one-hot's memory bound is kept)."""
    flat, (V, d), dtype, out_shape = cache
    limits.check_nbytes(flat.shape[0] * V * 8, "dy (rows x the table's vocabulary V, one-hot scatter)")
    oh = one_hot_core(flat, V, dtype=dtype, xp=xp)                                       # (N, V)
    return TokenEmbeddingGrads(table=xp.matrix_transpose(oh) @ xp.reshape(dy, (-1, d)))   # (V, d)


@fill_doc(params=_TOKEN_PARAMS, raises=_TOKEN_RAISES)
def token_embedding(ids, table):
    """Token embedding: the rows ``y = table[ids]`` (its scatter-add gradient: the module docstring).

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., L, d) array

    Raises
    ------
    {raises}

    See Also
    --------
    token_embedding_fwd, token_embedding_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import token_embedding
    >>> table = np.arange(6.0).reshape(3, 2)                   # (V, d) = (3, 2)
    >>> token_embedding(np.array([[2, 0]]), table)             # ids: (B, L) = (1, 2)
    array([[[4., 5.],
            [0., 1.]]])
    """
    return token_embedding_fwd(ids, table)[0]


# ---- patches -----------------------------------------------------------------------------------------------
@fill_doc(patch=_PATCH_SIDE)
def patchify(images, patch):
    r"""Cut images into non-overlapping ``p x p`` patches, row-major, each flattened to ``p*p*C`` values.

    A pure reshape and transpose (the order: module docstring); its inverse and adjoint is :func:`unpatchify`.

    Parameters
    ----------
    images : (..., H, W, C) array
        Finite float32/float64; empty axes give empty patches.
    {patch}

    Returns
    -------
    patches : (..., (H/p)(W/p), p*p*C) array
        Same namespace and dtype as `images`.

    Raises
    ------
    ValueError
        `patch` not a positive integer dividing H and W, `images` of fewer than 3 axes, or not finite.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import patchify
    >>> images = np.arange(16.0).reshape(1, 4, 4, 1)           # (B, H, W, C)
    >>> patches = patchify(images, 2)
    >>> patches.shape                                          # (B, (H/p)(W/p), p*p*C)
    (1, 4, 4)
    >>> patches[0, 0]                                          # the top-left 2 x 2 patch
    array([0., 1., 4., 5.])
    """
    xp = namespace(images, names=("images",))
    p = check_positive_int(patch, "patch")
    check_shape("images", images, "..., H, W, C")
    *batch, H, W, C = images.shape
    if H % p or W % p:
        raise ValueError(f"patch: expected a divisor of the image height and width ({H}, {W}); got {p}")
    check_finite("images", images, xp=xp)
    return patchify_core(images, p, xp=xp)


def patchify_core(images, p, *, xp):
    """Unchecked core of :func:`patchify`."""
    *batch, H, W, C = images.shape
    nb = len(batch)
    t = xp.reshape(images, tuple(batch) + (H // p, p, W // p, p, C))               # (..., H/p, p, W/p, p, C)
    perm = tuple(range(nb)) + (nb, nb + 2, nb + 1, nb + 3, nb + 4)
    t = xp.permute_dims(t, perm)                                                    # (..., H/p, W/p, p, p, C)
    return xp.reshape(t, tuple(batch) + ((H // p) * (W // p), p * p * C))          # (..., P, p*p*C)


@fill_doc(patch=_PATCH_SIDE)
def unpatchify(patches, patch, image_shape):
    r"""Inverse (and adjoint) of :func:`patchify`: reassemble images from their patches.

    Parameters
    ----------
    patches : (..., P, p*p*C) array
        With ``P = (H/p)(W/p)``; finite float32/float64.
    {patch}
    image_shape : tuple of int
        ``(H, W, C)``, positive.

    Returns
    -------
    images : (..., H, W, C) array
        Same namespace and dtype as `patches`.

    Raises
    ------
    ValueError
        `patch` or an entry of `image_shape` not a positive integer, `patch` not dividing H and W, `patches`
        not of shape ``(..., P, p*p*C)``, or not finite.
    TypeError
        `image_shape` not a tuple of three entries.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import patchify, unpatchify
    >>> images = np.arange(16.0).reshape(1, 4, 4, 1)
    >>> bool(np.array_equal(unpatchify(patchify(images, 2), 2, (4, 4, 1)), images))
    True
    """
    xp = namespace(patches, names=("patches",))
    p = check_positive_int(patch, "patch")
    if not (isinstance(image_shape, (tuple, list)) and len(image_shape) == 3):
        raise TypeError(f"image_shape: expected a tuple (H, W, C); got {image_shape!r}")
    H, W, C = (check_positive_int(n, f"image_shape[{i}]") for i, n in enumerate(image_shape))
    if H % p or W % p:
        raise ValueError(f"patch: expected a divisor of image_shape's height and width ({H}, {W}); got {p}")
    check_shape("patches", patches, f"..., {(H // p) * (W // p)}, {p * p * C}")
    check_finite("patches", patches, xp=xp)
    return unpatchify_core(patches, p, (H, W, C), xp=xp)


def unpatchify_core(patches, p, image_shape, *, xp):
    """Unchecked core of :func:`unpatchify`."""
    H, W, C = image_shape
    batch = tuple(patches.shape[:-2])
    nb = len(batch)
    t = xp.reshape(patches, batch + (H // p, W // p, p, p, C))                      # (..., H/p, W/p, p, p, C)
    perm = tuple(range(nb)) + (nb, nb + 2, nb + 1, nb + 3, nb + 4)
    t = xp.permute_dims(t, perm)                                                    # (..., H/p, p, W/p, p, C)
    return xp.reshape(t, batch + (H, W, C))                                         # (..., H, W, C)


@fill_doc(params=_PATCH_PARAMS, y=_PATCH_Y, raises=_PATCH_RAISES)
def patch_embedding_fwd(images, params: DenseParams, *, patch):
    r"""Forward of :func:`patch_embedding` (see it for the equations), with the cache for the backward.

    Parameters
    ----------
    {params}

    Returns
    -------
    {y}
    cache : tuple
        ``(DenseCache, patch, (H, W, C))``, for :func:`patch_embedding_bwd`.

    Raises
    ------
    {raises}
    """
    xp, p = check_patch_embedding(images, params, patch)
    check_finite("images", images, xp=xp)
    check_finite_all(xp, **{"params.W": params.W, "params.b": params.b})
    return patch_embedding_fwd_core(images, params, p, xp=xp)


def check_patch_embedding(images, params, patch):
    """Structural checks of :func:`patch_embedding_fwd` (namespaces, dtypes, shapes, the patch size): no data
    read; returns ``(xp, p)``. The model runs them where the layer is used."""
    xp = namespace(images, names=("images",))
    p = check_positive_int(patch, "patch")
    check_shape("images", images, "..., H, W, C")
    H, W, C = images.shape[-3:]
    if H % p or W % p:
        raise ValueError(f"patch: expected a divisor of the image height and width ({H}, {W}); got {p}")
    if not (isinstance(params, tuple) and hasattr(params, "W") and hasattr(params, "b")):
        raise TypeError(f"params: expected DenseParams(W, b); got {type(params).__name__}")
    namespace(images, params.W, params.b, names=("images", "params.W", "params.b"))
    if getattr(params.W, "ndim", 0) == 2 and params.W.shape[0] != p * p * C:
        raise ValueError(f"images: C = {C} channels with patch = {p} give patch rows of p*p*C = {p * p * C}; "
                         f"params.W has {params.W.shape[0]} rows (shape {tuple(params.W.shape)})")
    check_shape("params.b", params.b, "d_out", check_shape("params.W", params.W, "d_in, d_out"))
    return xp, p


# y = patchify(images) W + b
# dW, db: the dense backward;  dimages = unpatchify(dy W^T)
def patch_embedding_fwd_core(images, params, p, *, xp):
    """Unchecked core of :func:`patch_embedding_fwd` (see :func:`patch_embedding`)."""
    tokens = patchify_core(images, p, xp=xp)                                        # (..., P, p*p*C)
    y, dcache = dense_fwd_core(tokens, params, xp=xp)                               # (..., P, d)
    return y, (dcache, p, tuple(images.shape[-3:]))


@fill_doc(dy_cache=_DY_CACHE, raises=_DY_RAISES)
def patch_embedding_bwd(dy, cache) -> PatchEmbeddingGrads:
    """Gradients of :func:`patch_embedding` (see it for the equations).

    Parameters
    ----------
    {dy_cache}

    Returns
    -------
    PatchEmbeddingGrads
        ``images: (..., H, W, C)``, ``params.W: (p*p*C, d)``, ``params.b: (d,)``.

    Raises
    ------
    {raises}
    """
    x, W = cache[0]
    return patch_embedding_bwd_core(dy, cache, xp=check_dy(dy, x, tuple(x.shape[:-1]) + (W.shape[1],)))


def patch_embedding_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`patch_embedding_bwd` (see :func:`patch_embedding`)."""
    dcache, patch, image_shape = cache
    g = dense_bwd_core(dy, dcache, xp=xp)
    return PatchEmbeddingGrads(images=unpatchify_core(g.x, patch, image_shape, xp=xp), params=g.params)


@fill_doc(params=_PATCH_PARAMS, y=_PATCH_Y, raises=_PATCH_RAISES)
def patch_embedding(images, params: DenseParams, *, patch):
    """Patch (ViT) or pixel (``patch = 1``) embedding ``dense(patchify(images, patch), params)``.

    Parameters
    ----------
    {params}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    See Also
    --------
    patch_embedding_fwd, patch_embedding_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import patch_embedding
    >>> from refattn.random import init_dense
    >>> images = np.zeros((2, 28, 28, 1))                          # (B, H, W, C)
    >>> params = init_dense(np.random.default_rng(0), 4 * 4 * 1, 32)
    >>> patch_embedding(images, params, patch=4).shape             # (B, 7 * 7 patches, d)
    (2, 49, 32)
    """
    return patch_embedding_fwd(images, params, patch=patch)[0]


# ---- absolute positions ------------------------------------------------------------------------------------
def sinusoid_position_table(L, d, *, like):
    r"""The ``(L, d)`` sinusoid position table of Vaswani et al. (2017), Sec. 3.5.

    ``P[p, j] = sin(p w_j)`` for even j, ``cos(p w_j)`` for odd j, ``w_j = 10000^(-2 floor(j/2) / d)``.

    Parameters
    ----------
    L : int
        Number of positions, positive.
    d : int
        Width, positive.
    like : array
        Any real floating array: the table is made in its namespace, dtype and device.

    Returns
    -------
    P : (L, d) array
        Same namespace, dtype and device as `like`.

    Raises
    ------
    ValueError
        `L` or `d` not a positive integer.
    MemoryError
        If the table exceeds the allocation bound (:mod:`refattn.limits`).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import sinusoid_position_table
    >>> sinusoid_position_table(3, 4, like=np.zeros(1)).round(4)
    array([[ 0.    ,  1.    ,  0.    ,  1.    ],
           [ 0.8415,  0.5403,  0.01  ,  1.    ],
           [ 0.9093, -0.4161,  0.02  ,  0.9998]])
    """
    xp = namespace(like, names=("like",))
    L = check_positive_int(L, "L")
    d = check_positive_int(d, "d")
    limits.check_nbytes(3 * L * d * 8, "L * d (the position table)")
    dev = device_of(like)
    pos = xp.arange(L, dtype=like.dtype, device=dev)                                # (L,)
    j = xp.arange(d, device=dev)                                                    # (d,)
    pair = xp.astype(2 * (j // 2), like.dtype)                                      # (d,) 2 floor(j/2)
    freq = xp.exp(-(pair / d) * xp.log(xp.asarray(10000.0, dtype=like.dtype, device=dev)))   # (d,)
    angle = xp.expand_dims(pos, axis=1) * freq                                      # (L, d)
    return xp.where(j % 2 == 0, xp.sin(angle), xp.cos(angle))                       # (L, d)


@fill_doc(params=_POSITION_PARAMS, y=_POSITION_Y, raises=_POSITION_RAISES)
def position_embedding_fwd(x, table):
    r"""Forward of :func:`position_embedding` (see it for the equations), with the cache for the backward.

    Parameters
    ----------
    {params}

    Returns
    -------
    {y}
    cache : tuple
        ``(L_max, L, x.shape, x.dtype)``, for :func:`position_embedding_bwd`.

    Raises
    ------
    {raises}
    """
    xp = check_position_embedding(x, table)
    check_finite("x", x, xp=xp)
    check_finite("table", table, xp=xp)
    return position_embedding_fwd_core(x, table, xp=xp)


def check_position_embedding(x, table):
    """Structural checks of :func:`position_embedding_fwd` (namespaces, dtypes, shapes, ``L <= L_max``): no
    data read; returns the namespace. The model runs them where the layer is used."""
    xp = namespace(x, table, names=("x", "table"))
    sizes = check_shape("x", x, "..., L, d")
    check_shape("table", table, "L_max, d", sizes)
    L, L_max = x.shape[-2], table.shape[0]
    if L > L_max:
        raise ValueError(f"x: sequence length L = {L} exceeds the position table's L_max = {L_max} (table)")
    return xp


# y = x + table[:L]
# dx = dy,  dtable[:L] = sum of dy over the leading axes (zero rows past L)
def position_embedding_fwd_core(x, table, *, xp):
    """Unchecked core of :func:`position_embedding_fwd` (see :func:`position_embedding`)."""
    L, L_max = x.shape[-2], table.shape[0]
    return x + table[:L, :], (L_max, L, tuple(x.shape), x.dtype)                    # (..., L, d)


@fill_doc(dy_cache=_DY_CACHE, raises=_DY_RAISES)
def position_embedding_bwd(dy, cache) -> PositionEmbeddingGrads:
    """Gradients of :func:`position_embedding` (see it for the equations).

    Parameters
    ----------
    {dy_cache}

    Returns
    -------
    PositionEmbeddingGrads
        ``x: (..., L, d)`` and ``table: (L_max, d)`` (zero rows past L).

    Raises
    ------
    {raises}
    """
    L_max, L, x_shape, dtype = cache
    return position_embedding_bwd_core(dy, cache, xp=check_dy_spec(dy, x_shape, dtype))


def position_embedding_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`position_embedding_bwd` (see :func:`position_embedding`)."""
    L_max, L, x_shape, dtype = cache
    d = dy.shape[-1]
    dtab = xp.sum(xp.reshape(dy, (-1, L, d)), axis=0)                               # (L, d)
    if L < L_max:
        dtab = xp.concat([dtab, xp.zeros((L_max - L, d), dtype=dy.dtype, device=device_of(dy))], axis=0)
    return PositionEmbeddingGrads(x=dy, table=dtab)


@fill_doc(params=_POSITION_PARAMS, y=_POSITION_Y, raises=_POSITION_RAISES)
def position_embedding(x, table):
    """Absolute position embedding: ``y = x + table[:L]`` (its gradient: module docstring).

    Parameters
    ----------
    {params}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    See Also
    --------
    position_embedding_fwd, position_embedding_bwd : the differentiable pair.
    sinusoid_position_table : the fixed table of Vaswani et al.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import position_embedding, sinusoid_position_table
    >>> x = np.zeros((1, 2, 4))                                   # (B, L, d)
    >>> position_embedding(x, sinusoid_position_table(3, 4, like=x)).round(4)
    array([[[0.    , 1.    , 0.    , 1.    ],
            [0.8415, 0.5403, 0.01  , 1.    ]]])
    """
    return position_embedding_fwd(x, table)[0]
