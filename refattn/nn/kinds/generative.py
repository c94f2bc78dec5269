"""Kind ``generative``: KL-Transformer Generative-PRF / Generative-RKS (Chowdhury et al. Sec. 3.3;
:mod:`refattn.features.generative`).

Options: ``features`` in {"prf", "rks"}, ``m`` features, ``on_nonpositive`` (RKS). Learnable:
``attn["generator"]`` (the generator MLP). Drawn: the generator's input noise ``features["noise"]: (M, d)``
and its batch-norm state ``features["state"]`` (the generator runs with the batch statistics of its M noise
rows, train mode, at training and evaluation; the state is the initial one).

omega: **none** (the frequencies are the generator's output: their gradient flows to ``generator``).
"""

from __future__ import annotations

from ...features.generative import (generative_prf_features_stable_bwd, generative_prf_features_stable_fwd,
                                    generative_rks_features_bwd, generative_rks_features_fwd)
from .base import AttentionKind, Draw, spectral_kind

__all__ = ["KIND"]

_fwd, _bwd = spectral_kind(generative_prf_features_stable_fwd, generative_prf_features_stable_bwd,
                           generative_rks_features_fwd, generative_rks_features_bwd,
                           lambda p, f, o: ((f["noise"], p["generator"], f["state"]), {"train": True}),
                           "generator")


def _params(att, *, d_head, n_heads):
    return {"generator": Draw("generator", {"d": d_head})}


def _features(att, *, d_head, n_heads):
    return {"noise": Draw("generator_noise", {"m": att["m"], "d": d_head}),
            "state": Draw("generator_state", {"d": d_head})}


KIND = AttentionKind(
    "generative", _fwd, _bwd,
    options={"features": "prf", "m": None, "on_nonpositive": "raise"},
    choices={"features": ("prf", "rks"), "on_nonpositive": ("raise", "ignore")},
    params=_params, features=_features, omega="none")
