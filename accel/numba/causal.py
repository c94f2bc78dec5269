r"""Numba kernels for the causal linear-attention scan, forward and backward (CPU, ``prange`` over batch x
heads).

Supported (read by ``tests/accel/test_causal.py``):

=====================  ============  ==================  ==================================================
primitive              backend       dtypes              registered as
=====================  ============  ==================  ==================================================
``causal_fwd``         NumPy (CPU)   float32, float64    ``"linear_attention.causal_fwd"``
``causal_bwd``         NumPy (CPU)   float32, float64    ``"linear_attention.causal_bwd"``
=====================  ============  ==================  ==================================================

Same signatures and results as the core's chunked reference
(:func:`refattn.attention.linear._causal_fwd_reference`, ``_causal_bwd_reference``), computed as the
recurrence of Katharopoulos et al. (the RNN view of causal linear attention), per (batch, head):

    S_i = d_i S_{i-1} + w_i phi_k_i^T v_aug_i,      numer_i = phi_q_i S_i                      (m, d_v + 1)
    state

with the key log-scales s carried relative to the prefix maximum ``M_i = max_{j<=i} s_j`` (design.md trap 3):
``w_i = exp(s_i - M_i) <= 1`` and ``d_i = exp(M_{i-1} - M_i) <= 1`` rescales the state when the maximum grows,
so ``S_i = sum_{j<=i} exp(s_j - M_i) phi_k_j^T v_aug_j`` exactly as in the reference (M_i depends on the
prefix
only: the output for a prefix never depends on later tokens). Without log-scales ``d = w = 1``.

Backward, with ``g = d numer_aug``, keeps one (m, d_v + 1) state per sweep and never an (L, m, d_v) stack:

* forward sweep (recomputes S_i): ``dphi_q_i = S_i g_i``;
* reverse sweep: ``G_j = d_{j+1} G_{j+1} + phi_q_j^T g_j`` (= sum_{i>=j} exp(M_j - M_i) phi_q_i^T g_i, every
  factor <= 1, nothing recovered by subtraction), then ``dphi_k_j = w_j G_j v_aug_j`` and
  ``dv_aug_j = w_j G_j^T phi_k_j``.

Loop order: the time axis is cut into blocks of ``TIME_BLOCK`` steps; for each group of four state rows the
block's steps run with those rows in L1 (``for a in 0, 4, ...: for t in block: for c``), so the (m, d_v + 1)
state streams from cache once per block instead of once per step, and one load/store of an output row serves
four rows (measured: 2-2.5x over one row at a time, benchmarks/accel.py). Every state entry is still updated
in time order, so the result does
not depend on the block length (nor on the core's ``chunk_size``, which the recurrence does not need).
Flops per (batch, head): forward ``4 L m (d_v + 1)``; backward ``10 L m (d_v + 1)`` (4 in the forward sweep,
6 in the reverse sweep).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._checks import check_same, flatten_leading
from ._common import FASTMATH, as_numpy

__all__ = ["SUPPORTED", "TIME_BLOCK", "causal_fwd", "causal_bwd", "step_weights"]

SUPPORTED = {
    "causal_fwd": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                   "primitive": "linear_attention.causal_fwd"},
    "causal_bwd": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                   "primitive": "linear_attention.causal_bwd"},
}

#: Steps per time block (state rows are reused from L1 across a block). Any value gives the same result.
TIME_BLOCK = 32


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _fwd_kernel(phi_q, phi_k, v_aug, dec, wk, numer, state, T):  # pragma: no cover - compiled
    """numer[b, i] = phi_q[b, i] S_i with S_i = dec[b, i] S_{i-1} + wk[b, i] phi_k[b, i]^T v_aug[b, i].

    `numer` and `state` (B, m, D) must come zeroed (the state is allocated by the caller, so that tracemalloc
    sees every byte the scan uses). State rows are taken four at a time (a0..a0+3) so that one load and one
    store of
    numer[b, t, c] serve four rows' updates; the remaining m % 4 rows run one at a time.
    """
    B, L, m = phi_q.shape
    D = v_aug.shape[2]
    m4 = m - m % 4
    for b in prange(B):
        S = state[b]                                                     # (m, D) the only state
        for t0 in range(0, L, T):
            t1 = min(L, t0 + T)
            for a in range(0, m4, 4):
                S0, S1, S2, S3 = S[a], S[a + 1], S[a + 2], S[a + 3]      # (D,) four state rows, kept in L1
                for t in range(t0, t1):
                    d, w = dec[b, t], wk[b, t]
                    pk, pq = phi_k[b, t], phi_q[b, t]
                    k0, k1, k2, k3 = w * pk[a], w * pk[a + 1], w * pk[a + 2], w * pk[a + 3]
                    q0, q1, q2, q3 = pq[a], pq[a + 1], pq[a + 2], pq[a + 3]
                    u = v_aug[b, t]
                    o = numer[b, t]
                    for c in range(D):
                        uc = u[c]
                        x0 = d * S0[c] + k0 * uc  # S_t[a, c] = d_t S_{t-1}[a, c] + w_t k_t[a] u_t[c]
                        x1 = d * S1[c] + k1 * uc
                        x2 = d * S2[c] + k2 * uc
                        x3 = d * S3[c] + k3 * uc
                        S0[c], S1[c], S2[c], S3[c] = x0, x1, x2, x3
                        o[c] += (q0 * x0 + q1 * x1) + (q2 * x2 + q3 * x3)   # numer_t[c] += q_t[a] S_t[a, c]
            for a in range(m4, m):
                Sa = S[a]
                for t in range(t0, t1):
                    d = dec[b, t]
                    ka = wk[b, t] * phi_k[b, t, a]
                    qa = phi_q[b, t, a]
                    u = v_aug[b, t]
                    o = numer[b, t]
                    for c in range(D):
                        x = d * Sa[c] + ka * u[c]
                        Sa[c] = x
                        o[c] += qa * x


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _bwd_kernel(g, phi_q, phi_k, v_aug, dec, wk, dq, dk, dv, state, T):  # pragma: no cover - compiled
    """Forward sweep for dq, reverse sweep for dk and dv (`dv`, `state` must come zeroed); rows four at
    a time."""
    B, L, m = phi_q.shape
    D = v_aug.shape[2]
    m4 = m - m % 4
    zero = dq.dtype.type(0)  # typed constants: float32 stays float32
    one = dq.dtype.type(1)
    for b in prange(B):
        S = state[b]                                                     # (m, D) forward-sweep state
        for t0 in range(0, L, T):
            t1 = min(L, t0 + T)
            for a in range(0, m4, 4):
                S0, S1, S2, S3 = S[a], S[a + 1], S[a + 2], S[a + 3]
                for t in range(t0, t1):
                    d, w = dec[b, t], wk[b, t]
                    pk = phi_k[b, t]
                    k0, k1, k2, k3 = w * pk[a], w * pk[a + 1], w * pk[a + 2], w * pk[a + 3]
                    u = v_aug[b, t]
                    gt = g[b, t]
                    e0, e1, e2, e3 = zero, zero, zero, zero
                    for c in range(D):
                        uc, gc = u[c], gt[c]
                        x0 = d * S0[c] + k0 * uc                         # S_t[a, c]
                        x1 = d * S1[c] + k1 * uc
                        x2 = d * S2[c] + k2 * uc
                        x3 = d * S3[c] + k3 * uc
                        S0[c], S1[c], S2[c], S3[c] = x0, x1, x2, x3
                        e0 += x0 * gc                                    # (S_t g_t)[a]
                        e1 += x1 * gc
                        e2 += x2 * gc
                        e3 += x3 * gc
                    dq[b, t, a], dq[b, t, a + 1], dq[b, t, a + 2], dq[b, t, a + 3] = e0, e1, e2, e3
            for a in range(m4, m):
                Sa = S[a]
                for t in range(t0, t1):
                    d = dec[b, t]
                    ka = wk[b, t] * phi_k[b, t, a]
                    u = v_aug[b, t]
                    gt = g[b, t]
                    acc = zero
                    for c in range(D):
                        x = d * Sa[c] + ka * u[c]
                        Sa[c] = x
                        acc += x * gt[c]
                    dq[b, t, a] = acc                                    # dphi_q_t[a] = (S_t g_t)[a]
        G = state[b]                                                     # (m, D) reverse-sweep state (reused)
        G[:, :] = zero
        nblocks = (L + T - 1) // T
        for blk in range(nblocks - 1, -1, -1):
            t0 = blk * T
            t1 = min(L, t0 + T)
            for a in range(0, m4, 4):
                G0, G1, G2, G3 = G[a], G[a + 1], G[a + 2], G[a + 3]
                for t in range(t1 - 1, t0 - 1, -1):
                    r = dec[b, t + 1] if t + 1 < L else one              # exp(M_t - M_{t+1}) <= 1
                    w = wk[b, t]
                    pq, pk = phi_q[b, t], phi_k[b, t]
                    q0, q1, q2, q3 = pq[a], pq[a + 1], pq[a + 2], pq[a + 3]
                    k0, k1, k2, k3 = w * pk[a], w * pk[a + 1], w * pk[a + 2], w * pk[a + 3]
                    u = v_aug[b, t]
                    gt = g[b, t]
                    o = dv[b, t]
                    e0, e1, e2, e3 = zero, zero, zero, zero
                    for c in range(D):
                        uc, gc = u[c], gt[c]
                        x0 = r * G0[c] + q0 * gc  # G_t[a, c] = r G_{t+1}[a, c] + q_t[a] g_t[c]
                        x1 = r * G1[c] + q1 * gc
                        x2 = r * G2[c] + q2 * gc
                        x3 = r * G3[c] + q3 * gc
                        G0[c], G1[c], G2[c], G3[c] = x0, x1, x2, x3
                        e0 += x0 * uc                                    # (G_t v_aug_t)[a]
                        e1 += x1 * uc
                        e2 += x2 * uc
                        e3 += x3 * uc
                        # dv_aug_t[c] += w_t k_t[a] G_t[a, c]
                        o[c] += (k0 * x0 + k1 * x1) + (k2 * x2 + k3 * x3)
                    dk[b, t, a], dk[b, t, a + 1] = w * e0, w * e1
                    dk[b, t, a + 2], dk[b, t, a + 3] = w * e2, w * e3
            for a in range(m4, m):
                Ga = G[a]
                for t in range(t1 - 1, t0 - 1, -1):
                    r = dec[b, t + 1] if t + 1 < L else one
                    qa = phi_q[b, t, a]
                    w = wk[b, t]
                    kw = w * phi_k[b, t, a]
                    u = v_aug[b, t]
                    gt = g[b, t]
                    o = dv[b, t]
                    acc = zero
                    for c in range(D):
                        x = r * Ga[c] + qa * gt[c]                       # G_t[a, c]
                        Ga[c] = x
                        acc += x * u[c]
                        o[c] += kw * x  # dv_aug_t[c] += w_t phi_k_t[a] G_t[a, c]
                    dk[b, t, a] = w * acc                                # dphi_k_t[a] = w_t (G_t v_aug_t)[a]


def step_weights(s, dtype, shape):
    """Per-step state decay and key weight from the key log-scales (NumPy, O(B L)).

    Parameters: ``s: (B, L)`` or None. Returns ``M: (B, L)`` prefix maxima (None without `s`),
    ``dec: (B, L)`` = exp(M_{i-1} - M_i) (1 at i = 0, where the state is still zero) and
    ``wk: (B, L)`` = exp(s_i - M_i).
    """
    if s is None:
        ones = np.ones(shape, dtype=dtype)
        return None, ones, ones
    M = np.maximum.accumulate(s, axis=-1)                                # (B, L) prefix maxima
    dec = np.ones(shape, dtype=dtype)
    dec[:, 1:] = np.exp(M[:, :-1] - M[:, 1:])                            # (B, L - 1) <= 1
    wk = np.exp(s - M)                                                   # (B, L) <= 1
    return M, dec, wk


def _flatten(name, x, last, dtypes, kernel, like=None):
    return flatten_leading(name, as_numpy(name, x, dtypes, kernel=kernel, like=like), last, kernel=kernel)


def causal_fwd(phi_q, phi_k, v_aug, s, chunk_size):
    """Causal numerator and normaliser by the recurrent scan (signature of ``_causal_fwd_reference``).

    Parameters
    ----------
    phi_q, phi_k : (..., L, m) ndarray
    v_aug : (..., L, d_v + 1) ndarray
        ``[v, 1]``.
    s : (..., L) ndarray or None
        Key log-scales.
    chunk_size : int
        Accepted for the signature; the recurrence has no chunks (the result does not depend on it).

    Returns
    -------
    numer_aug : (..., L, d_v + 1) ndarray
    M : (..., L) ndarray or None
        Prefix maxima of `s`.
    """
    kern = "causal_fwd"
    dts = SUPPORTED[kern]["dtypes"]
    pq, lead = _flatten("phi_q", phi_q, 2, dts, kern)
    pk, _ = _flatten("phi_k", phi_k, 2, dts, kern, like=pq)
    ua, _ = _flatten("v_aug", v_aug, 2, dts, kern, like=pq)
    check_same("phi_k", pk, "phi_q", pq.shape)
    check_same("v_aug", ua, "phi_q", pq.shape[:2] + ua.shape[2:])
    B, L, _m = pq.shape
    sf = None
    if s is not None:
        sf, _ = _flatten("s", s, 1, dts, kern, like=pq)
        check_same("s", sf, "phi_q", (B, L))
    M, dec, wk = step_weights(sf, pq.dtype, (B, L))
    numer = np.zeros(ua.shape, dtype=pq.dtype)                           # (B, L, D)
    state = np.zeros((B, _m, ua.shape[2]), dtype=pq.dtype)  # (B, m, D): O(m d_v) per (batch, head)
    _fwd_kernel(pq, pk, ua, dec, wk, numer, state, TIME_BLOCK)
    numer = numer.reshape(lead + (L, ua.shape[2]))
    return numer, (None if M is None else M.reshape(lead + (L,)))


def causal_bwd(g, phi_q, phi_k, v_aug, s, M, chunk_size):
    """Backward of :func:`causal_fwd` (signature of ``_causal_bwd_reference``).

    Parameters
    ----------
    g : (..., L, d_v + 1) ndarray
        Cotangent of ``numer_aug``.
    phi_q, phi_k, v_aug, s, chunk_size
        As in :func:`causal_fwd`.
    M : (..., L) ndarray or None
        The forward's prefix maxima (recomputed from `s` when None; they are a running maximum, so exact).

    Returns
    -------
    dphi_q, dphi_k : (..., L, m) ndarray
    dv_aug : (..., L, d_v + 1) ndarray
    """
    kern = "causal_bwd"
    dts = SUPPORTED[kern]["dtypes"]
    pq, lead = _flatten("phi_q", phi_q, 2, dts, kern)
    gf, _ = _flatten("g", g, 2, dts, kern, like=pq)
    pk, _ = _flatten("phi_k", phi_k, 2, dts, kern, like=pq)
    ua, _ = _flatten("v_aug", v_aug, 2, dts, kern, like=pq)
    check_same("phi_k", pk, "phi_q", pq.shape)
    check_same("v_aug", ua, "phi_q", pq.shape[:2] + ua.shape[2:])
    check_same("g", gf, "v_aug", ua.shape)
    B, L, m = pq.shape
    sf = None
    if s is not None:
        sf, _ = _flatten("s", s, 1, dts, kern, like=pq)
        check_same("s", sf, "phi_q", (B, L))
    _, dec, wk = step_weights(sf, pq.dtype, (B, L))
    if M is not None:
        Mf, _ = _flatten("M", M, 1, dts, kern, like=pq)
        check_same("M", Mf, "phi_q", (B, L))
        if sf is not None:                                                # use the forward's maxima as given
            dec = np.ones((B, L), dtype=pq.dtype)
            dec[:, 1:] = np.exp(Mf[:, :-1] - Mf[:, 1:])
            wk = np.exp(sf - Mf)
    dq = np.empty(pq.shape, dtype=pq.dtype)                              # (B, L, m)
    dk = np.empty(pq.shape, dtype=pq.dtype)                              # (B, L, m)
    dv = np.zeros(ua.shape, dtype=pq.dtype)                              # (B, L, D)
    state = np.zeros((B, m, ua.shape[2]), dtype=pq.dtype)               # (B, m, D) one state, both sweeps
    _bwd_kernel(gf, pq, pk, ua, dec, wk, dq, dk, dv, state, TIME_BLOCK)
    shp = lead + (L,)
    return dq.reshape(shp + (m,)), dk.reshape(shp + (m,)), dv.reshape(shp + (ua.shape[2],))
