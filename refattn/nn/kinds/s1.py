r"""Kind ``s1``: Horn et al. Strategy 1 (Sec. 2.2), rotary relative positions through augmented queries and
keys (:func:`refattn.rpe.s1_rotation.s1_attention`).

Options: ``features`` (None: exact softmax on the augmented vectors; or a FAVOR map), ``m``, ``draw``,
``lengthscales`` S. Learnable: ``attn["s1"]`` (frequencies, alpha, beta; ``(A = 1, S)`` shared by the heads).
Drawn (FAVOR only): ``omega: (m, d + 2S)``. Positions: 1-D, ``0..L-1``.

omega: **redrawn** (never learned). ``refattn.rpe.s1_rotation.s1_attention_bwd`` computes its gradient and
this kind drops it (the rpe backward has no ``omega_grad`` switch yet; issue 21's rpe part).
"""

from __future__ import annotations

from ..._xp import namespace
from ...attention.favor import FAVOR_FEATURES
from ...rpe.s1_rotation import s1_attention_bwd, s1_attention_fwd
from .base import AttentionKind, Draw, grid_positions, projection

__all__ = ["KIND"]


def _fwd(q, k, v, attn_params, features, *, positions=None, causal, options):
    xp = namespace(q)
    omega = None if options["features"] is None else features["omega"]
    pos = grid_positions(q.shape[-2], None, q, xp=xp)[:, 0]                         # (L,)
    return s1_attention_fwd(q, k, v, pos, attn_params["s1"], omega=omega, causal=causal,
                            features=options["features"] or "positive")


def _bwd(do, cache):
    g = s1_attention_bwd(do, cache)                                                 # g.omega (drawn): dropped
    return g.q, g.k, g.v, {"s1": g.params}


def _params(att, *, d_head, n_heads):
    return {"s1": Draw("s1", {"n_axes": 1, "n_lengthscales": att["lengthscales"]})}   # (A = 1, S), all heads


def _features(att, *, d_head, n_heads):
    return {} if att["features"] is None else projection(att, d_head + 2 * att["lengthscales"])   # (m, d + P)


KIND = AttentionKind(
    "s1", _fwd, _bwd,
    options={"features": None, "m": None, "draw": "orthogonal", "lengthscales": 4},
    choices={"features": (None,) + tuple(FAVOR_FEATURES), "draw": ("iid", "orthogonal")},
    params=_params, features=_features, omega="redrawn")
