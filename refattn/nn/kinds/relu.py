"""Kind ``relu``: linear attention with ``relu(x) + 1e-3`` features.

No options, nothing drawn, no learnable parameters; omega: none.
"""

from __future__ import annotations

from ...features.deterministic import _relu_bwd, _relu_fwd
from .base import AttentionKind, linear_kind, no_draws

__all__ = ["KIND"]

_fwd, _bwd = linear_kind(_relu_fwd, _relu_bwd)                # unchecked cores

KIND = AttentionKind("relu", _fwd, _bwd, options={}, choices={}, params=no_draws, features=no_draws,
                     omega="none")
