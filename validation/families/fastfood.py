r"""FastFood-RKS and FastFood-PRF (Chowdhury et al. Eqs. 6, 12; Le et al. 2013): the candidate's contract.

``fn(x (..., L, d), S (n_blocks, D), G (n_blocks, D), B (n_blocks, D), perm (n_blocks, D) int) -> phi``

Convention (refattn.features.fastfood): d is zero-padded to D, the next power of two (here d = 12, D = 16);
``M = n_blocks D`` frequencies, block-major; block b's rows are

    V_b = (1 / sqrt(D)) diag(S_b) H diag(G_b) Pi_b H diag(B_b)

with H the *unnormalised* Sylvester Walsh-Hadamard matrix (entries +-1), ``Pi_b z = z[perm_b]`` and the
bandwidth sigma = 1; ``u = x_pad V^T``. ``S`` is part of the draw: ``S_ii = s_i / ||G_b||_F`` with ``s_i ~
chi(D)``, so every row of V is exactly N(0, I) (a map that ignores S gives rows that share one norm per
block).

* ``fastfood-rks``: ``[cos u, sin u] / sqrt(M)``; estimates ``exp(-|q - k|^2 / 2)``;
* ``fastfood-prf``: ``exp(u - |x|^2) / sqrt(M)`` (Eq. 9's offset); estimates
  ``exp(-|q|^2 - |k|^2 + |q + k|^2 / 2) = exp(-|q - k|^2 / 2)``.
"""

from __future__ import annotations

import math

import numpy as np

from refattn.features import fastfood as fastfood_mod
from refattn.features.fastfood_transform import FastFoodParams, fastfood_matrix
from refattn.random import draw_fastfood

from ..base import Target, UsageError
from .attention import ATTENTION_CHECKS, attend, feature_attention, half_rows, torch_target
from .base import FEATURE_CHECKS, Family, FeatureContract, symmetric_vjp

__all__ = ["FAMILIES"]

M = 64
LEARN = ("S", "G", "B")
NAMES = ("x", "S", "G", "B", "perm")
_PAIRS: dict = {}


def _d(d):
    return d - 4                                          # 12 for the default 16: exercises the padding


def _draw(rng, d, dtype):
    p = draw_fastfood(rng, M, _d(d), dtype=dtype)
    return {"S": p.S, "G": p.G, "B": p.B, "perm": p.perm}


def _redraw(rng, args, dtype):
    D = args["S"].shape[1]
    p = draw_fastfood(rng, args["S"].shape[0] * D, D, dtype=dtype)
    return {"S": p.S, "G": p.G, "B": p.B, "perm": p.perm}


def _params(args):
    return FastFoodParams(args["S"], args["G"], args["B"], args["perm"])


def _inputs(scale):
    def inputs(rng, shape, d):
        return scale * rng.standard_normal(shape + (d,)) / math.sqrt(d)
    return inputs


def _contract(which):

    fwd, bwd = (
        getattr(fastfood_mod, f"fastfood_{which}_features_fwd"),
        getattr(fastfood_mod, f"fastfood_{which}_features_bwd"),
    )
    kern = getattr(fastfood_mod, f"fastfood_{which}_kernel")

    def ref(x, args):
        phi = fwd(x, _params(args))[0]
        return phi, phi

    def pair_bwd(dphi, cache):
        g = bwd(dphi, cache)
        return {"x": g.x, "S": g.params.S, "G": g.params.G, "B": g.params.B}
    _PAIRS[which] = (lambda x, a: fwd(x, _params(a)), pair_bwd)
    return FeatureContract(
        family=f"fastfood-{which}", signature="fn(x, S, G, B, perm) -> phi (..., L, m')", arg_names=NAMES,
        convention=__doc__, draw=_draw, redraw=_redraw, ref=ref,
        ref_vjp=symmetric_vjp(lambda x, a: fwd(x, _params(a)), pair_bwd, LEARN),
        kernel_fn=lambda X, Y, args: np.asarray(kern(X, Y)), learnable=LEARN,
        inputs=_inputs(0.8 if which == "rks" else 0.5), kernel_name="exp(-|q-k|^2/2)", d_input=_d)


def _target(which):
    def target(framework):
        if framework not in ("numpy", "torch"):
            raise UsageError(f"target refattn --as fastfood-{which}: the built-in family targets take NumPy "
                             f"arrays; got --framework {framework}")
        f = getattr(fastfood_mod, f"fastfood_{which}_features")

        def fn(x, S, G, B, perm):
            return f(x, FastFoodParams(S, G, B, perm))
        return Target(fn, framework, f"fastfood-{which}", f"refattn.features.fastfood_{which}_features")
    return target


def _omega(args):
    D = args["S"].shape[1]
    return fastfood_matrix(_params(args), D)                                # (M, D): rows on the padded width


def _attention(which):
    fc = _contract(which)
    return feature_attention(fc, _PAIRS[which], limit_kernel=fc.kernel_fn,
                             leak_keys=half_rows(_omega) if which == "prf" else None,
                             signature="fn(q, k, v, S, G, B, perm, causal) -> out (..., L, d_v)")


def _att_target(which):
    def target(framework):
        if framework not in ("numpy", "torch"):
            raise UsageError(f"target refattn --as fastfood-{which} --kind attention: NumPy or torch; got "
                             f"--framework {framework}")
        f = (fastfood_mod.fastfood_prf_features_stable if which == "prf"
             else fastfood_mod.fastfood_rks_features)

        def fn(q, k, v, S, G, B, perm, causal):
            p = FastFoodParams(S, G, B, perm)
            return attend(f(q, p), f(k, p), v, causal)
        note = f"linear attention on refattn fastfood_{which} features"
        if framework == "torch":
            return Target(torch_target(_attention(which), fn), "torch", f"fastfood-{which}",
                          note + ", on tensors, manual backward")
        return Target(fn, "numpy", f"fastfood-{which}", note)
    return target


FAMILIES = {f"fastfood-{w}": Family(f"fastfood-{w}", {"features": _contract(w), "attention": _attention(w)},
                                    {"features": _target(w), "attention": _att_target(w)},
                                    {"features": FEATURE_CHECKS, "attention": ATTENTION_CHECKS})
            for w in ("rks", "prf")}
