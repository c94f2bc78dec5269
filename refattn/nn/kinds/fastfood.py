"""Kind ``fastfood``: KL-Transformer FastFood-PRF / FastFood-RKS (Chowdhury et al. Sec. 3.2;
:mod:`refattn.features.fastfood`).

Options: ``features`` in {"prf", "rks"}, ``m`` features, ``s_law`` in {"chi", "identity"}, ``on_nonpositive``,
and ``variant``, the Appendix D variants: ``"SGB"`` (S, G and B learnable, the paper's main model),
``"S"`` (only the scaling S learned) and ``"fixed"`` (nothing learned: random FastFood features). Learnable:
``attn["fastfood"]`` (the diagonals the variant learns, drawn once at initialisation; frozen diagonals get
``None`` gradients, which the optimisers leave unchanged; the permutation is a fixed integer array stored with
them; none is constrained: any real diagonals give a valid projection ``S H G Pi H B``). Nothing is drawn
per step. ``on_nonpositive``: RKS features can give a non-positive normaliser (from the first forward,
typically), so ``features="rks"`` needs it set explicitly (``"ignore"`` to train, ``"raise"`` to stop at the
first one); left unset, the configuration check refuses it, naming the option (PRF: unused). This holds for
every ``variant`` (``"S"`` with RKS included).

omega: **none** (the structured projection ``S H G Pi H B`` is built from the learnable diagonals).
"""

from __future__ import annotations

from ...features.fastfood import (fastfood_prf_features_stable_bwd_core,
                                  fastfood_prf_features_stable_fwd_core, fastfood_rks_features_bwd_core,
                                  fastfood_rks_features_fwd_core)
from ...features.fastfood_transform import (FASTFOOD_VARIANTS, check_fastfood_perm, check_fastfood_struct,
                                            padded_dim)
from .base import AttentionKind, Draw, no_draws, resolve_on_nonpositive, spectral_kind

__all__ = ["KIND"]


def _check(attn_params, features, options, q, train):
    """The maps' structural checks on the queries, then the permutation's values (an integer leaf: not
    covered by the model's finiteness check), once per forward; the namespace."""
    p = attn_params["fastfood"]
    xp = check_fastfood_struct(q, p, 1.0, options["variant"])                              # its shapes first
    check_fastfood_perm(p, padded_dim(q.shape[-1]), xp)
    return xp


# the unchecked cores of fastfood_prf_features_stable_fwd/_bwd and fastfood_rks_features_fwd/_bwd (the model
# checked its parameters, features and inputs once)
_fwd, _bwd = spectral_kind(fastfood_prf_features_stable_fwd_core, fastfood_prf_features_stable_bwd_core,
                           fastfood_rks_features_fwd_core, fastfood_rks_features_bwd_core,
                           lambda p, f, o, t: ((p["fastfood"],), {"variant": o["variant"]}), "fastfood",
                           check=_check)


def _check_config(att, *, d_head, n_heads):
    return resolve_on_nonpositive(att, att["features"] == "rks", "features='rks'")


def _params(att, *, d_head, n_heads):
    return {"fastfood": Draw("fastfood", {"m": att["m"], "d": d_head, "s_law": att["s_law"]})}


KIND = AttentionKind(
    "fastfood", _fwd, _bwd,
    options={"features": "prf", "m": None, "s_law": "chi", "on_nonpositive": None, "variant": "SGB"},
    choices={"features": ("prf", "rks"), "s_law": ("chi", "identity"),
             "on_nonpositive": (None, "raise", "ignore"), "variant": tuple(FASTFOOD_VARIANTS)},
    params=_params, features=no_draws, omega="none", check=_check_config)
