"""Kind ``generative``: KL-Transformer Generative-PRF / Generative-RKS (Chowdhury et al. Sec. 3.3;
:mod:`refattn.features.generative`).

Options: ``features`` in {"prf", "rks"}, ``m`` features, ``on_nonpositive``, and ``bn``, the batch-norm
mode of the generator:

* ``"batch"`` (default): the generator always runs in training mode, normalising with the batch statistics of
  its M noise rows, at training and at evaluation; its state is the initial one, drawn with the features
  (``features["state"]``);
* ``"running"``: training forwards (``train=True``) use the batch statistics and return updated running
  statistics (momentum 0.1, as torch), kept in the model as the non-learnable ``attn["bn_state"]`` (its
  gradient is ``None``: the optimisers leave it; ``refattn.nn.train`` writes each step's updated statistics
  back, :func:`running_updates`); evaluation forwards (``train=False``) normalise with those running
  statistics, so the frequencies are iid draws of g(rho_0).

Learnable: ``attn["generator"]`` (the generator MLP). Drawn: the generator's input noise
``features["noise"]: (M, d)`` (and ``features["state"]`` in ``"batch"`` mode).

``on_nonpositive``: RKS features can give a non-positive normaliser (from the first forward, typically), so
``features="rks"`` needs it set explicitly (``"ignore"`` to train, ``"raise"`` to stop at the first one);
left unset, the configuration check refuses it, naming the option (PRF: unused).
No learnable parameter is constrained (the generator is an MLP; the running variances are statistics, not
learned, checked positive in every forward).

omega: **none** (the frequencies are the generator's output: their gradient flows to ``generator``).
"""

from __future__ import annotations

from ...features.generative import (check_generative_features_struct, generative_prf_features_stable_bwd_core,
                                    generative_prf_features_stable_fwd_core, generative_rks_features_bwd_core,
                                    generative_rks_features_fwd_core)
from ...features.generator_network import check_generator_state
from .base import AttentionKind, Draw, resolve_on_nonpositive, spectral_kind

__all__ = ["KIND", "running_updates"]


def _args(p, f, o, train):
    if o["bn"] == "running":
        return (f["noise"], p["generator"], p["bn_state"]), {"train": bool(train)}
    return (f["noise"], p["generator"], f["state"]), {"train": True}


def _check(attn_params, features, options, q, train):
    """The maps' structural checks on the queries, then the running variances' sign (beyond the model's
    finiteness check), once per forward; the namespace."""
    (noise, params, state), kw = _args(attn_params, features, options, train)
    xp = check_generative_features_struct(q, noise, params, state, train=kw["train"])
    check_generator_state(state, xp=xp)
    return xp


# the unchecked cores of generative_prf_features_stable_fwd/_bwd and generative_rks_features_fwd/_bwd
# (the model checked its parameters, features and inputs once)
_spectral_fwd, _spectral_bwd = spectral_kind(
    generative_prf_features_stable_fwd_core, generative_prf_features_stable_bwd_core,
    generative_rks_features_fwd_core, generative_rks_features_bwd_core, _args, "generator",
    check=_check)


def _fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
         options):
    o, cache = _spectral_fwd(q, k, v, attn_params, features, positions=positions, train=train, causal=causal,
                             options=options)
    return o, (cache, options["bn"], bool(train))


def _bwd(do, cache):
    inner, bn, _ = cache
    dq, dk, dv, grads = _spectral_bwd(do, inner)
    if bn == "running":
        grads = {**grads, "bn_state": None}                                         # statistics, not learned
    return dq, dk, dv, grads


def running_updates(cache) -> dict:
    """``{"bn_state": new running statistics}`` of a training forward in ``bn="running"`` mode, else
    ``{}``."""
    inner, bn, train = cache
    return {"bn_state": inner[-1]} if bn == "running" and train else {}


def _check_config(att, *, d_head, n_heads):
    return resolve_on_nonpositive(att, att["features"] == "rks", "features='rks'")


def _params(att, *, d_head, n_heads):
    out = {"generator": Draw("generator", {"d": d_head})}
    if att["bn"] == "running":
        out["bn_state"] = Draw("generator_state", {"d": d_head})                   # running statistics
    return out


def _features(att, *, d_head, n_heads):
    out = {"noise": Draw("generator_noise", {"m": att["m"], "d": d_head})}
    if att["bn"] == "batch":
        out["state"] = Draw("generator_state", {"d": d_head})
    return out


KIND = AttentionKind(
    "generative", _fwd, _bwd,
    options={"features": "prf", "m": None, "on_nonpositive": None, "bn": "batch"},
    choices={"features": ("prf", "rks"), "on_nonpositive": (None, "raise", "ignore"),
             "bn": ("batch", "running")},
    params=_params, features=_features, omega="none", updates=running_updates, check=_check_config)
