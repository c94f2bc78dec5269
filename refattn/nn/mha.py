r"""Multi-head attention with the attention kind chosen by configuration.

    MHA(x) = concat_h(Attn_kind(x W_q^h, x W_k^h, x W_v^h)) W_o            (Vaswani et al. Sec. 3.2.2)

Axes: ``...`` batch, ``L`` positions, ``D`` model width, ``H`` heads, ``d = D / H`` head width.

**Attention kinds** are declared one per module in :mod:`refattn.nn.kinds` (table
:data:`refattn.nn.kinds.ATTENTION_KINDS`): each holds its forward and backward on the per-head
``q, k, v: (..., H, L, d)``, its options, the arrays it needs drawn (learnable ``attn_params`` and
non-learnable ``features``, drawn at the NumPy edge by :mod:`refattn.nn.init`) and whether its omega is
learned. :func:`mha_fwd` dispatches on ``attention["kind"]``; adding a kind = one module and one entry in
``kinds/registry.py``.

==============  =========================================================================================
kind            method (options; module ``refattn.nn.kinds.<kind>``)
==============  =========================================================================================
``softmax``     exact ``softmax(q k^T / sqrt(d)) v``
``elu``         linear attention with ``elu(x) + 1`` features (Katharopoulos et al.)
``relu``        linear attention with ``relu(x) + 1e-3`` features
``favor``       FAVOR / FAVOR+: ``features`` in {"positive", "hyperbolic", "trig"}, ``m``, ``draw`` in
                {"iid", "orthogonal"}, ``on_nonpositive`` (required for trig); ``omega: (m, d)``, shared
``gmm``         KL-Transformer GMM-PRF / GMM-RKS: ``features`` in {"prf", "rks"}, ``m``, ``components``,
                ``covariance`` in {"diagonal", "full"}, ``init`` in {"scaled-identity", "authors"},
                ``s_init``; learnable mixture
``fastfood``    KL-Transformer FastFood-PRF / -RKS: ``features``, ``m``, ``s_law`` in {"chi", "identity"};
                learnable diagonals S, G, B
``generative``  KL-Transformer Generative-PRF / -RKS: ``features``, ``m``; learnable generator MLP
``s1``          Horn et al. Strategy 1 (rotations): ``features`` (None: exact; or a FAVOR map), ``m``,
                ``draw``, ``lengthscales``; learnable frequencies
``s2``          Horn et al. Strategy 2 (bidirectional only): ``content_heads`` (default ``H // 2``) content
                heads beside positional heads with learned clipped relative keys ``w: (H - C, R, d)``;
                ``clip``, ``grid``, ``features`` (None or "positive")
``flt``         FourierLearner-Transformers (Algorithm 1): ``spectrum``, ``components``, ``r``, ``m``,
                ``draw``, ``grid``; learnable spectrum and proposal
``toeplitz``    exact RPE via a learned Toeplitz mask and FFT: ``feature_map`` in {"elu", "positive"},
                ``m``, ``draw``, ``max_len``; learnable log-coefficients
==============  =========================================================================================

Every kind supports ``causal`` except ``s2``; every kind but ``toeplitz`` takes a class token
(``class_token=True``: token 0 without a position, :mod:`refattn.nn.kinds.base`). The attention
configuration is a plain dict ``{"kind": ..., <options>, "redraw_every": None | k}`` (JSON-serialisable,
stored in checkpoints); :func:`refattn.nn.config.check_attention_config` fills the defaults and rejects
unknown kinds and options.

Parameters ``MHA params = {"q": DenseParams, "k": ..., "v": ..., "o": ..., "attn": {...}}`` (dense weights
``(D, D)``); ``mha_bwd`` returns ``MHAGrads(x, params)`` with ``params`` mirroring that dict.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_positive_int, check_shape, device_of, namespace
from ..layers.checks import check_dy
from ..layers.dense import DenseParams, check_dense, dense_bwd_core, dense_fwd_core
from ..layers.dropout import check_dropout, dropout_bwd_core, dropout_fwd_core
from ._boundary import check_trees, naming
from .config import check_attention_config, check_class_token
from .kinds import ATTENTION_KINDS

__all__ = ["MHACache", "MHAGrads", "mha", "mha_fwd", "mha_bwd", "split_heads", "merge_heads"]

Array = Any


# ---- heads -------------------------------------------------------------------------------------------------
def split_heads(x, n_heads, *, xp):
    r"""Split the last axis into heads: ``(..., L, D)`` -> ``(..., H, L, D/H)``.

    Parameters
    ----------
    x : (..., L, D) array
        Input, D divisible by `n_heads`.
    n_heads : int
        H.
    xp : namespace
        The array namespace of `x`.

    Returns
    -------
    (..., H, L, D/H) array
        Head h holds columns ``h d .. (h + 1) d - 1``.

    Raises
    ------
    ValueError
        `x` not ``(..., L, D)``, or `n_heads` not a positive integer dividing D.
    """
    check_shape("x", x, "..., L, D")
    n_heads = check_positive_int(n_heads, "n_heads")
    *batch, L, D = x.shape
    if D % n_heads:
        raise ValueError(f"n_heads: the number of heads {n_heads} must divide x's last axis D = {D}; x has "
                         f"shape {tuple(x.shape)}")
    nb = len(batch)
    t = xp.reshape(x, tuple(batch) + (L, n_heads, D // n_heads))                    # (..., L, H, d)
    return xp.permute_dims(t, tuple(range(nb)) + (nb + 1, nb, nb + 2))              # (..., H, L, d)


def merge_heads(x, *, xp):
    r"""Merge the heads back: ``(..., H, L, d)`` -> ``(..., L, H d)`` (inverse of :func:`split_heads`).

    Parameters
    ----------
    x : (..., H, L, d) array
        Per-head values.
    xp : namespace
        The array namespace of `x`.

    Returns
    -------
    (..., L, H d) array

    Raises
    ------
    ValueError
        `x` not ``(..., H, L, d)``.
    """
    check_shape("x", x, "..., H, L, d")
    *batch, H, L, d = x.shape
    nb = len(batch)
    t = xp.permute_dims(x, tuple(range(nb)) + (nb + 1, nb, nb + 2))                 # (..., L, H, d)
    return xp.reshape(t, tuple(batch) + (L, H * d))                                 # (..., L, D)


class MHACache(NamedTuple):
    """Cache of :func:`mha_fwd` for :func:`mha_bwd`: the layers' caches, the kind's name and H."""

    qkv_cache: Any   # DenseCache of the fused projection x [W_q, W_k, W_v]
    attn_cache: Any
    o_cache: Any
    kind: str
    n_heads: int
    drop_cache: Any = None   # DropoutCache of the per-head output, when a mask was given


class MHAGrads(NamedTuple):
    """Gradients from :func:`mha_bwd`: ``x`` and the ``params`` tree."""

    x: Array      # (..., L, D)
    params: dict  # {"q", "k", "v", "o": DenseParams, "attn": dict}


def _check_params(params, D):
    if not isinstance(params, dict) or not {"q", "k", "v", "o"} <= set(params):
        got = sorted(params) if isinstance(params, dict) else type(params).__name__
        raise ValueError(f"params: expected a dict with entries 'q', 'k', 'v', 'o' (and 'attn'); got {got}")


_PARAMS = """
x : (..., L, D) array
    Input, real floating (float64 reference, float32 supported).
params : dict
    ``{"q", "k", "v", "o": DenseParams(W: (D, D), b: (D,)), "attn": dict}`` (:func:`refattn.nn.init.init_mha`,
    moved with :func:`refattn.random.tree_as_xp` if needed); ``attn`` holds the kind's learnable parameters
    (``{}`` or absent for kinds that have none).
features : dict, optional
    The kind's drawn arrays (``{"omega": (m, d)}`` for FAVOR;
    :func:`refattn.nn.init.draw_attention_features`); None for kinds that draw nothing.
n_heads : int
    H; must divide D.
attention : dict or str
    Attention configuration (:func:`refattn.nn.config.check_attention_config`).
causal : bool
    Position i attends to positions j <= i only.
dropout_mask : (..., H, L, d) array, optional
    Attention dropout: an inverted-dropout mask (:func:`refattn.random.draw_dropout_mask`) on the per-head
    output before the output projection (kernelized attention has no probability matrix to drop entries of, so
    every kind drops the same thing). None: no dropout.
positions : (L, D_pos) array, optional
    Per-token coordinates for the positional kinds (``s1``, ``flt``; D_pos is the kind's ``pos_dim``), real
    floating; None: the kind's default (``0..L-1``, or its ``grid``). Other kinds ignore them. With
    `class_token` they describe tokens 1..L-1 (``(L - 1, D_pos)``).
class_token : bool
    Token 0 is a class token without a position (the model's ``readout="class-token"``): the positional
    kinds place it as :mod:`refattn.nn.kinds.base` describes (S1 and FLT: zero positional features; S2: Horn
    et al.'s placement), the others treat it as any token. Needs ``causal=False``, L >= 2 and a kind that
    takes it (not ``toeplitz``).
"""

_RAISES = """
ValueError
    `n_heads` not dividing D, a bad attention configuration, parameters of the wrong shape, or a class token
    with causal attention, L < 2 or a kind that does not take one.
"""


@fill_doc(params=_PARAMS, raises=_RAISES)
def mha_fwd(x, params: dict, features: dict | None = None, *, n_heads, attention, causal=False,
            dropout_mask=None, positions=None, train=True, class_token=False):
    r"""Forward of :func:`mha` and the cache for :func:`mha_bwd` (equation and shapes: :func:`mha`).

    Parameters
    ----------
    {params}
    train : bool
        Training (default) or evaluation forward, for kinds whose computation differs (the generative kind's
        batch norm with ``bn="running"``); the others ignore it.

    Returns
    -------
    y : (..., L, D) array
    cache : MHACache

    Raises
    ------
    {raises}
    """
    xp, att = check_mha(x, params, n_heads, attention, positions, dropout_mask, class_token=class_token,
                        causal=causal)
    check_trees(("params", params), ("features", features), ("x", x), ("dropout_mask", dropout_mask),
                ("positions", positions), dtype=x.dtype)                         # once, named leaf by leaf
    return mha_fwd_core(x, params, features, n_heads=n_heads, att=att, causal=causal,
                        dropout_mask=dropout_mask, positions=positions, train=train, xp=xp,
                        class_token=class_token)


def check_mha(x, params, n_heads, attention, positions, dropout_mask=None, *, class_token=False,
              causal=False):
    """Structural checks of :func:`mha_fwd` (namespaces, dtypes, shapes of the four projections and the
    dropout mask, heads, the attention configuration, a class token's preconditions): metadata only, no data
    read. Returns ``(xp, normalised attention configuration)``."""
    xp = namespace(x, names=("x",))
    sizes = check_shape("x", x, "..., L, D")
    D = x.shape[-1]
    n_heads = check_positive_int(n_heads, "n_heads")
    if D % n_heads:
        raise ValueError(f"n_heads: the number of heads {n_heads} must divide the model width D = {D} (x's "
                         f"last axis; x has shape {tuple(x.shape)})")
    att = check_attention_config(attention, d_head=D // n_heads, n_heads=n_heads)
    _check_params(params, D)
    check_shape("params['q'].W", params["q"].W, "D, D", sizes)
    for key in ("q", "k", "v", "o"):                # the merged heads, o's input, have x's shape
        with naming(f"params['{key}']"):
            check_dense(x, params[key])
    if dropout_mask is not None:                    # on the per-head output (..., H, L, d)
        check_dropout(x, dropout_mask, name="dropout_mask",
                      shape=tuple(x.shape[:-2]) + (n_heads, x.shape[-2], D // n_heads))
    if positions is not None:
        namespace(x, positions, names=("x", "positions"))                          # same namespace and dtype
    if class_token:
        check_class_token(att["kind"], causal, x.shape[-2])
    return xp, att


def mha_fwd_core(x, params, features, *, n_heads, att, causal, dropout_mask, positions, train, xp,
                 class_token=False):
    """Unchecked core of :func:`mha_fwd` (see its docstring); the arguments passed :func:`check_mha`."""
    # [q, k, v] = x [W_q, W_k, W_v] + [b_q, b_k, b_v] (one GEMM), split into H heads each
    # o_h = Attn_kind(q_h, k_h, v_h);  y = concat_h(dropout(o_h)) W_o + b_o
    n_heads = int(n_heads)
    kind = ATTENTION_KINDS[att["kind"]]
    qkv, cqkv = dense_fwd_core(x, _fused_qkv(params, xp=xp), xp=xp)                # (..., L, 3D)
    heads = split_heads(qkv, 3 * n_heads, xp=xp)                                    # (..., 3H, L, d) view
    qh, kh, vh = (heads[..., i * n_heads:(i + 1) * n_heads, :, :] for i in range(3))   # (..., H, L, d)
    with naming("params['attn'] / features"):
        oh, ca = kind.fwd(qh, kh, vh, params.get("attn", {}), features or {}, positions=positions,
                          class_token=bool(class_token), train=bool(train), causal=bool(causal), options=att)
    cd = None
    if dropout_mask is not None:
        oh, cd = dropout_fwd_core(oh, dropout_mask, xp=xp)                          # (..., H, L, d)
    y, co = dense_fwd_core(merge_heads(oh, xp=xp), params["o"], xp=xp)             # (..., L, D)
    return y, MHACache(cqkv, ca, co, att["kind"], n_heads, cd)


def mha_bwd(dy, cache: MHACache) -> MHAGrads:
    r"""Gradients of :func:`mha` for `x` and every learnable parameter (see :func:`mha` for the shapes).

    Parameters
    ----------
    dy : (..., L, D) array
        Cotangent of the output, dtype and namespace of the forward.
    cache : MHACache
        The cache returned by :func:`mha_fwd`.

    Returns
    -------
    MHAGrads
        ``x: (..., L, D)`` and ``params`` mirroring the parameters (``attn``: the kind's learnable ones).
    """
    namespace(dy, names=("dy",))
    x, W = cache.o_cache
    xp = check_dy(dy, x, tuple(x.shape[:-1]) + (W.shape[1],))                     # once: the cores trust it
    return mha_bwd_core(dy, cache, xp=xp)


def mha_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`mha_bwd` (see its docstring)."""
    # the forward in reverse: dense_o, dropout, the kind's backward, then the fused projection with
    # g = [dq, dk, dv] merged to (..., L, 3D):  dx = g [W_q, W_k, W_v]^T,  d[W_q, W_k, W_v] = x^T g
    c = cache
    go = dense_bwd_core(dy, c.o_cache, xp=xp)
    doh = split_heads(go.x, c.n_heads, xp=xp)                                       # (..., H, L, d)
    if c.drop_cache is not None:
        doh = dropout_bwd_core(doh, c.drop_cache, mask_grad=False, xp=xp).x         # (..., H, L, d)
    dqh, dkh, dvh, dattn = ATTENTION_KINDS[c.kind].bwd(doh, c.attn_cache)
    *batch, H, L, d = dqh.shape
    nb, D = len(batch), H * d
    to_lhd = tuple(range(nb)) + (nb + 1, nb, nb + 2)                        # (..., H, L, d) -> (..., L, H, d)
    d3 = xp.empty((*batch, L, 3, H, d), dtype=dqh.dtype, device=device_of(dqh))   # row-major: one copy in
    for i, t in enumerate((dqh, dkh, dvh)):
        d3[..., i, :, :] = xp.permute_dims(t, to_lhd)                              # (..., L, H, d)
    g = dense_bwd_core(xp.reshape(d3, (*batch, L, 3 * D)), c.qkv_cache, xp=xp)  # merged heads, a view
    W3, b3 = g.params                                                               # (D, 3D), (3D,)
    grads = {n: DenseParams(W=W3[:, i * D:(i + 1) * D], b=b3[i * D:(i + 1) * D]) for i, n in enumerate("qkv")}
    grads.update(o=go.params, attn=dattn)
    return MHAGrads(x=g.x, params=grads)


def _fused_qkv(params, *, xp):
    """The three projections as one dense layer: ``[W_q, W_k, W_v]: (D, 3D)``, ``[b_q, b_k, b_v]: (3D,)``."""
    q, k, v = params["q"], params["k"], params["v"]
    return DenseParams(W=xp.concat([q.W, k.W, v.W], axis=1), b=xp.concat([q.b, k.b, v.b], axis=0))


@fill_doc(params=_PARAMS, raises=_RAISES)
def mha(x, params, features=None, *, n_heads, attention, causal=False, dropout_mask=None, positions=None,
        class_token=False):
    r"""Multi-head attention with the configured attention kind (Vaswani et al. Sec. 3.2.2).

    ``MHA(x) = concat_h(Attn_kind(x W_q^h, x W_k^h, x W_v^h)) W_o``: the three projections of the
    ``(..., L, D)`` input are split into H heads of width ``d = D / H``, each head runs the configured kind on
    ``(..., H, L, d)`` (the kinds are listed in the module docstring), and the merged heads are projected back
    to ``(..., L, D)``.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., L, D) array
        Dtype and namespace of `x`.

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.nn import init_mha, mha
    >>> x = np.random.default_rng(0).standard_normal((2, 5, 8))          # (batch, L, D)
    >>> params = init_mha(np.random.default_rng(1), 8, 2, "softmax")     # D = 8, H = 2
    >>> mha(x, params, n_heads=2, attention="softmax").shape
    (2, 5, 8)
    """
    return mha_fwd(x, params, features, n_heads=n_heads, attention=attention, causal=causal,
                   dropout_mask=dropout_mask, positions=positions, class_token=class_token)[0]


