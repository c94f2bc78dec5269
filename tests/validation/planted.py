"""Candidates for the cross-checks: planted defects (each must be flagged by its named check) and careful,
correct reimplementations (each must pass every check).

NumPy candidates use refattn's pieces where the defect is elsewhere; torch candidates are written from the
formulas (torch is optional: they are defined only when it imports). Also usable from the command line, e.g.
``python -m validation check tests/validation/planted.py:upcast_favor --kind attention``.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from refattn.attention import favor_attention, linear_attention
from refattn.features import positive_features_stable
from refattn.random import draw_gaussian

EPS = 1e-4


# ----------------------------------------------------------------------------------------------------------
# planted defects (NumPy)


def qr_no_sign(seed, m, d):
    """Non-Haar ORF: Householder QR of a Gaussian matrix WITHOUT the sign(diag R) correction, chi(d) norms."""
    rng = np.random.default_rng(seed)
    blocks = [np.linalg.qr(rng.standard_normal((d, d)))[0].T for _ in range(-(-m // d))]
    rows = np.concatenate(blocks)[:m]                                                   # (m, d) unit rows
    return rows * np.sqrt(rng.chisquare(d, size=m))[:, None]


def separate_qk_favor(q, k, v, omega, causal):
    """Separate q/k draws: queries use omega, keys a second projection drawn here (seeded by omega)."""
    omega_k = draw_gaussian(
        np.random.default_rng(zlib.crc32(omega.tobytes())), *omega.shape, dtype=omega.dtype
    )
    s = q.shape[-1] ** -0.25
    phi_q, _ = positive_features_stable(q * s, omega)
    phi_k, ls_k = positive_features_stable(k * s, omega_k)
    return linear_attention(phi_q, phi_k, v, causal=causal, k_log_scale=ls_k)


def _global_max_favor(q, k, v, omega, causal, eps):
    s = q.shape[-1] ** -0.25
    m = omega.shape[0]
    uq = (q * s) @ omega.T - 0.5 * np.sum((q * s) ** 2, -1, keepdims=True)           # (..., L, m)
    uk = (k * s) @ omega.T - 0.5 * np.sum((k * s) ** 2, -1, keepdims=True)           # (..., L, m)
    phi_q = (np.exp(uq - uq.max(-1, keepdims=True)) + eps) / math.sqrt(m)            # per-row max: fine
    phi_k = (np.exp(uk - uk.max((-1, -2), keepdims=True)) + eps) / math.sqrt(m)     # max over ALL keys: leaks
    if not causal:
        kv = np.swapaxes(phi_k, -1, -2) @ v                                           # (..., m, d_v)
        return (phi_q @ kv) / (phi_q @ phi_k.sum(-2)[..., None])
    S = np.cumsum(phi_k[..., :, :, None] * v[..., :, None, :], axis=-3)       # (..., L, m, d_v) prefix states
    z = np.cumsum(phi_k, axis=-2)                                                     # (..., L, m)
    with np.errstate(invalid="ignore", divide="ignore"):                         # 0/0 once features underflow
        return np.einsum("...lm,...lmd->...ld", phi_q, S) / np.sum(phi_q * z, -1, keepdims=True)


def global_max_eps_favor(q, k, v, omega, causal):
    """Causal leak through an additive epsilon: keys stabilised by one maximum over all positions + eps."""
    return _global_max_favor(q, k, v, omega, causal, EPS)


def global_max_favor(q, k, v, omega, causal):
    """The same global key maximum without epsilon: leaks through underflow (a later key's larger exponent
    pushes the earlier keys' features to zero)."""
    return _global_max_favor(q, k, v, omega, causal, 0.0)


def unstabilised_favor(q, k, v, omega, causal):
    """No stabiliser at all: raw exp(x omega^T - |x|^2/2) features and prefix sums. It cannot leak (each
    output uses only its prefix), but keys far below the largest exponent underflow to zero features: 0/0
    outputs."""
    s = q.shape[-1] ** -0.25
    phi_q = np.exp((q * s) @ omega.T - 0.5 * np.sum((q * s) ** 2, -1, keepdims=True))   # (..., L, m)
    phi_k = np.exp((k * s) @ omega.T - 0.5 * np.sum((k * s) ** 2, -1, keepdims=True))   # (..., L, m)
    if not causal:
        return (phi_q @ (np.swapaxes(phi_k, -1, -2) @ v)) / (phi_q @ phi_k.sum(-2)[..., None])
    S = np.cumsum(phi_k[..., :, :, None] * v[..., :, None, :], axis=-3)               # (..., L, m, d_v)
    z = np.cumsum(phi_k, axis=-2)                                                     # (..., L, m)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.einsum("...lm,...lmd->...ld", phi_q, S) / np.sum(phi_q * z, -1, keepdims=True)


def no_scale_favor(q, k, v, omega, causal):
    """Missing d^{-1/4}: FAVOR+ on the raw q, k (estimates exp(q.k), not exp(q.k/sqrt d))."""
    s = q.shape[-1] ** 0.25                                                            # undo favor's d^{-1/4}
    return favor_attention(q * s, k * s, v, omega, causal=causal)


def upcast_favor(q, k, v, omega, causal):
    """Silent float64 upcast: correct values, but float32 in gives float64 out."""
    return favor_attention(*(a.astype(np.float64) for a in (q, k, v, omega)), causal=causal)


def wrong_offset_features(x, omega):
    """Wrong feature offset: exp(x omega^T - |x|^2) / sqrt(m) presented as the positive (softmax) map; it is
    the KL Eq. (9) map, which estimates the Gaussian kernel (docs/guide/features.md, the maps' table)."""
    return np.exp(x @ omega.T - np.sum(x * x, -1, keepdims=True)) / math.sqrt(omega.shape[0])


def wrong_signature(q, k, v):
    return v


def wrong_shape_favor(q, k, v, omega, causal):
    return v[..., :-1, :]


# ----------------------------------------------------------------------------------------------------------
# torch: a careful reimplementation (correct) and a wrong custom gradient

try:
    import torch
except ImportError:  # pragma: no cover - the crosscheck extra is optional
    torch = None

if torch is not None:

    def torch_draw(seed, m, d):
        """Haar-orthogonal blocks: QR with the sign(diag R) correction, chi(d) row norms (float64)."""
        g = torch.Generator().manual_seed(int(seed))
        blocks = []
        for _ in range(-(-m // d)):
            Q, R = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
            s = torch.sign(torch.diagonal(R))
            blocks.append((Q * torch.where(s == 0, torch.ones_like(s), s)).T)    # rows = columns of Q diag(s)
        rows = torch.cat(blocks)[:m]
        norms = torch.randn(m, d, generator=g, dtype=torch.float64).norm(dim=-1)        # chi(d)
        return rows * norms[:, None]

    def torch_positive_features(x, omega):
        """exp(x omega^T - |x|^2/2) / sqrt(m), autograd."""
        u = x @ omega.T - 0.5 * (x * x).sum(-1, keepdim=True)
        return torch.exp(u) / math.sqrt(omega.shape[0])

    def torch_favor(q, k, v, omega, causal):
        """FAVOR+ written carefully in torch: query features stabilised per row, keys by a log-scale combined
        with the maximum over the prefix j <= i (causal) or over all keys; quadratic in L for clarity."""
        s = q.shape[-1] ** -0.25
        uq = (q * s) @ omega.T                                                            # (..., L, m)
        uk = (k * s) @ omega.T                                                            # (..., L, m)
        phi_q = torch.exp(uq - uq.amax(-1, keepdim=True))                                 # row factor cancels
        mk = uk.amax(-1, keepdim=True)                                                    # (..., L, 1)
        phi_k = torch.exp(uk - mk)
        ls = mk[..., 0] - 0.5 * ((k * s) ** 2).sum(-1)                                # (..., L) key log-scale
        L = q.shape[-2]
        if causal:
            M = torch.cummax(ls, dim=-1).values                                          # (..., L) prefix max
            mask = torch.ones(L, L, dtype=torch.bool).tril()
        else:
            M = ls.amax(-1, keepdim=True).expand_as(ls)
            mask = torch.ones(L, L, dtype=torch.bool)
        expo = torch.where(mask, ls[..., None, :] - M[..., :, None], torch.full_like(uq[..., :1], -math.inf))
        A = (phi_q @ phi_k.transpose(-1, -2)) * torch.exp(expo)                           # (..., L, L)
        return (A @ v) / A.sum(-1, keepdim=True)

    class _WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, omega, causal):
            ctx.save_for_backward(q, k, v, omega)
            ctx.causal = causal
            return torch_favor(q, k, v, omega, causal)

        @staticmethod
        def backward(ctx, dy):
            with torch.enable_grad():
                args = [t.detach().requires_grad_(True) for t in ctx.saved_tensors]
                y = torch_favor(*args, ctx.causal)
                g = torch.autograd.grad(y, args, dy)
            return g[0], g[1], 1.05 * g[2], g[3], None                                # planted: dv off by 5 %

    def wrong_grad_favor(q, k, v, omega, causal):
        """Correct forward (torch_favor), custom backward with the value gradient 5 % too large."""
        return _WrongGrad.apply(q, k, v, omega, causal)
