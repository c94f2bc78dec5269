"""Kind ``gmm``: KL-Transformer GMM-PRF / GMM-RKS (Chowdhury et al. Eqs. 7-9; :mod:`refattn.features.gmm`).

Options: ``features`` in {"prf", "rks"}, ``m`` features, ``components`` C, ``covariance`` in {"diagonal",
"full"}, ``init`` and ``s_init`` (the start of the mixture; the paper does not state its initialisation):

* ``init="scaled-identity"`` (default): ``S_c = s_init I`` (``s_init`` 1 by default), means 0, equal
  weights (:func:`refattn.random.init_gmm`), so the kernel starts as ``exp(-s_init^2 |q - k|^2 /
  (2 sqrt(d)))`` of the scaled inputs.
* ``init="authors"``: the KL authors' code's random start of their map
  (:func:`refattn.random.init_gmm_authors`, with the model's heads H in the fans): RKS, factor entries
  ``U(+-sqrt(6 / (d^2 + H d)))`` (``E[S_c S_c^T] = 2 / (d + H) I``) and means ``U(+-1/d)``, needs
  ``covariance="full"``; PRF, ``S_c = diag(exp(s / 2))`` with a log-variance ``s ~ U(+-sqrt(6 / (d + H)))``
  per coordinate and means ``U(+-1/sqrt(d))``; equal weights. ``s_init`` scales the scaled-identity start
  only (left at 1 here).

``on_nonpositive``: RKS features can give a non-positive
normaliser (from the first forward, typically), so ``features="rks"`` needs it set explicitly (``"ignore"``
to train, ``"raise"`` to stop at the first one); left unset, the configuration check refuses it, naming the
option (PRF: unused). Learnable: ``attn["gmm"]`` (mixture weights, means, covariance factors); none is
constrained: ``Sigma_c = S_c S_c^T`` (diagonal: ``diag(S_c^2)``) is valid for any real S, and the weights
are the softmax of free logits. Drawn: the base noise ``features["noise"]: (C, M/C, d)``.

omega: **none** (the frequencies are ``mu + S noise``: their gradient flows to the learnable ``gmm``).
"""

from __future__ import annotations

from ...features.gmm import (check_gmm_features_struct, gmm_prf_features_stable_bwd_core,
                             gmm_prf_features_stable_fwd_core, gmm_rks_features_bwd_core,
                             gmm_rks_features_fwd_core)
from .base import AttentionKind, Draw, resolve_on_nonpositive, spectral_kind

__all__ = ["KIND"]

def _check_map(attn_params, features, options, q, train):
    """The maps' structural checks (no data read) on the queries, once per forward; the namespace."""
    return check_gmm_features_struct(q, features["noise"], attn_params["gmm"])


# the unchecked cores of gmm_prf_features_stable_fwd/_bwd and gmm_rks_features_fwd/_bwd: the model checked its
# parameters, features and inputs once
_fwd, _bwd = spectral_kind(gmm_prf_features_stable_fwd_core, gmm_prf_features_stable_bwd_core,
                           gmm_rks_features_fwd_core, gmm_rks_features_bwd_core,
                           lambda p, f, o, t: ((f["noise"], p["gmm"]), {}), "gmm", check=_check_map)


def _params(att, *, d_head, n_heads):
    args = {"components": att["components"], "d": d_head, "covariance": att["covariance"],
            "s_scale": att["s_init"]}
    if att["init"] == "authors":                 # the default's arguments (and so its draw) are unchanged
        args.update(init="authors", features=att["features"], heads=n_heads)
    return {"gmm": Draw("gmm", args)}


def _check(att, *, d_head, n_heads):
    s = att["s_init"]
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not (0 < s < float("inf")):
        raise ValueError(f"attention.s_init: expected a positive finite number; got {s!r}")
    if att["init"] == "authors" and s != 1.0:
        raise ValueError(f"attention.s_init: scales the 'scaled-identity' start only; got s_init = {s!r} "
                         "with init='authors' (expected it unset)")
    if att["init"] == "authors" and att["features"] == "rks" and att["covariance"] != "full":
        raise ValueError("attention.covariance: init='authors' with features='rks' draws the authors' full "
                         f"(d, d) factor; got covariance={att['covariance']!r} (expected 'full')")
    return resolve_on_nonpositive({**att, "s_init": float(s)}, att["features"] == "rks", "features='rks'")


def _features(att, *, d_head, n_heads):
    return {"noise": Draw("gmm_noise", {"components": att["components"], "m": att["m"], "d": d_head})}


KIND = AttentionKind(
    "gmm", _fwd, _bwd,
    options={"features": "prf", "m": None, "components": 2, "covariance": "diagonal",
             "on_nonpositive": None, "s_init": 1.0, "init": "scaled-identity"},
    choices={"features": ("prf", "rks"), "covariance": ("diagonal", "full"),
             "init": ("scaled-identity", "authors"),
             "on_nonpositive": (None, "raise", "ignore")},
    params=_params, features=_features, omega="none", check=_check)
