"""Kind ``fastfood``: KL-Transformer FastFood-PRF / FastFood-RKS (Chowdhury et al. Sec. 3.2;
:mod:`refattn.features.fastfood`).

Options: ``features`` in {"prf", "rks"}, ``m`` features, ``s_law`` in {"chi", "identity"}, ``on_nonpositive``
(RKS). Learnable: ``attn["fastfood"]`` (the diagonals S, G, B, drawn once at initialisation; the permutation
is a fixed integer array stored with them). Nothing is drawn per step.

omega: **none** (the structured projection ``S H G Pi H B`` is built from the learnable diagonals).
"""

from __future__ import annotations

from ...features.fastfood import (fastfood_prf_features_stable_bwd, fastfood_prf_features_stable_fwd,
                                  fastfood_rks_features_bwd, fastfood_rks_features_fwd)
from .base import AttentionKind, Draw, no_draws, spectral_kind

__all__ = ["KIND"]

_fwd, _bwd = spectral_kind(fastfood_prf_features_stable_fwd, fastfood_prf_features_stable_bwd,
                           fastfood_rks_features_fwd, fastfood_rks_features_bwd,
                           lambda p, f, o: ((p["fastfood"],), {}), "fastfood")


def _params(att, *, d_head, n_heads):
    return {"fastfood": Draw("fastfood", {"m": att["m"], "d": d_head, "s_law": att["s_law"]})}


KIND = AttentionKind(
    "fastfood", _fwd, _bwd,
    options={"features": "prf", "m": None, "s_law": "chi", "on_nonpositive": "raise"},
    choices={"features": ("prf", "rks"), "s_law": ("chi", "identity"), "on_nonpositive": ("raise", "ignore")},
    params=_params, features=no_draws, omega="none")
