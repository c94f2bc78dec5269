"""Kind ``favor``: FAVOR / FAVOR+ (Choromanski et al. 2021; :func:`refattn.attention.favor.favor_attention`).

Options: ``features`` in {"positive", "hyperbolic", "trig"}, ``m`` projections (default ``2 d``), ``draw`` in
{"iid", "orthogonal"}, ``on_nonpositive`` (trig only). Drawn: ``omega: (m, d)`` shared by the heads of a
layer.

omega: **redrawn** (drawn once or per the redraw policy, never learned), so its gradient is not computed
(the backward of :func:`~refattn.attention.favor.favor_attention_bwd` with ``omega_grad=False``).
"""

from __future__ import annotations

from ..._xp import namespace
from ...attention.favor import FAVOR_FEATURES, favor_attention_bwd_core, favor_attention_fwd
from .base import AttentionKind, no_draws, projection

__all__ = ["KIND"]


def _fwd(q, k, v, attn_params, features, *, positions=None, train=True, causal, options):
    return favor_attention_fwd(q, k, v, features["omega"], causal=causal, features=options["features"],
                               on_nonpositive=options["on_nonpositive"])


def _bwd(do, cache):
    g = favor_attention_bwd_core(do, cache, omega_grad=False, xp=namespace(do))   # omega drawn, not learned
    return g.q, g.k, g.v, {}


def _features(att, *, d_head, n_heads):
    return projection(att, d_head)                                                # (m, d) shared by the heads


KIND = AttentionKind(
    "favor", _fwd, _bwd,
    options={"features": "positive", "m": None, "draw": "orthogonal", "on_nonpositive": "raise"},
    choices={"features": tuple(FAVOR_FEATURES), "draw": ("iid", "orthogonal"),
             "on_nonpositive": ("raise", "ignore")},
    params=no_draws, features=_features, omega="redrawn")
