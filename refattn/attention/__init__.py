"""Attention: the exact softmax oracle, generalized kernel attention and linear attention."""

from .favor import (
    FavorAttentionCache,
    FavorAttentionGrads,
    favor_attention,
    favor_attention_bwd,
    favor_attention_fwd,
)
from .kernel import exp_dot_kernel, kernel_attention
from .linear import (
    LinearAttentionCache,
    LinearAttentionGrads,
    LinearAttentionState,
    linear_attention,
    linear_attention_bwd,
    linear_attention_fwd,
    linear_attention_step,
)
from .softmax import (
    SoftmaxAttentionCache,
    SoftmaxAttentionGrads,
    softmax_attention,
    softmax_attention_bwd,
    softmax_attention_fwd,
)

__all__ = [
    "softmax_attention", "softmax_attention_fwd", "softmax_attention_bwd",
    "SoftmaxAttentionCache", "SoftmaxAttentionGrads",
    "kernel_attention", "exp_dot_kernel",
    "linear_attention", "linear_attention_fwd", "linear_attention_bwd", "linear_attention_step",
    "LinearAttentionCache", "LinearAttentionGrads", "LinearAttentionState",
    "favor_attention", "favor_attention_fwd", "favor_attention_bwd",
    "FavorAttentionCache", "FavorAttentionGrads",
]
