r"""Numba kernels for the causal linear-attention scan, forward and backward: a **time-blocked** scan (chunk
GEMMs inside the kernel), ``prange`` over batch x heads (CPU).

Supported (read by ``tests/accel/test_causal.py``):

=====================  ============  ==================  ==================================================
primitive              backend       dtypes              registered as
=====================  ============  ==================  ==================================================
``causal_fwd``         NumPy (CPU)   float32, float64    ``"linear_attention.causal_fwd"``
``causal_bwd``         NumPy (CPU)   float32, float64    ``"linear_attention.causal_bwd"``
``causal_frames_fwd``  NumPy (CPU)   float32, float64    ``"linear_attention.causal_frames_fwd"``
``causal_frames_bwd``  NumPy (CPU)   float32, float64    ``"linear_attention.causal_frames_bwd"``
=====================  ============  ==================  ==================================================

Same signatures and results (to float rounding) as the core's chunked references in
``refattn.attention._causal``: row log-scales ``s: (..., L)`` or none (``_causal_{fwd,bwd}_reference``;
trig features, the KL kinds) and per-feature frames ``s: (..., L, m)``
(``_causal_frames_{fwd,bwd}_reference``; FAVOR+ positive and hyperbolic features). Per (batch,
head), one (m, d_v + 1) state, the time axis cut into chunks of :data:`TIME_BLOCK` rows; a chunk ``[a, e)``
is computed in its end frame ``E`` (as in the reference's frames path):

    Qc = phi_q * exp(E - frame_q),   Kc = phi_k * exp(s - E),   S <- exp(P - E) S   (P: the state's frame)
    numer_c = tril(Qc Kc^T) v_aug_c + Qc S,                     S <- S + Kc^T v_aug_c

with four BLAS GEMMs per chunk (numba's ``np.dot`` on contiguous 2-D blocks calls the BLAS that SciPy ships).
Frames: ``E = s_{e-1}`` per feature, and only the feature columns whose prefix maximum moves inside the chunk
are rescaled (on typical keys a few of m per chunk: a running maximum has O(log L) records), so a chunk where
none moves uses ``phi_q`` and ``phi_k`` in place; the exponentials are per moved column, not per element. Row
log-scales: the frame of query i is the prefix maximum ``M_i = max_{j<=i} s_j``, ``E = M_{e-1}``, and the
factors are per row. A chunk whose frames spread by more than ``SPREAD_LIMIT`` (``E - frame`` above e^20 for
some feature; the reference's guard) takes the exact path: the weights ``exp(s_j - frame_i)`` per (i, j) (per
feature for frames, O(C^2 m) exponentials; per row for row scales, a masked GEMM), as the reference does.
Frames and maxima depend on the prefix only, so the output for a prefix never depends on later positions (the
prefix invariance of ``refattn.attention.linear``); every ``exp`` argument is <= 0 except ``E - frame`` <=
``SPREAD_LIMIT``.

Backward, with ``g = d numer_aug``: two sweeps, each with the one (m, d_v + 1) state (nothing is stored per
chunk, nothing recovered by subtraction): a forward sweep recomputes S for
``dphi_q = (tril(g v_aug^T) Kc + g S^T) * exp(E - frame_q)``; a reverse sweep carries the state's cotangent
``G`` (``G <- exp(P - E) (G + Qc^T g_c)``) for ``dphi_k = (v_aug G^T + tril(g v_aug^T)^T Qc) * exp(s - E)``
and ``dv_aug = Kc G + tril(Qc Kc^T)^T g``. Flops per (batch, head) and chunk of C rows, m features,
D = d_v + 1: forward ``4 C m D + 2 C^2 (m + D)``, backward ``10 C m D + 2 C^2 (3 m + 3 D)`` (five state GEMMs,
the intra-chunk products twice); the forward of the bidirectional path is ``4 C m D``. Extra memory: the
state and a few (C, m) blocks per (batch, head), allocated by the caller (tracemalloc sees them). The frames
forward keeps no states for a one-sweep backward: a kept-state variant (states before every other chunk,
one reverse sweep) saves in the backward about what writing the states costs the forward. With
``log_features=True`` each chunk's ``dphi_q``, ``dphi_k`` are multiplied by its features while in cache
(FAVOR+'s gauge backward needs only ``dphi * phi``: two passes over (L, m) saved).

The result does not depend on the core's ``chunk_size`` (accepted for the signature): the kernel uses its own
:data:`TIME_BLOCK`, chosen by the sweep ``benchmarks/accel.py --sections blocks`` (results in BENCHMARKS.md);
a different block changes only the rounding. Inside the kernels BLAS is held to one thread
(:func:`_one_blas_thread`): the parallelism is the ``prange`` over batch x heads.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from numba import njit, prange

from .._checks import check_same, flatten_leading, scan_operands
from ._common import FASTMATH, as_numpy

__all__ = ["SUPPORTED", "TIME_BLOCK", "SPREAD_LIMIT", "causal_fwd", "causal_bwd", "causal_frames_fwd",
           "causal_frames_bwd"]

SUPPORTED = {
    "causal_fwd": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                   "primitive": "linear_attention.causal_fwd"},
    "causal_bwd": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                   "primitive": "linear_attention.causal_bwd"},
    "causal_frames_fwd": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                          "primitive": "linear_attention.causal_frames_fwd"},
    "causal_frames_bwd": {"backends": ("numpy",), "dtypes": ("float32", "float64"),
                          "primitive": "linear_attention.causal_frames_bwd"},
}

#: Rows per chunk of the time-blocked scan (any value gives the same result up to rounding).
TIME_BLOCK = 32

#: Largest spread of the frames inside a chunk for which the chunk's end frame is used (the reference's
#: ``refattn.attention._causal.SPREAD_LIMIT``); a larger spread takes the exact path.
SPREAD_LIMIT = 20.0

_NONE, _ROWS, _FRAMES = 0, 1, 2       # kernel modes: no log-scales, row log-scales, per-feature frames


# ---------------------------------------------------------------------------------------------- block helpers
# (compiled; called per chunk from the kernels below)

@njit(cache=True, fastmath=FASTMATH)
def _copy(dst, src):  # pragma: no cover - compiled
    """dst[:] = src for C-contiguous 2-D blocks of the same shape (a flat loop: vectorised)."""
    d, s = dst.ravel(), src.ravel()
    for i in range(d.size):
        d[i] = s[i]


@njit(cache=True, fastmath=FASTMATH)
def _add(dst, src):  # pragma: no cover - compiled
    """dst += src for C-contiguous 2-D blocks of the same shape."""
    d, s = dst.ravel(), src.ravel()
    for i in range(d.size):
        d[i] += s[i]


@njit(cache=True, fastmath=FASTMATH)
def _mul(dst, src):  # pragma: no cover - compiled
    """dst *= src for C-contiguous 2-D blocks of the same shape."""
    d, s = dst.ravel(), src.ravel()
    for i in range(d.size):
        d[i] *= s[i]


@njit(cache=True, fastmath=FASTMATH)
def _tril(A):  # pragma: no cover - compiled
    """Zero the entries above the diagonal of a square block (j > i)."""
    c = A.shape[0]
    for i in range(c):
        for j in range(i + 1, c):
            A[i, j] = 0


@njit(cache=True, fastmath=FASTMATH)
def _frames_scan(sf, a, e, moved):  # pragma: no cover - compiled
    """One pass over the chunk's frames ``sf[a:e]: (c, m)``: ``moved[f] = max_i |s_if - E_f|`` (0 where the
    column's frame does not move inside the chunk; E the chunk-end frame); returns the spread
    ``max_f moved[f]`` (for prefix maxima ``max_f (E_f - s_af)``). Any frames are handled, not only
    nondecreasing ones (a finite-difference check perturbs them). A max-reduction per column: vectorised."""
    m = sf.shape[1]
    se = sf[e - 1]
    for f in range(m):
        moved[f] = 0
    for i in range(a, e - 1):
        si = sf[i]
        for f in range(m):
            moved[f] = max(moved[f], abs(si[f] - se[f]))
    sp = sf.dtype.type(0)
    for f in range(m):
        sp = max(sp, moved[f])
    return sp


@njit(cache=True, fastmath=FASTMATH)
def _frames_operands(pq, pk, sf, a, qb, kb, moved, limit):  # pragma: no cover - compiled
    """``(cheap, Qc, Kc)`` in the chunk's end frame E: ``Qc = pq exp(E - s)``, ``Kc = pk exp(s - E)``.

    Only the moved columns are rescaled; with none, `pq` and `pk` are returned as they are. On the exact
    path (spread above `limit`) only ``Kc`` is formed, on every column (``Qc`` is `pq`, unused)."""
    c, m = pq.shape
    e = a + c
    spread = _frames_scan(sf, a, e, moved)
    if spread == 0:
        return True, pq, pk
    cheap = spread <= limit
    _copy(kb, pk)
    if cheap:
        _copy(qb, pq)
    se = sf[e - 1]
    for f in range(m):
        if moved[f] != 0:
            E = se[f]
            for i in range(c):
                x = sf[a + i, f] - E                                     # <= 0 for prefix maxima
                if x != 0:
                    kb[i, f] *= math.exp(x)
                    if cheap:
                        qb[i, f] *= math.exp(-x)                         # <= e^SPREAD_LIMIT
    return cheap, (qb if cheap else pq), kb


@njit(cache=True, fastmath=FASTMATH)
def _rows_operands(pq, pk, s, M, a, qb, kb, cheap):  # pragma: no cover - compiled
    """Row log-scales: ``Kc_j = pk_j exp(s_j - E)``, ``Qc_i = pq_i exp(E - M_i)`` (``E = M_{e-1}``)."""
    c, m = pq.shape
    E = M[a + c - 1]
    for i in range(c):
        w = math.exp(s[a + i] - E)                                       # <= 1
        for f in range(m):
            kb[i, f] = pk[i, f] * w
    if not cheap or M[a] == E:                                           # no new maximum: Qc = pq
        return pq, kb
    for i in range(c):
        w = math.exp(E - M[a + i])                                       # <= e^SPREAD_LIMIT
        for f in range(m):
            qb[i, f] = pq[i, f] * w
    return qb, kb


@njit(cache=True, fastmath=FASTMATH)
def _decay(S, mode, sf, M, a, e, transposed):  # pragma: no cover - compiled
    """The state (frame before the chunk, ``P``) into the chunk's end frame: ``S <- exp(P - E) S`` on the
    feature axis (rows of ``S: (m, D)``, or columns of ``S^T: (D, m)`` when `transposed`)."""
    if mode == 2:
        sp, se = sf[a - 1], sf[e - 1]
        for f in range(sp.shape[0]):
            x = sp[f] - se[f]
            if x != 0:
                w = math.exp(x)
                if transposed:
                    for t in range(S.shape[0]):
                        S[t, f] *= w
                else:
                    for t in range(S.shape[1]):
                        S[f, t] *= w
    elif mode == 1:
        x = M[a - 1] - M[e - 1]
        if x != 0:
            w = math.exp(x)
            for f in range(S.shape[0]):
                for t in range(S.shape[1]):
                    S[f, t] *= w


@njit(cache=True, fastmath=FASTMATH)
def _scale_out(X, mode, sf, s, M, a, sign, moved):  # pragma: no cover - compiled
    """``X *= exp(sign (E - frame))`` on the moved columns (frames; `moved` from the chunk's
    :func:`_frames_operands`) or per row (row scales): sign = +1 takes a ``d Qc`` to ``d phi_q``; sign = -1
    (keys: ``exp(s - E)``) a ``d Kc`` to ``d phi_k``."""
    c, m = X.shape
    if mode == 2:
        se = sf[a + c - 1]
        for f in range(m):
            if moved[f] != 0:
                E = se[f]
                for i in range(c):
                    x = sf[a + i, f] - E
                    if x != 0:
                        X[i, f] *= math.exp(-sign * x)
    elif mode == 1:
        E = M[a + c - 1]
        for i in range(c):
            x = (E - M[a + i]) if sign > 0 else (s[a + i] - E)
            if x != 0:
                w = math.exp(x)
                for f in range(m):
                    X[i, f] *= w


@njit(cache=True, fastmath=FASTMATH)
def _exact_weights(A, pq, pk, sf, a):  # pragma: no cover - compiled
    """Frames, exact path: ``A_ij = sum_f pq_if pk_jf exp(s_jf - s_if)`` for j <= i, 0 above."""
    c, m = pq.shape
    zero = A.dtype.type(0)
    for i in range(c):
        si = sf[a + i]
        for j in range(c):
            acc = zero
            if j <= i:
                sj = sf[a + j]
                for f in range(m):
                    acc += pq[i, f] * pk[j, f] * math.exp(sj[f] - si[f])
            A[i, j] = acc


@njit(cache=True, fastmath=FASTMATH)
def _exact_dq(dq, Bm, pk, sf, a):  # pragma: no cover - compiled
    """Frames, exact path: ``dq_if = sum_{j<=i} Bm_ij pk_jf exp(s_jf - s_if)``."""
    c, m = dq.shape
    for i in range(c):
        si = sf[a + i]
        for f in range(m):
            dq[i, f] = 0
        for j in range(i + 1):
            sj = sf[a + j]
            bij = Bm[i, j]
            for f in range(m):
                dq[i, f] += bij * pk[j, f] * math.exp(sj[f] - si[f])


@njit(cache=True, fastmath=FASTMATH)
def _exact_dk_add(dk, Bm, pq, sf, a):  # pragma: no cover - compiled
    """Frames, exact path: ``dk_jf += sum_{i>=j} Bm_ij pq_if exp(s_jf - s_if)``."""
    c, m = dk.shape
    for j in range(c):
        sj = sf[a + j]
        for i in range(j, c):
            si = sf[a + i]
            bij = Bm[i, j]
            for f in range(m):
                dk[j, f] += bij * pq[i, f] * math.exp(sj[f] - si[f])


@njit(cache=True, fastmath=FASTMATH)
def _row_weights(A, s, M, a):  # pragma: no cover - compiled
    """Row scales, exact path: ``A_ij *= exp(s_j - M_i)`` for j <= i (<= 1), 0 above."""
    c = A.shape[0]
    for i in range(c):
        for j in range(c):
            A[i, j] = A[i, j] * math.exp(s[a + j] - M[a + i]) if j <= i else 0


@njit(cache=True, fastmath=FASTMATH)
def _to_state_frame(X, mode, sf, M, a):  # pragma: no cover - compiled
    """Exact path: ``X *= exp(P - frame_q)`` for the chunk's queries (each in the state's frame ``P``;
    factors <= 1)."""
    c, m = X.shape
    for i in range(c):
        if mode == 2:
            sp, si = sf[a - 1], sf[a + i]
            for f in range(m):
                X[i, f] *= math.exp(sp[f] - si[f])
        else:
            w = math.exp(M[a - 1] - M[a + i])
            for f in range(m):
                X[i, f] *= w


@njit(cache=True, fastmath=FASTMATH)
def _operands(pq, pk, mode, sf, s, M, a, e, qb, kb, moved, limit):  # pragma: no cover - compiled
    """``(cheap, Qc, Kc)`` of the chunk ``[a, e)`` for each mode."""
    if mode == 2:
        return _frames_operands(pq, pk, sf, a, qb, kb, moved, limit)
    if mode == 1:
        cheap = M[e - 1] - M[a] <= limit
        Qc, Kc = _rows_operands(pq, pk, s, M, a, qb, kb, cheap)
        return cheap, Qc, Kc
    return True, pq, pk


# ---------------------------------------------------------------------------------------------- kernels

@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _fwd_kernel(phi_q, phi_k, v_aug, mode, sf, s, M, numer, state, qbuf, kbuf, abuf, tbuf, ubuf, fbuf, C,
                limit):  # pragma: no cover - compiled
    """numer[b] of one (batch, head) per prange iteration; `state` must come zeroed. ``sf: (B, L, m)``
    frames (mode 2), ``s, M: (B, L)`` row log-scales and their prefix maxima (mode 1); unused ones empty."""
    B, L, m = phi_q.shape
    for b in prange(B):
        S = state[b]                                                     # (m, D) frame: before the chunk
        sfb, sb, Mb = sf[b % sf.shape[0]], s[b % s.shape[0]], M[b % M.shape[0]]
        moved = fbuf[b]
        for a in range(0, L, C):
            e = min(L, a + C)
            c = e - a
            pq, pk, ua = phi_q[b, a:e], phi_k[b, a:e], v_aug[b, a:e]
            out = numer[b, a:e]                                          # (c, D)
            A = abuf[b, :c * c].reshape((c, c))
            T = tbuf[b, :c]                                              # (c, D)
            cheap, Qc, Kc = _operands(pq, pk, mode, sfb, sb, Mb, a, e, qbuf[b, :c], kbuf[b, :c], moved,
                                      limit)
            if cheap:
                np.dot(Qc, Kc.T, A)                                      # (c, c) Qc_i . Kc_j
                _tril(A)
                np.dot(A, ua, out)                                       # intra-chunk
                if a > 0:
                    _decay(S, mode, sfb, Mb, a, e, False)
                    np.dot(Qc, S, T)                                     # inter-chunk
                    _add(out, T)
            else:
                if mode == 2:
                    _exact_weights(A, pq, pk, sfb, a)
                else:
                    np.dot(pq, pk.T, A)
                    _row_weights(A, sb, Mb, a)
                np.dot(A, ua, out)
                if a > 0:
                    Qx = qbuf[b, :c]
                    _copy(Qx, pq)
                    _to_state_frame(Qx, mode, sfb, Mb, a)
                    np.dot(Qx, S, T)
                    _add(out, T)
                    _decay(S, mode, sfb, Mb, a, e, False)
            np.dot(Kc.T, ua, ubuf[b])                                    # (m, D) this chunk's keys
            _add(S, ubuf[b])


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _bwd_kernel(g, phi_q, phi_k, v_aug, mode, sf, s, M, dq, dk, dv, state, qbuf, kbuf, abuf, bbuf, tbuf,
                t2buf, ubuf, fbuf, C, limit, logf):  # pragma: no cover - compiled
    """Forward sweep (state S, kept transposed so that ``g S^T`` is a plain GEMM) for dq, reverse sweep
    (cotangent G) for dk and dv; `state` must come zeroed. `logf`: dq and dk are multiplied by the chunk's
    features (cotangents of the log-features) while in cache."""
    B, L, m = phi_q.shape
    D = v_aug.shape[2]
    nchunks = (L + C - 1) // C
    for b in prange(B):
        ST = state[b].reshape((D, m))                                    # (D, m) S^T, zero
        UT = ubuf[b].reshape((D, m))
        sfb, sb, Mb = sf[b % sf.shape[0]], s[b % s.shape[0]], M[b % M.shape[0]]
        moved = fbuf[b]
        for a in range(0, L, C):                                         # forward sweep: dphi_q
            e = min(L, a + C)
            c = e - a
            pq, pk, ua, gc = phi_q[b, a:e], phi_k[b, a:e], v_aug[b, a:e], g[b, a:e]
            Bm = bbuf[b, :c * c].reshape((c, c))
            T2 = t2buf[b, :c]                                            # (c, m)
            dqc = dq[b, a:e]
            cheap, Qc, Kc = _operands(pq, pk, mode, sfb, sb, Mb, a, e, qbuf[b, :c], kbuf[b, :c], moved,
                                      limit)
            np.dot(gc, ua.T, Bm)                                         # (c, c) g_i . v_aug_j
            _tril(Bm)
            if cheap:
                np.dot(Bm, Kc, dqc)                                      # (c, m)
                if a > 0:
                    _decay(ST, mode, sfb, Mb, a, e, True)
                    np.dot(gc, ST, T2)
                    _add(dqc, T2)
                _scale_out(dqc, mode, sfb, sb, Mb, a, 1, moved)          # d Qc -> d phi_q
            else:
                if mode == 2:
                    _exact_dq(dqc, Bm, pk, sfb, a)
                else:
                    _row_weights(Bm, sb, Mb, a)
                    np.dot(Bm, pk, dqc)
                if a > 0:
                    np.dot(gc, ST, T2)
                    _to_state_frame(T2, mode, sfb, Mb, a)
                    _add(dqc, T2)
                    _decay(ST, mode, sfb, Mb, a, e, True)
            if logf:
                _mul(dqc, pq)
            np.dot(ua.T, Kc, UT)                                         # (D, m) this chunk's keys
            _add(ST, UT)
        G = state[b]                                                     # reverse sweep: dphi_k, dv_aug
        G[:, :] = 0
        for idx in range(nchunks - 1, -1, -1):
            a = idx * C
            e = min(L, a + C)
            c = e - a
            pq, pk, ua, gc = phi_q[b, a:e], phi_k[b, a:e], v_aug[b, a:e], g[b, a:e]
            A = abuf[b, :c * c].reshape((c, c))
            Bm = bbuf[b, :c * c].reshape((c, c))
            T = tbuf[b, :c]                                              # (c, D)
            T2 = t2buf[b, :c]                                            # (c, m)
            dkc, dvc = dk[b, a:e], dv[b, a:e]
            cheap, Qc, Kc = _operands(pq, pk, mode, sfb, sb, Mb, a, e, qbuf[b, :c], kbuf[b, :c], moved,
                                      limit)
            np.dot(gc, ua.T, Bm)
            _tril(Bm)
            np.dot(ua, G.T, dkc)                                         # (c, m) through the state
            np.dot(Kc, G, dvc)                                           # (c, D)
            if cheap:
                np.dot(Qc, Kc.T, A)
                _tril(A)
                np.dot(Bm.T, Qc, T2)
                _add(dkc, T2)
                np.dot(A.T, gc, T)
                _add(dvc, T)
                _scale_out(dkc, mode, sfb, sb, Mb, a, -1, moved)         # d Kc -> d phi_k
                if a > 0:
                    np.dot(Qc.T, gc, ubuf[b])                            # (m, D)
                    _add(G, ubuf[b])
                    _decay(G, mode, sfb, Mb, a, e, False)                # into the previous chunk's frame
            else:
                if mode == 2:                                            # exp(s - E) on every column
                    se = sfb[e - 1]
                    for i in range(c):
                        for f in range(m):
                            dkc[i, f] *= math.exp(sfb[a + i, f] - se[f])
                    _exact_weights(A, pq, pk, sfb, a)
                    _exact_dk_add(dkc, Bm, pq, sfb, a)
                else:
                    _scale_out(dkc, mode, sfb, sb, Mb, a, -1, moved)
                    np.dot(pq, pk.T, A)
                    _row_weights(A, sb, Mb, a)
                    _row_weights(Bm, sb, Mb, a)
                    np.dot(Bm.T, pq, T2)
                    _add(dkc, T2)
                np.dot(A.T, gc, T)
                _add(dvc, T)
                if a > 0:
                    Qx = qbuf[b, :c]
                    _copy(Qx, pq)
                    _to_state_frame(Qx, mode, sfb, Mb, a)
                    _decay(G, mode, sfb, Mb, a, e, False)
                    np.dot(Qx.T, gc, ubuf[b])
                    _add(G, ubuf[b])
            if logf:
                _mul(dkc, pk)


# ---------------------------------------------------------------------------------------------- wrappers

_BLAS_CONTROLLER: list = []           # [threadpoolctl.ThreadpoolController or None], built on first use


def _one_blas_thread():
    """A context that limits BLAS to one thread while a parallel kernel runs (``prange`` over batch x heads,
    each numba thread calling BLAS on small blocks: a multi-threaded BLAS inside would oversubscribe the
    cores). A no-op with one numba thread, or without ``threadpoolctl`` (then set ``OPENBLAS_NUM_THREADS=1``
    when using several numba threads)."""
    import numba

    if numba.get_num_threads() <= 1:
        return contextlib.nullcontext()
    if not _BLAS_CONTROLLER:
        try:
            import scipy.linalg.cython_blas  # noqa: F401 -- the BLAS numba's np.dot calls, loaded first
            from threadpoolctl import ThreadpoolController
            _BLAS_CONTROLLER.append(ThreadpoolController())
        except ImportError:
            _BLAS_CONTROLLER.append(None)
    ctl = _BLAS_CONTROLLER[0]
    return contextlib.nullcontext() if ctl is None else ctl.limit(limits=1, user_api="blas")


def _flatten(name, x, last, dtypes, kernel, like=None):
    return flatten_leading(name, as_numpy(name, x, dtypes, kernel=kernel, like=like), last, kernel=kernel)


def _touched(shape, dtype):
    """An output array whose pages are touched here, sequentially, before the kernel writes it: page faults
    on the backward's large outputs cost far more system time when taken inside the parallel kernel than one
    sequential fill does."""
    out = np.empty(shape, dtype=dtype)
    out.fill(0)
    return out


def _workspace(B, C, m, D, dtype, backward):
    """Zeroed state and per-(batch, head) blocks, allocated here so that tracemalloc sees every byte."""
    ws = dict(state=np.zeros((B, m, D), dtype=dtype), qbuf=np.empty((B, C, m), dtype=dtype),
              kbuf=np.empty((B, C, m), dtype=dtype), abuf=np.empty((B, C * C), dtype=dtype),
              tbuf=np.empty((B, C, D), dtype=dtype), ubuf=np.empty((B, m, D), dtype=dtype),
              fbuf=np.zeros((B, m), dtype=dtype))                       # moved columns: max |s - E|
    if backward:
        ws.update(bbuf=np.empty((B, C * C), dtype=dtype), t2buf=np.empty((B, C, m), dtype=dtype))
    return ws


def _inputs(kern, phi_q, phi_k, v_aug, s, frames, g=None):
    dts = SUPPORTED[kern]["dtypes"]
    pq, pk, ua, gf, lead = scan_operands(_flatten, kern, dts, phi_q, phi_k, v_aug, g)
    B, L, m = pq.shape
    empty2 = np.zeros((1, 0), dtype=pq.dtype)
    sf, sr = np.zeros((1, 0, 0), dtype=pq.dtype), empty2
    mode = _NONE
    if s is not None:
        if frames:
            sf, _ = _flatten("s", s, 2, dts, kern, like=pq)
            check_same("s", sf, "phi_q", (B, L, m))
            mode = _FRAMES
        else:
            sr, _ = _flatten("s", s, 1, dts, kern, like=pq)
            check_same("s", sr, "phi_q", (B, L))
            mode = _ROWS
    return pq, pk, ua, gf, lead, mode, sf, sr


def _scan_fwd(kern, phi_q, phi_k, v_aug, s, frames):
    pq, pk, ua, _, lead, mode, sf, sr = _inputs(kern, phi_q, phi_k, v_aug, s, frames)
    B, L, m = pq.shape
    D = ua.shape[2]
    M = np.maximum.accumulate(sr, axis=-1) if mode == _ROWS else sr      # (B, L) prefix maxima
    numer = _touched(ua.shape, pq.dtype)                                  # (B, L, D)
    C = max(1, int(TIME_BLOCK))
    ws = _workspace(B, C, m, D, pq.dtype, False)
    if B and L:
        with _one_blas_thread():
            _fwd_kernel(pq, pk, ua, mode, sf, sr, M, numer, ws["state"], ws["qbuf"], ws["kbuf"], ws["abuf"],
                        ws["tbuf"], ws["ubuf"], ws["fbuf"], C, pq.dtype.type(SPREAD_LIMIT))
    return numer.reshape(lead + (L, D)), (M.reshape(lead + (L,)) if mode == _ROWS else None)


def _scan_bwd(kern, g, phi_q, phi_k, v_aug, s, M, frames, log_features=False):
    pq, pk, ua, gf, lead, mode, sf, sr = _inputs(kern, phi_q, phi_k, v_aug, s, frames, g=g)
    B, L, m = pq.shape
    D = ua.shape[2]
    if mode == _ROWS:
        if M is None:
            Mf = np.maximum.accumulate(sr, axis=-1)                      # a running maximum: exact
        else:
            Mf, _ = _flatten("M", M, 1, SUPPORTED[kern]["dtypes"], kern, like=pq)
            check_same("M", Mf, "phi_q", (B, L))
    else:
        Mf = sr
    dq = _touched(pq.shape, pq.dtype)                                    # (B, L, m)
    dk = _touched(pq.shape, pq.dtype)                                    # (B, L, m)
    dv = _touched(ua.shape, pq.dtype)                                    # (B, L, D)
    C = max(1, int(TIME_BLOCK))
    ws = _workspace(B, C, m, D, pq.dtype, True)
    if B and L:
        with _one_blas_thread():
            _bwd_kernel(gf, pq, pk, ua, mode, sf, sr, Mf, dq, dk, dv, ws["state"], ws["qbuf"], ws["kbuf"],
                        ws["abuf"], ws["bbuf"], ws["tbuf"], ws["t2buf"], ws["ubuf"], ws["fbuf"], C,
                        pq.dtype.type(SPREAD_LIMIT), bool(log_features))
    shp = lead + (L,)
    return dq.reshape(shp + (m,)), dk.reshape(shp + (m,)), dv.reshape(shp + (D,))


def causal_fwd(phi_q, phi_k, v_aug, s, chunk_size):
    """Causal numerator and normaliser with row log-scales (signature of ``_causal_fwd_reference``).

    Parameters
    ----------
    phi_q, phi_k : (..., L, m) ndarray
        Query and key features.
    v_aug : (..., L, d_v + 1) ndarray
        ``[v, 1]``.
    s : (..., L) ndarray or None
        Key log-scales.
    chunk_size : int
        Accepted for the signature; the kernel's chunk is :data:`TIME_BLOCK` (the result does not depend on
        either beyond rounding).

    Returns
    -------
    numer_aug : (..., L, d_v + 1) ndarray
        Relative to ``exp(M)``.
    M : (..., L) ndarray or None
        Prefix maxima of `s`.
    """
    return _scan_fwd("causal_fwd", phi_q, phi_k, v_aug, s, False)


def causal_bwd(g, phi_q, phi_k, v_aug, s, M, chunk_size):
    """Backward of :func:`causal_fwd` (signature of ``_causal_bwd_reference``).

    Parameters
    ----------
    g : (..., L, d_v + 1) ndarray
        Cotangent of ``numer_aug``.
    phi_q, phi_k, v_aug, s, chunk_size
        As in :func:`causal_fwd`.
    M : (..., L) ndarray or None
        The forward's prefix maxima (recomputed from `s` when None; a running maximum is exact).

    Returns
    -------
    dphi_q, dphi_k : (..., L, m) ndarray
        Cotangents of the features.
    dv_aug : (..., L, d_v + 1) ndarray
        Cotangent of ``[v, 1]``.
    """
    return _scan_bwd("causal_bwd", g, phi_q, phi_k, v_aug, s, M, False)


def causal_frames_fwd(phi_q, phi_k, v_aug, s, chunk_size, stride):
    """Causal numerator and normaliser with per-feature frames (signature of
    ``_causal_frames_fwd_reference``).

    Parameters
    ----------
    phi_q, phi_k : (..., L, m) ndarray
        Query features (in the reciprocal frame of their own position) and key features (relative to
        ``exp(s)``).
    v_aug : (..., L, d_v + 1) ndarray
        ``[v, 1]``.
    s : (..., L, m) ndarray
        Per-feature frames, nondecreasing along L (prefix maxima).
    chunk_size, stride
        Accepted for the signature (see :func:`causal_fwd`): this kernel keeps no states (measured: writing
        them cost the forward what the one-sweep backward saved; BENCHMARKS.md, accel).

    Returns
    -------
    numer_aug : (..., L, d_v + 1) ndarray
        Numerator and (last column) normaliser.
    kept : None
        Nothing kept: :func:`causal_frames_bwd` recomputes the states.
    """
    if s is None:
        raise ValueError("s: per-feature frames (..., L, m) are required by causal_frames_fwd; got None")
    return _scan_fwd("causal_frames_fwd", phi_q, phi_k, v_aug, s, True)[0], None


def causal_frames_bwd(g, phi_q, phi_k, v_aug, s, chunk_size, kept, stride, log_features=False):
    """Backward of :func:`causal_frames_fwd` (signature of ``_causal_frames_bwd_reference``).

    Parameters
    ----------
    g : (..., L, d_v + 1) ndarray
        Cotangent of ``numer_aug``.
    phi_q, phi_k, v_aug, s, chunk_size
        As in :func:`causal_frames_fwd`.
    kept, stride
        What a forward kept (from the reference; None from this kernel's forward): not read, the two
        sweeps recompute the states.
    log_features : bool, default False
        Return the cotangents of ``log phi_q`` and ``log phi_k`` (``dphi * phi``, formed per chunk in
        cache) instead of those of the features.

    Returns
    -------
    dphi_q, dphi_k : (..., L, m) ndarray
        Cotangents of the features, or of their logarithms (the frames' cotangent is formed by the
        caller).
    dv_aug : (..., L, d_v + 1) ndarray
        Cotangent of ``[v, 1]``.
    """
    if s is None:
        raise ValueError("s: per-feature frames (..., L, m) are required by causal_frames_bwd; got None")
    return _scan_bwd("causal_frames_bwd", g, phi_q, phi_k, v_aug, s, None, True, log_features)
