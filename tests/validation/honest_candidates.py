"""Candidates for the honesty tests of the validator: maps of unknown kernels, planted defects in known ones,
degenerate draws, batch-coupled stabilisers, causal modes that raise, and S2 on 2-D grids written from the
contract (NumPy, quadratic in L for clarity)."""

from __future__ import annotations

import math

import numpy as np

from refattn.attention import favor_attention, linear_attention
from refattn.features import positive_features, trig_features

from .family_candidates import grid_classes, s2_classes


def arccos_features(x, omega):
    """ReLU random features (the first-order arc-cosine kernel, as fast-transformers'
    GeneralizedRandomFeatures with a ReLU): sqrt(2/m) relu(x omega^T). Its kernel is none of the known
    ones."""
    return math.sqrt(2.0 / omega.shape[0]) * np.maximum(x @ omega.T, 0.0)


def one_over_m_features(x, omega):
    """Positive features normalised by 1/m instead of 1/sqrt(m): a constant multiple of the softmax kernel."""
    return positive_features(x, omega) / math.sqrt(omega.shape[0])


def gaussian_trig_features(x, omega):
    """The Gaussian [cos, sin] map (correct under --as gaussian-trig, a swap under --as softmax-trig)."""
    return trig_features(x, omega)


def zero_draw(seed, m, d):
    """A degenerate sampler: every draw is all zeros."""
    return np.zeros((m, d))


def nan_features(x, omega):
    """Features with NaN entries."""
    phi = positive_features(x, omega)
    phi[..., 0] = np.nan
    return phi


def batch_max_favor(q, k, v, omega, causal):
    """Each key position stabilised by one maximum over the whole batch (batch, heads and features), its
    log-scale kept, plus a tiny eps (1e-10): per position (no causal leak) and equal to FAVOR+ within the
    values tolerance, but one batch element's keys move every other element's stabiliser."""
    s = q.shape[-1] ** -0.25
    m = omega.shape[0]
    uq = (q * s) @ omega.T
    uk = (k * s) @ omega.T - 0.5 * np.sum((k * s) ** 2, -1, keepdims=True)           # (..., L, m) exponents
    M = uk.max(axis=tuple(range(k.ndim - 2)) + (-1,), keepdims=True)                 # (1, 1, L, 1)
    phi_q = np.exp(uq - uq.max(-1, keepdims=True)) / math.sqrt(m)
    phi_k = (np.exp(uk - M) + 1e-10) / math.sqrt(m)
    ls = np.broadcast_to(M[..., 0], k.shape[:-1])
    return linear_attention(phi_q, phi_k, v, causal=causal, k_log_scale=np.ascontiguousarray(ls))


def causal_raises_favor(q, k, v, omega, causal):
    """Correct bidirectional FAVOR+, no causal mode."""
    if causal:
        raise NotImplementedError("no causal path")
    return favor_attention(q, k, v, omega)


def s2_grid_chebyshev(q, v, w, k, grid):
    """Planted: the Chebyshev (max) distance for the Manhattan one."""
    H, W = grid
    return s2_classes(q, v, w, grid_classes(H, W, k, q.shape[-2] == H * W + 1, metric="chebyshev"))


def s2_grid_unclipped(q, v, w, k, grid):
    """Planted: no clipping (distances beyond k get w_0 instead of w_k)."""
    H, W = grid
    return s2_classes(q, v, w, grid_classes(H, W, k, q.shape[-2] == H * W + 1, clip=False))


def s2_grid_cls_below(q, v, w, k, grid):
    """Planted: the class token placed one row below the grid at column 0 (its row then sees the bottom-left
    cells at their Manhattan distance), as a literal reading of Horn et al.'s index layout."""
    H, W = grid
    C = grid_classes(H + 1, W, k, False)[: H * W + 1, : H * W + 1].copy()
    C[:, H * W] = k
    return s2_classes(q, v, w, C)
