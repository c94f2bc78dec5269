"""Attention kinds of :func:`refattn.nn.mha.mha`: one module per kind (forward, backward, options, the arrays
it needs drawn and what happens to its omega gradient), collected in :data:`ATTENTION_KINDS`."""

from .base import COMMON_OPTIONS, AttentionKind, Draw
from .registry import ATTENTION_KINDS

__all__ = [n for n in dir() if not n.startswith("_")]
