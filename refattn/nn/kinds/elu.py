"""Kind ``elu``: linear attention with ``elu(x) + 1`` features (Katharopoulos et al. 2020).

No options, nothing drawn, no learnable parameters; omega: none.
"""

from __future__ import annotations

from ...features.deterministic import _elu_bwd, _elu_fwd
from .base import AttentionKind, linear_kind, no_draws

__all__ = ["KIND"]

_fwd, _bwd = linear_kind(_elu_fwd, _elu_bwd)                # unchecked cores

KIND = AttentionKind("elu", _fwd, _bwd, options={}, choices={}, params=no_draws, features=no_draws,
                     omega="none")
