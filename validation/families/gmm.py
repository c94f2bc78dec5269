r"""GMM-RKS and GMM-PRF (Chowdhury et al., KL-Transformer, Eqs. 3-5, 9-10): the candidate's contract.

``fn(x (..., L, d), noise (C, Mc, d), logits (C,), mu (C, d), S (C, d, d)) -> phi (..., L, m')``

Convention (refattn.features.gmm): ``pi = softmax(logits)``; ``Sigma_c = S_c S_c^T``; the frequencies are
``omega_cj = mu_c + S_c noise_cj`` (M = C Mc of them, component-major); component c's features are scaled by
``sqrt(C pi_c)`` and all by ``1 / sqrt(M)`` (deterministic assignment, M/C per component, so that the weights
get gradients). Frequencies, not angular frequencies: the phase is ``x . omega``.

* ``gmm-rks``: ``[cos(x omega^T), sin(x omega^T)] * sqrt(C pi_c) / sqrt(M)``; estimates
  ``sum_c pi_c exp(-|S_c^T p|^2 / 2) cos(mu_c^T p)``, p = q - k (Eq. 4);
* ``gmm-prf``: ``exp(x omega^T - |x|^2) * sqrt(C pi_c) / sqrt(M)`` (Eq. 9's offset |x|^2, not |x|^2/2);
  estimates ``sum_c pi_c exp(-|q|^2 - |k|^2 + mu_c^T o + |S_c^T o|^2 / 2)``, o = q + k. A stabilised pair
  ``(phi, log_scale)`` is read as ``phi * exp(log_scale)``.
"""

from __future__ import annotations

import math

import numpy as np

from refattn.features import gmm as gmm_mod
from refattn.features.gmm_spectrum import GMMParams, gmm_frequencies

from ..base import Target, UsageError
from .attention import ATTENTION_CHECKS, attend, feature_attention, half_rows, torch_target
from .base import FEATURE_CHECKS, Family, FeatureContract, symmetric_vjp

__all__ = ["FAMILIES"]

C, MC = 3, 16
LEARN = ("logits", "mu", "S")
_PAIRS: dict = {}


def _draw(mu_scale):
    def draw(rng, d, dtype):
        S = 0.5 * np.eye(d) + 0.4 * rng.standard_normal((C, d, d)) / math.sqrt(d)  # not symmetric
        args = {
            "logits": 0.5 * rng.standard_normal(C),
            "mu": mu_scale * rng.standard_normal((C, d)) / math.sqrt(d),
            "S": S,
            "noise": rng.standard_normal((C, MC, d)),
        }
        return {k: v.astype(dtype) for k, v in args.items()}
    return draw


def _redraw(rng, args, dtype):
    C_, Mc, d = args["noise"].shape
    return dict(args, noise=rng.standard_normal((C_, Mc, d)).astype(dtype))


def _params(args):
    return GMMParams(args["logits"], args["mu"], args["S"])


def _inputs(scale):
    def inputs(rng, shape, d):
        return scale * rng.standard_normal(shape + (d,)) / math.sqrt(d)
    return inputs


def _contract(which):
    fwd, bwd = getattr(gmm_mod, f"gmm_{which}_features_fwd"), getattr(gmm_mod, f"gmm_{which}_features_bwd")
    kern = getattr(gmm_mod, f"gmm_{which}_kernel")

    def ref(x, args):
        phi = fwd(x, args["noise"], _params(args))[0]
        return phi, phi

    def pair_fwd(x, args):
        return fwd(x, args["noise"], _params(args))

    def pair_bwd(dphi, cache):
        g = bwd(dphi, cache)
        return {"x": g.x, "logits": g.params.logits, "mu": g.params.mu, "S": g.params.S}
    _PAIRS[which] = (pair_fwd, pair_bwd)
    what = ("sum_c pi_c exp(-|S_c^T (q-k)|^2/2) cos(mu_c^T (q-k))" if which == "rks" else
            "sum_c pi_c exp(-|q|^2-|k|^2+mu_c^T (q+k)+|S_c^T (q+k)|^2/2)")
    return FeatureContract(
        family=f"gmm-{which}", signature="fn(x, noise, logits, mu, S) -> phi (..., L, m')",
        arg_names=("x", "noise", "logits", "mu", "S"), convention=__doc__,
        draw=_draw(0.5 if which == "rks" else 0.3), redraw=_redraw, ref=ref,
        ref_vjp=symmetric_vjp(pair_fwd, pair_bwd, LEARN),
        kernel_fn=lambda X, Y, args: np.asarray(kern(X, Y, _params(args))), learnable=LEARN,
        inputs=_inputs(0.8 if which == "rks" else 0.5), kernel_name=what)


def _target(which):
    def target(framework):
        if framework not in ("numpy", "torch"):
            raise UsageError(f"target refattn --as gmm-{which}: the built-in family targets run refattn's "
                             f"array-API core on NumPy or torch arrays; got "
                             f"--framework {framework}")
        f = getattr(gmm_mod, f"gmm_{which}_features")

        def fn(x, noise, logits, mu, S):
            return f(x, noise, gmm_mod.GMMParams(logits, mu, S))
        return Target(fn, framework, f"gmm-{which}", f"refattn.features.gmm_{which}_features")
    return target


def _omega(args):
    return gmm_frequencies(args["noise"], _params(args))[0]


def _attention(which):
    fc = _contract(which)
    return feature_attention(fc, _PAIRS[which], limit_kernel=fc.kernel_fn,
                             leak_keys=half_rows(_omega) if which == "prf" else None,
                             signature="fn(q, k, v, noise, logits, mu, S, causal) -> out (..., L, d_v)")


def _att_target(which):
    def target(framework):
        if framework not in ("numpy", "torch"):
            raise UsageError(f"target refattn --as gmm-{which} --kind attention: NumPy or torch; got "
                             f"--framework {framework}")
        f = gmm_mod.gmm_prf_features_stable if which == "prf" else gmm_mod.gmm_rks_features

        def fn(q, k, v, noise, logits, mu, S, causal):
            p = gmm_mod.GMMParams(logits, mu, S)
            return attend(f(q, noise, p), f(k, noise, p), v, causal)
        if framework == "torch":
            return Target(torch_target(_attention(which), fn), "torch", f"gmm-{which}",
                          f"linear attention on refattn gmm_{which} features, on tensors, manual backward")
        return Target(fn, "numpy", f"gmm-{which}", f"linear attention on refattn gmm_{which} features")
    return target


FAMILIES = {
    f"gmm-{w}": Family(
        f"gmm-{w}",
        {"features": _contract(w), "attention": _attention(w)},
        {"features": _target(w), "attention": _att_target(w)},
        {"features": FEATURE_CHECKS, "attention": ATTENTION_CHECKS},
    )
    for w in ("rks", "prf")
}
