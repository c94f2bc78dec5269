r"""Exact softmax attention: the quadratic oracle every estimator in refattn is tested against.

    y = softmax(mask_add + scale * q k^T) v,      scale = 1/sqrt(d) by default

(Vaswani et al.; Horn et al. Eq. (1) with the row normalisation written out; Choromanski et al. (FLT)
Definition 3.1, Eq. (1), with the RPE mask entering additively, ``mask_add = N``, so that the attention matrix
is exp(N) * exp(q k^T)).

Axes: ``...`` batch and heads, ``Lq`` query positions, ``Lk`` key positions (``L`` when they are equal),
``d`` query/key width, ``d_v`` value width.

The computation is blocked over queries so that at most ``block_elements`` logits exist at once
(``(..., block, Lk)``), which keeps L = 16384 within memory; the backward recomputes each block's
probabilities from the cached per-row log-sum-exp (no (L, L) cache).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, check_shape, device_of, namespace, sum_to_shape

__all__ = [
    "softmax_attention",
    "softmax_attention_fwd",
    "softmax_attention_bwd",
    "SoftmaxAttentionCache",
    "SoftmaxAttentionGrads",
]

Array = Any

#: Logit entries materialised at once (per query block, all batch axes together): 2**22 float64 = 32 MiB.
DEFAULT_BLOCK_ELEMENTS = 2**22


class SoftmaxAttentionCache(NamedTuple):
    """What :func:`softmax_attention_bwd` needs from :func:`softmax_attention_fwd` (no (Lq, Lk) array)."""

    q: Array             # (..., Lq, d)
    k: Array             # (..., Lk, d)
    v: Array             # (..., Lk, d_v)
    mask_add: Array      # broadcastable to (..., Lq, Lk), or None
    y: Array             # (..., Lq, d_v)
    lse: Array           # (..., Lq, 1)  log-sum-exp of each row of logits
    scale: float
    causal: bool
    block: int           # query rows per block
    grad_mask_add: bool  # whether the O(L^2) mask gradient is wanted


class SoftmaxAttentionGrads(NamedTuple):
    """Gradients of :func:`softmax_attention`: ``q``, ``k``, ``v``, ``mask_add`` (or ``None``)."""

    q: Array          # (..., Lq, d)
    k: Array          # (..., Lk, d)
    v: Array          # (..., Lk, d_v)
    mask_add: Array   # same shape as mask_add; None unless grad_mask_add=True


def _validate(q, k, v, mask_add, causal, scale):
    xp = namespace(q, k, v, mask_add, names=("q", "k", "v", "mask_add"))
    sizes = check_shape("q", q, "..., Lq, d")
    check_shape("k", k, "..., Lk, d", sizes)
    check_shape("v", v, "..., Lk, d_v", sizes)
    Lq, Lk = q.shape[-2], k.shape[-2]
    if causal and Lq != Lk:
        raise ValueError(f"causal=True needs as many queries as keys; got Lq = {Lq} (q) and Lk = {Lk} (k)")
    if mask_add is not None:
        full = tuple(q.shape[:-1]) + (Lk,)
        ok = mask_add.ndim <= len(full) and all(
            m in (1, f) for m, f in zip(tuple(mask_add.shape)[::-1], full[::-1], strict=False)
        )
        if not ok:
            raise ValueError(
                f"mask_add: expected a shape broadcastable to (..., Lq, Lk) = {full}; "
                f"got {tuple(mask_add.shape)}"
            )
    for name, a in (("q", q), ("k", k), ("v", v), ("mask_add", mask_add)):
        if a is not None:
            check_finite(name, a, xp=xp)
    if Lk == 0 and Lq > 0:
        raise ValueError(f"k: expected at least one key for {Lq} queries (a softmax over no keys is "
                         f"undefined); got shape {tuple(k.shape)}")
    if scale is None:
        if q.shape[-1] == 0:
            raise ValueError(f"q: expected d >= 1 (the default scale is d^(-1/2)); got shape "
                             f"{tuple(q.shape)}")
        scale = q.shape[-1] ** -0.5
    if not isinstance(scale, (int, float)) or not (scale == scale) or scale in (float("inf"), float("-inf")):
        raise ValueError(f"scale: expected a finite real number; got {scale!r}")
    return xp, float(scale)


def _block_rows(batch_numel: int, Lk: int, block_elements: int) -> int:
    return max(1, block_elements // max(1, batch_numel * Lk))


def _block_logits(q_b, k, mask_b, scale, causal, row0, *, xp):
    """Logits of one query block: mask + scale q_b k^T, with -inf above the diagonal when causal."""
    s = scale * (q_b @ xp.matrix_transpose(k))                                    # (..., b, Lk)
    if mask_b is not None:
        s = s + mask_b
    if causal:
        dev = device_of(q_b)
        rows = xp.arange(row0, row0 + q_b.shape[-2], device=dev)
        cols = xp.arange(k.shape[-2], device=dev)
        future = xp.expand_dims(cols, axis=0) > xp.expand_dims(rows, axis=1)       # (b, Lk)
        s = xp.where(future, xp.asarray(-float("inf"), dtype=s.dtype, device=dev), s)
    return s


def _mask_rows(mask_add, r0, r1):
    """Rows r0:r1 (query axis) of a mask broadcastable to (..., Lq, Lk)."""
    if mask_add is None:
        return None
    if mask_add.ndim >= 2 and mask_add.shape[-2] != 1:
        return mask_add[..., r0:r1, :]
    return mask_add


_ARGS = """
q : (..., Lq, d) array
    Queries. Real floating (float64 reference, float32 supported); finite.
k : (..., Lk, d) array
    Keys, same batch axes, dtype and namespace as `q`.
v : (..., Lk, d_v) array
    Values, same batch axes, dtype and namespace as `q`.
mask_add : array broadcastable to (..., Lq, Lk), optional
    Additive logit mask: the RPE mask N of FLT Definition 3.1 (or any precomputed logit term, such as Horn et
    al.'s relative-position logits, Eq. (4) term (b)). Same dtype and namespace as `q`; must be finite (use
    ``causal=True`` rather than ``-inf`` entries).
causal : bool, default False
    Query i attends to keys j <= i only (needs Lq == Lk).
scale : float, optional
    Logit scale; default ``1/sqrt(d)``.
"""

_BLOCK = """
block_elements : int, default 2**22
    At most this many logits are materialised at once (query blocking).
"""

_RAISES = """
ValueError
    Shapes that do not match (the message names the argument, the shape received and the one expected),
    ``causal=True`` with ``Lq != Lk``, no keys for at least one query (``Lk = 0 < Lq``), ``d = 0`` without
    a `scale`, non-finite input, or a non-finite `scale`. No queries (``Lq = 0``) or an empty batch axis give
    the empty result.
TypeError
    Mixed namespaces or dtypes, or a non-floating input.
"""


@fill_doc(args=_ARGS, block=_BLOCK, raises=_RAISES)
def softmax_attention(q, k, v, *, mask_add=None, causal=False, scale=None,
                      block_elements=DEFAULT_BLOCK_ELEMENTS):
    r"""Exact attention ``softmax(mask_add + scale q k^T) v``: the oracle every estimator is tested against.

    Implements Horn et al. Eq. (1), ``Att(Q, K, V) = softmax(Q K^T / sqrt(d)) V``, and with `mask_add` the
    RPE-enhanced attention of Choromanski et al. (FLT) Definition 3.1, Eq. (1),
    ``D^{-1} exp(N + Q K^T / sqrt(d)) V`` with ``D = diag(exp(N + Q K^T / sqrt(d)) 1_L)``, ``N = mask_add``.
    Rows are stabilised by their maximum logit; at most `block_elements` logits exist at once, and the forward
    keeps the per-row log-sum-exp ``lse`` instead of the (Lq, Lk) probabilities.

    Backward (:func:`softmax_attention_bwd`): with P the attention matrix (recomputed block by block from
    ``lse``) and ``dP = dy v^T``, the logit gradient is ``dS = P * (dP - rowsum(dy * y))``; then
    ``dq = scale dS k``, ``dk = scale dS^T q``, ``dv = P^T dy``, ``dmask_add = dS`` (summed over the axes
    `mask_add` was broadcast along).

    Parameters
    ----------
    {args}
    {block}

    Returns
    -------
    y : (..., Lq, d_v) array
        Same namespace, device and dtype as `q`.

    Raises
    ------
    {raises}

    See Also
    --------
    softmax_attention_fwd, softmax_attention_bwd : the differentiable pair.
    refattn.attention.kernel_attention : the same with any kernel (Chowdhury et al. Eq. (1)).
    refattn.attention.favor_attention : the FAVOR(+) estimate of the same output in O(L).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.attention import softmax_attention
    >>> q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])   # (L, d) = (3, 2)
    >>> v = np.array([[1.0], [2.0], [3.0]])                   # (L, d_v) = (3, 1)
    >>> softmax_attention(q, q, v).round(4)
    array([[2.    ],
           [2.2033],
           [2.2552]])
    >>> softmax_attention(q, q, v, causal=True).round(4)      # row i averages v_0 .. v_i
    array([[1.    ],
           [1.6698],
           [2.2552]])
    """
    return softmax_attention_fwd(q, k, v, mask_add=mask_add, causal=causal, scale=scale,
                                 block_elements=block_elements)[0]


@fill_doc(args=_ARGS, block=_BLOCK, raises=_RAISES)
def softmax_attention_fwd(q, k, v, *, mask_add=None, causal=False, scale=None, grad_mask_add=False,
                          block_elements=DEFAULT_BLOCK_ELEMENTS):
    r"""Forward of :func:`softmax_attention` (see it for the equations), with the cache for the backward.

    Parameters
    ----------
    {args}
    grad_mask_add : bool, default False
        Whether the backward returns the gradient for `mask_add`. It costs O(Lq Lk) memory, so it is off by
        default and the ``mask_add`` field of the gradients is ``None``.
    {block}

    Returns
    -------
    y : (..., Lq, d_v) array
        The attention output; same namespace, device and dtype as `q`.
    cache : SoftmaxAttentionCache
        The inputs, `y`, the per-row log-sum-exp ``lse: (..., Lq, 1)`` and the options, for
        :func:`softmax_attention_bwd` (no (Lq, Lk) array is kept).

    Raises
    ------
    {raises}
    """
    xp, scale = _validate(q, k, v, mask_add, causal, scale)
    return softmax_attention_fwd_core(q, k, v, mask_add, causal, scale, grad_mask_add, block_elements, xp=xp)


# S = mask_add + scale q k^T (-inf above the diagonal when causal),  y = softmax(S) v    (Horn et al. Eq. (1))
# per query block: P = exp(S - max S) / rowsum,  lse = max S + log rowsum (kept for the backward)
def softmax_attention_fwd_core(q, k, v, mask_add, causal, scale, grad_mask_add, block_elements, *, xp):
    """Unchecked core of :func:`softmax_attention_fwd` (see :func:`softmax_attention`; `scale` a float)."""
    Lq, Lk = q.shape[-2], k.shape[-2]
    batch_numel = 1
    for s in q.shape[:-2]:
        batch_numel *= s
    block = _block_rows(batch_numel, Lk, block_elements)
    ys, lses = [], []
    for r0 in range(0, Lq, block):
        r1 = min(Lq, r0 + block)
        s = _block_logits(q[..., r0:r1, :], k, _mask_rows(mask_add, r0, r1), scale, causal, r0, xp=xp)
        row_max = xp.max(s, axis=-1, keepdims=True)                                 # (..., b, 1) stabiliser
        p = xp.exp(s - row_max)                                                     # (..., b, Lk)
        denom = xp.sum(p, axis=-1, keepdims=True)                                   # (..., b, 1)
        ys.append((p @ v) / denom)                                                  # (..., b, d_v)
        lses.append(row_max + xp.log(denom))                                        # (..., b, 1)
    if not ys:                                                                      # Lq = 0: empty
        ys = [xp.zeros((*q.shape[:-1], v.shape[-1]), dtype=q.dtype, device=device_of(q))]
        lses = [xp.zeros((*q.shape[:-1], 1), dtype=q.dtype, device=device_of(q))]
    y = ys[0] if len(ys) == 1 else xp.concat(ys, axis=-2)                           # (..., Lq, d_v)
    lse = lses[0] if len(lses) == 1 else xp.concat(lses, axis=-2)                   # (..., Lq, 1)
    cache = SoftmaxAttentionCache(q, k, v, mask_add, y, lse, scale, bool(causal), block, bool(grad_mask_add))
    return y, cache


def softmax_attention_bwd(dy, cache: SoftmaxAttentionCache) -> SoftmaxAttentionGrads:
    r"""Gradients of :func:`softmax_attention` (see it for the equations) for `q`, `k`, `v` and `mask_add`.

    Parameters
    ----------
    dy : (..., Lq, d_v) array
        Cotangent of the output `y`: its shape, dtype and namespace; finite.
    cache : SoftmaxAttentionCache
        From :func:`softmax_attention_fwd`.

    Returns
    -------
    SoftmaxAttentionGrads
        ``q: (..., Lq, d)``, ``k: (..., Lk, d)``, ``v: (..., Lk, d_v)``, in the dtype and namespace of the
        inputs, and ``mask_add``: the shape of the `mask_add` given, or ``None`` unless the forward was called
        with ``grad_mask_add=True`` and a mask.

    Raises
    ------
    ValueError
        If `dy` is not of the output's shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    xp = namespace(dy, cache.q, names=("dy", "cache.q"))
    check_finite("dy", dy, xp=xp)
    check_shape("dy", dy, "..., Lq, d_v", check_shape("y", cache.y, "..., Lq, d_v"))
    return softmax_attention_bwd_core(dy, cache, xp=xp)


# P = exp(S - lse) recomputed per block;  dS = P * (dy v^T - rowsum(dy * y))
# dq = scale dS k,  dk = scale dS^T q,  dv = P^T dy,  dmask_add = dS summed to the mask's shape
def softmax_attention_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`softmax_attention_bwd` (see :func:`softmax_attention`)."""
    c = cache
    Lq = c.q.shape[-2]
    dq_blocks, dmask_blocks = [], []
    dk = xp.zeros_like(c.k)
    dv = xp.zeros_like(c.v)
    delta = xp.sum(dy * c.y, axis=-1, keepdims=True)  # (..., Lq, 1) rowsum(dP * P)
    for r0 in range(0, Lq, c.block):
        r1 = min(Lq, r0 + c.block)
        q_b = c.q[..., r0:r1, :]
        s = _block_logits(q_b, c.k, _mask_rows(c.mask_add, r0, r1), c.scale, c.causal, r0, xp=xp)
        p = xp.exp(s - c.lse[..., r0:r1, :])                                        # (..., b, Lk) recomputed
        dy_b = dy[..., r0:r1, :]
        dv = dv + xp.matrix_transpose(p) @ dy_b                                     # (..., Lk, d_v)
        dp = dy_b @ xp.matrix_transpose(c.v)                                        # (..., b, Lk)
        ds = p * (dp - delta[..., r0:r1, :])                                        # (..., b, Lk)
        dq_blocks.append(c.scale * (ds @ c.k))                                      # (..., b, d)
        dk = dk + c.scale * (xp.matrix_transpose(ds) @ q_b)                         # (..., Lk, d)
        if c.grad_mask_add:
            dmask_blocks.append(ds)
    if not dq_blocks:                                                               # Lq = 0: empty
        dq_blocks = [xp.zeros_like(c.q)]
        dmask_blocks = [xp.zeros((*c.q.shape[:-1], c.k.shape[-2]), dtype=c.q.dtype, device=device_of(c.q))]
    dq = dq_blocks[0] if len(dq_blocks) == 1 else xp.concat(dq_blocks, axis=-2)
    dmask = None
    if c.grad_mask_add and c.mask_add is not None:
        full = dmask_blocks[0] if len(dmask_blocks) == 1 else xp.concat(dmask_blocks, axis=-2)
        dmask = sum_to_shape(full, tuple(c.mask_add.shape), xp=xp)
    return SoftmaxAttentionGrads(q=dq, k=dk, v=dv, mask_add=dmask)

