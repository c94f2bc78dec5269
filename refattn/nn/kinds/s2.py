r"""Kind ``s2``: Horn et al. Strategy 2 (Sec. 2.3, Eq. 4), bidirectional only.

``content_heads`` C (default ``H // 2``, set by :func:`content_heads`, the one place that default is written)
ordinary content heads, Eq. (4) term (a): exact softmax, or FAVOR+ with ``features="positive"`` and the
layer's drawn omega; and ``H - C`` positional heads, term (b), whose keys are the learned clipped relative
vectors ``w[clip(dist(i, j), k)]`` (:func:`refattn.rpe.s2_clipped.s2_attention`; learnable
``attn["w"]: (H - C, R, d)``), which do not read ``k`` (its gradient there is zero). ``content_heads=0``: all
heads positional. Options ``clip`` k, ``grid`` (None: 1-D signed distances, R = 2k + 1; ``(H, W)``: Manhattan
distances on the grid, R = k + 1).

A class token (the model's ``readout="class-token"``, token 0) is placed as Horn et al.'s code places it
(``clipped_relative_attention.py`` l. 150-175; ``train.py`` l. 350-363 appends the class token after the
image's tokens and reads the last output): in the positional heads it is, **as a query**, at the raster
position after the last token (``(H, 0)``, one row below the grid; ``L - 1`` in 1-D) and sees the tokens by
their clipped distances from there; **as a key** it is in the far class ``w[k]`` (``w[+k]`` in 1-D) for every
query, itself included, because their window admits only keys inside the image
(:func:`refattn.rpe.s2_clipped.s2_attention_fwd_core` with ``class_token=True``). The content heads treat it
as any token. refattn keeps it at sequence index 0 as for the other kinds; the index changes nothing, the
model treating the tokens alike everywhere else (non-causal). This is the authors' placement, not a
position-free one: the validation contract ``s2-grid-cls`` (docs/guide/validation.md) puts the class query at
the clipped distance from every token too, and the conformance table records the authors' code's difference
from it (docs/guide/conformance.md); the model runs what the authors ran.

omega: **redrawn** (FAVOR+ only; never learned). The content heads' backward skips its gradient
(``favor_attention_bwd``'s core with ``omega_grad=False``), and so does the positional heads'
(``refattn.rpe.s2_clipped.s2_attention_bwd(..., omega_grad=False)``). The model checked every array once:
the heads run the unchecked cores of S2 and softmax attention (FAVOR+ checks only its result).
"""

from __future__ import annotations

import math

from ..._xp import namespace
from ...attention.favor import favor_attention_bwd_core, favor_attention_fwd
from ...attention.softmax import (DEFAULT_BLOCK_ELEMENTS, SoftmaxAttentionCache, softmax_attention_bwd_core,
                                  softmax_attention_fwd_core)
from ...rpe.s2_clipped import check_s2_inputs, s2_attention_bwd_core, s2_attention_fwd_core
from .base import AttentionKind, Draw, projection

__all__ = ["KIND", "content_heads"]


def content_heads(att, n_heads) -> int:
    """Number of content heads of an S2 layer with `n_heads` heads: ``att["content_heads"]``, default
    ``n_heads // 2``; at least one positional head must remain."""
    nc = att.get("content_heads")
    nc = n_heads // 2 if nc is None else nc
    if not 0 <= nc < n_heads:
        raise ValueError(f"attention.content_heads: expected an integer in 0..{n_heads - 1} (at least one "
                         f"positional head among the layer's {n_heads}); got {nc}")
    return nc


def _check(att, *, d_head, n_heads):
    nc = att["content_heads"]
    if nc is not None:
        if isinstance(nc, bool) or not isinstance(nc, int) or nc < 0:
            raise ValueError(f"attention.content_heads: expected a non-negative integer (the number of "
                             f"content heads) or None (n_heads // 2); got {nc!r}")
    if n_heads is not None:
        att["content_heads"] = content_heads(att, int(n_heads))
    return att


def _fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
         options):
    if causal:
        raise ValueError("attention kind 's2': clipped relative-distance heads are bidirectional only "
                         "(refattn.rpe.s2_clipped has no causal mode); use causal=False")
    xp = namespace(q)
    H = q.shape[-3]
    nc = content_heads(options, H)
    w = attn_params["w"]                                                             # (H - C, R, d)
    if w.ndim != 3 or w.shape[0] != H - nc:
        raise ValueError(f"attn_params['w']: expected shape (H - content_heads, R, d) = ({H - nc}, R, "
                         f"{q.shape[-1]}) for {H} heads with {nc} content heads; got {tuple(w.shape)}")
    omega = None if options["features"] is None else features["omega"]
    grid = None if options["grid"] is None else tuple(options["grid"])
    qp, vp = q[..., nc:, :, :], v[..., nc:, :, :]                                   # positional heads
    _, clip, grid = check_s2_inputs(qp, vp, w, omega, options["clip"], grid, class_token)   # no data read
    yp, cp = s2_attention_fwd_core(qp, vp, w, omega, k=clip, grid=grid, xp=xp,
                                   class_token=class_token)                         # (..., H - C, L, d)
    if nc == 0:
        return yp, (cp, None, k, nc)
    qc, kc, vc = q[..., :nc, :, :], k[..., :nc, :, :], v[..., :nc, :, :]            # (..., C, L, d)
    if omega is None:
        yc, cc = softmax_attention_fwd_core(qc, kc, vc, None, False, float(qc.shape[-1] ** -0.5), False,
                                   DEFAULT_BLOCK_ELEMENTS, xp=xp)
    else:
        yc, cc = favor_attention_fwd(qc, kc, vc, omega, features="positive")          # checks its result only
    return xp.concat([yc, yp], axis=-3), (cp, cc, k, nc)                              # (..., H, L, d)


def _bwd(do, cache):
    cp, cc, k, nc = cache
    xp = namespace(do)
    gp = s2_attention_bwd_core(do[..., nc:, :, :], cp, omega_grad=False, xp=xp)    # omega drawn: not computed
    dk_pos = xp.zeros_like(k[..., nc:, :, :])                                      # positional heads: no keys
    if cc is None:
        return gp.q, dk_pos, gp.v, {"w": gp.w}
    do_c = do[..., :nc, :, :]
    if isinstance(cc, SoftmaxAttentionCache):
        gc = softmax_attention_bwd_core(do_c, cc, xp=xp)
    else:
        gc = favor_attention_bwd_core(do_c, cc, omega_grad=False, xp=xp)           # omega drawn: not computed

    def cat(a, b):
        return xp.concat([a, b], axis=-3)                                           # (..., H, L, d)

    return cat(gc.q, gp.q), cat(gc.k, dk_pos), cat(gc.v, gp.v), {"w": gp.w}


def _params(att, *, d_head, n_heads):
    # one table per positional head; the first content_heads heads are content heads without one
    R = att["clip"] + 1 if att["grid"] is not None else 2 * att["clip"] + 1
    shape = (n_heads - content_heads(att, n_heads), R, d_head)                       # (H - C, R, d)
    return {"w": Draw("normal", {"shape": shape, "scale": 1.0 / math.sqrt(d_head)})}


def _features(att, *, d_head, n_heads):
    return {} if att["features"] is None else projection(att, d_head)


KIND = AttentionKind(
    "s2", _fwd, _bwd,
    options={"features": None, "m": None, "draw": "orthogonal", "clip": 6, "grid": None,
             "content_heads": None},
    choices={"features": (None, "positive"), "draw": ("iid", "orthogonal")},
    params=_params, features=_features, omega="redrawn", check=_check)
