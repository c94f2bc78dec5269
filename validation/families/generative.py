r"""Generative-RKS and Generative-PRF (Chowdhury et al. Eqs. 7-8, 11): the candidate's contract.

``fn(x (..., L, d), noise (M, d_noise), params: dict, state: dict) -> phi (..., L, m')``

The generator (evaluation mode: batch norm uses the running statistics, so the M frequencies are iid):

    h_0 = noise;  h_l = leaky_relu(bn_l(h_{l-1} W_l + b_l)), l = 1..4;  omega = tanh(h_4 W_5 + b_5)   (M, d)
    bn_l(z) = gamma_l (z - mean_l) / sqrt(var_l + 1e-5) + beta_l,   leaky_relu slope 0.01

with ``params = {"W": [W_1..W_5] (d_in, d_out), "b": [b_1..b_5], "gamma": [4], "beta": [4]}`` (right
multiplication: ``h W``) and ``state = {"mean": [4], "var": [4]}`` (not learned). Here d = d_noise = width =
16, M = 32.

* ``generative-rks``: ``[cos(x omega^T), sin(x omega^T)] / sqrt(M)`` (Eq. 8);
* ``generative-prf``: ``exp(x omega^T - |x|^2) / sqrt(M)`` (Eq. 11 with Eq. 9's offset).

The kernels (``E_n cos(g(n)^T (q - k))``; ``E_n exp(g(n)^T (q + k)) exp(-|q|^2 - |k|^2)``) have no closed
form: ``kernel`` compares the candidate's mean with refattn's estimate on independent draws.
"""

from __future__ import annotations

import math

import numpy as np

from refattn.features import generative as generative_mod
from refattn.features.generator_network import GeneratorParams, GeneratorState, generator
from refattn.random import init_generator
from refattn.tree import tree_map

from ..base import Target, UsageError
from .attention import ATTENTION_CHECKS, attend, feature_attention, half_rows, torch_target
from .base import FEATURE_CHECKS, Family, FeatureContract, symmetric_vjp

__all__ = ["FAMILIES"]

M = 32
_PAIRS: dict = {}


def _draw(rng, d, dtype):
    p, _ = init_generator(rng, d)
    n = len(p.norms)
    params = {
        "W": [h.W for h in p.hidden] + [p.out.W],
        "b": [0.1 * rng.standard_normal(h.b.shape) for h in p.hidden]
        + [0.1 * rng.standard_normal(p.out.b.shape)],
        "gamma": [1.0 + 0.2 * rng.standard_normal(b.gamma.shape) for b in p.norms],
        "beta": [0.1 * rng.standard_normal(b.beta.shape) for b in p.norms],
    }
    state = {"mean": [0.1 * rng.standard_normal(p.norms[i].gamma.shape) for i in range(n)],
             "var": [rng.uniform(0.5, 2.0, p.norms[i].gamma.shape) for i in range(n)]}
    tree = {"noise": rng.standard_normal((M, d)), "params": params, "state": state}
    return _cast(tree, dtype)


def _cast(tree, dtype):
    return tree_map(lambda a: np.asarray(a, dtype=dtype), tree)


def _redraw(rng, args, dtype):
    return dict(args, noise=rng.standard_normal(args["noise"].shape).astype(dtype))


def _refattn_params(params, state):
    """refattn's GeneratorParams / GeneratorState from the contract's dicts."""
    tmpl, st = init_generator(np.random.default_rng(0), 1)                     # for the NamedTuple types only
    Dense, BN, BNS = type(tmpl.out), type(tmpl.norms[0]), type(st.norms[0])
    n = len(params["gamma"])
    gp = GeneratorParams(hidden=tuple(Dense(params["W"][i], params["b"][i]) for i in range(n)),
                         norms=tuple(BN(params["gamma"][i], params["beta"][i]) for i in range(n)),
                         out=Dense(params["W"][n], params["b"][n]))
    gs = GeneratorState(norms=tuple(BNS(state["mean"][i], state["var"][i]) for i in range(n)))
    return gp, gs


def _grads_dict(gp):
    n = len(gp.norms)
    return {
        "W": [gp.hidden[i].W for i in range(n)] + [gp.out.W],
        "b": [gp.hidden[i].b for i in range(n)] + [gp.out.b],
        "gamma": [b.gamma for b in gp.norms],
        "beta": [b.beta for b in gp.norms],
    }


def _contract(which):

    fwd, bwd = (
        getattr(generative_mod, f"generative_{which}_features_fwd"),
        getattr(generative_mod, f"generative_{which}_features_bwd"),
    )

    def pair_fwd(x, args):
        gp, gs = _refattn_params(args["params"], args["state"])
        out, cache = fwd(x, args["noise"], gp, gs, train=False)
        return out.phi, cache

    def ref(x, args):
        phi = pair_fwd(x, args)[0]
        return phi, phi

    def pair_bwd(dphi, cache):
        g = bwd(dphi, cache)
        return {"x": g.x, "params": _grads_dict(g.params)}

    _PAIRS[which] = (pair_fwd, pair_bwd)

    def inputs(rng, shape, d):
        return (0.8 if which == "rks" else 0.5) * rng.standard_normal(shape + (d,)) / math.sqrt(d)
    return FeatureContract(
        family=f"generative-{which}",
        signature="fn(x, noise, params, state) -> phi (..., L, m')",
        arg_names=("x", "noise", "params", "state"),
        convention=__doc__,
        draw=_draw,
        redraw=_redraw,
        ref=ref,
        ref_vjp=symmetric_vjp(pair_fwd, pair_bwd, ("params",)),
        kernel_fn=None,
        learnable=("params",),
        inputs=inputs,
    )


def _target(which):
    def target(framework):
        if framework not in ("numpy", "torch"):
            raise UsageError(f"target refattn --as generative-{which}: the built-in family targets take "
                             f"NumPy arrays; got --framework {framework}")
        f = getattr(generative_mod, f"generative_{which}_features")

        def fn(x, noise, params, state):
            gp, gs = _refattn_params(params, state)
            return f(x, noise, gp, gs, train=False).phi
        return Target(fn, framework, f"generative-{which}", f"refattn.features.generative_{which}_features "
                      f"(train=False)")
    return target


def _omega(args):
    gp, gs = _refattn_params(args["params"], args["state"])
    return generator(args["noise"], gp, gs, train=False).omega


def _attention(which):
    fc = _contract(which)
    return feature_attention(fc, _PAIRS[which], limit_kernel=None,
                             leak_keys=half_rows(_omega) if which == "prf" else None,
                             signature="fn(q, k, v, noise, params, state, causal) -> out (..., L, d_v)")


def _att_target(which):
    def target(framework):
        if framework not in ("numpy", "torch"):
            raise UsageError(f"target refattn --as generative-{which} --kind attention: NumPy or torch; got "
                             f"--framework {framework}")
        f = (generative_mod.generative_prf_features_stable if which == "prf"
             else generative_mod.generative_rks_features)

        def fn(q, k, v, noise, params, state, causal):
            gp, gs = _refattn_params(params, state)
            fq, fk = (f(x, noise, gp, gs, train=False) for x in (q, k))
            if which == "prf":
                return attend(tuple(fq[:2]), tuple(fk[:2]), v, causal)         # (phi, log_scale, state)
            return attend(fq.phi, fk.phi, v, causal)
        note = f"linear attention on refattn generative_{which} features"
        if framework == "torch":
            return Target(torch_target(_attention(which), fn), "torch", f"generative-{which}",
                          note + ", on tensors, manual backward")
        return Target(fn, "numpy", f"generative-{which}", note)
    return target


FAMILIES = {
    f"generative-{w}": Family(
        f"generative-{w}",
        {"features": _contract(w), "attention": _attention(w)},
        {"features": _target(w), "attention": _att_target(w)},
        {"features": FEATURE_CHECKS, "attention": ATTENTION_CHECKS},
    )
    for w in ("rks", "prf")
}
