r"""Kind ``flt``: FourierLearner-Transformers (Choromanski et al. 2023, Algorithm 1;
:func:`refattn.rpe.flt_linear.flt_attention`): the RPE mask ``N_ij = f(r_i - r_j)`` learned through its
spectrum g, estimated with r frequencies drawn from a proposal (Theorem 4.1), inside linear attention on the
augmented ``[N1 | d^{-1/4} q]`` and ``[N2 | d^{-1/4} k]``.

Options

* ``spectrum``: any family of :mod:`refattn.rpe.spectra`: ``"gaussian_mixture"`` (Sec. 4.3), the
  shift-invariant kernels ``"gaussian_kernel"``, ``"laplace_kernel"``, ``"cauchy_kernel"``,
  ``"gaussian_basis"`` (Sec. 5.3), the local RPE ``"box"`` (Eq. 4), ``"bspline"`` (the continuous sin^k form
  of order ``order``, default 2) and the printed ``"sin_power"`` form (odd ``order`` >= 3; like the box it
  decays as 1/|xi| and needs ``truncation``, but no bias bound is computed for it); ``components`` T for
  the mixtures (Gaussian mixture and basis, sums of boxes), ``radius`` for the compactly supported families
  (box: f = 1 on |Delta_j| <= radius; B-spline: support radius).
* ``proposal``: ``None`` (the family's default: the kernels' own spectral density, App. A.4, a Gaussian for
  mixtures and Gaussian bases, a Cauchy for the B-spline and sin^k forms) or a kind of
  ``refattn.rpe.spectra.PROPOSAL_KINDS``; ``proposal_scale`` (``None``: the family's default);
  ``learn_proposal`` (True: loc and scale are learned, App. B.3; False: fixed, their gradients are ``None``).
* ``truncation`` B: the estimator the paper ran for the local RPE, explicitly: frequencies from the uniform
  proposal on ``[-B, B]^D``, which estimates the *truncated* Fourier integral (the box spectrum has no Monte
  Carlo estimator with a mean under any proposal; ``refattn.rpe.spectra``). Required for ``"box"``. The bias
  is bounded by :func:`box_truncation_bias_bound`, computed in every forward and recorded in the cache
  (and by ``train`` in the run's log, ``"flt_bias_bound"``).
* ``feature_map``: ``"favor"`` (Algorithm 1: FAVOR+ positive random features of the augmented vectors with a
  drawn ``omega: (m, 2r + d)``), or the learnable map of App. B.2, ``phi(x) = x W^T`` (``"linear"``) and its
  ReLU form ``phi(x) = relu(x W^T) + 1e-3`` (``"relu"``), ``W: (m, 2r + d)`` learnable. The linear map can
  give a non-positive normaliser ``phi(q_i) . sum_j phi(k_j)`` (from the first forward on, typically), so it
  needs ``on_nonpositive`` set explicitly: ``"ignore"`` proceeds (the division may then change sign or blow
  up; what training needs), ``"raise"`` stops with a ``ValueError`` naming it; left unset, the configuration
  check refuses it, naming the option. The ReLU form's ``+ 1e-3`` keeps every feature, hence every
  normaliser, positive (and so do FAVOR+ features): ``on_nonpositive`` defaults to ``"raise"`` there.
* ``r`` frequencies, ``m`` features, ``draw``, ``grid`` (None: 1-D positions 0..L-1; ``(H, W)``: 2-D grid
  coordinates), ``pos_dim`` D (any D with the model's ``positions: (L, D)`` input: per-token coordinates,
  e.g. 3-D atoms).
* ``share``: ``"layer"`` (one spectrum and proposal per layer, shared by its heads) or ``"heads"`` (the
  paper's default: one spectrum and proposal **per head, shared across layers**; they live once in
  ``params["shared"]["attn"]`` with a leading head axis, each layer's gradient is summed into them).

Learnable: ``attn["spectrum"]`` and ``attn["proposal"]`` (per ``share``), and ``attn["W"]``
for the learnable feature maps. **Parameterisation** (:mod:`refattn.nn.kinds.domains`): the spectrum's
positive fields (widths ``sigma``, lengths ``length``, radii ``v``) are stored and learned as their logarithm,
``sigma = exp(sigma.log)``; the proposal's ``scale`` as ``scale = s_* + exp(scale.log_excess)`` with ``s_*``
the floor the current spectrum sets for finite-variance importance weights
(:func:`refattn.rpe.spectra.scale_floor`, 0 where none), so any optimiser step keeps the pair valid; the
other fields (weights, means, ``C``, ``loc``) are stored as they are. The drawn initial values are the
constrained ones; ``learn_proposal=False`` freezes the stored ``loc`` and ``log_excess``. Drawn: the
frequency noise ``eps: (r, D)`` (from the proposal's standard density) and, for ``feature_map="favor"``,
``omega: (m, 2r + d)``.

A class token (the model's ``readout="class-token"``, token 0) has zero RPE features: its rows of ``N1`` and
``N2`` are zero (weight 0 in :func:`refattn.rpe.flt.flt_features_fwd_core`), so the estimated RPE term
vanishes for every pair it is in and its logits are the content logits. This is refattn's choice, by analogy
with Horn et al.'s zero positional encoding of their class token (the FLT paper does not mention a class
token); ``positions`` describe the other tokens.

omega: **redrawn** for ``feature_map="favor"`` (never learned, so its gradient is not computed:
``refattn.rpe.flt_linear.flt_attention_bwd(..., omega_grad=False)``); **learnable** for
``"linear"``/``"relu"``, where the projection is the parameter ``W`` and its gradient is returned.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..._xp import namespace, sum_to_shape
from ...attention.linear import DEFAULT_CHUNK_SIZE, linear_attention_bwd_core, linear_attention_fwd_core
from ...rpe.flt import check_flt_inputs, flt_features_bwd_core, flt_features_fwd_core
from ...rpe.flt_linear import flt_attention_bwd_core, flt_attention_fwd_core
from ...rpe.spectra import PROPOSAL_KINDS, Box, Proposal
from ...tree import tree_leaves, tree_map
from .base import (AttentionKind, Draw, pos_dim, projection, resolve_on_nonpositive, token_positions,
                   with_class_token)
from .domains import LogExcess, spectral_values_bwd, spectral_values_fwd, spectrum_values, store_spectral

__all__ = ["KIND", "FAMILIES", "proposal_kind", "box_truncation_bias_bound", "model_bias_bound",
           "FLTKindCache", "spectrum_heads"]

#: family option -> its default proposal kind (None: no Monte Carlo estimator; needs ``truncation``)
FAMILIES = {
    "gaussian_mixture": "gaussian", "gaussian_kernel": "gaussian", "laplace_kernel": "mv_cauchy",
    "cauchy_kernel": "laplace", "gaussian_basis": "gaussian", "box": None, "bspline": "cauchy",
    "sin_power": None,
}


class FLTKindCache(NamedTuple):
    inner: object          # FLTAttentionCache (favor) or the learnable map's pieces; per head: a list of them
    feature_map: str
    learn_proposal: bool
    bias_bound: object     # float or None: box_truncation_bias_bound of this forward (truncated box only)


def proposal_kind(att) -> str:
    """The proposal kind the options imply (``"uniform"`` with a truncation)."""
    if att["truncation"] is not None:
        return "uniform"
    if att["proposal"] is not None:
        return att["proposal"]
    return FAMILIES[att["spectrum"]]


def _check(att, *, d_head, n_heads):
    fam = att["spectrum"]
    if att["truncation"] is not None:
        B = att["truncation"]
        if isinstance(B, bool) or not isinstance(B, (int, float)) or not (B > 0 and math.isfinite(B)):
            raise ValueError(f"attention.truncation: expected a positive number B (proposal uniform on "
                             f"[-B, B]^D) or None; got {B!r}")
        if att["proposal"] not in (None, "uniform"):
            raise ValueError(f"attention.proposal: a truncation uses the uniform proposal; got "
                             f"{att['proposal']!r}")
    elif FAMILIES[fam] is None or att["proposal"] == "uniform":
        raise ValueError(f"attention.truncation: the {fam!r} spectrum (g ~ 1/|xi|) has no Monte Carlo "
                         f"estimator with a mean under any proposal; set truncation=B to estimate the "
                         f"truncated Fourier integral over [-B, B]^D (biased; for the box its bound is "
                         f"recorded)")
    for name in ("radius", "proposal_scale"):
        val = att[name]
        if val is not None and (isinstance(val, bool) or not isinstance(val, (int, float)) or not val > 0):
            raise ValueError(f"attention.{name}: expected a positive number or None; got {val!r}")
    if fam == "sin_power" and att["order"] is not None and (att["order"] < 3 or att["order"] % 2 == 0):
        raise ValueError(f"attention.order: the sin^k spectrum needs an odd k >= 3 (k = 1 is the box: use "
                         f"spectrum='box'); got {att['order']}")
    if att["feature_map"] != "favor" and att["m"] is None and d_head is not None:
        att["m"] = 2 * int(d_head)
    return resolve_on_nonpositive(att, att["feature_map"] == "linear", "feature_map='linear'")


# ---- the truncated local RPE: its bias, computed -----------------------------------------------------------
def box_truncation_bias_bound(spectrum: Box, B: float, pos, *, xp):
    r"""A bound on ``max_ij |E[N_hat_ij] - N_ij|`` for the box spectrum estimated with the uniform proposal on
    ``[-B, B]^D``, over the offsets ``Delta = r_i - r_j`` of `pos` (``(L, D)``).

    Per box t and axis j the truncated integral is
    ``T = (Si(2 pi B (v + Delta)) + Si(2 pi B (v - Delta))) / pi`` against the exact ``I = 1[|Delta| < v]``
    (``1/2`` at ``|Delta| = v``, the Fourier-inversion midpoint), and ``|Si(x) - sign(x) pi / 2| <= 2 / |x|``
    (integration by parts), so ``e = |T - I| <= (1 / |v + Delta| + 1 / |v - Delta|) / (pi^2 B)`` (a term whose
    argument is 0 contributes nothing: ``Si(0) = 0`` is the midpoint convention). The product over axes
    telescopes: ``|prod T - prod I| <= sum_j e_j prod_{k<j} I_k prod_{k>j} (I_k + e_k)``, and the boxes add
    with ``|w_t|``. The bound is loose near the jumps (the Gibbs overshoot does not shrink with B there);
    integer positions and a non-integer radius keep the offsets away from them. Returns a Python float.
    """
    delta = xp.expand_dims(pos, axis=1) - xp.expand_dims(pos, axis=0)             # (L, L, D)
    total = 0.0
    w, v = spectrum.w, spectrum.v                                                # (T,), (T, D)
    for t in range(w.shape[0]):
        e_all, i_all = [], []
        for j in range(v.shape[-1]):
            dj, vj = delta[..., j], v[t, j]
            a, b = xp.abs(vj + dj), xp.abs(vj - dj)                               # (L, L)
            inv = (xp.where(a > 0, 1.0 / xp.where(a > 0, a, 1.0), 0.0)
                   + xp.where(b > 0, 1.0 / xp.where(b > 0, b, 1.0), 0.0))
            e_all.append(inv / (math.pi ** 2 * B))                                # (L, L)
            ind = xp.where(xp.abs(dj) < vj, 1.0, xp.where(xp.abs(dj) == vj, 0.5, 0.0))
            i_all.append(xp.astype(ind, delta.dtype))
        bound = xp.zeros_like(e_all[0])
        for j in range(len(e_all)):
            term = e_all[j]
            for kk in range(len(e_all)):
                if kk < j:
                    term = term * i_all[kk]
                elif kk > j:
                    term = term * (i_all[kk] + e_all[kk])
            bound = bound + term
        total += abs(float(w[t])) * float(xp.max(bound))
    return total


def model_bias_bound(params, config, positions=None, L=None):
    """The largest :func:`box_truncation_bias_bound` over the layers of a model with a truncated box ``flt``
    kind (``None`` for any other configuration); `positions` or the kind's default coordinates for ``L``."""
    att = config["attention"]
    if att["kind"] != "flt" or att["spectrum"] != "box" or att["truncation"] is None:
        return None
    if att["share"] == "heads":                           # one stacked spectrum, per head
        stacked = params["shared"]["attn"]["spectrum"]
        specs = [tree_map(lambda a, h=h: a[h], stacked) for h in range(spectrum_heads(stacked))]
    else:
        specs = [blk["attn"]["attn"]["spectrum"] for blk in params["blocks"]]
    bounds = []
    for stored in specs:
        xp = namespace(stored.w)
        spec = spectrum_values(stored, xp=xp)                                       # radii = exp(v.log)
        pos = token_positions(positions, L, att, spec.w, xp=xp, kind="flt")
        bounds.append(box_truncation_bias_bound(spec, att["truncation"], pos, xp=xp))
    return max(bounds)


# ---- forward / backward ------------------------------------------------------------------------------------
def _proposal_grads(g, learn):
    return g if learn else Proposal(g.kind, None, LogExcess(None))              # fixed: no gradient


def _one_fwd(q, k, v, pos, stored_spectrum, stored_proposal, attn_params, features, *, causal, options, xp,
             keep=True, class_token=False):
    """One stored spectrum for all heads in `q`: ``(y, (inner cache, values cache), bias bound or None)``;
    `pos` the coordinates of the positioned tokens (all but token 0 with `class_token`)."""
    spectrum, proposal, vc = spectral_values_fwd(stored_spectrum, stored_proposal, xp=xp)   # the values
    truncated = options["truncation"] is not None
    bound = None
    if truncated and isinstance(spectrum, Box):
        bound = box_truncation_bias_bound(spectrum, options["truncation"], pos, xp=xp)
    weight = None
    if class_token:                                   # token 0: zero RPE features (weight 0)
        pos, weight = with_class_token(pos, xp=xp)                                  # (L, D), (L,)
    if options["feature_map"] == "favor":
        check_flt_inputs(pos, features["eps"], spectrum, proposal, truncated, finite=False)  # pair, signs
        y, c = flt_attention_fwd_core(q, k, v, pos, features["eps"], spectrum, proposal, features["omega"],
                                       causal=causal, xp=xp, keep=keep, weight=weight)
    else:
        y, c = _learned_fwd(q, k, v, pos, features["eps"], spectrum, proposal, attn_params["W"],
                            causal=causal, options=options, xp=xp, keep=keep, weight=weight)
    return y, (c, vc), bound


def _one_bwd(do, cache, feature_map):
    """``(dq, dk, dv, dspectrum, dproposal, dW or None)`` of :func:`_one_fwd`, to the stored (raw) forms."""
    inner, vc = cache
    if feature_map == "favor":
        g = flt_attention_bwd_core(do, inner, omega_grad=False, xp=namespace(do))  # omega drawn; pos: none
        dq, dk, dv, dspec, dprop, dW = g.q, g.k, g.v, g.spectrum, g.proposal, None
    else:
        dq, dk, dv, dspec, dprop, dW = _learned_bwd(do, inner)
    dspec, dprop = spectral_values_bwd(dspec, dprop, vc)                          # through exp and the floor
    return dq, dk, dv, dspec, dprop, dW


def _fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
         options):
    xp = namespace(q)
    n = q.shape[-2] - (1 if class_token else 0)                                       # positioned tokens
    pos = token_positions(positions, n, options, q, xp=xp, kind="flt")               # (n, D)
    spectrum, proposal = attn_params["spectrum"], attn_params["proposal"]
    if options["share"] == "layer":
        y, c, bound = _one_fwd(q, k, v, pos, spectrum, proposal, attn_params, features, causal=causal,
                               options=options, xp=xp, keep=train, class_token=class_token)
    else:                                                 # per head: spectrum leaves carry a leading H axis
        H = q.shape[-3]
        if spectrum_heads(spectrum) != H:
            raise ValueError(f"attn_params['spectrum']: share='heads' expects one spectrum per head, leaves "
                             f"with a leading axis of H = {H}; got {spectrum_heads(spectrum)}")
        ys, c, bounds = [], [], []
        for h in range(H):
            sl = slice(h, h + 1)
            spec_h = tree_map(lambda a, h=h: a[h], spectrum)                        # head h's spectrum
            prop_h = tree_map(lambda a, h=h: a[h], proposal)
            y_h, c_h, b_h = _one_fwd(q[..., sl, :, :], k[..., sl, :, :], v[..., sl, :, :], pos, spec_h,
                                     prop_h, attn_params, features, causal=causal, options=options, xp=xp,
                                     keep=train, class_token=class_token)
            ys.append(y_h)
            c.append(c_h)
            bounds.append(b_h)
        y = xp.concat(ys, axis=-3)                                                  # (..., H, L, d)
        bound = None if bounds[0] is None else max(bounds)
    return y, FLTKindCache(c, options["feature_map"], bool(options["learn_proposal"]), bound)


def _bwd(do, cache):
    if not isinstance(cache.inner, list):
        dq, dk, dv, dspec, dprop, dW = _one_bwd(do, cache.inner, cache.feature_map)
    else:
        xp = namespace(do)
        parts = [_one_bwd(do[..., h:h + 1, :, :], c_h, cache.feature_map)
                 for h, c_h in enumerate(cache.inner)]
        dq, dk, dv = (xp.concat([p[i] for p in parts], axis=-3) for i in range(3))     # (..., H, L, d)
        def stack(i):                                                               # per head, stacked
            return tree_map(lambda a, *rest: xp.stack([a, *rest]), parts[0][i], *(p[i] for p in parts[1:]))

        dspec, dprop = stack(3), stack(4)
        dW = None if parts[0][5] is None else sum(p[5] for p in parts[1:]) + parts[0][5]
    out = {"spectrum": dspec, "proposal": _proposal_grads(dprop, cache.learn_proposal)}
    if dW is not None:
        out["W"] = dW
    return dq, dk, dv, out


def spectrum_heads(spectrum):
    """The leading (head) axis length of a stacked spectrum's first array leaf."""
    leaves = tree_leaves(spectrum)
    return None if not leaves else (leaves[0].shape[0] if leaves[0].ndim else None)


def _learned_fwd(q, k, v, pos, eps, spectrum, proposal, W, *, causal, options, xp, keep=True, weight=None):
    """App. B.2: ``phi(x) = x W^T`` (or ``relu(x W^T) + 1e-3``) on ``[N1 | d^{-1/4} q]``, then linear
    attention (``weight``: per-token factor on the RPE features, 0 for a class token)."""
    truncated = options["truncation"] is not None
    check_flt_inputs(pos, eps, spectrum, proposal, truncated, finite=False)       # signs, proposal vs g
    (N1, N2), fc = flt_features_fwd_core(pos, eps, spectrum, proposal, xp=xp, weight=weight)
    two_r, d = N1.shape[-1], q.shape[-1]
    batch = tuple(q.shape[:-1])                                                   # (..., L)
    ds = d ** -0.25
    q_hat = xp.concat([xp.broadcast_to(N1, batch + (two_r,)), q * ds], axis=-1)    # (..., L, 2r + d)
    k_hat = xp.concat([xp.broadcast_to(N2, batch + (two_r,)), k * ds], axis=-1)
    u_q, u_k = q_hat @ xp.matrix_transpose(W), k_hat @ xp.matrix_transpose(W)     # (..., L, m)
    if options["feature_map"] == "relu":
        phi_q, phi_k = xp.where(u_q > 0, u_q, 0.0) + 1e-3, xp.where(u_k > 0, u_k, 0.0) + 1e-3
    else:
        phi_q, phi_k = u_q, u_k
    y, lc = linear_attention_fwd_core(phi_q, phi_k, v, causal, None, DEFAULT_CHUNK_SIZE,
                                      options["on_nonpositive"], xp=xp,
                                      inputs={"q": q, "k": k, "v": v, "W": W}, keep=keep)
    return y, (fc, lc, q_hat, k_hat, u_q, u_k, W, tuple(N1.shape), two_r, ds, options["feature_map"])


def _learned_bwd(do, cache):
    fc, lc, q_hat, k_hat, u_q, u_k, W, n1_shape, two_r, ds, fmap = cache
    xp = namespace(do)
    g = linear_attention_bwd_core(do, lc, xp=xp)
    du_q, du_k = g.phi_q, g.phi_k                                                 # (..., L, m)
    if fmap == "relu":
        du_q, du_k = xp.where(u_q > 0, du_q, 0.0), xp.where(u_k > 0, du_k, 0.0)
    m, w = W.shape
    dW = (xp.matrix_transpose(xp.reshape(du_q, (-1, m))) @ xp.reshape(q_hat, (-1, w))
          + xp.matrix_transpose(xp.reshape(du_k, (-1, m))) @ xp.reshape(k_hat, (-1, w)))   # (m, 2r + d)
    dq_hat, dk_hat = du_q @ W, du_k @ W                                           # (..., L, 2r + d)
    dN1 = sum_to_shape(dq_hat[..., :two_r], n1_shape, xp=xp)                      # back to pos's axes
    dN2 = sum_to_shape(dk_hat[..., :two_r], n1_shape, xp=xp)
    fg = flt_features_bwd_core(dN1, dN2, fc, xp=xp)
    return dq_hat[..., two_r:] * ds, dk_hat[..., two_r:] * ds, g.v, fg.spectrum, fg.proposal, dW


# ---- declarations ------------------------------------------------------------------------------------------
def _spectral_draws(att, heads):
    D = pos_dim(att)
    spec = {"family": att["spectrum"], "components": att["components"], "D": D, "radius": att["radius"],
            "order": att["order"], "heads": heads}
    prop = {"family": att["spectrum"], "D": D, "kind": proposal_kind(att), "scale": att["proposal_scale"],
            "truncation": att["truncation"], "radius": att["radius"], "heads": heads}
    return {"spectrum": Draw("flt_spectrum", spec), "proposal": Draw("flt_proposal", prop)}


def _store(attn_params):
    """The drawn (constrained) spectrum and proposal in their stored form (:mod:`.domains`), per head when
    stacked (``share="heads"``); a dict without them (a layer of a shared model) is returned as it is."""
    if "spectrum" not in attn_params:
        return attn_params
    spec, prop = attn_params["spectrum"], attn_params["proposal"]
    xp = namespace(prop.loc)
    if prop.loc.ndim == 1:
        spec, prop = store_spectral(spec, prop, xp=xp)
    else:                                                                   # (H, ...) leaves: one per head
        parts = [store_spectral(*(tree_map(lambda a, h=h: a[h], t) for t in (spec, prop)), xp=xp)
                 for h in range(prop.loc.shape[0])]
        spec, prop = (tree_map(lambda a, *rest: xp.stack([a, *rest]), parts[0][i], *(p[i] for p in parts[1:]))
                      for i in range(2))
    return {**attn_params, "spectrum": spec, "proposal": prop}


def _shared(att, *, d_head, n_heads):
    return _spectral_draws(att, n_heads) if att["share"] == "heads" else {}


def _params(att, *, d_head, n_heads):
    out = _spectral_draws(att, None) if att["share"] == "layer" else {}
    if att["feature_map"] != "favor":
        width = 2 * att["r"] + d_head
        shape = (att["m"], width)                                                  # (m, 2r + d)
        out["W"] = Draw("normal", {"shape": shape, "scale": 1.0 / math.sqrt(width)})
    return out


def _features(att, *, d_head, n_heads):
    out = {"eps": Draw("flt_noise", {"r": att["r"], "D": pos_dim(att), "kind": proposal_kind(att)})}  # (r, D)
    if att["feature_map"] == "favor":
        out.update(projection(att, 2 * att["r"] + d_head))                       # (m, 2r + d)
    return out


KIND = AttentionKind(
    "flt", _fwd, _bwd,
    options={"spectrum": "gaussian_mixture", "components": 2, "r": 8, "m": None, "draw": "orthogonal",
             "grid": None, "pos_dim": None, "radius": None, "order": None, "proposal": None,
             "proposal_scale": None, "learn_proposal": True, "truncation": None, "feature_map": "favor",
             "on_nonpositive": None, "share": "layer"},
    choices={"spectrum": tuple(FAMILIES), "draw": ("iid", "orthogonal"), "proposal": (None,) + PROPOSAL_KINDS,
             "learn_proposal": (True, False), "feature_map": ("favor", "linear", "relu"),
             "on_nonpositive": (None, "raise", "ignore"), "share": ("layer", "heads")},
    params=_params, features=_features, omega="redrawn", check=_check, shared=_shared, store=_store)
