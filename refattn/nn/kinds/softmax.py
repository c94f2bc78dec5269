"""Kind ``softmax``: exact ``softmax(q k^T / sqrt(d)) v`` (:func:`refattn.attention.softmax_attention`).

No options, nothing drawn, no learnable parameters; omega: none.
"""

from __future__ import annotations

from ..._xp import namespace
from ...attention.softmax import (DEFAULT_BLOCK_ELEMENTS, softmax_attention_bwd_core,
                                  softmax_attention_fwd_core)
from .base import AttentionKind, no_draws

__all__ = ["KIND"]


def _fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
         options):
    # the unchecked core: q, k, v are projections of the model's checked input (validated once)
    return softmax_attention_fwd_core(q, k, v, None, causal, float(q.shape[-1] ** -0.5), False,
                                      DEFAULT_BLOCK_ELEMENTS, xp=namespace(q))


def _bwd(do, cache):
    g = softmax_attention_bwd_core(do, cache, xp=namespace(do))
    return g.q, g.k, g.v, {}


KIND = AttentionKind("softmax", _fwd, _bwd, options={}, choices={}, params=no_draws, features=no_draws,
                     omega="none")
