r"""Kind ``toeplitz``: exact RPE through a learned Toeplitz mask applied by FFT (Luo et al. 2021 style;
:func:`refattn.rpe.toeplitz.toeplitz_attention`), ``N_ij = b(i - j)``, mask ``exp(N)``.

Options: ``feature_map`` in {"elu", "positive"}, ``m``, ``draw``, ``max_len`` (filled from the model's
``max_len``). Learnable: ``attn["log_coeffs"]: (H, 2 max_len - 1)``, the log-coefficients ``b(t)`` for offsets
``t = -(max_len-1)..(max_len-1)`` per head (zeros at initialisation: ``exp(0) = 1``, no RPE at the start).
Drawn (``feature_map="positive"``): ``omega: (m, d)``.

omega: **redrawn** (never learned): its gradient is not computed (``positive_features_bwd(...,
omega_grad=False)``).
"""

from __future__ import annotations

from ..._xp import device_of, namespace
from ...features.deterministic import elu_features_bwd, elu_features_fwd
from ...features.positive import positive_features_bwd, positive_features_fwd
from ...rpe.toeplitz import toeplitz_attention_bwd, toeplitz_attention_fwd
from .base import AttentionKind, Draw, projection

__all__ = ["KIND"]


def _window(log_coeffs, L, *, xp):
    """Offsets -(L-1)..(L-1) of a table over -(L_max-1)..(L_max-1): ``(*c, 2L - 1)``."""
    L_max = (log_coeffs.shape[-1] + 1) // 2
    if L > L_max:
        raise ValueError(f"attention kind 'toeplitz': sequence length L = {L} exceeds the coefficient "
                         f"table's "
                         f"max_len = {L_max}")
    return log_coeffs[..., L_max - L:L_max + L - 1]


def _feature(x, features, options):
    if options["feature_map"] == "elu":
        return elu_features_fwd(x)
    return positive_features_fwd(x * float(x.shape[-1]) ** -0.25, features["omega"])


def _fwd(q, k, v, attn_params, features, *, positions=None, train=True, causal, options):
    xp = namespace(q)
    L = q.shape[-2]
    b = attn_params["log_coeffs"]                                                    # (H, 2 L_max - 1)
    coeffs = xp.exp(_window(b, L, xp=xp))                                            # (H, 2L - 1) = exp(N)
    phi_q, cq = _feature(q, features, options)                                       # (..., H, L, m)
    phi_k, ck = _feature(k, features, options)
    y, ca = toeplitz_attention_fwd(phi_q, phi_k, v, coeffs, causal=causal)
    return y, (cq, ck, ca, coeffs, tuple(b.shape), options["feature_map"], float(q.shape[-1]) ** -0.25)


def _bwd(do, cache):
    cq, ck, ca, coeffs, b_shape, fmap, scale = cache
    xp = namespace(do)
    g = toeplitz_attention_bwd(do, ca)
    dwin = g.coeffs * coeffs                                                         # d exp(b) = exp(b) db
    L_max, L = (b_shape[-1] + 1) // 2, (coeffs.shape[-1] + 1) // 2
    if L < L_max:
        pad = xp.zeros(b_shape[:-1] + (L_max - L,), dtype=do.dtype, device=device_of(do))
        dwin = xp.concat([pad, dwin, pad], axis=-1)                                  # (H, 2 L_max - 1)
    if fmap == "elu":
        dq, dk = elu_features_bwd(g.phi_q, cq).x, elu_features_bwd(g.phi_k, ck).x
    else:
        dq = positive_features_bwd(g.phi_q, cq, omega_grad=False).x * scale        # omega drawn: no gradient
        dk = positive_features_bwd(g.phi_k, ck, omega_grad=False).x * scale
    return dq, dk, g.v, {"log_coeffs": dwin}


def _params(att, *, d_head, n_heads):
    if att["max_len"] is None:
        raise ValueError("attention.max_len: required for kind 'toeplitz' (the coefficient table covers "
                         "offsets "
                         "-(max_len-1)..(max_len-1)); the transformer fills it from config['max_len']")
    return {"log_coeffs": Draw("zeros", {"shape": (n_heads, 2 * att["max_len"] - 1)})}


def _features(att, *, d_head, n_heads):
    return {} if att["feature_map"] == "elu" else projection(att, d_head)


KIND = AttentionKind(
    "toeplitz", _fwd, _bwd,
    options={"feature_map": "elu", "m": None, "draw": "orthogonal", "max_len": None},
    choices={"feature_map": ("elu", "positive"), "draw": ("iid", "orthogonal")},
    params=_params, features=_features, omega="redrawn")
