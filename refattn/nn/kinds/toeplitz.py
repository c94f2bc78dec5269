r"""Kind ``toeplitz``: exact RPE through a learned Toeplitz mask applied by FFT (Luo et al. 2021 style;
:func:`refattn.rpe.toeplitz.toeplitz_attention`), ``N_ij = b(i - j)``, mask ``exp(N)``.

Options: ``feature_map`` in {"elu", "positive"}, ``m``, ``draw``, ``max_len`` (filled from the model's
``max_len``). Learnable: ``attn["log_coeffs"]: (H, 2 max_len - 1)``, the log-coefficients ``b(t)`` for offsets
``t = -(max_len-1)..(max_len-1)`` per head (zeros at initialisation: ``exp(0) = 1``, no RPE at the start).
Drawn (``feature_map="positive"``): ``omega: (m, d)``.

A class token (``readout="class-token"``) is not defined here: the mask is indexed by the offset ``i - j`` of
two positions, and a token without a position has none (the kind declares ``class_token=False``).

omega: **redrawn** (never learned): its gradient is not computed (the core of ``positive_features_bwd(...,
omega_grad=False)``). The model checked every array once: this kind runs the maps' and the Toeplitz
attention's unchecked cores.
"""

from __future__ import annotations

from ..._xp import device_of, namespace
from ...features.deterministic import elu_features_bwd_core, elu_features_fwd_core
from ...features.positive import positive_features_bwd_core, positive_features_fwd_core
from ...rpe.toeplitz import DEFAULT_CHUNK_ELEMENTS, toeplitz_attention_bwd_core, toeplitz_attention_fwd_core
from .base import AttentionKind, Draw, check_omega, projection

__all__ = ["KIND"]

_NO_CLASS_TOKEN = ("attention kind 'toeplitz': a class token (readout='class-token') has no position, and "
                   "the Toeplitz mask is indexed by the offset i - j of two positions; use readout 'mean' or "
                   "'first'")


def _window(log_coeffs, L, *, xp):
    """Offsets -(L-1)..(L-1) of a table over -(L_max-1)..(L_max-1): ``(*c, 2L - 1)``."""
    L_max = (log_coeffs.shape[-1] + 1) // 2
    if L > L_max:
        raise ValueError(f"attention kind 'toeplitz': sequence length L = {L} exceeds the coefficient "
                         f"table's max_len = {L_max}")
    return log_coeffs[..., L_max - L:L_max + L - 1]


def _feature(x, features, options, *, xp):
    if options["feature_map"] == "elu":
        return elu_features_fwd_core(x, xp=xp)
    return positive_features_fwd_core(x * float(x.shape[-1]) ** -0.25, features["omega"], xp=xp)


def _fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
         options):
    if class_token:
        raise ValueError(_NO_CLASS_TOKEN)
    xp = namespace(q)
    L = q.shape[-2]
    b = attn_params["log_coeffs"]                                                    # (H, 2 L_max - 1)
    coeffs = xp.exp(_window(b, L, xp=xp))                                            # (H, 2L - 1) = exp(N)
    if b.ndim != 2 or b.shape[0] not in (1, q.shape[-3]):
        raise ValueError(f"attn_params['log_coeffs']: expected shape (H, 2 max_len - 1) with H = "
                         f"{q.shape[-3]} heads; got {tuple(b.shape)}")
    if options["feature_map"] != "elu":
        check_omega(q, features["omega"])                                            # its shape: no data read
    phi_q, cq = _feature(q, features, options, xp=xp)                                # (..., H, L, m)
    phi_k, ck = _feature(k, features, options, xp=xp)
    y, ca = toeplitz_attention_fwd_core(phi_q, phi_k, v, coeffs, causal=causal,
                                        chunk_elements=DEFAULT_CHUNK_ELEMENTS, on_nonpositive="raise",
                                        workers=None, xp=xp)                         # unchecked core
    return y, (cq, ck, ca, coeffs, tuple(b.shape), options["feature_map"], float(q.shape[-1]) ** -0.25)


def _bwd(do, cache):
    cq, ck, ca, coeffs, b_shape, fmap, scale = cache
    xp = namespace(do)
    g = toeplitz_attention_bwd_core(do, ca, xp=xp)
    dwin = g.coeffs * coeffs                                                         # d exp(b) = exp(b) db
    L_max, L = (b_shape[-1] + 1) // 2, (coeffs.shape[-1] + 1) // 2
    if L < L_max:
        pad = xp.zeros(b_shape[:-1] + (L_max - L,), dtype=do.dtype, device=device_of(do))
        dwin = xp.concat([pad, dwin, pad], axis=-1)                                  # (H, 2 L_max - 1)
    if fmap == "elu":
        dq, dk = elu_features_bwd_core(g.phi_q, cq, xp=xp).x, elu_features_bwd_core(g.phi_k, ck, xp=xp).x
    else:                                                                           # omega drawn: no gradient
        dq = positive_features_bwd_core(g.phi_q, cq, omega_grad=False, xp=xp).x * scale
        dk = positive_features_bwd_core(g.phi_k, ck, omega_grad=False, xp=xp).x * scale
    return dq, dk, g.v, {"log_coeffs": dwin}


def _params(att, *, d_head, n_heads):
    if att["max_len"] is None:
        raise ValueError("attention.max_len: required for kind 'toeplitz' (its table covers the offsets "
                         "-(max_len-1)..(max_len-1)); the transformer fills it from config['max_len']")
    return {"log_coeffs": Draw("zeros", {"shape": (n_heads, 2 * att["max_len"] - 1)})}


def _features(att, *, d_head, n_heads):
    return {} if att["feature_map"] == "elu" else projection(att, d_head)


KIND = AttentionKind(
    "toeplitz", _fwd, _bwd,
    options={"feature_map": "elu", "m": None, "draw": "orthogonal", "max_len": None},
    choices={"feature_map": ("elu", "positive"), "draw": ("iid", "orthogonal")},
    params=_params, features=_features, omega="redrawn", class_token=False)
