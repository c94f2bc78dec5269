"""The registry of adapted implementations, in the conformance report's order."""

from __future__ import annotations

from . import fast_transformers, horn, kl_transformer, performer_pytorch, sklearn_rbf, xformers_favor
from .base import Implementation

__all__ = ["IMPLEMENTATIONS"]

#: every adapted implementation, in the report's order
IMPLEMENTATIONS: list[Implementation] = [
    performer_pytorch.IMPLEMENTATION,
    sklearn_rbf.IMPLEMENTATION,
    fast_transformers.IMPLEMENTATION,
    kl_transformer.IMPLEMENTATION,
    horn.IMPLEMENTATION,
    xformers_favor.IMPLEMENTATION,
]
