"""Kind ``softmax``: exact ``softmax(q k^T / sqrt(d)) v``
(:func:`refattn.attention.softmax.softmax_attention`).

No options, nothing drawn, no learnable parameters; omega: none.
"""

from __future__ import annotations

from ...attention.softmax import softmax_attention_bwd, softmax_attention_fwd
from .base import AttentionKind, no_draws

__all__ = ["KIND"]


def _fwd(q, k, v, attn_params, features, *, positions=None, train=True, causal, options):
    return softmax_attention_fwd(q, k, v, causal=causal)


def _bwd(do, cache):
    g = softmax_attention_bwd(do, cache)
    return g.q, g.k, g.v, {}


KIND = AttentionKind("softmax", _fwd, _bwd, options={}, choices={}, params=no_draws, features=no_draws,
                     omega="none")
