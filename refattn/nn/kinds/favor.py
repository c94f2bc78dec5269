"""Kind ``favor``: FAVOR / FAVOR+ (Choromanski et al. 2021; :func:`refattn.attention.favor.favor_attention`).

Options: ``features`` in {"positive", "hyperbolic", "trig"}, ``m`` projections (default ``2 d``), ``draw`` in
{"iid", "orthogonal"}, ``on_nonpositive``: trig features can give a non-positive normaliser, so
``features="trig"`` needs it set explicitly (``"ignore"`` to train, ``"raise"`` to stop at the first one);
left unset, the configuration check refuses it, naming the option (positive and hyperbolic: unused).
Drawn: ``omega: (m, d)`` shared by the heads of a layer.

omega: **redrawn** (drawn once or per the redraw policy, never learned), so its gradient is not computed
(the backward of :func:`~refattn.attention.favor.favor_attention_bwd` with ``omega_grad=False``).
"""

from __future__ import annotations

from ..._xp import namespace
from ...attention.favor import (FAVOR_FEATURES, check_favor_inputs, favor_attention_bwd_core,
                                favor_attention_fwd_core)
from ...attention.linear import DEFAULT_CHUNK_SIZE
from .base import AttentionKind, no_draws, projection, resolve_on_nonpositive

__all__ = ["KIND"]


def _fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
         options):
    omega, feats, nonpos = features["omega"], options["features"], options["on_nonpositive"]
    xp, chunk = check_favor_inputs(q, k, v, omega, causal, feats, DEFAULT_CHUNK_SIZE, nonpos)
    return favor_attention_fwd_core(q, k, v, omega, causal=causal, features=feats, chunk_size=chunk,
                                    on_nonpositive=nonpos, xp=xp, keep=train)   # evaluation: nothing kept


def _bwd(do, cache):
    g = favor_attention_bwd_core(do, cache, omega_grad=False, xp=namespace(do))   # omega drawn, not learned
    return g.q, g.k, g.v, {}


def _check(att, *, d_head, n_heads):
    return resolve_on_nonpositive(att, att["features"] == "trig", "features='trig'")


def _features(att, *, d_head, n_heads):
    return projection(att, d_head)                                                # (m, d) shared by the heads


KIND = AttentionKind(
    "favor", _fwd, _bwd,
    options={"features": "positive", "m": None, "draw": "orthogonal", "on_nonpositive": None},
    choices={"features": tuple(FAVOR_FEATURES), "draw": ("iid", "orthogonal"),
             "on_nonpositive": (None, "raise", "ignore")},
    params=no_draws, features=_features, omega="redrawn", check=_check)
