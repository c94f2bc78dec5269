"""Kind ``elu``: linear attention with ``elu(x) + 1`` features (Katharopoulos et al. 2020).

No options, nothing drawn, no learnable parameters; omega: none.
"""

from __future__ import annotations

from ...features.deterministic import elu_features_bwd_core, elu_features_fwd_core
from .base import AttentionKind, linear_kind, no_draws

__all__ = ["KIND"]

_fwd, _bwd = linear_kind(elu_features_fwd_core, elu_features_bwd_core)

KIND = AttentionKind("elu", _fwd, _bwd, options={}, choices={}, params=no_draws, features=no_draws,
                     omega="none")
