r"""The causal linear-attention scan in its chunk-parallel form (the GPU formulation), forward and backward.

This module holds the algorithm, written against an array namespace ``xp`` (CuPy on the device; NumPy in the
CPU tests that check the algebra) with the two sequential scans over chunks passed in as functions.
:mod:`accel.cupy.causal` passes CUDA kernels for them; :func:`scan_fwd_loop` / :func:`scan_rev_loop` are the
plain loops the kernels implement, used by the tests.

The core's reference (``refattn._dispatch.reference("linear_attention.causal_fwd")``) walks the chunks one
after another: a Python loop of ``L / C`` steps of small GEMMs, which on a GPU is launch-bound
(benchmarks/gpu.py). Here every GEMM runs for all chunks at once as one batched GEMM, and only the carry of
the state from chunk to chunk is sequential -- an elementwise scan over ``n = L / C`` chunks, one thread per
state entry. With positions cut into chunks ``c`` of length ``C`` (``q_c, k_c: (C, m)``,
``u_c: (C, d_v + 1)``):

    U_c = k_c^T (w_c * u_c)                                    (m, d_v + 1)   one batched GEMM over all c
    S_c = sum_{c' < c} exp(mc_{c'} - P_{c-1}) U_{c'}           exclusive scan over c          (scan_fwd)
    numer_c = (q_c k_c^T * E_c) u_c + exp(P_{c-1} - M_c) * (q_c S_c)                      batched GEMMs

Log-scales (the stabiliser of ``refattn.attention.linear``) follow the reference exactly: ``M_i`` is the
prefix maximum of ``s`` at each position, ``mc_c`` the maximum of ``s`` inside chunk ``c``, ``P_c = max_{c' <=
c} mc_{c'}`` (= M at the end of chunk c), ``w_j = exp(s_j - mc_c) <= 1``, ``E_ij = exp(s_j - M_i) <= 1`` for
``j <= i`` in the chunk (0 above the diagonal). Every factor is ``<= 1``, no later key changes an earlier
output (M is a prefix maximum), and nothing is recovered by subtraction. Without log-scales all these factors
are 1 and the scan is a plain exclusive prefix sum.

Backward, with ``g = d numer_aug``: the forward scan is recomputed for ``dphi_q``; a reverse scan carries

    V_c = (r_c * q_c)^T g_c,   r_i = exp(P_{c-1} - M_i)                                     (m, d_v + 1)
    G_c = sum_{c' > c} exp(P_c - P_{c'-1}) V_{c'}              exclusive reverse scan          (scan_rev)

and ``dphi_k_c += (w'_c * u_c) G_c^T``, ``dv_aug_c += w'_c * (k_c G_c)`` with ``w'_j = exp(s_j - P_c)``: the
same sums as the reference's reverse sweep.

Memory: ``O(B L (C + m (d_v + 1) / C))`` for the chunk matrices and the per-chunk states (the price of
parallelism over chunks; the CPU kernels keep O(m d_v)). The tail is padded to a whole chunk with zero
features and values and, for ``s``, the last log-scale repeated (it cannot raise any prefix maximum that a
real position sees).
"""

from __future__ import annotations

import math
from typing import Any, Callable

__all__ = ["causal_fwd", "causal_bwd", "scan_fwd_loop", "scan_rev_loop"]

Array = Any


def scan_fwd_loop(U, mc, *, xp):
    """Reference loop for the forward scan. ``U: (B, n, K)``, ``mc: (B, n)`` or None ->
    ``S: (B, n, K)`` (exclusive, each in the frame ``P_{c-1}``), ``P: (B, n)`` (None without `mc`)."""
    B, n, K = U.shape
    S = xp.zeros_like(U)
    acc = xp.zeros((B, K), dtype=U.dtype)
    if mc is None:
        for c in range(n):
            S[:, c, :] = acc
            acc = acc + U[:, c, :]
        return S, None
    P = xp.zeros_like(mc)
    Pp = None
    for c in range(n):
        S[:, c, :] = acc
        m_c = mc[:, c]
        Pn = m_c if Pp is None else xp.maximum(Pp, m_c)
        decay = xp.zeros_like(Pn) if Pp is None else xp.exp(Pp - Pn)
        acc = xp.expand_dims(decay, axis=-1) * acc + xp.expand_dims(xp.exp(m_c - Pn), axis=-1) * U[:, c, :]
        P[:, c] = Pn
        Pp = Pn
    return S, P


def scan_rev_loop(V, P, *, xp):
    """Reference loop for the reverse scan. ``V: (B, n, K)``, ``P: (B, n)`` or None -> ``G: (B, n, K)`` with
    ``G_c = exp(P_c - P_{c+1}) G_{c+1} + V_{c+1}``, ``G_{n-1} = 0``."""
    B, n, K = V.shape
    G = xp.zeros_like(V)
    acc = xp.zeros((B, K), dtype=V.dtype)
    for c in range(n - 1, -1, -1):
        G[:, c, :] = acc
        if c > 0:
            if P is None:
                acc = acc + V[:, c, :]
            else:
                acc = xp.expand_dims(xp.exp(P[:, c - 1] - P[:, c]), axis=-1) * acc + V[:, c, :]
    return G


def _chunks(x, n, C, *, xp):
    """(B, L, k) -> (B, n, C, k), zero-padded along L to n C rows."""
    B, L = x.shape[0], x.shape[1]
    if n * C != L:
        pad = xp.zeros((B, n * C - L) + tuple(x.shape[2:]), dtype=x.dtype)
        x = xp.concat([x, pad], axis=1)
    return xp.reshape(x, (B, n, C) + tuple(x.shape[2:]))


def _log_scale_parts(s, n, C, *, xp):
    """Chunked log-scales and their prefix maxima.

    ``s: (B, L)`` -> ``sc: (B, n, C)`` (tail padded with the last value), ``Mloc: (B, n, C)`` (the maximum of
    ``s`` from the chunk's start to each position), ``mc: (B, n)`` (chunk maxima)."""
    B, L = s.shape
    if n * C != L:
        s = xp.concat([s, xp.broadcast_to(s[:, L - 1:], (B, n * C - L))], axis=1)
    sc = xp.reshape(s, (B, n, C))
    tril = _tril(C, xp=xp)
    neg_inf = xp.asarray(-math.inf, dtype=s.dtype)
    Mloc = xp.max(xp.where(tril, xp.expand_dims(sc, axis=-2), neg_inf), axis=-1)   # (B, n, C)
    return sc, Mloc, Mloc[:, :, C - 1]


def _tril(C, *, xp):
    r = xp.arange(C)
    return xp.expand_dims(r, axis=1) >= xp.expand_dims(r, axis=0)                 # (C, C): j <= i


def _prev(P, *, xp):
    """``P_{c-1}`` for every chunk c (``-inf`` before the first)."""
    first = xp.full((P.shape[0], 1), -math.inf, dtype=P.dtype)
    return xp.concat([first, P[:, :-1]], axis=1)


def _weights(sc, Mloc, P, *, xp):
    """``M: (B, n, C)`` prefix maxima, ``E: (B, n, C, C)`` intra-chunk weights, ``decay: (B, n, C, 1)`` =
    exp(P_{c-1} - M_i)."""
    Pp = xp.expand_dims(_prev(P, xp=xp), axis=-1)                                  # (B, n, 1)
    M = xp.maximum(Mloc, Pp)                                                      # (B, n, C)
    C = sc.shape[-1]
    tril = _tril(C, xp=xp)
    diff = xp.expand_dims(sc, axis=-2) - xp.expand_dims(M, axis=-1)               # (B, n, C, C) s_j - M_i
    zero = xp.asarray(0.0, dtype=sc.dtype)
    E = xp.where(tril, xp.exp(xp.where(tril, diff, zero)), zero)
    decay = xp.expand_dims(xp.exp(Pp - M), axis=-1)                               # first chunk: exp(-inf) = 0
    return M, E, decay


def causal_fwd(phi_q, phi_k, v_aug, s, C: int, *, xp, scan_fwd: Callable):
    """Chunk-parallel causal forward on flattened inputs.

    ``phi_q, phi_k: (B, L, m)``, ``v_aug: (B, L, e)``, ``s: (B, L)`` or None, chunk length ``C`` ->
    ``numer: (B, L, e)``, ``M: (B, L)`` (None without `s`). ``scan_fwd(U, mc) -> (S, P)`` as
    :func:`scan_fwd_loop`.
    """
    B, L, m = phi_q.shape
    e = v_aug.shape[-1]
    n = -(-L // C)
    q, k, u = (_chunks(a, n, C, xp=xp) for a in (phi_q, phi_k, v_aug))             # (B, n, C, .)
    kT = xp.matrix_transpose(k)                                                   # (B, n, m, C)
    A = q @ kT                                                                    # (B, n, C, C)
    if s is None:
        U = kT @ u                                                                # (B, n, m, e)
        S, _ = scan_fwd(xp.reshape(U, (B, n, m * e)), None)
        S = xp.reshape(S, (B, n, m, e))
        A = xp.where(_tril(C, xp=xp), A, xp.zeros_like(A))
        numer = A @ u + q @ S                                                     # (B, n, C, e)
        M = None
    else:
        sc, Mloc, mc = _log_scale_parts(s, n, C, xp=xp)
        w = xp.expand_dims(xp.exp(sc - xp.expand_dims(mc, axis=-1)), axis=-1)     # (B, n, C, 1) <= 1
        U = kT @ (w * u)
        S, P = scan_fwd(xp.reshape(U, (B, n, m * e)), mc)
        S = xp.reshape(S, (B, n, m, e))
        M, E, decay = _weights(sc, Mloc, P, xp=xp)
        numer = (A * E) @ u + decay * (q @ S)
        M = xp.reshape(M, (B, n * C))[:, :L]
    return xp.reshape(numer, (B, n * C, e))[:, :L, :], M


def causal_bwd(g, phi_q, phi_k, v_aug, s, C: int, *, xp, scan_fwd: Callable, scan_rev: Callable):
    """Chunk-parallel causal backward on flattened inputs (``g: (B, L, e)``, the others as
    :func:`causal_fwd`; the prefix maxima are recomputed with the chunk maxima the scans need) ->
    ``dphi_q, dphi_k: (B, L, m)``, ``dv_aug: (B, L, e)``."""
    B, L, m = phi_q.shape
    e = v_aug.shape[-1]
    n = -(-L // C)
    q, k, u, gc = (_chunks(a, n, C, xp=xp) for a in (phi_q, phi_k, v_aug, g))     # (B, n, C, .)
    kT, uT, qT = (xp.matrix_transpose(a) for a in (k, u, q))
    A = q @ kT                                                                    # (B, n, C, C) q_i . k_j
    Bm = gc @ uT                                                                  # (B, n, C, C) g_i . u_j
    if s is None:
        tril = _tril(C, xp=xp)
        zero = xp.zeros_like(A)
        AE, Bm = xp.where(tril, A, zero), xp.where(tril, Bm, zero)
        U = kT @ u
        S, _ = scan_fwd(xp.reshape(U, (B, n, m * e)), None)
        S = xp.reshape(S, (B, n, m, e))
        dq = Bm @ k + gc @ xp.matrix_transpose(S)                                 # (B, n, C, m)
        V = qT @ gc                                                               # (B, n, m, e)
        G = xp.reshape(scan_rev(xp.reshape(V, (B, n, m * e)), None), (B, n, m, e))
        dk = xp.matrix_transpose(Bm) @ q + u @ xp.matrix_transpose(G)
        du = xp.matrix_transpose(AE) @ gc + k @ G
    else:
        sc, Mloc, mc = _log_scale_parts(s, n, C, xp=xp)
        w = xp.expand_dims(xp.exp(sc - xp.expand_dims(mc, axis=-1)), axis=-1)     # (B, n, C, 1)
        U = kT @ (w * u)
        S, P = scan_fwd(xp.reshape(U, (B, n, m * e)), mc)
        S = xp.reshape(S, (B, n, m, e))
        _, E, decay = _weights(sc, Mloc, P, xp=xp)
        AE, Bm = A * E, Bm * E
        dq = Bm @ k + decay * (gc @ xp.matrix_transpose(S))
        V = xp.matrix_transpose(decay * q) @ gc                                   # r_i = exp(P_{c-1} - M_i)
        G = xp.reshape(scan_rev(xp.reshape(V, (B, n, m * e)), P), (B, n, m, e))
        wr = xp.expand_dims(xp.exp(sc - xp.expand_dims(P, axis=-1)), axis=-1)  # (B, n, C, 1) exp(s_j - P_c)
        dk = xp.matrix_transpose(Bm) @ q + (wr * u) @ xp.matrix_transpose(G)
        du = xp.matrix_transpose(AE) @ gc + wr * (k @ G)
    out = []
    for a, width in ((dq, m), (dk, m), (du, e)):
        out.append(xp.reshape(a, (B, n * C, width))[:, :L, :])
    return tuple(out)
