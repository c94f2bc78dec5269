"""Kind ``relu``: linear attention with ``relu(x) + 1e-3`` features.

No options, nothing drawn, no learnable parameters; omega: none.
"""

from __future__ import annotations

from ...features.deterministic import relu_features_bwd_core, relu_features_fwd_core
from .base import AttentionKind, linear_kind, no_draws

__all__ = ["KIND"]

_fwd, _bwd = linear_kind(relu_features_fwd_core, relu_features_bwd_core)

KIND = AttentionKind("relu", _fwd, _bwd, options={}, choices={}, params=no_draws, features=no_draws,
                     omega="none")
