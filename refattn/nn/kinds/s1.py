r"""Kind ``s1``: Horn et al. Strategy 1 (Sec. 2.2), rotary relative positions through augmented queries and
keys (:func:`refattn.rpe.s1_rotation.s1_attention`).

Options: ``features`` (None: exact softmax on the augmented vectors; or a FAVOR map), ``m``, ``draw``,
``lengthscales`` S, ``grid`` and ``pos_dim`` A, ``init``. Learnable: ``attn["s1"]`` (frequencies, alpha,
beta). Drawn (FAVOR only): ``omega: (m, d + 2 A S)``.

Initialisation (``init``; the paper says only "initialized in a similar manner as conventional absolute
positional encodings", App. A.2):

* ``"sinusoid"`` (default): :func:`refattn.random.init_s1_params` -- frequencies ``10^4 ** (-s / S)``, alpha
  1, beta ~ N(0, 0.1^2); ``(A, S)``, shared by the heads.
* ``"authors"``: Horn et al.'s code (``train.py``, ``LearnableSinusoidEncoding(pos_scales * 2,
  max_timescale_init=max_pos * 2)``; ``ConstrainedLinear.reset_parameters``: ``init.normal_`` of alpha and
  beta, one per head and (axis, scale)) -- frequencies ``base ** (-s / S)`` with ``base`` twice the grid's
  longest side (64 for their 32 x 32 images), alpha and beta ~ N(0, 1) iid; ``(H, A, S)``, one set per head
  (and per layer, as every layer draws its own). Needs ``grid``. The authors learn one frequency set shared
  by heads, axes and layers; here each head, axis and layer learns its own from the same start.

Positions: 1-D ``0..L-1`` by default (the paper writes S1 for scalar positions). **2-D positions are this
project's extension** for images: ``grid=(H, W)`` uses the row-major (row, column) coordinates of the token
grid (A = 2: one rotation block per axis and lengthscale, so the positional logit is
``sum_(a, s) alpha_as cos(omega_as Delta_a) + beta_as sin(omega_as Delta_a)``, a function of the 2-D offset);
``pos_dim=A`` with the model's ``positions: (L, A)`` input takes any coordinates.

A class token (the model's ``readout="class-token"``, token 0) has zero positional parts ``Q_p = K_p = 0``
(weight 0 in :func:`refattn.rpe.s1_rotation.s1_positional_fwd_core`), exactly Horn et al.'s zero positional
encoding of their class token (``train.py`` l. 88-117, fed to ``ConstrainedLinear``): its logits against
every key, and every query's against it, are the content logits; ``positions`` describe the other tokens.

omega: **redrawn** (never learned), so its gradient is not computed
(``refattn.rpe.s1_rotation.s1_attention_bwd(..., omega_grad=False)``; the kind runs its unchecked core, the
model having checked every array once).
"""

from __future__ import annotations

from ..._xp import namespace
from ...attention.favor import FAVOR_FEATURES
from ...rpe.s1_rotation import (check_s1_params, check_s1_positions, s1_attention_bwd_core,
                                s1_attention_fwd_core)
from .base import AttentionKind, Draw, pos_dim, projection, token_positions, with_class_token

__all__ = ["KIND"]


def _fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
         options):
    xp = namespace(q)
    omega = None if options["features"] is None else features["omega"]
    n = q.shape[-2] - (1 if class_token else 0)                                       # positioned tokens
    pos = token_positions(positions, n, options, q, xp=xp, kind="s1")                 # (n, A)
    params = attn_params["s1"]
    check_s1_params(params)
    if n < 1:
        raise ValueError(f"q: expected shape (..., L, d) with L >= 1 positions; got {tuple(q.shape)}")
    pos = check_s1_positions(pos, params.freqs.shape[-2], params.freqs, xp=xp)        # (n, A), no data read
    weight = None
    if class_token:                                   # token 0: zero positional features (weight 0)
        pos, weight = with_class_token(pos, xp=xp)                                    # (L, A), (L,)
    # the unchecked core: q, k, v, the parameters and the positions were checked once by the model
    return s1_attention_fwd_core(q, k, v, pos, params, omega=omega, causal=causal,
                                 features=options["features"] or "positive", xp=xp, keep=train,
                                 weight=weight)


def _bwd(do, cache):
    g = s1_attention_bwd_core(do, cache, omega_grad=False, xp=namespace(do))       # omega drawn: not computed
    return g.q, g.k, g.v, {"s1": g.params}


def _params(att, *, d_head, n_heads):
    args = {"n_axes": pos_dim(att), "n_lengthscales": att["lengthscales"]}
    if att["init"] == "authors":                                                    # (H, A, S)
        args.update(init="authors", base=2 * max(att["grid"]), heads=n_heads)
    return {"s1": Draw("s1", args)}                                                  # (A, S) by default


def _check(att, *, d_head, n_heads):
    if att["init"] == "authors" and att.get("grid") is None:
        raise ValueError("attention.init: 'authors' sets the frequency base to twice the grid's longest side "
                         "and needs attention.grid = (H, W); got grid None")
    return att


def _features(att, *, d_head, n_heads):
    P = 2 * pos_dim(att) * att["lengthscales"]
    return {} if att["features"] is None else projection(att, d_head + P)         # (m, d + P)


KIND = AttentionKind(
    "s1", _fwd, _bwd,
    options={"features": None, "m": None, "draw": "orthogonal", "lengthscales": 4, "grid": None,
             "pos_dim": None, "init": "sinusoid"},
    choices={"features": (None,) + tuple(FAVOR_FEATURES), "draw": ("iid", "orthogonal"),
             "init": ("sinusoid", "authors")},
    params=_params, features=_features, omega="redrawn", check=_check)
