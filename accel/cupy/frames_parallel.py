r"""The causal scan with per-feature key frames in its chunk-parallel form (the GPU formulation).

Same results (to rounding) as the core's references ``linear_attention.causal_frames_fwd`` / ``_bwd``
(``refattn._dispatch.reference``), written against an array namespace ``xp`` (CuPy on the device; NumPy and
torch in the CPU tests) with the two sequential scans over chunks passed in as functions, as in
:mod:`accel.cupy.chunk_parallel` (whose ``scan_fwd_loop`` / ``scan_rev_loop`` are the plain loops, and whose
CUDA kernels :func:`accel.cupy.causal.scan_fwd` / ``scan_rev`` run them on the device). The reference walks
the chunks one after another; here every GEMM runs for all chunks at once and only the carry of the state is
sequential.

Frames ``s: (L, m)`` are nondecreasing along L. Positions are cut into chunks ``c`` of ``C`` rows; the chunk's
**end frame** ``E_c = s`` at its last row (per feature), ``P_c = E_{c-1}`` the frame of the state before it:

    down_c = exp(s_c - E_c) <= 1,   Kc = k_c down_c,   Qc = q_c / down_c                      (C, m)
    U_c = Kc^T u_c,   S_c = sum_{c' < c} exp(E_{c'} - P_c) U_{c'}                 scan, per feature row
    numer_c = tril(Qc Kc^T) u_c + Qc (exp(P_c - E_c)^T * S_c)

The scan is the row-scale scan of :mod:`accel.cupy.chunk_parallel` with the feature axis moved into the batch
axis: its chunk maxima are the end frames ``E_c`` (a running maximum of nondecreasing frames is the frame
itself), so every factor is ``<= 1``. A chunk whose frames spread by more than :data:`SPREAD_LIMIT` (the
reference's guard: ``Qc`` would exceed ``e^SPREAD_LIMIT``) takes the reference's **exact path**, chunk by
chunk after the batched pass: weights ``W_ij = sum_f q_if k_jf exp(s_jf - s_if)`` for ``j <= i`` and the
state seen in each query's own frame, ``(q_c exp(P_c - s_c)) S_c``. The batched pass divides by
``max(down, e^-SPREAD_LIMIT)``, equal to ``down`` on every chunk within the limit, so a chunk on the exact
path leaves finite values (no overflow) there before they are replaced.

Backward, with ``g = d numer_aug`` and ``Bm = tril(g_c u_c^T)``: the forward scan again for

    dphi_q = (Bm Kc + g_c (exp(P_c - E_c)^T * S_c)^T) / down_c

and a reverse scan of the state's cotangent in the end frames, ``G_{c-1} = exp(P_c - E_c) G_c + V_c`` with
``V_c = exp(P_c - E_c)^T * (Qc^T g_c)`` (exact path: ``(q_c exp(P_c - s_c))^T g_c``), for

    dphi_k = (u_c G_c^T + Bm^T Qc) down_c,   dv_aug = Kc G_c + tril(Qc Kc^T)^T g_c.

``log_features=True`` returns ``dphi * phi`` for both feature cotangents (FAVOR+'s gauge backward).

Memory: ``O(B L (C + m (d_v + 1) / C + m))`` (chunk matrices, per-chunk states, the frame factors); the tail
is padded to a whole chunk with zero features and values and the last frame repeated (the partial chunk's end
frame is then the reference's).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import array_api_compat

__all__ = ["SPREAD_LIMIT", "causal_frames_fwd", "causal_frames_bwd"]

Array = Any

#: Largest spread of the frames inside a chunk for which the chunk's end frame is used (the reference's
#: ``refattn.attention._causal.SPREAD_LIMIT``); a larger spread takes the exact path.
SPREAD_LIMIT = 20.0


def _chunks(x, n, C, *, xp):
    """(B, L, k) -> (B, n, C, k), zero-padded along L to n C rows."""
    B, L = x.shape[0], x.shape[1]
    if n * C != L:
        pad = xp.zeros((B, n * C - L) + tuple(x.shape[2:]), dtype=x.dtype, device=array_api_compat.device(x))
        x = xp.concat([x, pad], axis=1)
    return xp.reshape(x, (B, n, C) + tuple(x.shape[2:]))


def _tril(C, *, xp, device):
    r = xp.arange(C, device=device)
    return xp.expand_dims(r, axis=1) >= xp.expand_dims(r, axis=0)                 # (C, C): j <= i


class _Frames:
    """One chunking of the inputs and its frames: the parts shared by the forward and the backward.

    ``q, k, u: (B, n, C, .)`` chunks; ``sc: (B, n, C, m)`` frames (tail: the last frame repeated); ``E``,
    ``P: (B, n, 1, m)`` end frame and the state's frame (``-inf`` before the first chunk); ``down``, ``Kc``,
    ``Qc: (B, n, C, m)``; ``decay = exp(P - E)^T: (B, n, m, 1)``; ``tril: (C, C)``; ``exact``: the chunk
    indices on the exact path (a Python list).
    """

    def __init__(self, phi_q, phi_k, v_aug, s, C, *, xp):
        B, L, m = phi_q.shape
        n = -(-L // C)
        dev = array_api_compat.device(phi_q)
        self.xp, self.B, self.L, self.n, self.C, self.m = xp, B, L, n, C, m
        self.q, self.k, self.u = (_chunks(a, n, C, xp=xp) for a in (phi_q, phi_k, v_aug))
        if n * C != L:
            s = xp.concat([s, xp.broadcast_to(s[:, L - 1:, :], (B, n * C - L, m))], axis=1)
        self.sc = xp.reshape(s, (B, n, C, m))
        self.E = self.sc[:, :, C - 1:, :]                                          # (B, n, 1, m)
        first = xp.full((B, 1, 1, m), -math.inf, dtype=s.dtype, device=dev)
        self.P = xp.concat([first, self.E[:, :-1, :, :]], axis=1)                # (B, n, 1, m)
        self.down = xp.exp(self.sc - self.E)                                       # (B, n, C, m) <= 1
        self.Kc = self.k * self.down
        floor = xp.exp(xp.asarray(-SPREAD_LIMIT, dtype=s.dtype, device=dev))       # <= down when cheap
        self.den = xp.maximum(self.down, floor)                                    # (B, n, C, m) = down there
        self.Qc = self.q / self.den                                                # <= e^SPREAD_LIMIT q
        self.decay = xp.matrix_transpose(xp.exp(self.P - self.E))                  # (B, n, m, 1) <= 1
        self.tril = _tril(C, xp=xp, device=dev)
        self.exact = self._exact_chunks()

    def _exact_chunks(self):
        """Chunks whose frames spread by more than :data:`SPREAD_LIMIT` in some batch row and feature (the
        reference's per-chunk decision, one reduction over batch and features)."""
        xp = self.xp
        if self.B * self.m == 0:
            return []
        spread = self.sc[:, :, self.C - 1, :] - self.sc[:, :, 0, :]               # (B, n, m) >= 0
        cheap = xp.max(xp.max(spread, axis=2), axis=0) <= SPREAD_LIMIT             # (n,) NaN: exact
        if bool(xp.all(cheap)):                                                    # the common case: one sync
            return []
        idx = xp.nonzero(xp.logical_not(cheap))[0]
        return [int(idx[i]) for i in range(idx.shape[0])]

    def flat(self, x, width):
        """(B, n, C, width) -> (B, L, width): the chunks joined, the padding cut."""
        return self.xp.reshape(x, (self.B, self.n * self.C, width))[:, :self.L, :]

    def scan_states(self, scan_fwd):
        """``S_c: (B, n, m, e)``, the state before chunk c in its frame ``P_c`` (zero for the first)."""
        xp, B, n, m = self.xp, self.B, self.n, self.m
        e = self.u.shape[-1]
        U = xp.matrix_transpose(self.Kc) @ self.u                                  # (B, n, m, e) frame E_c
        rows = xp.reshape(xp.permute_dims(U, (0, 2, 1, 3)), (B * m, n, e))        # feature rows in the batch
        ends = xp.reshape(xp.permute_dims(self.E[:, :, 0, :], (0, 2, 1)), (B * m, n))
        S, _ = scan_fwd(rows, ends)
        return xp.permute_dims(xp.reshape(S, (B, m, n, e)), (0, 2, 1, 3))

    def scan_cotangents(self, V, scan_rev):
        """``G_c: (B, n, m, e)``, the state's cotangent after chunk c in its frame ``E_c``, from ``V``."""
        xp, B, n, m = self.xp, self.B, self.n, self.m
        e = V.shape[-1]
        rows = xp.reshape(xp.permute_dims(V, (0, 2, 1, 3)), (B * m, n, e))
        ends = xp.reshape(xp.permute_dims(self.E[:, :, 0, :], (0, 2, 1)), (B * m, n))
        G = scan_rev(rows, ends)
        return xp.permute_dims(xp.reshape(G, (B, m, n, e)), (0, 2, 1, 3))

    def own_frame(self, c):
        """``exp(P_c - s_c): (B, C, m)``, each query's factor for the state on the exact path (<= 1)."""
        return self.xp.exp(self.P[:, c, :, :] - self.sc[:, c, :, :])


def _exact_factors(sc, tril, *, xp):
    """``E_ijf = exp(s_jf - s_if)`` for j <= i, 0 above the diagonal: ``(B, C, C, m)``."""
    diff = xp.expand_dims(sc, axis=-3) - xp.expand_dims(sc, axis=-2)               # (B, C_i, C_j, m)
    neg_inf = xp.asarray(-math.inf, dtype=sc.dtype, device=array_api_compat.device(sc))
    return xp.exp(xp.where(xp.expand_dims(tril, axis=-1), diff, neg_inf))


def _exact_weights(q, k, sc, tril, *, xp):
    """``W_ij = sum_f q_if k_jf exp(s_jf - s_if)`` for j <= i (0 above): ``(B, C, C)``."""
    E = _exact_factors(sc, tril, xp=xp)
    return xp.sum(E * xp.expand_dims(k, axis=-3) * xp.expand_dims(q, axis=-2), axis=-1)


def _exact_weights_bwd(dW, q, k, sc, tril, *, xp):
    """Cotangents of :func:`_exact_weights`: ``dq_if = sum_j dW_ij k_jf E_ijf``,
    ``dk_jf = sum_i dW_ij q_if E_ijf``."""
    dWE = _exact_factors(sc, tril, xp=xp) * xp.expand_dims(dW, axis=-1)          # (B, C, C, m)
    dq = xp.sum(dWE * xp.expand_dims(k, axis=-3), axis=-2)
    dk = xp.sum(dWE * xp.expand_dims(q, axis=-2), axis=-3)
    return dq, dk


def _masked(x, tril, *, xp):
    return xp.where(tril, x, xp.zeros_like(x))


# numer_c = tril(Qc Kc^T) u_c + Qc (decay * S_c); exact path: W u_c + (q exp(P - s)) S_c
def causal_frames_fwd(phi_q, phi_k, v_aug, s, C: int, *, xp, scan_fwd: Callable):
    """Chunk-parallel causal forward with per-feature frames on flattened inputs.

    ``phi_q, phi_k: (B, L, m)``, ``v_aug: (B, L, e)``, ``s: (B, L, m)`` nondecreasing along L, chunk length
    ``C`` -> ``numer: (B, L, e)``. ``scan_fwd(U, mc) -> (S, P)`` as
    :func:`accel.cupy.chunk_parallel.scan_fwd_loop`.
    """
    if phi_q.shape[1] == 0:
        return xp.zeros_like(v_aug)
    f = _Frames(phi_q, phi_k, v_aug, s, C, xp=xp)
    S = f.scan_states(scan_fwd)                                                   # (B, n, m, e) frame P_c
    A = _masked(f.Qc @ xp.matrix_transpose(f.Kc), f.tril, xp=xp)                 # (B, n, C, C)
    numer = A @ f.u + f.Qc @ (f.decay * S)                                        # (B, n, C, e)
    for c in f.exact:
        q, k, sc = f.q[:, c, :, :], f.k[:, c, :, :], f.sc[:, c, :, :]
        W = _exact_weights(q, k, sc, f.tril, xp=xp)                               # (B, C, C)
        numer[:, c, :, :] = W @ f.u[:, c, :, :] + (q * f.own_frame(c)) @ S[:, c, :, :]
    return f.flat(numer, v_aug.shape[-1])


# dphi_q = (Bm Kc + g (decay S)^T) / down,  dphi_k = (u G^T + Bm^T Qc) down,  dv_aug = Kc G + A^T g
def causal_frames_bwd(g, phi_q, phi_k, v_aug, s, C: int, *, xp, scan_fwd: Callable, scan_rev: Callable,
                      log_features: bool = False):
    """Chunk-parallel backward of :func:`causal_frames_fwd` (``g: (B, L, e)``, the others as there; the
    states are recomputed) -> ``dphi_q, dphi_k: (B, L, m)`` (times the features with `log_features`),
    ``dv_aug: (B, L, e)``. ``scan_rev(V, P) -> G`` as :func:`accel.cupy.chunk_parallel.scan_rev_loop`."""
    if phi_q.shape[1] == 0:
        return xp.zeros_like(phi_q), xp.zeros_like(phi_k), xp.zeros_like(v_aug)
    f = _Frames(phi_q, phi_k, v_aug, s, C, xp=xp)
    gc = _chunks(g, f.n, C, xp=xp)                                                # (B, n, C, e)
    S = f.scan_states(scan_fwd)                                                   # (B, n, m, e) frame P_c
    Bm = _masked(gc @ xp.matrix_transpose(f.u), f.tril, xp=xp)                   # (B, n, C, C) g_i . u_j
    A = _masked(f.Qc @ xp.matrix_transpose(f.Kc), f.tril, xp=xp)
    dq = (Bm @ f.Kc + gc @ xp.matrix_transpose(f.decay * S)) / f.den
    V = f.decay * (xp.matrix_transpose(f.Qc) @ gc)                                # (B, n, m, e) frame P_c
    for c in f.exact:
        V[:, c, :, :] = xp.matrix_transpose(f.q[:, c, :, :] * f.own_frame(c)) @ gc[:, c, :, :]
    G = f.scan_cotangents(V, scan_rev)                                            # (B, n, m, e) frame E_c
    dk = (f.u @ xp.matrix_transpose(G) + xp.matrix_transpose(Bm) @ f.Qc) * f.down
    du = f.Kc @ G + xp.matrix_transpose(A) @ gc
    for c in f.exact:
        q, k, sc, u, g_c = f.q[:, c, :, :], f.k[:, c, :, :], f.sc[:, c, :, :], f.u[:, c, :, :], gc[:, c, :, :]
        dq_c, dk_c = _exact_weights_bwd(Bm[:, c, :, :], q, k, sc, f.tril, xp=xp)
        dq[:, c, :, :] = dq_c + (g_c @ xp.matrix_transpose(S[:, c, :, :])) * f.own_frame(c)
        dk[:, c, :, :] = (u @ xp.matrix_transpose(G[:, c, :, :])) * f.down[:, c, :, :] + dk_c
        W = _exact_weights(q, k, sc, f.tril, xp=xp)
        du[:, c, :, :] = f.Kc[:, c, :, :] @ G[:, c, :, :] + xp.matrix_transpose(W) @ g_c
    if log_features:
        dq, dk = dq * f.q, dk * f.k
    return f.flat(dq, f.m), f.flat(dk, f.m), f.flat(du, v_aug.shape[-1])
