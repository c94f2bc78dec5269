"""Learnable parameters stay in their domain (refattn.nn.kinds.domains): FLT's positive spectrum fields are
learned through their logarithm and the proposal's scale above the floor the spectrum sets
(refattn.rpe.spectra.scale_floor), so every FLT spectrum family and every KL kind trains at lr 1e-2 with
AdamW and SGD without leaving it; the chain rule of the parameterisation is gradient-checked in float64; a
map whose normaliser can be non-positive needs ``on_nonpositive`` set, and the configuration check says so.

Before the parameterisation (the proposal's scale and the spectrum's widths/lengths learned as they are), the
same training loop stopped with a ValueError from the forward within 100 steps for 5 of the 16 FLT runs
(AdamW: Gaussian kernel at step 3, Gaussian mixture 19 with a negative sigma, Gaussian basis 30 with the
proposal under its floor; SGD: Gaussian kernel 2, B-spline 3 with a negative scale), and the model-level
Gaussian kernel with AdamW at step 3."""

from __future__ import annotations

import math

import numpy as np
import pytest

import refattn.nn.init as nninit
from refattn.nn.config import check_attention_config
from refattn.nn.kinds.domains import (Log, LogExcess, spectral_values_bwd, spectral_values_fwd,
                                      spectrum_values, store_spectral)
from refattn.nn.kinds.registry import ATTENTION_KINDS
from refattn.nn.optim import adam_init, adamw_update, sgd_init, sgd_update
from refattn.nn.transformer import loss_and_grads, transformer
from refattn.rpe.spectra import (PROPOSAL_KINDS, Box, BSpline, CauchyKernel, GaussianBasis, GaussianKernel,
                                 GaussianMixture, LaplaceKernel, Proposal, SinPower, check_proposal,
                                 scale_floor)
from refattn.tree import tree_leaves, tree_map
from validation import check_vjp

FLT = {
    "gaussian_mixture": {}, "gaussian_kernel": {}, "laplace_kernel": {}, "cauchy_kernel": {},
    "gaussian_basis": {}, "bspline": {}, "box": {"truncation": 3.0}, "sin_power": {"truncation": 3.0},
}
KL = {
    "gmm": {"kind": "gmm"},
    "gmm-full-rks": {"kind": "gmm", "covariance": "full", "features": "rks", "on_nonpositive": "ignore"},
    "fastfood": {"kind": "fastfood"},
    "fastfood-S-rks": {"kind": "fastfood", "variant": "S", "features": "rks", "on_nonpositive": "ignore"},
    "generative": {"kind": "generative"},
    "flt-linear": {"kind": "flt", "r": 4, "m": 8, "feature_map": "linear", "on_nonpositive": "ignore"},
}
#: optimiser steps per run (before the parameterisation, AdamW and SGD at lr 1e-2 left the domain within them:
#: the module docstring)
STEPS = 100
KL_STEPS = 40
LR = 1e-2
D_HEAD, N_HEADS = 4, 2


def _config(att):
    return dict(task="classify", vocab_size=5, n_classes=2, d_model=4, n_heads=1, n_layers=1, max_len=4,
                d_ff=4, position="learned", attention=att)


def _layer(att, seed=0):
    """A checked attention config, its kind, one layer's stored parameters and drawn features, q, k, v."""
    att = check_attention_config(att, d_head=D_HEAD, n_heads=N_HEADS)
    kind = ATTENTION_KINDS[att["kind"]]
    rng = np.random.default_rng(seed)
    params = nninit.init_mha(rng, D_HEAD * N_HEADS, N_HEADS, att)["attn"]        # drawn, then stored
    feats = nninit.draw_declared(rng, kind.features(att, d_head=D_HEAD, n_heads=N_HEADS), dtype=np.float64)
    q, k, v = (rng.standard_normal((2, N_HEADS, 6, D_HEAD)) for _ in range(3))
    return att, kind, params, feats, (q, k, v)


def _teacher(params):
    """The same layer with every width/length/radius and every proposal excess times e^-2: fitting its output
    pulls the student's constrained parameters towards their boundary (a valid teacher by construction)."""
    def shrink(a):
        if isinstance(a, Log):
            return Log(a.log - 2.0)
        if isinstance(a, LogExcess):
            return LogExcess(a.log_excess - 2.0)
        return a

    return {**params, "spectrum": type(params["spectrum"])(*map(shrink, params["spectrum"])),
            "proposal": params["proposal"]._replace(scale=shrink(params["proposal"].scale))}


def _train(att, optimizer, steps):
    """`steps` optimiser steps of one attention layer (the kind's forward and backward, as the model runs
    them) on the mean squared error to a target; returns the kind, its options and the trained parameters."""
    att, kind, params, feats, (q, k, v) = _layer(att)
    if "spectrum" in params:
        target, _ = kind.fwd(q, k, v, _teacher(params), feats, causal=False, options=att)
    else:
        target = np.random.default_rng(1).standard_normal(q.shape)
    init, update = (adam_init, adamw_update) if optimizer == "adamw" else (sgd_init, sgd_update)
    state = init(params)
    for _ in range(steps):
        y, cache = kind.fwd(q, k, v, params, feats, causal=False, options=att)
        *_, grads = kind.bwd((y - target) / y.size, cache)                          # d mean((y - t)^2) / 2
        params, state = update(params, grads, state, lr=LR)
    y, _ = kind.fwd(q, k, v, params, feats, causal=False, options=att)              # the last update too
    assert np.all(np.isfinite(y))
    return params


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
@pytest.mark.parametrize("family", list(FLT))
def test_flt_trains_inside_the_domain(family, optimizer):
    """Every spectrum family, learned proposal: STEPS steps at lr 1e-2 towards a narrower teacher, then every
    constrained value valid (positive widths/lengths/radii, the proposal accepted by check_proposal: its
    scale above the floor)."""
    params = _train({"kind": "flt", "r": 4, "m": 8, "spectrum": family, **FLT[family]}, optimizer, STEPS)
    spec, prop, _ = spectral_values_fwd(params["spectrum"], params["proposal"], xp=np)
    check_proposal(spec, prop, allow_truncation="truncation" in FLT[family])       # signs, support, variance


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
@pytest.mark.parametrize("name", list(KL))
def test_kl_kinds_and_nonpositive_maps_train(name, optimizer):
    """The KL kinds (no constrained parameter: any real S, G, B, generator weights) and the maps whose
    normaliser can be non-positive (with on_nonpositive='ignore', as their docs say) train."""
    params = _train(KL[name], optimizer, KL_STEPS)
    assert all(np.all(np.isfinite(a)) for a in tree_leaves(params) if a.dtype.kind == "f")


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_model_trains_inside_the_domain(optimizer):
    """Through the whole model (init's stored form, per-head spectra shared by the layers, the model's loss):
    the Gaussian kernel, whose proposal left the domain at step 3 with AdamW before."""
    cfg = _config({"kind": "flt", "r": 2, "m": 4, "spectrum": "gaussian_kernel", "share": "heads"})
    cfg.update(n_heads=2, n_layers=2)
    rng = np.random.default_rng(0)
    params, feats = nninit.init_transformer(rng, cfg), nninit.draw_attention_features(rng, cfg)
    X, Y = rng.integers(0, 5, size=(16, 4)), rng.integers(0, 2, size=(16,))
    init, update = (adam_init, adamw_update) if optimizer == "adamw" else (sgd_init, sgd_update)
    state = init(params)
    for _ in range(30):
        idx = rng.integers(0, 16, size=4)
        _, grads = loss_and_grads(params, X[idx], Y[idx], feats, config=cfg)
        params, state = update(params, grads, state, lr=LR)
    assert np.all(np.isfinite(transformer(params, X[:4], feats, config=cfg)))
    shared = params["shared"]["attn"]
    for h in range(2):
        spec, prop, _ = spectral_values_fwd(*(tree_map(lambda a, h=h: a[h], shared[n])
                                              for n in ("spectrum", "proposal")), xp=np)
        check_proposal(spec, prop)


@pytest.mark.parametrize("att, what", [
    ({"kind": "flt", "feature_map": "linear"}, "feature_map='linear'"),
    ({"kind": "fastfood", "variant": "S", "features": "rks"}, "features='rks'"),
    ({"kind": "fastfood", "features": "rks"}, "features='rks'"),
    ({"kind": "gmm", "features": "rks"}, "features='rks'"),
    ({"kind": "generative", "features": "rks"}, "features='rks'"),
    ({"kind": "favor", "features": "trig"}, "features='trig'"),
])
def test_nonpositive_maps_need_on_nonpositive_set(att, what):
    """A map whose normaliser can be non-positive cannot train under 'raise' (its first forward stops): left
    unset, the option is refused by the configuration check, naming it; set, it is kept."""
    with pytest.raises(ValueError, match=f"attention.on_nonpositive: {what} can give non-positive"):
        check_attention_config(att, d_head=4, n_heads=1)
    for choice in ("ignore", "raise"):
        assert check_attention_config({**att, "on_nonpositive": choice}, d_head=4)["on_nonpositive"] == choice


@pytest.mark.parametrize("att", [{"kind": "flt"}, {"kind": "flt", "feature_map": "relu"}, {"kind": "favor"},
                                 {"kind": "gmm"}, {"kind": "fastfood"}, {"kind": "generative"}])
def test_positive_maps_default_to_raise(att):
    assert check_attention_config(att, d_head=4, n_heads=1)["on_nonpositive"] == "raise"


def test_fastfood_s_rks_under_raise_stops_at_the_first_forward():
    """What the docs say 'raise' does for RKS: the first non-positive normaliser stops the run, naming it."""
    cfg = _config({"kind": "fastfood", "variant": "S", "features": "rks", "on_nonpositive": "raise"})
    rng = np.random.default_rng(0)
    params, feats = nninit.init_transformer(rng, cfg), nninit.draw_attention_features(rng, cfg)
    with pytest.raises(ValueError, match="non-positive normaliser"):
        transformer(params, rng.integers(0, 5, size=(8, 4)), feats, config=cfg)


# ---- the parameterisation itself ---------------------------------------------------------------------------
def _one(x):
    return np.asarray(x, dtype=np.float64)


#: (spectrum, proposal kind): every family with its default proposal, and every pair that sets a floor
PAIRS = {
    "mixture-gaussian": (GaussianMixture(w=_one([0.6, -0.3, 0.5]),
                                         mu=_one([[0.1, -0.2], [0.3, 0.0], [0.0, 0.2]]),
                                         sigma=_one([0.1, 0.25, 0.15])), "gaussian"),
    "kernel-gaussian": (GaussianKernel(C=_one(1.3), length=_one(1.7)), "gaussian"),
    "basis-gaussian": (GaussianBasis(w=_one([0.5, 0.7]), sigma=_one([1.3, 0.8])), "gaussian"),
    "cauchy-laplace": (CauchyKernel(C=_one(0.9), length=_one(1.4)), "laplace"),
    "laplace-mv_cauchy": (LaplaceKernel(C=_one(1.1), length=_one(0.7)), "mv_cauchy"),
    "bspline-cauchy": (BSpline(C=_one(1.2), v=_one([1.1, 0.9]), k=2), "cauchy"),
    "box-uniform": (Box(w=_one([0.5, 0.5]), v=_one([[1.5], [2.5]])), "uniform"),
    "sin_power-uniform": (SinPower(C=_one(0.8), v=_one([2.5]), k=3), "uniform"),
}


def _pair(name):
    spec, kind = PAIRS[name]
    D = {"mixture-gaussian": 2, "bspline-cauchy": 2}.get(name, 1)
    floor, _ = scale_floor(spec, kind, D)
    rng = np.random.default_rng(1)
    prop = Proposal(kind, 0.1 * rng.standard_normal(D), floor + np.exp(0.3 * rng.standard_normal(D)) * 0.2)
    return spec, prop


@pytest.mark.parametrize("name", list(PAIRS))
def test_parameterisation_gradient_checked(name):
    """d log = d value * exp(log), d log_excess = d scale * exp(log_excess), and the floor's pull on the
    spectrum: the backward against central differences in float64 over every raw parameter."""
    spec, prop = _pair(name)
    stored_spec, stored_prop = store_spectral(spec, prop, xp=np)

    def fwd(spectrum, proposal):
        s, p, cache = spectral_values_fwd(spectrum, proposal, xp=np)
        return (s, p), cache

    def bwd(dy, cache):
        ds, dp = spectral_values_bwd(dy[0], dy[1], cache)
        return {"spectrum": ds, "proposal": dp}

    check_vjp(fwd, bwd, {"spectrum": stored_spec, "proposal": stored_prop})


@pytest.mark.parametrize("name", list(PAIRS))
def test_stored_form_round_trips_and_any_raw_value_is_valid(name):
    spec, prop = _pair(name)
    stored_spec, stored_prop = store_spectral(spec, prop, xp=np)
    assert isinstance(stored_prop.scale, LogExcess)
    assert all(isinstance(getattr(stored_spec, n), Log) for n in ("sigma", "length", "v") if hasattr(spec, n))
    back_spec, back_prop, _ = spectral_values_fwd(stored_spec, stored_prop, xp=np)
    for a, b in zip(tree_leaves((back_spec, back_prop)), tree_leaves((spec, prop)), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    # raw values far out on either side still give an accepted pair (what no optimiser step can break)
    for shift in (-6.0, 6.0):
        far_spec = stored_spec._replace(**{n: Log(getattr(stored_spec, n).log + shift)
                                           for n in ("sigma", "length", "v") if hasattr(spec, n)})
        far_prop = stored_prop._replace(scale=LogExcess(stored_prop.scale.log_excess - abs(shift)))
        s, p, _ = spectral_values_fwd(far_spec, far_prop, xp=np)
        check_proposal(s, p, allow_truncation=p.kind == "uniform")


@pytest.mark.parametrize("name", [n for n in PAIRS if PAIRS[n][1] in ("gaussian", "laplace")])
def test_floor_is_check_proposals_bound(name):
    """scale_floor is the bound check_proposal applies: just above it accepted, just below refused."""
    spec, prop = _pair(name)
    D = prop.loc.shape[0]
    floor, dfloor = scale_floor(spec, prop.kind, D)
    assert floor > 0 and dfloor is not None
    check_proposal(spec, prop._replace(scale=np.full(D, floor * (1 + 1e-9))))
    with pytest.raises(ValueError, match="infinite variance"):
        check_proposal(spec, prop._replace(scale=np.full(D, floor * (1 - 1e-9))))


def test_floor_values():
    assert scale_floor(GaussianKernel(C=_one(1.0), length=_one(2.0)), "gaussian", 1)[0] == pytest.approx(
        1 / (2 * math.sqrt(2) * math.pi * 2.0), rel=1e-15)
    assert scale_floor(PAIRS["mixture-gaussian"][0], "gaussian", 2)[0] == pytest.approx(0.25 / math.sqrt(2))
    assert scale_floor(PAIRS["cauchy-laplace"][0], "laplace", 1)[0] == pytest.approx(1 / (4 * math.pi * 1.4))
    for kind in PROPOSAL_KINDS:
        if kind != "gaussian":
            assert scale_floor(PAIRS["kernel-gaussian"][0], kind, 1) == (0.0, None)


def test_init_refuses_a_proposal_scale_under_the_floor():
    """A configured proposal_scale the spectrum's floor rules out has no raw value: refused at init, naming
    the option (before: accepted, then the first forward raised)."""
    cfg = _config({"kind": "flt", "r": 2, "m": 4, "spectrum": "gaussian_mixture", "proposal_scale": 0.05})
    with pytest.raises(ValueError, match="attention.proposal_scale: .* must exceed s_\\* = 0.0707107"):
        nninit.init_transformer(np.random.default_rng(0), cfg)


def test_stored_paths_name_the_raw_parameters():
    """A checkpoint stores the raw arrays under paths that say so (an older checkpoint holding the values
    under .../sigma is refused as a missing entry, not misread)."""
    from refattn.nn.checkpoint import flatten_tree
    cfg = _config({"kind": "flt", "r": 2, "m": 4, "spectrum": "gaussian_mixture"})
    paths = set(flatten_tree(nninit.init_transformer(np.random.default_rng(0), cfg), "params"))
    assert "params/blocks/0/attn/attn/spectrum/sigma/log" in paths
    assert "params/blocks/0/attn/attn/proposal/scale/log_excess" in paths
    assert "params/blocks/0/attn/attn/spectrum/sigma" not in paths
    spec = spectrum_values(nninit.init_transformer(np.random.default_rng(0), cfg)["blocks"][0]["attn"]["attn"]
                           ["spectrum"], xp=np)
    np.testing.assert_allclose(spec.sigma, 0.1, rtol=1e-15)                          # the documented init
