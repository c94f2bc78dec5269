"""Candidates for the papers' families, written from the contracts' docstrings as an outside user would (no
refattn import), generic over NumPy and torch through array-api-compat; and planted defects, each a known way
to get a family wrong (flagged by name in test_families.py).
"""

from __future__ import annotations

import math

import array_api_compat
import numpy as np


def _xp(*a):
    return array_api_compat.array_namespace(*a)


def _softmax(z, xp):
    e = xp.exp(z - xp.max(z))
    return e / xp.sum(e)


# ----------------------------------------------------------------------------------------------------------
# GMM: omega_cj = mu_c + S_c n_cj, sqrt(C pi_c) per component, 1/sqrt(M)


def _gmm_omega(noise, mu, S, transpose=False):
    xp = _xp(noise, mu, S)
    St = xp.permute_dims(S, (0, 2, 1))
    return mu[:, None, :] + noise @ (S if transpose else St)              # (C, Mc, d): S_c n (row form n S^T)


def _gmm_scale(logits, Mc, xp, weighted=True):
    C = logits.shape[0]
    pi = _softmax(logits, xp)
    s = xp.sqrt(C * pi) if weighted else xp.ones_like(pi)
    return xp.reshape(xp.broadcast_to(s[:, None], (C, Mc)), (C * Mc,))


def gmm_rks(x, noise, logits, mu, S, *, transpose=False, weighted=True):
    xp = _xp(x, noise)
    C, Mc, d = noise.shape
    om = xp.reshape(_gmm_omega(noise, mu, S, transpose), (C * Mc, d))
    u = x @ xp.matrix_transpose(om)                                            # (..., L, M)
    sc = _gmm_scale(logits, Mc, xp, weighted) / math.sqrt(C * Mc)
    return xp.concat([xp.cos(u) * sc, xp.sin(u) * sc], axis=-1)


def gmm_prf(x, noise, logits, mu, S, *, offset=1.0):
    xp = _xp(x, noise)
    C, Mc, d = noise.shape
    om = xp.reshape(_gmm_omega(noise, mu, S), (C * Mc, d))
    u = x @ xp.matrix_transpose(om) - offset * xp.sum(x * x, axis=-1, keepdims=True)
    return xp.exp(u) * (_gmm_scale(logits, Mc, xp) / math.sqrt(C * Mc))


def gmm_rks_transposed_s(x, noise, logits, mu, S):
    """omega = mu + S^T n: covariance S^T S, the paper's Theorem 3 statement read literally."""
    return gmm_rks(x, noise, logits, mu, S, transpose=True)


def gmm_rks_no_weight(x, noise, logits, mu, S):
    """Missing sqrt(C pi_c): every component weighted 1/C whatever the logits."""
    return gmm_rks(x, noise, logits, mu, S, weighted=False)


def gmm_prf_half_offset(x, noise, logits, mu, S):
    """The FAVOR+ offset |x|^2/2 where Eq. 9 has |x|^2: estimates another kernel."""
    return gmm_prf(x, noise, logits, mu, S, offset=0.5)


# ----------------------------------------------------------------------------------------------------------
# FastFood: V_b = diag(S) H diag(G) Pi H diag(B) / sqrt(D), x padded to D


def _hadamard(D):
    H = np.ones((1, 1))
    while H.shape[0] < D:
        H = np.block([[H, H], [H, -H]])
    return H


def _fastfood_u(x, S, G, B, perm, *, use_S=True, normalised_H=False):
    xp = _xp(x, S)
    nb, D = S.shape
    d = x.shape[-1]
    if D > d:
        x = xp.concat([x, xp.zeros(tuple(x.shape[:-1]) + (D - d,), dtype=x.dtype)], axis=-1)
    H = xp.asarray(_hadamard(D) / (math.sqrt(D) if normalised_H else 1.0), dtype=x.dtype)
    out = []
    for b in range(nb):
        z = (x * B[b]) @ H                                                      # H B x (H symmetric)
        z = xp.take(z, perm[b], axis=-1) * G[b]                                 # G Pi H B x
        z = z @ H
        out.append(z * S[b] / math.sqrt(D) if use_S else z / math.sqrt(D))
    return xp.concat(out, axis=-1)                                              # (..., L, M) block-major


def fastfood_rks(x, S, G, B, perm, **kw):
    xp = _xp(x, S)
    u = _fastfood_u(x, S, G, B, perm, **kw)
    M = u.shape[-1]
    return xp.concat([xp.cos(u), xp.sin(u)], axis=-1) / math.sqrt(M)


def fastfood_prf(x, S, G, B, perm, **kw):
    xp = _xp(x, S)
    u = _fastfood_u(x, S, G, B, perm, **kw)
    return xp.exp(u - xp.sum(x * x, axis=-1, keepdims=True)) / math.sqrt(u.shape[-1])


def fastfood_rks_no_s(x, S, G, B, perm):
    """FastFood without the chi-law S (basic FastFood): rows of a block share one norm."""
    return fastfood_rks(x, S, G, B, perm, use_S=False)


def fastfood_prf_normalised_h(x, S, G, B, perm):
    """Orthonormal H / sqrt(D) in both transforms where the contract has the unnormalised one."""
    return fastfood_prf(x, S, G, B, perm, normalised_H=True)


# ----------------------------------------------------------------------------------------------------------
# Generative: an MLP on the noise (evaluation mode), then RKS / PRF


def _generator(noise, params, state, *, use_running=True, out_tanh=True):
    xp = _xp(noise)
    h = noise
    n = len(params["gamma"])
    for i in range(n):
        z = h @ params["W"][i] + params["b"][i]
        if use_running:
            mean, var = state["mean"][i], state["var"][i]
        else:                                                               # batch statistics (training mode)
            mean, var = xp.mean(z, axis=0), xp.var(z, axis=0)
        z = params["gamma"][i] * (z - mean) / xp.sqrt(var + 1e-5) + params["beta"][i]
        h = xp.where(z > 0, z, 0.01 * z)
    z = h @ params["W"][n] + params["b"][n]
    return xp.tanh(z) if out_tanh else z


def generative_rks(x, noise, params, state, **kw):
    xp = _xp(x, noise)
    om = _generator(noise, params, state, **kw)
    u = x @ xp.matrix_transpose(om)
    return xp.concat([xp.cos(u), xp.sin(u)], axis=-1) / math.sqrt(om.shape[0])


def generative_prf(x, noise, params, state, **kw):
    xp = _xp(x, noise)
    om = _generator(noise, params, state, **kw)
    return xp.exp(x @ xp.matrix_transpose(om) - xp.sum(x * x, axis=-1, keepdims=True)) / math.sqrt(
        om.shape[0]
    )


def generative_rks_batch_stats(x, noise, params, state):
    """Batch norm with the batch's statistics at evaluation: frequencies coupled, not the contract's map."""
    return generative_rks(x, noise, params, state, use_running=False)


def generative_prf_no_tanh(x, noise, params, state):
    """The generator's output layer without tanh."""
    return generative_prf(x, noise, params, state, out_tanh=False)


# ----------------------------------------------------------------------------------------------------------
# FLT: a = 2 pi pos . xi, weights 1/r, sign(w) on one side


def flt(pos, xi, w, *, angular=False, one_over_t=False):
    xp = _xp(pos, xi)
    r = xi.shape[0]
    a = (pos @ xp.matrix_transpose(xi)) * (1.0 if angular else 2 * math.pi)    # (..., L, r)
    if one_over_t:
        wt = w / xp.arange(1, r + 1, dtype=w.dtype)                            # printed Eqs. 14-15: w_t / t
    else:
        wt = w / r
    s = xp.sqrt(xp.abs(wt))
    sg = xp.sign(wt)
    c, sn = xp.cos(a), xp.sin(a)
    return xp.concat([c * s, sn * s], axis=-1), xp.concat([c * s * sg, sn * s * sg], axis=-1)


def flt_angular(pos, xi, w):
    """Angular frequencies: phase pos . xi instead of 2 pi pos . xi."""
    return flt(pos, xi, w, angular=True)


def flt_one_over_t(pos, xi, w):
    """The printed 1/t weighting of the t-th term instead of the average 1/r."""
    return flt(pos, xi, w, one_over_t=True)


# ----------------------------------------------------------------------------------------------------------
# S2: exact softmax over clipped signed distances, w row r + k = w_r


def s2(q, v, w, k, *, lower=None):
    xp = _xp(q, v, w)
    Lq, d = q.shape[-2], q.shape[-1]
    rel = np.arange(Lq)[None, :] - np.arange(Lq)[:, None]                     # j - i
    cls = np.clip(rel, -k if lower is None else lower, k) + k                   # (L, L) class index
    logits = (q @ xp.matrix_transpose(w)) / math.sqrt(d)                        # (..., L, 2k + 1)
    A = 0.0
    for r in range(2 * k + 1):
        A = A + logits[..., :, r:r + 1] * xp.asarray((cls == r).astype(np.float64), dtype=q.dtype)
    A = xp.exp(A - xp.max(A, axis=-1, keepdims=True))
    return (A @ v) / xp.sum(A, axis=-1, keepdims=True)


def grid_classes(H, W, k, cls, metric="manhattan", clip=True):
    """(L, L) class index on an H x W grid (row-major): the Manhattan (or Chebyshev) distance clipped to k
    (unclipped: distances beyond k get class 0); with a class token last at class k from every token."""
    y, x = np.divmod(np.arange(H * W), W)
    dy, dx = np.abs(y[:, None] - y[None, :]), np.abs(x[:, None] - x[None, :])
    dist = dy + dx if metric == "manhattan" else np.maximum(dy, dx)
    C = np.minimum(dist, k) if clip else np.where(dist <= k, dist, 0)
    if not cls:
        return C
    out = np.full((H * W + 1, H * W + 1), k)
    out[:H * W, :H * W] = C
    return out


def s2_classes(q, v, w, C):
    """Exact S2 attention with the (L, L) class index C: softmax_j(q_i . w[C_ij] / sqrt(d)) v_j."""
    xp = _xp(q, v, w)
    logits = (q @ xp.matrix_transpose(w)) / math.sqrt(q.shape[-1])              # (..., L, R)
    A = 0.0
    for r in range(w.shape[-2]):
        A = A + logits[..., :, r:r + 1] * xp.asarray((C == r).astype(np.float64), dtype=q.dtype)
    A = xp.exp(A - xp.max(A, axis=-1, keepdims=True))
    return (A @ v) / xp.sum(A, axis=-1, keepdims=True)


def s2_grid(q, v, w, k, grid):
    """S2 on a grid (Manhattan distance clipped to k), a class token last when L = H W + 1."""
    H, W = grid
    return s2_classes(q, v, w, grid_classes(H, W, k, q.shape[-2] == H * W + 1))


def s2_one_tail(q, v, w, k):
    """The one-sided far-region formula on signed distances: keys with j - i <= -k are not given w_{-k}."""
    return s2(q, v, w, k, lower=-(k - 1))


# ----------------------------------------------------------------------------------------------------------
# attention: linear attention on a feature map, written out (quadratic in L for clarity)


def linear_attention(phi_q, phi_k, v, causal):
    xp = _xp(phi_q, phi_k, v)
    A = phi_q @ xp.matrix_transpose(phi_k)                                      # (..., L, L) kernel estimates
    if causal:
        Lq = A.shape[-1]
        A = A * xp.asarray(np.tril(np.ones((Lq, Lq))), dtype=A.dtype)
    return (A @ v) / xp.sum(A, axis=-1, keepdims=True)


def _feature_attention(features):
    def att(q, k, v, *draws):
        *draws, causal = draws
        return linear_attention(features(q, *draws), features(k, *draws), v, causal)
    return att


gmm_rks_attention = _feature_attention(gmm_rks)
gmm_prf_attention = _feature_attention(gmm_prf)
fastfood_rks_attention = _feature_attention(fastfood_rks)
fastfood_prf_attention = _feature_attention(fastfood_prf)
generative_rks_attention = _feature_attention(generative_rks)
generative_prf_attention = _feature_attention(generative_prf)


def gmm_prf_attention_global_max(q, k, v, noise, logits, mu, S, causal):
    """Keys stabilised by one maximum over *all* positions plus an additive eps: leaks the future (causal)."""
    xp = _xp(q, noise)
    C, Mc, d = noise.shape
    om = xp.reshape(_gmm_omega(noise, mu, S), (C * Mc, d))
    sc = _gmm_scale(logits, Mc, xp) / math.sqrt(C * Mc)
    uq = q @ xp.matrix_transpose(om)
    uk = k @ xp.matrix_transpose(om)
    phi_q = xp.exp(uq - xp.max(uq, axis=-1, keepdims=True)) * sc
    phi_k = (xp.exp(uk - xp.max(uk, axis=(-1, -2), keepdims=True)) + 1e-4) * sc
    phi_k = phi_k * xp.exp(-xp.sum(k * k, axis=-1, keepdims=True))
    return linear_attention(phi_q, phi_k, v, causal)


def fastfood_rks_attention_scaled(q, k, v, S, G, B, perm, causal):
    """The FAVOR habit of scaling q and k by d^{-1/4}: the attention of another kernel."""
    s = q.shape[-1] ** -0.25
    return fastfood_rks_attention(q * s, k * s, v, S, G, B, perm, causal)


def s1_attention(q, k, v, positions, freqs, alpha, beta, omega, causal, *, paper_transpose=False):
    xp = _xp(q, k, v, omega)
    th = positions[:, None] * freqs[0]                                          # (L, S)
    s, c = xp.sin(th), xp.cos(th)
    al, be = alpha[0], beta[0]
    if paper_transpose:                                                    # W_q*^T: the column-vector reading
        Qp = xp.stack([al * s + be * c, -be * s + al * c], axis=-1)
    else:
        Qp = xp.stack([al * s - be * c, be * s + al * c], axis=-1)              # (L, S, 2) = [s c] W_q*
    Kp = xp.stack([s, c], axis=-1)
    Lq = q.shape[-2]
    Qp = xp.broadcast_to(xp.reshape(Qp, (Lq, -1)), tuple(q.shape[:-1]) + (2 * th.shape[-1],))
    Kp = xp.broadcast_to(xp.reshape(Kp, (Lq, -1)), tuple(k.shape[:-1]) + (2 * th.shape[-1],))
    Q, K = xp.concat([q, Qp], axis=-1), xp.concat([k, Kp], axis=-1)
    return _favor(Q, K, v, omega, causal)


def _favor(Q, K, v, omega, causal):
    xp = _xp(Q, K, omega)
    s = Q.shape[-1] ** -0.25
    Q, K = Q * s, K * s
    uq = Q @ xp.matrix_transpose(omega) - 0.5 * xp.sum(Q * Q, axis=-1, keepdims=True)
    uk = K @ xp.matrix_transpose(omega) - 0.5 * xp.sum(K * K, axis=-1, keepdims=True)
    return linear_attention(xp.exp(uq), xp.exp(uk), v, causal)


def s1_attention_paper_transpose(q, k, v, positions, freqs, alpha, beta, omega, causal):
    """W_q^T W_k read as the rotation condition in the row-vector convention: beta's sign flipped."""
    return s1_attention(q, k, v, positions, freqs, alpha, beta, omega, causal, paper_transpose=True)


def flt_attention(q, k, v, pos, xi, w, omega, causal, *, angular=False):
    xp = _xp(q, k, v, omega)
    N1, N2 = flt(pos, xi, w, angular=angular)
    s = q.shape[-1] ** -0.25
    N1 = xp.broadcast_to(N1, tuple(q.shape[:-1]) + (N1.shape[-1],))
    N2 = xp.broadcast_to(N2, tuple(k.shape[:-1]) + (N2.shape[-1],))
    Q, K = xp.concat([N1, q * s], axis=-1), xp.concat([N2, k * s], axis=-1)
    uq = Q @ xp.matrix_transpose(omega) - 0.5 * xp.sum(Q * Q, axis=-1, keepdims=True)
    uk = K @ xp.matrix_transpose(omega) - 0.5 * xp.sum(K * K, axis=-1, keepdims=True)
    return linear_attention(xp.exp(uq), xp.exp(uk), v, causal)


def flt_attention_angular(q, k, v, pos, xi, w, omega, causal):
    """Algorithm 1 with angular frequencies in the RPE features."""
    return flt_attention(q, k, v, pos, xi, w, omega, causal, angular=True)
