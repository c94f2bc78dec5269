r"""Input embeddings as forward/backward pairs: tokens, pixels/patches, absolute positions.

* **Token embedding** ``y = table[ids]``: ``ids: (..., L)`` integer token indices (indices by nature),
  ``table: (V, d)``. Gathered with ``take``; the backward is the scatter-add ``dtable = onehot(ids)^T dy``,
  written as one GEMM with an ``(N, V)`` one-hot (the standard has no scatter-add; fine for the vocabularies
  of the reference tasks, O(N V d)).
* **Patch embedding** (ViT, Dosovitskiy et al. 2021): ``images: (..., H, W, C)`` cut into non-overlapping
  ``p x p`` patches in row-major order, each flattened to ``p*p*C`` values (order (row in patch, column in
  patch, channel)), then a dense layer: ``(..., (H/p)(W/p), d)``. **Pixel embedding** is ``patch = 1`` (each
  pixel a token; integer intensities can use the token embedding instead).
* **Absolute position embeddings** ``y = x + P[:L]`` with ``P: (L_max, d)`` either the sinusoid table of
  Vaswani et al. (2017, Sec. 3.5: ``P[p, 2i] = sin(p / 10000^(2i/d))``,
  ``P[p, 2i+1] = cos(p / 10000^(2i/d))``),
  which a model keeps fixed, or a learned table (gradient = dy summed over the batch, zero rows past L).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import limits
from .._xp import check_finite, check_positive_int, check_shape, device_of, namespace
from ._check import check_dy_spec
from .dense import DenseParams, _dense_fwd, _validate, dense_bwd
from .losses import _one_hot

__all__ = [
    "token_embedding", "token_embedding_fwd", "token_embedding_bwd", "TokenEmbeddingGrads",
    "patchify", "unpatchify",
    "patch_embedding", "patch_embedding_fwd", "patch_embedding_bwd", "PatchEmbeddingGrads",
    "sinusoid_position_table",
    "position_embedding", "position_embedding_fwd", "position_embedding_bwd", "PositionEmbeddingGrads",
]

Array = Any


class TokenEmbeddingGrads(NamedTuple):
    table: Array  # (V, d)


class PatchEmbeddingGrads(NamedTuple):
    images: Array         # (..., H, W, C)
    params: DenseParams   # W: (p*p*C, d), b: (d,)


class PositionEmbeddingGrads(NamedTuple):
    x: Array      # (..., L, d)
    table: Array  # (L_max, d)


# ---- tokens ------------------------------------------------------------------------------------------------
def token_embedding_fwd(ids, table):
    r"""``y = table[ids]``: ``ids: (..., L)`` integer in ``[0, V)``, ``table: (V, d)`` -> ``(..., L, d)``."""
    xp = namespace(ids, table, names=("ids", "table"), allow_int=("ids",))
    if not xp.isdtype(ids.dtype, "integral"):
        raise TypeError(f"ids: expected an integer array of token indices; got dtype {ids.dtype}")
    check_shape("table", table, "V, d")
    check_finite("table", table, xp=xp)
    V = table.shape[0]
    if ids.size and (int(xp.min(ids)) < 0 or int(xp.max(ids)) >= V):
        raise ValueError(f"ids: expected token indices in [0, {V}) (vocabulary of table); got values in "
                         f"[{int(xp.min(ids))}, {int(xp.max(ids))}]")
    flat = xp.reshape(ids, (-1,))                                                   # (N,)
    y = xp.reshape(xp.take(table, flat, axis=0), tuple(ids.shape) + (table.shape[1],))   # (..., L, d)
    return y, (flat, table.shape, table.dtype, tuple(ids.shape) + (table.shape[1],))


def token_embedding_bwd(dy, cache) -> TokenEmbeddingGrads:
    """``dtable = onehot(ids)^T dy`` (scatter-add of the rows of dy into the rows of the table)."""
    flat, (V, d), dtype, out_shape = cache
    xp = check_dy_spec(dy, out_shape, dtype)
    limits.check_nbytes(flat.shape[0] * V * 8, "dy (rows x the table's vocabulary V, one-hot scatter)")
    oh = _one_hot(flat, V, dtype=dtype, xp=xp)                                       # (N, V)
    return TokenEmbeddingGrads(table=xp.matrix_transpose(oh) @ xp.reshape(dy, (-1, d)))   # (V, d)


def token_embedding(ids, table):
    """``table[ids]``, ``(..., L)`` -> ``(..., L, d)``."""
    return token_embedding_fwd(ids, table)[0]


# ---- patches -----------------------------------------------------------------------------------------------
def patchify(images, patch):
    r"""``(..., H, W, C)`` -> ``(..., (H/p)(W/p), p*p*C)``: non-overlapping patches, row-major (a pure reshape
    and transpose; its adjoint is :func:`unpatchify`). `images` finite float32/float64; empty axes give empty
    patches."""
    xp = namespace(images, names=("images",))
    p = check_positive_int(patch, "patch")
    check_shape("images", images, "..., H, W, C")
    *batch, H, W, C = images.shape
    if H % p or W % p:
        raise ValueError(f"patch: expected a divisor of the image height and width ({H}, {W}); got {p}")
    check_finite("images", images, xp=xp)
    return _patchify(images, p, xp=xp)


def _patchify(images, p, *, xp):
    """Unchecked core of :func:`patchify`."""
    *batch, H, W, C = images.shape
    nb = len(batch)
    t = xp.reshape(images, tuple(batch) + (H // p, p, W // p, p, C))               # (..., H/p, p, W/p, p, C)
    perm = tuple(range(nb)) + (nb, nb + 2, nb + 1, nb + 3, nb + 4)
    t = xp.permute_dims(t, perm)                                                    # (..., H/p, W/p, p, p, C)
    return xp.reshape(t, tuple(batch) + ((H // p) * (W // p), p * p * C))          # (..., P, p*p*C)


def unpatchify(patches, patch, image_shape):
    r"""Inverse (and adjoint) of :func:`patchify`: ``(..., P, p*p*C)`` -> ``(..., H, W, C)`` with
    ``image_shape = (H, W, C)``."""
    xp = namespace(patches, names=("patches",))
    p = check_positive_int(patch, "patch")
    if not (isinstance(image_shape, (tuple, list)) and len(image_shape) == 3):
        raise TypeError(f"image_shape: expected a tuple (H, W, C); got {image_shape!r}")
    H, W, C = (check_positive_int(n, f"image_shape[{i}]") for i, n in enumerate(image_shape))
    if H % p or W % p:
        raise ValueError(f"patch: expected a divisor of image_shape's height and width ({H}, {W}); got {p}")
    check_shape("patches", patches, f"..., {(H // p) * (W // p)}, {p * p * C}")
    check_finite("patches", patches, xp=xp)
    return _unpatchify(patches, p, (H, W, C), xp=xp)


def _unpatchify(patches, p, image_shape, *, xp):
    """Unchecked core of :func:`unpatchify`."""
    H, W, C = image_shape
    batch = tuple(patches.shape[:-2])
    nb = len(batch)
    t = xp.reshape(patches, batch + (H // p, W // p, p, p, C))                      # (..., H/p, W/p, p, p, C)
    perm = tuple(range(nb)) + (nb, nb + 2, nb + 1, nb + 3, nb + 4)
    t = xp.permute_dims(t, perm)                                                    # (..., H/p, p, W/p, p, C)
    return xp.reshape(t, batch + (H, W, C))                                         # (..., H, W, C)


def patch_embedding_fwd(images, params: DenseParams, *, patch):
    r"""Patch (``patch > 1``) or pixel (``patch = 1``) embedding: ``dense(patchify(images, patch), params)``.

    Parameters
    ----------
    images : (..., H, W, C) array
    params : DenseParams
        ``W: (patch*patch*C, d)``, ``b: (d,)``.
    patch : int
        Patch side; must divide H and W.

    Returns
    -------
    y : (..., (H/p)(W/p), d) array
    cache
    """
    xp = namespace(images, names=("images",))
    p = check_positive_int(patch, "patch")
    check_shape("images", images, "..., H, W, C")
    H, W = images.shape[-3], images.shape[-2]
    if H % p or W % p:
        raise ValueError(f"patch: expected a divisor of the image height and width ({H}, {W}); got {p}")
    check_finite("images", images, xp=xp)
    C = images.shape[-1]
    if isinstance(params, tuple) and hasattr(params, "W") and getattr(params.W, "ndim", 0) == 2 \
            and params.W.shape[0] != p * p * C:
        raise ValueError(f"images: C = {C} channels with patch = {p} give patch rows of p*p*C = {p * p * C}; "
                         f"params.W has {params.W.shape[0]} rows (shape {tuple(params.W.shape)})")
    tokens = _patchify(images, p, xp=xp)                                            # (..., P, p*p*C)
    _validate(tokens, params)  # params.W: (p*p*C, d), b: (d,), finite (tokens: a reshape of checked images)
    y, dcache = _dense_fwd(tokens, params)                                          # (..., P, d)
    return y, (dcache, p, tuple(images.shape[-3:]))


def patch_embedding_bwd(dy, cache) -> PatchEmbeddingGrads:
    """Dense backward, then :func:`unpatchify` of the token gradient."""
    dcache, patch, image_shape = cache
    g = dense_bwd(dy, dcache)  # checks dy: (..., P, d), finite
    xp = namespace(g.x)
    return PatchEmbeddingGrads(images=_unpatchify(g.x, patch, image_shape, xp=xp), params=g.params)


def patch_embedding(images, params: DenseParams, *, patch):
    """Patch/pixel embedding (see :func:`patch_embedding_fwd`)."""
    return patch_embedding_fwd(images, params, patch=patch)[0]


# ---- absolute positions ------------------------------------------------------------------------------------
def sinusoid_position_table(L, d, *, like):
    r"""The ``(L, d)`` sinusoid table of Vaswani et al. Sec. 3.5 in `like`'s namespace, dtype and device:
    ``P[p, j] = sin(p w_j)`` for even j, ``cos(p w_j)`` for odd j, ``w_j = 10000^(-2 floor(j/2) / d)``."""
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


def position_embedding_fwd(x, table):
    r"""``y = x + table[:L]``: ``x: (..., L, d)``, ``table: (L_max, d)`` with ``L <= L_max``."""
    xp = namespace(x, table, names=("x", "table"))
    sizes = check_shape("x", x, "..., L, d")
    check_shape("table", table, "L_max, d", sizes)
    L, L_max = x.shape[-2], table.shape[0]
    if L > L_max:
        raise ValueError(f"x: sequence length L = {L} exceeds the position table's L_max = {L_max} (table)")
    check_finite("x", x, xp=xp)
    check_finite("table", table, xp=xp)
    return x + table[:L, :], (L_max, L, tuple(x.shape), x.dtype)                    # (..., L, d)


def position_embedding_bwd(dy, cache) -> PositionEmbeddingGrads:
    """``dx = dy``; ``dtable[:L] = sum over leading axes of dy``, zero rows past L."""
    L_max, L, x_shape, dtype = cache
    xp = check_dy_spec(dy, x_shape, dtype)
    d = dy.shape[-1]
    dtab = xp.sum(xp.reshape(dy, (-1, L, d)), axis=0)                               # (L, d)
    if L < L_max:
        dtab = xp.concat([dtab, xp.zeros((L_max - L, d), dtype=dy.dtype, device=device_of(dy))], axis=0)
    return PositionEmbeddingGrads(x=dy, table=dtab)


def position_embedding(x, table):
    """``x + table[:L]``."""
    return position_embedding_fwd(x, table)[0]
