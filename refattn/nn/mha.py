r"""Multi-head attention with the attention kind chosen by configuration.

    MHA(x) = concat_h(Attn_kind(x W_q^h, x W_k^h, x W_v^h)) W_o            (Vaswani et al. Sec. 3.2.2)

Axes: ``...`` batch, ``L`` positions, ``D`` model width, ``H`` heads, ``d = D / H`` head width.

**Attention kinds** are one small adapter each, in the table :data:`ATTENTION_KINDS` (``kind -> AttentionKind(fwd,
bwd, options)``). An adapter sees the per-head ``q, k, v: (..., H, L, d)``, its kind's learnable parameters
``attn_params`` (a dict, possibly empty; e.g. spectral or RPE parameters) and its drawn, non-learnable
``features`` (a dict, possibly empty; e.g. FAVOR's ``omega``), and returns the per-head output and a cache; its
backward returns ``(dq, dk, dv, dattn_params)``. The matching edge table
``refattn.random.nn.ATTENTION_DRAWS`` holds, per kind, the NumPy-only functions that initialise ``attn_params``
and draw ``features`` (randomness never enters the core). Adding a kind = one entry in each table.

=============  ===========================================================================================
kind           method (options)
=============  ===========================================================================================
``softmax``    exact ``softmax(q k^T / sqrt(d)) v`` (:func:`refattn.attention.softmax.softmax_attention`)
``elu``        linear attention with ``elu(x) + 1`` features (Katharopoulos et al.)
``relu``       linear attention with ``relu(x) + 1e-3`` features
``favor``      FAVOR / FAVOR+ (:func:`refattn.attention.favor.favor_attention`): ``features`` in
               {"positive", "hyperbolic", "trig"}, ``m`` projections, ``draw`` in {"iid", "orthogonal"},
               ``on_nonpositive`` (trig only); ``omega: (m, d)`` shared by the heads of a layer
=============  ===========================================================================================

Every kind supports ``causal``. The attention configuration is a plain dict ``{"kind": ..., <options>,
"redraw_every": None | k}`` (JSON-serialisable, stored in checkpoints); :func:`check_attention_config` fills the
defaults and rejects unknown kinds and options with the list of what is accepted.

Parameters ``MHA params = {"q": DenseParams, "k": ..., "v": ..., "o": ..., "attn": {...}}`` (dense weights
``(D, D)``); ``mha_bwd`` returns ``MHAGrads(x, params)`` with ``params`` mirroring that dict.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .._xp import check_choice, check_positive_int, check_shape, namespace
from ..attention.favor import FAVOR_FEATURES, favor_attention_bwd, favor_attention_fwd
from ..attention.linear import linear_attention_bwd, linear_attention_fwd
from ..attention.softmax import softmax_attention_bwd, softmax_attention_fwd
from ..features.deterministic import elu_features_bwd, elu_features_fwd, relu_features_bwd, relu_features_fwd
from .dense import dense_bwd, dense_fwd

__all__ = ["AttentionKind", "ATTENTION_KINDS", "check_attention_config", "MHACache", "MHAGrads", "mha", "mha_fwd",
           "mha_bwd", "split_heads", "merge_heads"]

Array = Any


class AttentionKind(NamedTuple):
    fwd: Callable   # (q, k, v, attn_params, features, *, causal, options) -> (o, cache); q,k,v: (..., H, L, d)
    bwd: Callable   # (do, cache) -> (dq, dk, dv, dattn_params)
    options: dict   # option name -> default value
    choices: dict   # option name -> tuple of allowed values (options not listed: positive ints or free)


# ---- adapters -------------------------------------------------------------------------------------------------
def _softmax_fwd(q, k, v, attn_params, features, *, causal, options):
    return softmax_attention_fwd(q, k, v, causal=causal)


def _softmax_bwd(do, cache):
    g = softmax_attention_bwd(do, cache)
    return g.q, g.k, g.v, {}


def _make_deterministic(feat_fwd, feat_bwd):
    def fwd(q, k, v, attn_params, features, *, causal, options):
        phi_q, cq = feat_fwd(q)                                                     # (..., H, L, d)
        phi_k, ck = feat_fwd(k)                                                     # (..., H, L, d)
        o, ca = linear_attention_fwd(phi_q, phi_k, v, causal=causal)                # (..., H, L, d)
        return o, (cq, ck, ca)

    def bwd(do, cache):
        cq, ck, ca = cache
        g = linear_attention_bwd(do, ca)
        return feat_bwd(g.phi_q, cq).x, feat_bwd(g.phi_k, ck).x, g.v, {}

    return fwd, bwd


_elu_fwd, _elu_bwd = _make_deterministic(elu_features_fwd, elu_features_bwd)
_relu_fwd, _relu_bwd = _make_deterministic(relu_features_fwd, relu_features_bwd)


def _favor_fwd(q, k, v, attn_params, features, *, causal, options):
    return favor_attention_fwd(q, k, v, features["omega"], causal=causal, features=options["features"],
                               on_nonpositive=options["on_nonpositive"])


def _favor_bwd(do, cache):
    g = favor_attention_bwd(do, cache)   # g.omega is the gradient of a drawn (non-learnable) array: dropped
    return g.q, g.k, g.v, {}


#: kind -> adapter. The edge table ``refattn.random.nn.ATTENTION_DRAWS`` has the same keys.
ATTENTION_KINDS: dict[str, AttentionKind] = {
    "softmax": AttentionKind(_softmax_fwd, _softmax_bwd, {}, {}),
    "elu": AttentionKind(_elu_fwd, _elu_bwd, {}, {}),
    "relu": AttentionKind(_relu_fwd, _relu_bwd, {}, {}),
    "favor": AttentionKind(
        _favor_fwd, _favor_bwd,
        {"features": "positive", "m": None, "draw": "orthogonal", "on_nonpositive": "raise"},
        {"features": tuple(FAVOR_FEATURES), "draw": ("iid", "orthogonal"), "on_nonpositive": ("raise", "ignore")},
    ),
}

_COMMON = {"redraw_every": None}


def check_attention_config(attention, *, d_head=None) -> dict:
    """Validate an attention configuration dict and return it with every default filled in.

    Raises ``ValueError`` naming the unknown kind (and the known ones), an unknown option (and the accepted
    ones) or a bad option value. ``m`` defaults to ``2 * d_head`` for random-feature kinds when `d_head` is given.
    """
    if isinstance(attention, str):
        attention = {"kind": attention}
    if not isinstance(attention, dict) or "kind" not in attention:
        raise ValueError(f"attention: expected a dict with a 'kind' entry (or a kind name); got {attention!r}")
    kind = attention["kind"]
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind: unknown kind {kind!r}; known kinds: {', '.join(sorted(ATTENTION_KINDS))}")
    spec = ATTENTION_KINDS[kind]
    allowed = {**spec.options, **_COMMON}
    unknown = sorted(set(attention) - set(allowed) - {"kind"})
    if unknown:
        raise ValueError(f"attention: unknown option(s) {unknown} for kind {kind!r}; accepted: {sorted(allowed)}")
    out = {"kind": kind, **allowed, **{k: v for k, v in attention.items() if k != "kind"}}
    for name, choices in spec.choices.items():
        check_choice(f"attention.{name}", out[name], choices)
    if "m" in out:
        if out["m"] is None and d_head is not None:
            out["m"] = 2 * int(d_head)
        if out["m"] is not None:
            out["m"] = check_positive_int("attention.m", out["m"])
    if out["redraw_every"] is not None:
        out["redraw_every"] = check_positive_int("attention.redraw_every", out["redraw_every"])
    return out


# ---- heads ----------------------------------------------------------------------------------------------------
def split_heads(x, n_heads, *, xp):
    """``(..., L, D)`` -> ``(..., H, L, D/H)``."""
    *batch, L, D = x.shape
    nb = len(batch)
    t = xp.reshape(x, tuple(batch) + (L, n_heads, D // n_heads))                    # (..., L, H, d)
    return xp.permute_dims(t, tuple(range(nb)) + (nb + 1, nb, nb + 2))              # (..., H, L, d)


def merge_heads(x, *, xp):
    """``(..., H, L, d)`` -> ``(..., L, H d)`` (inverse of :func:`split_heads`)."""
    *batch, H, L, d = x.shape
    nb = len(batch)
    t = xp.permute_dims(x, tuple(range(nb)) + (nb + 1, nb, nb + 2))                 # (..., L, H, d)
    return xp.reshape(t, tuple(batch) + (L, H * d))                                 # (..., L, D)


class MHACache(NamedTuple):
    q_cache: Any
    k_cache: Any
    v_cache: Any
    attn_cache: Any
    o_cache: Any
    kind: str
    n_heads: int


class MHAGrads(NamedTuple):
    x: Array      # (..., L, D)
    params: dict  # {"q", "k", "v", "o": DenseParams, "attn": dict}


def _check_params(params, D):
    if not isinstance(params, dict) or not {"q", "k", "v", "o"} <= set(params):
        got = sorted(params) if isinstance(params, dict) else type(params).__name__
        raise ValueError(f"params: expected a dict with entries 'q', 'k', 'v', 'o' (and 'attn'); got {got}")


def mha_fwd(x, params: dict, features: dict | None = None, *, n_heads, attention, causal=False):
    r"""Multi-head attention of `x` with the configured attention kind, and the cache for :func:`mha_bwd`.

    Parameters
    ----------
    x : (..., L, D) array
    params : dict
        ``{"q", "k", "v", "o": DenseParams(W: (D, D), b: (D,)), "attn": dict}`` (``attn`` the kind's learnable
        parameters; ``{}`` or absent for kinds that have none).
    features : dict, optional
        The kind's drawn arrays (``{"omega": (m, d)}`` for FAVOR); from ``refattn.random.draw_attention_features``.
    n_heads : int
        H; must divide D.
    attention : dict or str
        Attention configuration (see :func:`check_attention_config`).
    causal : bool
        Position i attends to positions j <= i only.

    Returns
    -------
    y : (..., L, D) array
    cache : MHACache
    """
    xp = namespace(x, names=("x",))
    sizes = check_shape("x", x, "..., L, D")
    D = x.shape[-1]
    n_heads = check_positive_int("n_heads", n_heads)
    if D % n_heads:
        raise ValueError(f"n_heads: the number of heads {n_heads} must divide the model width D = {D}")
    att = check_attention_config(attention, d_head=D // n_heads)
    _check_params(params, D)
    check_shape("params['q'].W", params["q"].W, "D, D", sizes)
    kind = ATTENTION_KINDS[att["kind"]]
    q, cq = dense_fwd(x, params["q"])                                               # (..., L, D)
    k, ck = dense_fwd(x, params["k"])                                               # (..., L, D)
    v, cv = dense_fwd(x, params["v"])                                               # (..., L, D)
    qh, kh, vh = (split_heads(t, n_heads, xp=xp) for t in (q, k, v))                # (..., H, L, d)
    oh, ca = kind.fwd(qh, kh, vh, params.get("attn", {}), features or {}, causal=bool(causal), options=att)
    y, co = dense_fwd(merge_heads(oh, xp=xp), params["o"])                          # (..., L, D)
    return y, MHACache(cq, ck, cv, ca, co, att["kind"], n_heads)


def mha_bwd(dy, cache: MHACache) -> MHAGrads:
    """Gradients of :func:`mha` for `x` and every learnable parameter (the composition of the dense and attention
    backwards)."""
    c = cache
    xp = namespace(dy, names=("dy",))
    go = dense_bwd(dy, c.o_cache)
    doh = split_heads(go.x, c.n_heads, xp=xp)                                       # (..., H, L, d)
    dqh, dkh, dvh, dattn = ATTENTION_KINDS[c.kind].bwd(doh, c.attn_cache)
    gq = dense_bwd(merge_heads(dqh, xp=xp), c.q_cache)
    gk = dense_bwd(merge_heads(dkh, xp=xp), c.k_cache)
    gv = dense_bwd(merge_heads(dvh, xp=xp), c.v_cache)
    dx = gq.x + gk.x + gv.x                                                         # (..., L, D)
    return MHAGrads(x=dx, params={"q": gq.params, "k": gk.params, "v": gv.params, "o": go.params, "attn": dattn})


def mha(x, params, features=None, *, n_heads, attention, causal=False):
    """Multi-head attention, ``(..., L, D)`` -> ``(..., L, D)`` (see :func:`mha_fwd`)."""
    return mha_fwd(x, params, features, n_heads=n_heads, attention=attention, causal=causal)[0]


