r"""Kind ``flt``: FourierLearner-Transformers (Choromanski et al. 2023, Algorithm 1;
:func:`refattn.rpe.flt.flt_attention`): the RPE mask ``N_ij = f(r_i - r_j)`` learned through its spectrum g,
estimated with r frequencies drawn from a proposal, inside FAVOR+ on the augmented ``[N1 | d^{-1/4} q]``.

Options: ``spectrum`` in {"gaussian_mixture", "gaussian_kernel"}, ``components`` T (mixture), ``r``
frequencies, ``m``, ``draw``, ``grid`` (None: 1-D positions 0..L-1; ``(H, W)``: 2-D grid coordinates),
``pos_dim`` D (any D with the model's ``positions: (L, D)`` input: per-token coordinates, e.g. 3-D atoms).
Learnable: ``attn["spectrum"]`` and ``attn["proposal"]`` (shared by the heads of a layer). Drawn: the
frequency noise ``eps: (r, D)`` and ``omega: (m, 2r + d)``.

omega: **redrawn** (never learned). ``refattn.rpe.flt.flt_attention_bwd`` computes its gradient and this kind
drops it (the rpe backward has no ``omega_grad`` switch yet).
"""

from __future__ import annotations

from ..._xp import namespace
from ...rpe.flt import flt_attention_bwd, flt_attention_fwd
from .base import AttentionKind, Draw, pos_dim, projection, token_positions

__all__ = ["KIND"]


def _dim(att):
    return pos_dim(att)


def _fwd(q, k, v, attn_params, features, *, positions=None, causal, options):
    xp = namespace(q)
    pos = token_positions(positions, q.shape[-2], options, q, xp=xp, kind="flt")     # (L, D)
    return flt_attention_fwd(q, k, v, pos, features["eps"], attn_params["spectrum"], attn_params["proposal"],
                             features["omega"], causal=causal)


def _bwd(do, cache):
    g = flt_attention_bwd(do, cache)        # g.omega: drawn, dropped; positions and noise get none
    return g.q, g.k, g.v, {"spectrum": g.spectrum, "proposal": g.proposal}


def _params(att, *, d_head, n_heads):
    D = _dim(att)
    spectrum = {"family": att["spectrum"], "components": att["components"], "D": D}
    return {"spectrum": Draw("flt_spectrum", spectrum),
            "proposal": Draw("flt_proposal", {"family": att["spectrum"], "D": D})}


def _features(att, *, d_head, n_heads):
    return {"eps": Draw("flt_noise", {"r": att["r"], "D": _dim(att)}),                   # (r, D)
            **projection(att, 2 * att["r"] + d_head)}                                    # (m, 2r + d)


KIND = AttentionKind(
    "flt", _fwd, _bwd,
    options={"spectrum": "gaussian_mixture", "components": 2, "r": 8, "m": None, "draw": "orthogonal",
             "grid": None, "pos_dim": None},
    choices={"spectrum": ("gaussian_mixture", "gaussian_kernel"), "draw": ("iid", "orthogonal")},
    params=_params, features=_features, omega="redrawn")
