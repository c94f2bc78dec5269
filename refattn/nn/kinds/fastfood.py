"""Kind ``fastfood``: KL-Transformer FastFood-PRF / FastFood-RKS (Chowdhury et al. Sec. 3.2;
:mod:`refattn.features.fastfood`).

Options: ``features`` in {"prf", "rks"}, ``m`` features, ``s_law`` in {"chi", "identity"}, ``on_nonpositive``
(RKS), and ``variant``, the Appendix D variants: ``"SGB"`` (S, G and B learnable, the paper's main model),
``"S"`` (only the scaling S learned) and ``"fixed"`` (nothing learned: random FastFood features). Learnable:
``attn["fastfood"]`` (the diagonals the variant learns, drawn once at initialisation; frozen diagonals get
``None`` gradients, which the optimisers leave unchanged; the permutation is a fixed integer array stored with
them). Nothing is drawn per step.

omega: **none** (the structured projection ``S H G Pi H B`` is built from the learnable diagonals).
"""

from __future__ import annotations

from ..._xp import namespace
from ...features.fastfood import (fastfood_prf_features_stable_bwd_core,
                                  fastfood_prf_features_stable_fwd_core, fastfood_rks_features_bwd_core,
                                  fastfood_rks_features_fwd_core)
from ...features.fastfood_transform import (FASTFOOD_VARIANTS, check_fastfood_params_struct,
                                            check_fastfood_perm, padded_dim)
from .base import AttentionKind, Draw, no_draws, spectral_kind

__all__ = ["KIND"]


def _check(attn_params, features, options, q):
    """The permutation's values (an integer leaf: not covered by the model's finiteness check), once."""
    p, xp = attn_params["fastfood"], namespace(q)
    check_fastfood_params_struct(p, q.shape[-1], q, xp)                                     # its shapes first
    check_fastfood_perm(p, padded_dim(q.shape[-1]), xp)


# the unchecked cores of fastfood_prf_features_stable_fwd/_bwd and fastfood_rks_features_fwd/_bwd (the model
# checked its parameters, features and inputs once)
_fwd, _bwd = spectral_kind(fastfood_prf_features_stable_fwd_core, fastfood_prf_features_stable_bwd_core,
                           fastfood_rks_features_fwd_core, fastfood_rks_features_bwd_core,
                           lambda p, f, o, t: ((p["fastfood"],), {"variant": o["variant"]}), "fastfood",
                           check=_check)


def _params(att, *, d_head, n_heads):
    return {"fastfood": Draw("fastfood", {"m": att["m"], "d": d_head, "s_law": att["s_law"]})}


KIND = AttentionKind(
    "fastfood", _fwd, _bwd,
    options={"features": "prf", "m": None, "s_law": "chi", "on_nonpositive": "raise", "variant": "SGB"},
    choices={"features": ("prf", "rks"), "s_law": ("chi", "identity"), "on_nonpositive": ("raise", "ignore"),
             "variant": tuple(FASTFOOD_VARIANTS)},
    params=_params, features=no_draws, omega="none")
