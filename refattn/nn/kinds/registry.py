"""The table of attention kinds: ``kind name -> AttentionKind`` (one declaration per kind module)."""

from __future__ import annotations

from . import elu, fastfood, favor, flt, generative, gmm, relu, s1, s2, softmax, toeplitz

__all__ = ["ATTENTION_KINDS"]

#: kind name -> its declaration (forward, backward, options, choices, params/features draws, omega policy)
ATTENTION_KINDS = {k.name: k for k in (softmax.KIND, elu.KIND, relu.KIND, favor.KIND, gmm.KIND, fastfood.KIND,
                                       generative.KIND, s1.KIND, s2.KIND, flt.KIND, toeplitz.KIND)}
