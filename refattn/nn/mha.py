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
``s2``         Horn et al. Strategy 2 (bidirectional only): ``content_heads`` (default ``H // 2``) ordinary
               content heads (exact softmax, or FAVOR+ with ``features="positive"``) and ``H - content_heads``
               positional heads whose keys are learned clipped relative vectors ``w: (H - C, R, d)``
               (:func:`refattn.rpe.s2_clipped.s2_attention`); ``clip``, ``grid`` (None: 1-D signed distances,
               ``(H, W)``: Manhattan on a grid); ``content_heads=0``: all heads positional
=============  ===========================================================================================

Every kind supports ``causal``. The attention configuration is a plain dict ``{"kind": ..., <options>,
"redraw_every": None | k}`` (JSON-serialisable, stored in checkpoints); :func:`check_attention_config` fills the
defaults and rejects unknown kinds and options with the list of what is accepted.

Parameters ``MHA params = {"q": DenseParams, "k": ..., "v": ..., "o": ..., "attn": {...}}`` (dense weights
``(D, D)``); ``mha_bwd`` returns ``MHAGrads(x, params)`` with ``params`` mirroring that dict.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .._xp import check_choice, check_positive_int, check_shape, device_of, namespace
from ..attention.favor import FAVOR_FEATURES, favor_attention_bwd, favor_attention_fwd
from ..attention.linear import linear_attention_bwd, linear_attention_fwd
from ..attention.softmax import SoftmaxAttentionCache, softmax_attention_bwd, softmax_attention_fwd
from ..features.deterministic import elu_features_bwd, elu_features_fwd, relu_features_bwd, relu_features_fwd
from ..features.fastfood import (fastfood_prf_features_stable_bwd, fastfood_prf_features_stable_fwd,
                                 fastfood_rks_features_bwd, fastfood_rks_features_fwd)
from ..features.generative import (generative_prf_features_stable_bwd, generative_prf_features_stable_fwd,
                                   generative_rks_features_bwd, generative_rks_features_fwd)
from ..features.gmm import (gmm_prf_features_stable_bwd, gmm_prf_features_stable_fwd, gmm_rks_features_bwd,
                            gmm_rks_features_fwd)
from ..features.positive import positive_features_bwd, positive_features_fwd
from ..rpe.flt import flt_attention_bwd, flt_attention_fwd
from ..rpe.s1_rotation import s1_attention_bwd, s1_attention_fwd
from ..rpe.s2_clipped import s2_attention_bwd, s2_attention_fwd
from ..rpe.toeplitz import toeplitz_attention_bwd, toeplitz_attention_fwd
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


# ---- learnable spectra (KL-Transformer, Chowdhury et al.): GMM, FastFood, generative --------------------------
# Features are computed on d^{-1/4} q and d^{-1/4} k, as FAVOR does, so that at initialisation (mu = 0, S = I) the
# PRF maps estimate the Gaussian kernel exp(-|q - k|^2 / (2 sqrt(d))) of the scaled inputs. PRF maps are
# row-stabilised (keys' log-scales go to linear attention); RKS maps can give non-positive normalisers
# (option on_nonpositive, as for trig FAVOR).
def _make_spectral(stable_fwd, stable_bwd, rks_fwd, rks_bwd, args_of):
    """Adapter pair for a learnable-spectrum map. ``args_of(attn_params, features, options) -> (args, kwargs)``
    gives the map's arguments after ``x``; the map's gradients carry ``.x`` and ``.params``."""

    def fwd(q, k, v, attn_params, features, *, causal, options):
        scale = float(q.shape[-1]) ** -0.25
        args, kw = args_of(attn_params, features, options)
        if options["features"] == "prf":
            outq, cq = stable_fwd(q * scale, *args, **kw)
            outk, ck = stable_fwd(k * scale, *args, **kw)
            phi_q, phi_k, k_ls = outq[0], outk[0], outk[1]                          # (..., H, L, M), (..., H, L)
            o, ca = linear_attention_fwd(phi_q, phi_k, v, causal=causal, k_log_scale=k_ls)
        else:
            phi_q, cq = rks_fwd(q * scale, *args, **kw)                             # (..., H, L, 2M)
            phi_k, ck = rks_fwd(k * scale, *args, **kw)
            phi_q, phi_k = _first(phi_q), _first(phi_k)
            o, ca = linear_attention_fwd(phi_q, phi_k, v, causal=causal, on_nonpositive=options["on_nonpositive"])
        return o, (cq, ck, ca, scale, options["features"])

    def bwd(do, cache):
        cq, ck, ca, scale, feats = cache
        g = linear_attention_bwd(do, ca)
        if feats == "prf":
            gq = stable_bwd((g.phi_q, None), cq)                                    # query log-scale dropped
            gk = stable_bwd((g.phi_k, g.k_log_scale), ck)
        else:
            gq, gk = rks_bwd(g.phi_q, cq), rks_bwd(g.phi_k, ck)
        return gq.x * scale, gk.x * scale, g.v, _params_sum(gq.params, gk.params)

    return fwd, bwd


def _first(out):
    """The features of a map that returns ``phi`` or ``(phi, state)``."""
    return out[0] if isinstance(out, tuple) else out


def _params_sum(a, b):
    """Leafwise ``a + b`` of two gradient containers (``None`` where frozen)."""
    if a is None:
        return None
    if isinstance(a, tuple) and hasattr(a, "_fields"):
        return type(a)(*(_params_sum(x, y) for x, y in zip(a, b)))
    if isinstance(a, (tuple, list)):
        return type(a)(_params_sum(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return {kk: _params_sum(a[kk], b[kk]) for kk in a}
    return a + b


_gmm_fwd, _gmm_bwd = _make_spectral(
    gmm_prf_features_stable_fwd, gmm_prf_features_stable_bwd, gmm_rks_features_fwd, gmm_rks_features_bwd,
    lambda p, f, o: ((f["noise"], p["gmm"]), {}))
_fastfood_fwd, _fastfood_bwd = _make_spectral(
    fastfood_prf_features_stable_fwd, fastfood_prf_features_stable_bwd, fastfood_rks_features_fwd,
    fastfood_rks_features_bwd, lambda p, f, o: ((p["fastfood"],), {}))
_generative_fwd, _generative_bwd = _make_spectral(
    generative_prf_features_stable_fwd, generative_prf_features_stable_bwd, generative_rks_features_fwd,
    generative_rks_features_bwd, lambda p, f, o: ((f["noise"], p["generator"], f["state"]), {"train": True}))


def _wrap_grads(fwd, bwd, key):
    """Put the map's parameter gradients under ``attn_params[key]`` (the layout of the parameter dict)."""

    def b(do, cache):
        dq, dk, dv, dp = bwd(do, cache)
        return dq, dk, dv, {key: dp}

    return fwd, b


_gmm_fwd, _gmm_bwd = _wrap_grads(_gmm_fwd, _gmm_bwd, "gmm")
_fastfood_fwd, _fastfood_bwd = _wrap_grads(_fastfood_fwd, _fastfood_bwd, "fastfood")
_generative_fwd, _generative_bwd = _wrap_grads(_generative_fwd, _generative_bwd, "generator")


# ---- relative positional encodings (Horn et al.) ---------------------------------------------------------------
def _positions(L, like, *, xp):
    return xp.arange(L, dtype=like.dtype, device=device_of(like))                  # (L,) 1-D positions 0..L-1


def _s1_fwd(q, k, v, attn_params, features, *, causal, options):
    xp = namespace(q)
    omega = None if options["features"] is None else features["omega"]
    return s1_attention_fwd(q, k, v, _positions(q.shape[-2], q, xp=xp), attn_params["s1"], omega=omega,
                            causal=causal, features=options["features"] or "positive")


def _s1_bwd(do, cache):
    g = s1_attention_bwd(do, cache)          # g.omega (drawn, non-learnable) dropped
    return g.q, g.k, g.v, {"s1": g.params}


def _s2_split(n_heads, options):
    """Number of content heads of an S2 layer with `n_heads` heads (``options["content_heads"]``, default H // 2)."""
    nc = options.get("content_heads")
    nc = n_heads // 2 if nc is None else nc
    if not 0 <= nc < n_heads:
        raise ValueError(f"attention.content_heads: expected an integer in 0..{n_heads - 1} (at least one "
                         f"positional head among the layer's {n_heads}); got {nc}")
    return nc


def _s2_fwd(q, k, v, attn_params, features, *, causal, options):
    r"""Horn et al. Strategy 2 (Sec. 2.3): Eq. (4) split across the heads of the layer.

    Heads ``0..C-1`` (``C = content_heads``, default ``H // 2``) are **content heads**, Eq. (4) term (a):
    ``softmax(q k^T / sqrt(d)) v`` (``features=None``) or its FAVOR+ estimate with the layer's drawn omega.
    Heads ``C..H-1`` are **positional heads**, term (b): keys replaced by the learned relative vectors
    ``w[clip(dist(i, j), k)]`` (:func:`refattn.rpe.s2_clipped.s2_attention`; ``attn_params["w"]: (H - C, R, d)``),
    which do not read ``k`` (its gradient there is zero). ``content_heads=0`` gives an all-positional layer.
    """
    if causal:
        raise ValueError("attention kind 's2': clipped relative-distance heads are bidirectional only "
                         "(refattn.rpe.s2_clipped has no causal mode); use causal=False")
    xp = namespace(q)
    H = q.shape[-3]
    nc = _s2_split(H, options)
    w = attn_params["w"]                                                             # (H - C, R, d)
    if w.ndim != 3 or w.shape[0] != H - nc:
        raise ValueError(f"attn_params['w']: expected shape (H - content_heads, R, d) = ({H - nc}, R, "
                         f"{q.shape[-1]}) for {H} heads with {nc} content heads; got {tuple(w.shape)}")
    omega = None if options["features"] is None else features["omega"]
    grid = None if options["grid"] is None else tuple(options["grid"])
    yp, cp = s2_attention_fwd(q[..., nc:, :, :], v[..., nc:, :, :], w, k=options["clip"], grid=grid,
                              omega=omega)                                          # (..., H - C, L, d)
    if nc == 0:
        return yp, (cp, None, k, nc)
    qc, kc, vc = q[..., :nc, :, :], k[..., :nc, :, :], v[..., :nc, :, :]            # (..., C, L, d)
    if omega is None:
        yc, cc = softmax_attention_fwd(qc, kc, vc)
    else:
        yc, cc = favor_attention_fwd(qc, kc, vc, omega, features="positive")
    return xp.concat([yc, yp], axis=-3), (cp, cc, k, nc)                              # (..., H, L, d)


def _s2_bwd(do, cache):
    cp, cc, k, nc = cache
    xp = namespace(do)
    gp = s2_attention_bwd(do[..., nc:, :, :], cp)                                  # gp.omega (drawn): dropped
    dk_pos = xp.zeros_like(k[..., nc:, :, :])                                      # positional heads: no keys
    if cc is None:
        return gp.q, dk_pos, gp.v, {"w": gp.w}
    do_c = do[..., :nc, :, :]
    if isinstance(cc, SoftmaxAttentionCache):
        gc = softmax_attention_bwd(do_c, cc)
    else:
        gc = favor_attention_bwd(do_c, cc)                                         # gc.omega (drawn): dropped
    cat = lambda a, b: xp.concat([a, b], axis=-3)                                   # noqa: E731 (..., H, L, d)
    return cat(gc.q, gp.q), cat(gc.k, dk_pos), cat(gc.v, gp.v), {"w": gp.w}


def _toeplitz_window(log_coeffs, L, *, xp):
    """Offsets -(L-1)..(L-1) of a table over -(L_max-1)..(L_max-1): ``(*c, 2L - 1)``."""
    L_max = (log_coeffs.shape[-1] + 1) // 2
    if L > L_max:
        raise ValueError(f"attention kind 'toeplitz': sequence length L = {L} exceeds the coefficient table's "
                         f"max_len = {L_max}")
    return log_coeffs[..., L_max - L:L_max + L - 1]


def _toeplitz_feature(x, features, options):
    if options["feature_map"] == "elu":
        return elu_features_fwd(x)
    return positive_features_fwd(x * float(x.shape[-1]) ** -0.25, features["omega"])


def _toeplitz_fwd(q, k, v, attn_params, features, *, causal, options):
    xp = namespace(q)
    L = q.shape[-2]
    b = attn_params["log_coeffs"]                                                    # (H, 2 L_max - 1)
    coeffs = xp.exp(_toeplitz_window(b, L, xp=xp))                                   # (H, 2L - 1) = exp(N)
    phi_q, cq = _toeplitz_feature(q, features, options)                              # (..., H, L, m)
    phi_k, ck = _toeplitz_feature(k, features, options)
    y, ca = toeplitz_attention_fwd(phi_q, phi_k, v, coeffs, causal=causal)
    return y, (cq, ck, ca, coeffs, tuple(b.shape), options["feature_map"], float(q.shape[-1]) ** -0.25)


def _toeplitz_bwd(do, cache):
    cq, ck, ca, coeffs, b_shape, fmap, scale = cache
    xp = namespace(do)
    g = toeplitz_attention_bwd(do, ca)
    dwin = g.coeffs * coeffs                                                         # d exp(b) = exp(b) db
    L_max, L = (b_shape[-1] + 1) // 2, (coeffs.shape[-1] + 1) // 2
    if L < L_max:
        pad = xp.zeros(b_shape[:-1] + (L_max - L,), dtype=do.dtype, device=device_of(do))
        dwin = xp.concat([pad, dwin, pad], axis=-1)                                  # (H, 2 L_max - 1)
    if fmap == "elu":
        dq, dk = elu_features_bwd(g.phi_q, cq).x, elu_features_bwd(g.phi_k, ck).x
    else:
        dq = positive_features_bwd(g.phi_q, cq).x * scale
        dk = positive_features_bwd(g.phi_k, ck).x * scale
    return dq, dk, g.v, {"log_coeffs": dwin}



# ---- FLT (Choromanski et al., FourierLearner-Transformers, Algorithm 1) -----------------------------------------
def _flt_positions(L, options, like, *, xp):
    """``(L, D)`` positions: 0..L-1 (D = 1), or the row-major (row, column) of an ``(H, W)`` grid (D = 2)."""
    idx = xp.arange(L, dtype=like.dtype, device=device_of(like))                   # (L,)
    if options["grid"] is None:
        return xp.reshape(idx, (L, 1))                                              # (L, 1)
    H, W = options["grid"]
    if H * W != L:
        raise ValueError(f"attention kind 'flt': grid {tuple(options['grid'])} has H * W = {H * W} positions; "
                         f"the sequence has L = {L}")
    row = xp.floor(idx / W)
    return xp.stack([row, idx - W * row], axis=-1)                                  # (L, 2)


def _flt_fwd(q, k, v, attn_params, features, *, causal, options):
    xp = namespace(q)
    pos = _flt_positions(q.shape[-2], options, q, xp=xp)
    return flt_attention_fwd(q, k, v, pos, features["eps"], attn_params["spectrum"], attn_params["proposal"],
                             features["omega"], causal=causal)


def _flt_bwd(do, cache):
    g = flt_attention_bwd(do, cache)        # g.omega: drawn, dropped; positions and noise get none
    return g.q, g.k, g.v, {"spectrum": g.spectrum, "proposal": g.proposal}


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
    "gmm": AttentionKind(
        _gmm_fwd, _gmm_bwd,
        {"features": "prf", "m": None, "components": 2, "covariance": "diagonal", "on_nonpositive": "raise"},
        {"features": ("prf", "rks"), "covariance": ("diagonal", "full"), "on_nonpositive": ("raise", "ignore")},
    ),
    "fastfood": AttentionKind(
        _fastfood_fwd, _fastfood_bwd,
        {"features": "prf", "m": None, "s_law": "chi", "on_nonpositive": "raise"},
        {"features": ("prf", "rks"), "s_law": ("chi", "identity"), "on_nonpositive": ("raise", "ignore")},
    ),
    "generative": AttentionKind(
        _generative_fwd, _generative_bwd,
        {"features": "prf", "m": None, "on_nonpositive": "raise"},
        {"features": ("prf", "rks"), "on_nonpositive": ("raise", "ignore")},
    ),
    "s1": AttentionKind(
        _s1_fwd, _s1_bwd,
        {"features": None, "m": None, "draw": "orthogonal", "lengthscales": 4},
        {"features": (None,) + tuple(FAVOR_FEATURES), "draw": ("iid", "orthogonal")},
    ),
    "s2": AttentionKind(
        _s2_fwd, _s2_bwd,
        {"features": None, "m": None, "draw": "orthogonal", "clip": 6, "grid": None, "content_heads": None},
        {"features": (None, "positive"), "draw": ("iid", "orthogonal")},
    ),
    "flt": AttentionKind(
        _flt_fwd, _flt_bwd,
        {"spectrum": "gaussian_mixture", "components": 2, "r": 8, "m": None, "draw": "orthogonal", "grid": None},
        {"spectrum": ("gaussian_mixture", "gaussian_kernel"), "draw": ("iid", "orthogonal")},
    ),
    "toeplitz": AttentionKind(
        _toeplitz_fwd, _toeplitz_bwd,
        {"feature_map": "elu", "m": None, "draw": "orthogonal", "max_len": None},
        {"feature_map": ("elu", "positive"), "draw": ("iid", "orthogonal")},
    ),
}

_COMMON = {"redraw_every": None}


def check_attention_config(attention, *, d_head=None, n_heads=None) -> dict:
    """Validate an attention configuration dict and return it with every default filled in.

    Raises ``ValueError`` naming the unknown kind (and the known ones), an unknown option (and the accepted
    ones) or a bad option value. ``m`` defaults to ``2 * d_head`` for random-feature kinds when `d_head` is given;
    S2's ``content_heads`` defaults to ``n_heads // 2`` when `n_heads` is given (and must leave at least one
    positional head).
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
        check_choice(out[name], f"attention.{name}", choices)
    if "m" in out:
        if out["m"] is None and d_head is not None:
            out["m"] = 2 * int(d_head)
        if out["m"] is not None:
            out["m"] = check_positive_int(out["m"], "attention.m")
    for name in ("components", "lengthscales", "clip", "max_len", "r"):
        if name in out and out[name] is not None:
            out[name] = check_positive_int(out[name], f"attention.{name}")
    if "content_heads" in out:
        nc = out["content_heads"]
        if nc is None and n_heads is not None:
            nc = out["content_heads"] = int(n_heads) // 2
        if nc is not None:
            if isinstance(nc, bool) or not isinstance(nc, int) or nc < 0:
                raise ValueError(f"attention.content_heads: expected a non-negative integer (the number of content "
                                 f"heads) or None (n_heads // 2); got {nc!r}")
            if n_heads is not None:
                _s2_split(int(n_heads), out)
    if out.get("grid") is not None:
        g = out["grid"]
        if not (isinstance(g, (tuple, list)) and len(g) == 2):
            raise ValueError(f"attention.grid: expected None (1-D positions) or a pair (H, W); got {g!r}")
        out["grid"] = [check_positive_int(g[0], "attention.grid[0]"), check_positive_int(g[1], "attention.grid[1]")]
    if out["redraw_every"] is not None:
        out["redraw_every"] = check_positive_int(out["redraw_every"], "attention.redraw_every")
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
    n_heads = check_positive_int(n_heads, "n_heads")
    if D % n_heads:
        raise ValueError(f"n_heads: the number of heads {n_heads} must divide the model width D = {D}")
    att = check_attention_config(attention, d_head=D // n_heads, n_heads=n_heads)
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


