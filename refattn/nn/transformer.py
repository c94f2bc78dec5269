r"""Pre-LN transformer encoder, encoder classifier and causal language model, with a manual backward.

Block (pre-LN, Xiong et al. 2020; GPT-2)::

    h = x + MHA(LN1(x))                   MHA with the configured attention kind (refattn.nn.mha)
    y = h + W2 gelu(W1 LN2(h) + b1) + b2  feed-forward of width d_ff, GELU (tanh approximation)

Model: input embedding (tokens, or pixels/patches through a dense layer) + absolute positions (sinusoid,
learned, or none) -> ``n_layers`` blocks -> final layer norm -> head:

* ``task="classify"``: readout ``"mean"`` (mean over positions), ``"first"`` (position 0) or
  ``"class-token"``, then a dense layer to ``n_classes`` logits, ``(..., n_classes)``;
* ``task="lm"``: causal attention, a dense layer to ``vocab_size`` logits at every position, ``(..., L, V)``
  (position i predicts token i + 1: the caller shifts the labels).

:func:`transformer_bwd` is the composition of the layers' ``_bwd`` functions in reverse order and nothing
else. Parameters are a nested dict (:func:`refattn.nn.init.init_transformer`)::

    {"embed": (V, D) table | DenseParams(W: (p*p*C, D), b), "pos": (max_len, D) (learned positions only),
     "cls": (D,) (readout "class-token" only),
     "blocks": [{"ln1": LayerNormParams, "attn": {"q","k","v","o": DenseParams, "attn": {...}},
                 "ln2": LayerNormParams, "ff1": DenseParams(D, d_ff), "ff2": DenseParams(d_ff, D)}, ...],
     "ln_f": LayerNormParams, "head": DenseParams(D, n_out)}

**Class token** (``readout="class-token"``, Horn et al.'s readout: ``train.py`` l. 49-59, 88-117, 315-316):
a learned vector ``params["cls"]: (D,)`` is prepended to the embedded and position-embedded sequence,
``h = [cls; x_emb + pos]: (..., L + 1, D)``, so it carries no positional embedding (the authors' zero
positional encoding); the blocks run with ``class_token=True`` (:mod:`refattn.nn.kinds.base`: S1 and FLT give
it zero positional features, S2 places it as the authors' code does) and the head reads its final hidden
state, ``h_L[..., 0, :]``. Its gradient is the sum over the batch of the blocks' input cotangent at
position 0. ``positions`` describe the L input tokens; the dropout masks cover the L + 1 positions
(:func:`refattn.nn.init.draw_dropout_masks` adds the token).

``features`` is a list (one entry per layer) of the attention kind's drawn arrays
(:func:`refattn.nn.init.draw_attention_features`; redraws follow :func:`refattn.nn.init.features_for_step`).

The configuration is a plain JSON-serialisable dict; :func:`refattn.nn.config.check_config` validates it and
fills the defaults.
Axes: ``...`` batch, ``L`` positions, ``D`` width, ``V`` vocabulary.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, check_shape, device_of, namespace
from ..layers.checks import check_dy
from ..layers.activations import gelu_bwd_core, gelu_fwd_core
from ..layers.dense import check_dense, dense_bwd_core, dense_fwd_core
from ..layers.dropout import check_dropout, dropout_bwd_core, dropout_fwd_core
from ..layers.embeddings import (check_patch_embedding, check_position_embedding, check_token_embedding,
                                 patch_embedding_bwd_core, patch_embedding_fwd_core,
                                 position_embedding_bwd_core, position_embedding_fwd_core,
                                 sinusoid_position_table, token_embedding_bwd_core, token_embedding_fwd_core)
from ..layers.layernorm import check_layernorm, layernorm_bwd_core, layernorm_fwd_core
from ..layers.losses import softmax_cross_entropy_bwd_core, softmax_cross_entropy_fwd
from ..tree import tree_map
from ._boundary import check_trees, naming
from .config import check_config, has_class_token
from .kinds import ATTENTION_KINDS
from .mha import check_mha, mha_bwd_core, mha_fwd_core

__all__ = ["TransformerGrads", "parameter_updates", "transformer", "transformer_fwd", "transformer_bwd",
           "transformer_loss_fwd", "transformer_loss_bwd", "loss_and_grads", "block_fwd", "block_bwd"]

Array = Any


class TransformerGrads(NamedTuple):
    r"""Gradients from :func:`transformer_bwd`: ``params`` tree and images (``inputs``; None for tokens)."""

    params: dict   # same tree as params
    inputs: Array  # (..., H, W, C) for patch input; None for token input (integer ids)


# ---- one block ---------------------------------------------------------------------------------------------
def _drop_fwd(x, mask, *, xp):
    return (x, None) if mask is None else dropout_fwd_core(x, mask, xp=xp)


def _drop_bwd(dy, cache, *, xp):
    return dy if cache is None else dropout_bwd_core(dy, cache, mask_grad=False, xp=xp).x


def _layernorm(x, params):
    """The model's final layer norm: its structural checks (no data read), then the core."""
    return layernorm_fwd_core(x, params, 1e-5, xp=check_layernorm(x, params))


def _dense(x, params):
    """The model's head: its structural checks (no data read), then the core."""
    return dense_fwd_core(x, params, xp=check_dense(x, params))


def block_fwd(x, params: dict, features, *, cfg, masks=None, positions=None, shared=None, train=True):
    r"""One pre-LN transformer block, ``h = x + MHA(LN1(x))``, ``y = h + FF(LN2(h))``, and its cache.

    The block's equations are in the module docstring (pre-LN as in Xiong et al. 2020 and GPT-2).

    Parameters
    ----------
    x : (..., L, D) array
        Input of the block, real floating.
    params : dict
        ``{"ln1", "attn", "ln2", "ff1", "ff2"}`` (one entry of ``params["blocks"]``).
    features : dict or None
        This layer's drawn attention arrays.
    cfg : dict
        Normalised model configuration (:func:`refattn.nn.config.check_config`).
    masks : dict, optional
        Inverted-dropout masks (:func:`refattn.nn.init.draw_dropout_masks`): ``"attn"`` ``(..., H, L, d)`` on
        the per-head attention output, ``"resid_attn"`` and ``"resid_ff"`` ``(..., L, D)`` on each sub-layer's
        output before it is added to the residual stream (Vaswani et al. Sec. 5.4).
    positions : (L, D_pos) array, optional
        Token coordinates for positional attention kinds (``(L - 1, D_pos)``: tokens 1..L-1, when `cfg` has
        ``readout="class-token"``: token 0 is then the class token, without a position).
    shared : dict, optional
        Attention parameters shared by all layers (``params["shared"]["attn"]``), merged into this layer's;
        their gradients are returned apart (the third output of :func:`block_bwd`).
    train : bool
        Training or evaluation forward (for kinds whose computation differs).

    Returns
    -------
    y : (..., L, D) array
        Output of the block.
    cache : tuple
        For :func:`block_bwd`.
    """
    masks = masks or {}
    shared = shared or {}
    check_trees(("params", params), ("features", features), ("shared", shared), ("x", x), ("masks", masks),
                ("positions", positions), dtype=getattr(x, "dtype", None))     # once, named leaf by leaf
    xp, att = check_block(x, params, cfg=cfg, masks=masks, positions=positions, shared=shared)
    return block_fwd_core(x, params, features, cfg=cfg, att=att, masks=masks, positions=positions,
                          shared=shared, train=train, xp=xp)


def _attn_params(params, shared):
    """The block's attention parameters with the shared ones merged into ``attn``."""
    if not shared:
        return params["attn"]
    return {**params["attn"], "attn": {**params["attn"].get("attn", {}), **shared}}


def check_block(x, params, *, cfg, masks, positions, shared):
    """Structural checks of one block against its input ``x: (..., L, D)`` (every sub-layer's parameters
    and the dropout masks; metadata only, no data read). Returns ``(xp, normalised attention
    configuration)``."""
    with naming("params['ln1']"):
        check_layernorm(x, params["ln1"])
    with naming("params['attn']"):
        xp, att = check_mha(x, _attn_params(params, shared), cfg["n_heads"], cfg["attention"], positions,
                            masks.get("attn"), class_token=has_class_token(cfg), causal=cfg["causal"])
    with naming("params['ln2']"):
        check_layernorm(x, params["ln2"])
    with naming("params['ff1']"):
        check_dense(x, params["ff1"])
    with naming("params['ff2']"):                  # its input is ff1's output, (..., L, d_ff)
        check_dense(x, params["ff2"], width=params["ff1"].W.shape[1])
    for key in ("resid_attn", "resid_ff"):         # on sub-layer outputs of x's shape
        if masks.get(key) is not None:
            check_dropout(x, masks[key], name=f"masks['{key}']")
    return xp, att


def block_fwd_core(x, params, features, *, cfg, att, masks, positions, shared, train, xp):
    """Unchecked core of :func:`block_fwd` (see its docstring); the caller ran :func:`check_block`."""
    # h = x + dropout(MHA(LN1(x)))
    # y = h + dropout(W2 gelu(W1 LN2(h) + b1) + b2)
    attn_params = _attn_params(params, shared)
    a, c_ln1 = layernorm_fwd_core(x, params["ln1"], 1e-5, xp=xp)                   # (..., L, D)
    with naming("params['attn']"):                 # the kinds' own value checks (a permutation, a variance)
        a, c_att = mha_fwd_core(a, attn_params, features, n_heads=cfg["n_heads"], att=att,
                                causal=cfg["causal"], dropout_mask=masks.get("attn"), positions=positions,
                                train=train, xp=xp, class_token=has_class_token(cfg))
    a, c_da = _drop_fwd(a, masks.get("resid_attn"), xp=xp)                         # (..., L, D)
    h = x + a                                                                       # (..., L, D) residual
    f, c_ln2 = layernorm_fwd_core(h, params["ln2"], 1e-5, xp=xp)                   # (..., L, D)
    f, c_ff1 = dense_fwd_core(f, params["ff1"], xp=xp)                              # (..., L, d_ff)
    f, c_act = gelu_fwd_core(f, xp=xp)                                              # (..., L, d_ff)
    f, c_ff2 = dense_fwd_core(f, params["ff2"], xp=xp)                              # (..., L, D)
    f, c_df = _drop_fwd(f, masks.get("resid_ff"), xp=xp)                           # (..., L, D)
    return h + f, (c_ln1, c_att, c_da, c_ln2, c_ff1, c_act, c_ff2, c_df, tuple(shared))


def block_bwd(dy, cache):
    r"""Backward of :func:`block_fwd`: the layers' backwards in reverse order.

    Parameters
    ----------
    dy : (..., L, D) array
        Cotangent of the block's output.
    cache : tuple
        The cache returned by :func:`block_fwd`.

    Returns
    -------
    dx : (..., L, D) array
        Cotangent of the block's input.
    dparams : dict
        Gradients shaped like the block's parameters.
    dshared : dict
        This layer's share of the shared attention parameters' gradients (``{}`` when none).
    """
    x, W = cache[6]                                                                 # the last dense layer
    xp = check_dy(dy, x, tuple(x.shape[:-1]) + (W.shape[1],))                     # once: the cores trust it
    return block_bwd_core(dy, cache, xp=xp)


def block_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`block_bwd` (see its docstring)."""
    # dh = dy + LN2'^T FF'^T dy           (the residual passes dy through unchanged)
    # dx = dh + LN1'^T MHA'^T dh
    c_ln1, c_att, c_da, c_ln2, c_ff1, c_act, c_ff2, c_df, shared_keys = cache
    g_ff2 = dense_bwd_core(_drop_bwd(dy, c_df, xp=xp), c_ff2, xp=xp)
    g_act = gelu_bwd_core(g_ff2.x, c_act, xp=xp)
    g_ff1 = dense_bwd_core(g_act.x, c_ff1, xp=xp)
    g_ln2 = layernorm_bwd_core(g_ff1.x, c_ln2, xp=xp)
    dh = dy + g_ln2.x                                                               # (..., L, D) both paths
    g_att = mha_bwd_core(_drop_bwd(dh, c_da, xp=xp), c_att, xp=xp)
    g_ln1 = layernorm_bwd_core(g_att.x, c_ln1, xp=xp)
    dx = dh + g_ln1.x                                                               # (..., L, D)
    dattn = g_att.params
    dshared = {key: dattn["attn"][key] for key in shared_keys}
    if shared_keys:
        dattn = {**dattn, "attn": {k: v for k, v in dattn["attn"].items() if k not in shared_keys}}
    return dx, {"ln1": g_ln1.params, "attn": dattn, "ln2": g_ln2.params, "ff1": g_ff1.params,
                "ff2": g_ff2.params}, dshared


# ---- class token and readout -------------------------------------------------------------------------------
def check_class_token_param(h, params):
    """Structural checks of ``params["cls"]`` against the embedded sequence ``h: (..., L, D)`` (present, a
    ``(D,)`` array of h's namespace and dtype); no data read."""
    if "cls" not in params:
        raise ValueError("params['cls']: readout 'class-token' needs the learned class token, a (d_model,) "
                         "array (refattn.nn.init.init_transformer draws it); got none")
    namespace(h, params["cls"], names=("embedded inputs", "params['cls']"))
    check_shape("params['cls']", params["cls"], "D", check_shape("embedded inputs", h, "..., L, D"))


# h = [cls; h]                      (..., L + 1, D): the class token without a position, at index 0
# dcls = sum over the batch of dh[..., 0, :],  dh_tokens = dh[..., 1:, :]
def _prepend_fwd(h, cls, *, xp):
    token = xp.broadcast_to(cls, tuple(h.shape[:-2]) + (1, h.shape[-1]))            # (..., 1, D)
    return xp.concat([token, h], axis=-2)                                           # (..., L + 1, D)


def _prepend_bwd(dh, *, xp):
    lead = tuple(range(dh.ndim - 2))                                                # the batch axes
    dcls = xp.sum(dh[..., 0, :], axis=lead) if lead else dh[..., 0, :]              # (D,)
    return dh[..., 1:, :], dcls                                                     # (..., L, D), (D,)


def _readout_fwd(h, how, *, xp):
    if how == "mean":
        return xp.mean(h, axis=-2)                                                  # (..., D)
    return h[..., 0, :]                                                             # (..., D) first / class


def _readout_bwd(dr, how, L, *, xp):
    dr1 = xp.expand_dims(dr, axis=-2)                                               # (..., 1, D)
    if how == "mean":
        return xp.concat([dr1 / L] * L, axis=-2) if L > 1 else dr1 / L             # (..., L, D)
    if L == 1:
        return dr1
    zeros = xp.zeros(tuple(dr.shape[:-1]) + (L - 1, dr.shape[-1]), dtype=dr.dtype, device=device_of(dr))
    return xp.concat([dr1, zeros], axis=-2)                                         # (..., L, D)


_INPUTS = """
params : dict
    Parameter tree (see the module docstring; :func:`refattn.nn.init.init_transformer`), in the namespace and
    dtype of the computation.
inputs : (..., L) int array or (..., H, W, C) array
    Token ids (``input="tokens"``) or images (``input="patches"``).
"""

_LABELS = """
labels : (...) or (..., L) int array
    Class ids for classification, next tokens for the LM (the caller shifts them).
"""

_OPTIONS = """
features : list, optional
    One dict of drawn attention arrays per layer (:func:`refattn.nn.init.draw_attention_features`); required
    for random-feature kinds.
config : dict
    Model configuration (:func:`refattn.nn.config.check_config`).
dropout : list, optional
    One dict of dropout masks per layer (:func:`refattn.nn.init.draw_dropout_masks`, drawn with an explicit
    rng at the NumPy edge; over L + 1 positions with a class token); None (the default, and evaluation): no
    dropout.
positions : (L, D_pos) array, optional
    Per-token coordinates for positional attention kinds (``s1``, ``flt``), shared by the batch; real
    floating, in the computation's namespace and dtype. None: the kind's default coordinates. They describe
    the L input tokens (a class token has no position).
train : bool
    A training forward (default) or an evaluation one (False): only kinds with a mode-dependent computation
    read it (the generative kind with ``bn="running"`` normalises with its running statistics at evaluation);
    dropout is controlled by the masks alone.
"""

_RAISES = """
ValueError
    A bad configuration, a parameter tree that does not match it, ``L = 0`` or ``L > max_len``, or
    features/masks lists of the wrong length.
"""


# ---- the model ---------------------------------------------------------------------------------------------
def _check_features(features, n_layers):
    if features is None:
        return [None] * n_layers
    if not isinstance(features, (list, tuple)) or len(features) != n_layers:
        got = len(features) if isinstance(features, (list, tuple)) else type(features).__name__
        raise ValueError(f"features: expected a list with one entry per layer ({n_layers}) "
                         f"(config['n_layers']); got {got}")
    return list(features)


def _check_masks(dropout, n_layers):
    if dropout is None:
        return [None] * n_layers
    if not isinstance(dropout, (list, tuple)) or len(dropout) != n_layers:
        got = len(dropout) if isinstance(dropout, (list, tuple)) else type(dropout).__name__
        raise ValueError(f"dropout: expected a list with one dict of masks per layer ({n_layers}); got {got}")
    return list(dropout)


@fill_doc(inputs=_INPUTS, options=_OPTIONS, raises=_RAISES)
def transformer_fwd(params: dict, inputs, features=None, *, config: dict, dropout=None, positions=None,
                    train=True):
    r"""Forward of :func:`transformer`, and the cache for :func:`transformer_bwd` (see :func:`transformer`).

    Parameters
    ----------
    {inputs}
    {options}

    Returns
    -------
    logits : (..., n_classes) or (..., L, V) array
        Classification logits, or next-token logits at every position for ``task="lm"``.
    cache : tuple
        For :func:`transformer_bwd`.

    Raises
    ------
    {raises}
    """
    cfg = check_config(config)
    feats = _check_features(features, cfg["n_layers"])
    masks = _check_masks(dropout, cfg["n_layers"])
    if len(params.get("blocks", ())) != cfg["n_layers"]:
        raise ValueError(f"params['blocks']: expected {cfg['n_layers']} blocks (config['n_layers']); got "
                         f"{len(params.get('blocks', ()))}")
    check_trees(("params", params), ("features", features), ("dropout", dropout),
                ("positions", positions))                                          # once, one sync
    spec = "(..., L) token ids" if cfg["input"] == "tokens" else "(..., H, W, C) images"
    if getattr(inputs, "ndim", 0) < (1 if cfg["input"] == "tokens" else 3):
        raise ValueError(f"inputs: expected {spec}; got shape {tuple(getattr(inputs, 'shape', ()))}")
    with naming("inputs / params['embed']"):
        if cfg["input"] == "tokens":
            xp_in = check_token_embedding(inputs, params["embed"])                 # shapes, the ids' range
            h, c_emb = token_embedding_fwd_core(inputs, params["embed"], xp=xp_in)  # (..., L, D)
        else:
            xp_in, p = check_patch_embedding(inputs, params["embed"], cfg["patch"])
            check_finite("images", inputs, xp=xp_in)                                # the input, once
            h, c_emb = patch_embedding_fwd_core(inputs, params["embed"], p, xp=xp_in)  # (..., L, D)
    if h.shape[-1] != cfg["d_model"]:
        raise ValueError(f"params['embed']: expected width config['d_model'] = {cfg['d_model']}; got "
                         f"{h.shape[-1]}")
    xp = namespace(h, names=("embedded inputs",))
    L = h.shape[-2]
    if L == 0:                  # the positional table and the attention kinds need a position
        raise ValueError(f"inputs: expected at least one position (L >= 1); got shape {tuple(inputs.shape)}")
    if L > cfg["max_len"]:
        raise ValueError(f"inputs: sequence length L = {L} exceeds config['max_len'] = {cfg['max_len']}")
    c_pos = None
    if cfg["position"] == "learned":
        with naming("params['pos']"):
            check_position_embedding(h, params["pos"])
            h, c_pos = position_embedding_fwd_core(h, params["pos"], xp=xp)        # (..., L, D)
    elif cfg["position"] == "sinusoid":
        table = sinusoid_position_table(L, cfg["d_model"], like=h)                 # fixed (L, D) table
        h, c_pos = position_embedding_fwd_core(h, table, xp=xp)
    if has_class_token(cfg):                     # after the positions: the class token has none
        with naming("params['cls']"):
            check_class_token_param(h, params)
        h = _prepend_fwd(h, params["cls"], xp=xp)                                   # (..., L + 1, D)
    c_blocks = []
    shared = params.get("shared", {}).get("attn", {})
    for i, (blk, f, mk) in enumerate(zip(params["blocks"], feats, masks, strict=True)):
        with naming(f"params['blocks'][{i}] / features[{i}]"):
            _, att = check_block(h, blk, cfg=cfg, masks=mk or {}, positions=positions, shared=shared)
            h, cb = block_fwd_core(h, blk, f, cfg=cfg, att=att, masks=mk or {}, positions=positions,
                                   shared=shared, train=train, xp=xp)               # (..., L, D)
        c_blocks.append(cb)
    h_len = h.shape[-2]                                                             # L (+ 1: class token)
    with naming("params['ln_f']"):
        h, c_lnf = _layernorm(h, params["ln_f"])                                    # (..., L, D)
    if cfg["task"] == "classify":
        h = _readout_fwd(h, cfg["readout"], xp=xp)                                  # (..., D)
    with naming("params['head']"):
        logits, c_head = _dense(h, params["head"])                                # (..., n_out) / (..., L, V)
    return logits, (cfg, c_emb, c_pos, c_blocks, c_lnf, h_len, c_head)


def transformer_bwd(dlogits, cache) -> TransformerGrads:
    r"""Gradients of :func:`transformer` for every parameter (and the images for patch input).

    Parameters
    ----------
    dlogits : (..., n_classes) or (..., L, V) array
        Cotangent of the logits.
    cache : tuple
        The cache returned by :func:`transformer_fwd`.

    Returns
    -------
    TransformerGrads
        ``params``: a tree like the parameters (``"embed"``, ``"pos"`` for learned positions, ``"cls"`` for
        the class token, ``"blocks"``,
        ``"ln_f"``, ``"head"``, ``"shared"`` when present); ``inputs``: ``(..., H, W, C)`` for patch input,
        None for tokens.
    """
    namespace(dlogits, names=("dlogits",))
    x, W = cache[6]                                                                 # the head's dense cache
    xp = check_dy(dlogits, x, tuple(x.shape[:-1]) + (W.shape[1],), name="dlogits")  # once: the cores trust it
    return transformer_bwd_core(dlogits, cache, xp=xp)


def transformer_bwd_core(dlogits, cache, *, xp) -> TransformerGrads:
    """Unchecked core of :func:`transformer_bwd` (see its docstring)."""
    # the forward in reverse: head, readout, final LN, blocks from the last, class token, positions, embedding
    # the shared attention parameters' gradient is the sum over the layers
    cfg, c_emb, c_pos, c_blocks, c_lnf, L, c_head = cache                          # L: the blocks' length
    grads: dict = {}
    g_head = dense_bwd_core(dlogits, c_head, xp=xp)
    grads["head"] = g_head.params
    dh = g_head.x
    if cfg["task"] == "classify":
        dh = _readout_bwd(dh, cfg["readout"], L, xp=xp)                             # (..., L, D)
    g_lnf = layernorm_bwd_core(dh, c_lnf, xp=xp)
    grads["ln_f"] = g_lnf.params
    dh = g_lnf.x
    dblocks = [None] * len(c_blocks)
    dshared = None
    for i in range(len(c_blocks) - 1, -1, -1):
        dh, dblocks[i], ds = block_bwd_core(dh, c_blocks[i], xp=xp)
        if ds:                                                                    # shared by every layer: sum
            dshared = ds if dshared is None else tree_map(lambda a, b: a + b, dshared, ds)
    grads["blocks"] = dblocks
    if dshared is not None:
        grads["shared"] = {"attn": dshared}
    if has_class_token(cfg):
        dh, grads["cls"] = _prepend_bwd(dh, xp=xp)                                  # (..., L, D), (D,)
    if c_pos is not None:
        g_pos = position_embedding_bwd_core(dh, c_pos, xp=xp)
        if cfg["position"] == "learned":
            grads["pos"] = g_pos.table
        dh = g_pos.x
    dinputs = None
    if cfg["input"] == "tokens":
        grads["embed"] = token_embedding_bwd_core(dh, c_emb, xp=xp).table
    else:
        g_emb = patch_embedding_bwd_core(dh, c_emb, xp=xp)
        grads["embed"], dinputs = g_emb.params, g_emb.images
    order = ["embed", "pos", "blocks", "ln_f", "head", "shared", "cls"]             # init_transformer's order
    return TransformerGrads(params={k: grads[k] for k in order if k in grads}, inputs=dinputs)


@fill_doc(inputs=_INPUTS, options=_OPTIONS, raises=_RAISES)
def transformer(params, inputs, features=None, *, config, dropout=None, positions=None, train=True):
    r"""Logits of the configured pre-LN transformer (encoder classifier or causal language model).

    The model and its blocks are written out in the module docstring: embedding and positions, ``n_layers``
    pre-LN blocks ``h = x + MHA(LN1(x))``, ``y = h + FF(LN2(h))``, a final layer norm and a dense head (after
    a mean, first-position or class-token readout for ``task="classify"``). :func:`transformer_fwd` also
    returns the cache of :func:`transformer_bwd`.

    Parameters
    ----------
    {inputs}
    {options}

    Returns
    -------
    logits : (..., n_classes) or (..., L, V) array
        Classification logits, or next-token logits at every position for ``task="lm"``.

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.nn import draw_attention_features, init_transformer, transformer
    >>> config = {"task": "classify", "vocab_size": 11, "n_classes": 3, "d_model": 8, "n_heads": 2,
    ...           "n_layers": 1, "max_len": 6, "attention": {"kind": "favor", "m": 16}}
    >>> params = init_transformer(np.random.default_rng(0), config)
    >>> features = draw_attention_features(np.random.default_rng(1), config)   # FAVOR+ omega per layer
    >>> tokens = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])                          # (batch, L)
    >>> transformer(params, tokens, features, config=config).shape
    (2, 3)
    """
    return transformer_fwd(params, inputs, features, config=config, dropout=dropout, positions=positions,
                           train=train)[0]


def parameter_updates(cache) -> list:
    r"""Per layer, the non-learnable parameters a training forward updated (``{}`` when none).

    E.g. the generative kind's running batch-norm statistics (``bn="running"``). Write them into
    ``params["blocks"][i]["attn"]["attn"]`` after the step.

    Parameters
    ----------
    cache : tuple
        The cache of :func:`transformer_fwd` or :func:`transformer_loss_fwd`.

    Returns
    -------
    list of dict
        One dict per layer, ``{param name: new value}``.
    """
    if not isinstance(cache[0], dict):
        cache = cache[0]                                                         # a loss cache: (model, loss)
    c_blocks = cache[3]
    out = []
    for cb in c_blocks:
        c_att = cb[1]
        kind = ATTENTION_KINDS[c_att.kind]
        out.append({} if kind.updates is None else kind.updates(c_att.attn_cache))
    return out


@fill_doc(inputs=_INPUTS + _LABELS.lstrip(), options=_OPTIONS, raises=_RAISES)
def transformer_loss_fwd(params, inputs, labels, features=None, *, config, dropout=None, positions=None,
                         train=True):
    r"""Mean softmax cross-entropy of :func:`transformer`'s logits against integer `labels`, and the cache.

    Parameters
    ----------
    {inputs}
    {options}

    Returns
    -------
    loss : () array
        The mean cross-entropy, in the computation's dtype.
    cache : tuple
        For :func:`transformer_loss_bwd`.

    Raises
    ------
    {raises}
    """
    cfg = check_config(config)
    lead = tuple(getattr(inputs, "shape", ()))
    want = lead if cfg["task"] == "lm" else lead[:-1] if cfg["input"] == "tokens" else lead[:-3]
    if tuple(getattr(labels, "shape", (None,))) != want:
        got = tuple(labels.shape) if hasattr(labels, "shape") else type(labels).__name__
        raise ValueError(f"labels: expected shape {want} (from inputs of shape {lead}, task "
                         f"{cfg['task']!r}); got {got}")
    logits, c_model = transformer_fwd(params, inputs, features, config=cfg, dropout=dropout,
                                      positions=positions, train=train)
    loss, c_loss = softmax_cross_entropy_fwd(logits, labels)
    return loss, (c_model, c_loss)


def transformer_loss_bwd(dloss, cache) -> TransformerGrads:
    r"""Gradients of :func:`transformer_loss_fwd`: cross-entropy backward, then :func:`transformer_bwd`.

    Parameters
    ----------
    dloss : () array
        Cotangent of the loss (``ones_like(loss)`` for its gradient).
    cache : tuple
        The cache returned by :func:`transformer_loss_fwd`.

    Returns
    -------
    TransformerGrads
        As :func:`transformer_bwd`.
    """
    xp = check_dy(dloss, cache[1].p, (), name="dloss")                           # once: the cores trust it
    return transformer_loss_bwd_core(dloss, cache, xp=xp)


def transformer_loss_bwd_core(dloss, cache, *, xp) -> TransformerGrads:
    """Unchecked core of :func:`transformer_loss_bwd` (see its docstring)."""
    # dlogits = dloss (softmax(logits) - one_hot(labels)) / N
    # then transformer_bwd_core(dlogits)
    c_model, c_loss = cache
    return transformer_bwd_core(softmax_cross_entropy_bwd_core(dloss, c_loss, xp=xp).logits, c_model, xp=xp)


@fill_doc(inputs=_INPUTS + _LABELS.lstrip(), options=_OPTIONS, raises=_RAISES)
def loss_and_grads(params, inputs, labels, features=None, *, config, dropout=None, positions=None,
                   train=True):
    r"""The loss and the gradient tree of every parameter: the training step's work.

    :func:`transformer_loss_fwd` then :func:`transformer_loss_bwd` with ``dloss = 1``.

    Parameters
    ----------
    {inputs}
    {options}

    Returns
    -------
    loss : () array
        The mean cross-entropy.
    grads : dict
        A tree like `params` (see :class:`TransformerGrads`).

    Raises
    ------
    {raises}
    """
    loss, cache = transformer_loss_fwd(params, inputs, labels, features, config=config, dropout=dropout,
                                       positions=positions, train=train)
    xp = namespace(loss, names=("loss",))
    return loss, transformer_loss_bwd_core(xp.ones_like(loss), cache, xp=xp).params   # dloss = 1: unchecked
