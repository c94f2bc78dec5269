r"""Causal linear attention's chunked prefix sums: the primitives behind ``linear_attention(causal=True)``.

The algorithm is taught in one place, the module docstring of :mod:`refattn.attention.linear`; read its
recurrent form :func:`~refattn.attention.linear.linear_attention_step` first: every function here computes the
same recurrence C rows at a time. This module holds the chunk loops:

* row log-scales ``s: (..., L)`` or none: :func:`causal_fwd_states` (the forward, also keeping states for the
  backward), :func:`causal_bwd_stored` (one reverse sweep from the kept states) and the dispatched references
  ``_causal_fwd_reference`` / ``_causal_bwd_reference`` (two sweeps, nothing kept); one chunk of the first
  two is :func:`_chunk_fwd` / :func:`_chunk_fwd_scaled` and :func:`_chunk_bwd` / :func:`_chunk_bwd_scaled`;
* per-feature frames ``s: (..., L, m)``: ``_causal_frames_fwd_reference`` and ``_causal_frames_bwd_reference``
  (dispatched), each chunk on the chunk-frame path (GEMMs) while its spread is within :data:`SPREAD_LIMIT`,
  else on the exact path (:func:`_exact_weights`); one chunk is :func:`_frames_chunk_fwd`, and
  :func:`_frames_dq` with :func:`_frames_dk_dv` backward.

Each chunk step sits under a two-line comment with the equation it implements.

Axes: ``...`` batch and heads, ``L`` positions, ``C`` chunk length, ``m`` features, and ``d_v + 1`` the
width of the augmented values ``[v, 1]``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import array_api_compat

from .. import _dispatch
from .._xp import device_of, namespace

#: Largest spread of the frames inside a chunk for which the chunk's end frame is used (module ``linear``).
SPREAD_LIMIT = 20.0

#: Elements of the (rows, C, m) exact-path weight block computed at once (bounds its memory).
_EXACT_BLOCK_ELEMENTS = 1 << 22


def bcast2(x, *, xp):
    """(...,) -> (..., 1, 1) (expand_dims takes one axis in the 2024.12 standard)."""
    return xp.reshape(x, tuple(x.shape) + (1, 1))


def _tril_mask(c, *, xp, device):
    r = xp.arange(c, device=device)
    return xp.expand_dims(r, axis=1) >= xp.expand_dims(r, axis=0)                 # (c, c) j <= i


def _chunk_weights(s_c, Mp, *, xp, tril):
    """Prefix maxima and intra-chunk weights for one chunk.

    Returns ``Mi: (..., c)`` with Mi = max(Mp, max_{a<=j<=i} s_j) and ``E: (..., c, c)`` with
    E_ij = exp(s_j - Mi) for j <= i and 0 above the diagonal.
    """
    neg_inf = xp.asarray(-float("inf"), dtype=s_c.dtype, device=device_of(s_c))
    zero = xp.asarray(0.0, dtype=s_c.dtype, device=device_of(s_c))
    s_row = xp.expand_dims(s_c, axis=-2)                                          # (..., 1, c)
    Mi = xp.maximum(xp.max(xp.where(tril, s_row, neg_inf), axis=-1), xp.expand_dims(Mp, axis=-1))  # (..., c)
    diff = s_row - xp.expand_dims(Mi, axis=-1)                                    # (..., c, c) s_j - M_i
    E = xp.where(tril, xp.exp(xp.where(tril, diff, zero)), zero)                  # (..., c, c) <= 1
    return Mi, E


@_dispatch.define("linear_attention.causal_fwd")
def _causal_fwd_reference(phi_q, phi_k, v_aug, s, chunk_size):
    """Causal numerator and normaliser by chunked prefix sums.

    Parameters: ``phi_q, phi_k: (..., L, m)``, ``v_aug: (..., L, d_v + 1)``, ``s: (..., L)`` or None,
    ``chunk_size: int``. Returns ``numer_aug: (..., L, d_v + 1)`` (last column: the normaliser) and
    ``M: (..., L)`` prefix maxima of `s` (None when `s` is None). Extra memory O(L d_v + m d_v + C^2).
    """
    return causal_fwd_states(phi_q, phi_k, v_aug, s, chunk_size, None)[:2]


def state_stride(chunk_size, d1):
    """Keep the state before every `stride`-th chunk: ``ceil(d1 / (2 C))``, so the kept states hold at most
    about ``(L / (C stride)) m d1 <= 2 L m`` elements (the backward's memory budget)."""
    return max(1, -(-d1 // (2 * chunk_size)))


class KeptStates(NamedTuple):
    """What a causal reference forward keeps for its one-sweep backward.

    ``states``: the states before chunks 0, stride, 2 stride, ..., **transposed** and stacked as
    ``(..., n_kept, d_v + 1, m)`` (``n_kept = ceil(n_chunks / stride)``). Transposed because the backward's
    ``g S^T`` is then a plain GEMM without a transposed operand (faster in BLAS; BENCHMARKS.md). Every
    backend's kernels read and write this one layout, so a forward under one backend and a backward under
    another agree. ``intra``: per chunk, its
    masked intra-chunk weights ``(..., c, c)`` (``tril(A)``, ``tril(A) * E`` with row scales, the
    chunk-frame ``tril(Qc Kc^T)`` with frames; None for a chunk on the frames' exact path), or None when
    keeping them would take the kept elements past ``2 L m`` (:func:`_keep_intra`); the backward then
    recomputes them.
    """

    states: tuple
    intra: Any


def _kept_states(kept, intra):
    """The :class:`KeptStates` of a forward's stacked states and list of weights (None if it kept nothing)."""
    return None if kept is None else KeptStates(kept, None if intra is None else tuple(intra))


def _kept_buffer(batch, L, m, d1, chunk_size, stride, *, xp, dtype, device):
    """The stacked, transposed kept states ``(..., n_kept, d_v + 1, m)`` a forward fills (None: no stride)."""
    if not stride:
        return None
    n_chunks = -(-L // chunk_size)
    n_kept = -(-n_chunks // stride)
    return xp.empty(batch + (n_kept, d1, m), dtype=dtype, device=device)


def _keep_intra(L, m, d1, chunk_size, stride):
    """Whether the intra-chunk weights (``L C`` elements per batch index) fit beside the kept states
    (``ceil(n / stride) m d1``) within ``2 L m``."""
    n = -(-L // chunk_size)
    return -(-n // stride) * m * d1 + L * min(chunk_size, L) <= 2 * L * m


def _tril_masks(L, chunk_size, *, xp, device):
    """``{c: (c, c) j <= i mask}`` for the full chunk length and the last (partial) chunk's."""
    sizes = {min(chunk_size, L), L - (L - 1) // chunk_size * chunk_size}
    return {c: _tril_mask(c, xp=xp, device=device) for c in sizes}


# numer_c = tril(Q_c K_c^T) U_c + Q_c S_a,   S_b = S_a + K_c^T U_c    (linear_attention_step, C rows at once)
def _chunk_fwd(pq, pk, ua, S, *, xp, tril):
    """One chunk without scales: ``(numer_c: (..., c, d_v + 1), S_b, A = tril(Q_c K_c^T): (..., c, c))``."""
    A = pq @ xp.matrix_transpose(pk)                                  # (..., c, c) phi_q_i . phi_k_j
    A = xp.where(tril, A, xp.zeros_like(A))
    return A @ ua + pq @ S, S + xp.matrix_transpose(pk) @ ua, A


# row scales: numer_c = (A * E) U_c + exp(M_{a-1} - M_i) Q_c S_a,  E_ij = exp(s_j - M_i)  (module ``linear``)
#             S_b = exp(M_{a-1} - M_b) S_a + K_c^T (exp(s_c - M_b) U_c),  M the prefix maximum of s
def _chunk_fwd_scaled(pq, pk, ua, s_c, S, Mp, *, xp, tril):
    """One chunk with row log-scales `s_c` and the state's frame `Mp` (the prefix maximum before the chunk):
    ``(numer_c, S_b, Mi: (..., c) prefix maxima, A * E: (..., c, c))``."""
    A = pq @ xp.matrix_transpose(pk)                                              # (..., c, c)
    Mi, E = _chunk_weights(s_c, Mp, xp=xp, tril=tril)
    inter = xp.expand_dims(xp.exp(xp.expand_dims(Mp, axis=-1) - Mi), axis=-1) * (pq @ S)
    A = A * E
    Mn = Mi[..., -1]                                                              # (...,) max over the prefix
    w = xp.expand_dims(xp.exp(s_c - xp.expand_dims(Mn, axis=-1)), axis=-1)      # (..., c, 1)
    S = bcast2(xp.exp(Mp - Mn), xp=xp) * S + xp.matrix_transpose(pk) @ (w * ua)
    return A @ ua + inter, S, Mi, A


def causal_fwd_states(phi_q, phi_k, v_aug, s, chunk_size, stride):
    """The chunked causal forward; read :func:`~refattn.attention.linear.linear_attention_step` first.

    :func:`_causal_fwd_reference`, also returning what its one-sweep backward :func:`causal_bwd_stored` needs:
    a :class:`KeptStates` (the states before chunks 0, stride, 2 stride, ... and, within the memory bound,
    every chunk's masked intra-chunk weights), or ``None`` when `stride` is None. Each chunk is
    :func:`_chunk_fwd` (no scales) or :func:`_chunk_fwd_scaled` (row log-scales).
    """
    xp = namespace(phi_q, phi_k, v_aug)
    L, m = phi_q.shape[-2], phi_q.shape[-1]
    intra = [] if stride and _keep_intra(L, m, v_aug.shape[-1], chunk_size, stride) else None
    batch = tuple(phi_q.shape[:-2])
    dev = device_of(phi_q)
    kept = _kept_buffer(batch, L, m, v_aug.shape[-1], chunk_size, stride, xp=xp, dtype=phi_q.dtype,
                        device=dev)
    masks = _tril_masks(L, chunk_size, xp=xp, device=dev) if L else {}
    S = xp.zeros(batch + (m, v_aug.shape[-1]), dtype=phi_q.dtype, device=dev)   # (..., m, d_v + 1) state
    Mp = xp.full(batch, -float("inf"), dtype=phi_q.dtype, device=dev) if s is not None else None
    # outputs are written chunk by chunk into preallocated arrays (concatenating hundreds of chunks along the
    # L axis costs as much as the GEMMs at L = 16384)
    numer = xp.empty(tuple(v_aug.shape), dtype=phi_q.dtype, device=dev)          # (..., L, d_v + 1)
    M = xp.empty(tuple(s.shape), dtype=s.dtype, device=dev) if s is not None else None   # (..., L)
    for idx, a in enumerate(range(0, L, chunk_size)):
        if kept is not None and idx % stride == 0:
            kept[..., idx // stride, :, :] = xp.matrix_transpose(S)               # S^T before this chunk
        b = min(L, a + chunk_size)
        pq, pk, ua = phi_q[..., a:b, :], phi_k[..., a:b, :], v_aug[..., a:b, :]
        if s is None:
            numer_c, S, A = _chunk_fwd(pq, pk, ua, S, xp=xp, tril=masks[b - a])
        else:
            numer_c, S, Mi, A = _chunk_fwd_scaled(pq, pk, ua, s[..., a:b], S, Mp, xp=xp, tril=masks[b - a])
            M[..., a:b] = Mi
            Mp = Mi[..., -1]
        numer[..., a:b, :] = numer_c                                              # (..., c, d_v + 1)
        if intra is not None:
            intra.append(A)                                                       # masked weights (..., c, c)
    return numer, M, _kept_states(kept, intra)


def _block_states(ST, phi_k, v_aug, s, M, chunks, *, xp):
    """The transposed states ``(..., d_v + 1, m)`` before each chunk ``(a, b)`` of `chunks` (a block), from
    the kept state `ST` before the first: one state update per chunk but the last."""
    block = [ST]
    for a, b in chunks[:-1]:
        pk, ua = phi_k[..., a:b, :], v_aug[..., a:b, :]
        if s is None:
            ST = ST + xp.matrix_transpose(ua) @ pk
        else:
            Mn = M[..., b - 1]
            w = xp.expand_dims(xp.exp(s[..., a:b] - xp.expand_dims(Mn, axis=-1)), axis=-1)
            Mp = xp.full_like(Mn, -float("inf")) if a == 0 else M[..., a - 1]    # frame of the state
            ST = bcast2(xp.exp(Mp - Mn), xp=xp) * ST + xp.matrix_transpose(w * ua) @ pk
        block.append(ST)
    return block


# dphi_q = tril(g U^T) K_c + g S_a^T,  dphi_k = tril(g U^T)^T Q_c + U_c G^T,  dv_aug = A^T g + K_c G
# G = sum over later chunks of Q^T g (the state's cotangent), carried in reverse
def _chunk_bwd(gc, pq, pk, ua, ST, G, AE, *, xp, tril):
    """One chunk of the backward without scales, given the transposed state `ST` before it, the cotangent
    `G` of the state after it (None for the last chunk) and its masked weights `AE` (None: recomputed).
    Returns ``(dphi_q_c, dphi_k_c, dv_aug_c, G before the chunk)``."""
    Bm = gc @ xp.matrix_transpose(ua)                                             # (..., c, c) g_i . v_aug_j
    zero = xp.zeros_like(Bm)
    if AE is None:
        AE = xp.where(tril, pq @ xp.matrix_transpose(pk), zero)
    Bm = xp.where(tril, Bm, zero)
    dq = Bm @ pk + gc @ ST                                                        # (..., c, m)
    dk = xp.matrix_transpose(Bm) @ pq                                             # (..., c, m)
    dv = xp.matrix_transpose(AE) @ gc                                             # (..., c, d_v + 1)
    if G is not None:
        dk = dk + ua @ xp.matrix_transpose(G)
        dv = dv + pk @ G
    G = xp.matrix_transpose(pq) @ gc if G is None else G + xp.matrix_transpose(pq) @ gc
    return dq, dk, dv, G


# row scales: Bm and A times E_ij = exp(s_j - M_i); the state terms times r_i = exp(M_{a-1} - M_i) (queries)
# and w_j = exp(s_j - M_b) (keys);  G <- exp(M_{a-1} - M_b) G + (r Q_c)^T g, kept in the frame M_{a-1}
def _chunk_bwd_scaled(gc, pq, pk, ua, s_c, Mi, Mp, ST, G, AE, *, xp, tril, carry):
    """:func:`_chunk_bwd` with row log-scales: `Mi` the chunk's prefix maxima, `Mp` the state's frame;
    `carry` False for the first chunk (no earlier state takes a cotangent)."""
    Bm = gc @ xp.matrix_transpose(ua)                                             # (..., c, c)
    _, E = _chunk_weights(s_c, Mp, xp=xp, tril=tril)
    if AE is None:
        AE = (pq @ xp.matrix_transpose(pk)) * E
    Bm = Bm * E
    rq = xp.expand_dims(xp.exp(xp.expand_dims(Mp, axis=-1) - Mi), axis=-1)        # (..., c, 1) <= 1
    dq = Bm @ pk + rq * (gc @ ST)
    dk = xp.matrix_transpose(Bm) @ pq
    dv = xp.matrix_transpose(AE) @ gc
    if G is not None:
        w = xp.expand_dims(xp.exp(s_c - xp.expand_dims(Mi[..., -1], axis=-1)), axis=-1)   # (..., c, 1)
        dk = dk + (w * ua) @ xp.matrix_transpose(G)
        dv = dv + w * (pk @ G)
    if carry:                                                                     # G in the frame M[a - 1]
        upd = xp.matrix_transpose(rq * pq) @ gc
        G = upd if G is None else bcast2(xp.exp(Mp - Mi[..., -1]), xp=xp) * G + upd
    return dq, dk, dv, G


def causal_bwd_stored(g, phi_q, phi_k, v_aug, s, M, chunk_size, kept, stride):
    """Backward of :func:`causal_fwd_states` from what it kept (a :class:`KeptStates`): one reverse sweep.

    The states before the chunks of a block of `stride` chunks are recomputed from the block's kept state
    (:func:`_block_states`), then the block's chunks are processed in reverse (:func:`_chunk_bwd`,
    :func:`_chunk_bwd_scaled`): the intra-chunk terms, ``dphi_q``'s inter-chunk term from the state, and the
    reverse-accumulated cotangent ``G`` for ``dphi_k`` and ``dv_aug`` (as in :func:`_causal_bwd_reference`,
    which recomputes every state in a separate forward sweep). The chunks' masked intra-chunk weights are the
    forward's when it kept them (one ``(c, m) x (m, c)`` product and, with row scales, ``c^2`` exponentials
    per chunk saved). Memory beyond the outputs: the kept states and `stride` states of a block.
    """
    xp = namespace(g, phi_q, phi_k, v_aug)
    states, intra = kept
    L = phi_q.shape[-2]
    dev = device_of(phi_q)
    masks = _tril_masks(L, chunk_size, xp=xp, device=dev) if L else {}
    chunks = [(a, min(L, a + chunk_size)) for a in range(0, L, chunk_size)]
    dphi_q = xp.empty(tuple(phi_q.shape), dtype=phi_q.dtype, device=dev)        # (..., L, m)
    dphi_k = xp.empty(tuple(phi_k.shape), dtype=phi_q.dtype, device=dev)        # (..., L, m)
    dv_aug = xp.empty(tuple(v_aug.shape), dtype=phi_q.dtype, device=dev)        # (..., L, d_v + 1)
    G = None
    for blk in range((len(chunks) - 1) // stride * stride, -1, -stride):
        block = _block_states(states[..., blk // stride, :, :], phi_k, v_aug, s, M, chunks[blk:blk + stride],
                              xp=xp)
        for idx in range(min(len(chunks), blk + stride) - 1, blk - 1, -1):
            a, b = chunks[idx]
            pq, pk, ua, gc = phi_q[..., a:b, :], phi_k[..., a:b, :], v_aug[..., a:b, :], g[..., a:b, :]
            ST, AE = block[idx - blk], None if intra is None else intra[idx]     # (..., d_v + 1, m) S^T
            if s is None:
                dq, dk, dv, G = _chunk_bwd(gc, pq, pk, ua, ST, G, AE, xp=xp, tril=masks[b - a])
            else:
                Mp = xp.full_like(M[..., 0], -float("inf")) if a == 0 else M[..., a - 1]
                dq, dk, dv, G = _chunk_bwd_scaled(gc, pq, pk, ua, s[..., a:b], M[..., a:b], Mp, ST, G, AE,
                                                  xp=xp, tril=masks[b - a], carry=idx > 0)
            dphi_q[..., a:b, :], dphi_k[..., a:b, :], dv_aug[..., a:b, :] = dq, dk, dv
    return dphi_q, dphi_k, dv_aug


@_dispatch.define("linear_attention.causal_bwd")
def _causal_bwd_reference(g, phi_q, phi_k, v_aug, s, M, chunk_size):
    """Backward of :func:`_causal_fwd_reference` given ``g = d numer_aug: (..., L, d_v + 1)``.

    Two sweeps, each holding one (m, d_v + 1) state: a forward sweep recomputes the prefix state for
    ``dphi_q`` (and does every intra-chunk term); a reverse sweep accumulates
    ``G_c = sum_{i after chunk c} exp(R_c - M_i) phi_q_i^T g_i`` (R_c = M at the end of chunk c) for the
    inter-chunk terms of ``dphi_k`` and ``dv_aug``. No state is recovered by subtraction (that cancels
    catastrophically when later chunks dominate), and no (L, m, d_v) stack is formed.

    Returns ``dphi_q, dphi_k: (..., L, m)``, ``dv_aug: (..., L, d_v + 1)``.
    """
    xp = namespace(g, phi_q, phi_k, v_aug)
    L, m = phi_q.shape[-2], phi_q.shape[-1]
    batch = tuple(phi_q.shape[:-2])
    dev = device_of(phi_q)
    starts = list(range(0, L, chunk_size))
    S = xp.zeros(batch + (m, v_aug.shape[-1]), dtype=phi_q.dtype, device=dev)
    Mp = xp.full(batch, -float("inf"), dtype=phi_q.dtype, device=dev) if s is not None else None
    dphi_q = xp.empty(tuple(phi_q.shape), dtype=phi_q.dtype, device=dev)        # (..., L, m)
    dphi_k = xp.empty(tuple(phi_k.shape), dtype=phi_q.dtype, device=dev)        # (..., L, m)
    dv_aug = xp.empty(tuple(v_aug.shape), dtype=phi_q.dtype, device=dev)        # (..., L, d_v + 1)
    for a in starts:                                                              # forward sweep
        b = min(L, a + chunk_size)
        pq, pk, ua, gc = phi_q[..., a:b, :], phi_k[..., a:b, :], v_aug[..., a:b, :], g[..., a:b, :]
        tril = _tril_mask(b - a, xp=xp, device=dev)
        A = pq @ xp.matrix_transpose(pk)                                          # (..., c, c)
        Bm = gc @ xp.matrix_transpose(ua)                                         # (..., c, c) g_i . v_aug_j
        if s is None:
            zero = xp.zeros_like(A)
            AE, Bm = xp.where(tril, A, zero), xp.where(tril, Bm, zero)
            dphi_q[..., a:b, :] = Bm @ pk + gc @ xp.matrix_transpose(S)           # (..., c, m)
            S = S + xp.matrix_transpose(pk) @ ua
        else:
            s_c = s[..., a:b]
            Mi = M[..., a:b]
            _, E = _chunk_weights(s_c, Mp, xp=xp, tril=tril)
            AE, Bm = A * E, Bm * E
            decay = xp.expand_dims(xp.exp(xp.expand_dims(Mp, axis=-1) - Mi), axis=-1)   # (..., c, 1)
            dphi_q[..., a:b, :] = Bm @ pk + decay * (gc @ xp.matrix_transpose(S))
            Mn = Mi[..., -1]
            w = xp.expand_dims(xp.exp(s_c - xp.expand_dims(Mn, axis=-1)), axis=-1)
            S = bcast2(xp.exp(Mp - Mn), xp=xp) * S + xp.matrix_transpose(pk) @ (w * ua)
            Mp = Mn
        dphi_k[..., a:b, :] = xp.matrix_transpose(Bm) @ pq                        # (..., c, m) intra part
        dv_aug[..., a:b, :] = xp.matrix_transpose(AE) @ gc                        # (..., c, d_v + 1)
    G = xp.zeros_like(S)                                                          # (..., m, d_v + 1)
    for idx in range(len(starts) - 1, -1, -1):                                    # reverse sweep
        a = starts[idx]
        b = min(L, a + chunk_size)
        pq, pk, ua, gc = phi_q[..., a:b, :], phi_k[..., a:b, :], v_aug[..., a:b, :], g[..., a:b, :]
        if s is None:
            dphi_k[..., a:b, :] += ua @ xp.matrix_transpose(G)                    # inter-chunk parts
            dv_aug[..., a:b, :] += pk @ G
            G = G + xp.matrix_transpose(pq) @ gc
        else:
            s_c, Mi = s[..., a:b], M[..., a:b]
            R = Mi[..., -1]                                                       # (...,) M at chunk end
            w = xp.expand_dims(xp.exp(s_c - xp.expand_dims(R, axis=-1)), axis=-1)   # (..., c, 1) <= 1
            dphi_k[..., a:b, :] += (w * ua) @ xp.matrix_transpose(G)
            dv_aug[..., a:b, :] += w * (pk @ G)
            if idx > 0:
                R_prev = M[..., a - 1]  # M at the previous chunk end
                rq = xp.expand_dims(xp.exp(xp.expand_dims(R_prev, axis=-1) - Mi), axis=-1)  # (..., c, 1) <= 1
                G = bcast2(xp.exp(R_prev - R), xp=xp) * G + xp.matrix_transpose(rq * pq) @ gc
    return dphi_q, dphi_k, dv_aug


# ----------------------------------------------------------------------------------------------------------
# per-feature frames


def _host_bools(x, *, xp):
    """A small boolean array as a Python list (one transfer for NumPy arrays)."""
    if array_api_compat.is_numpy_array(x):
        return [bool(v) for v in x.tolist()]
    if bool(xp.all(x)):                                                           # the common case: one sync
        return [True] * x.shape[0]
    return [bool(x[i]) for i in range(x.shape[0])]


def chunk_plan(s, chunk_size, *, xp):
    """Chunk starts and, per chunk, whether its spread is within :data:`SPREAD_LIMIT` (one reduction)."""
    L = s.shape[-2]
    if L == 0:                                                                    # no positions: no chunks
        return [], []
    starts = list(range(0, L, chunk_size))
    ends = [min(L, a + chunk_size) - 1 for a in starts]
    first = s[..., ::chunk_size, :]  # (..., n, m) s at chunk starts
    if chunk_size <= L:
        last = s[..., chunk_size - 1::chunk_size, :]                              # (..., n or n-1, m)
        if len(ends) > last.shape[-2]:
            last = xp.concat([last, s[..., L - 1:, :]], axis=-2)                  # the partial last chunk
    else:
        last = s[..., L - 1:, :]                                                  # one partial chunk
    spread = last - first                                                         # (..., n, m) >= 0
    spread = xp.reshape(xp.moveaxis(spread, -2, 0), (len(starts), -1))            # (n, batch * m)
    if spread.shape[1] == 0:                                                      # an empty batch: no spread
        return starts, [True] * len(starts)
    cheap = _host_bools(xp.max(spread, axis=1) <= SPREAD_LIMIT, xp=xp)
    return starts, cheap


def _exact_weights(pq, pk, sc, *, xp, tril):
    """``W_ij = sum_f pq_if pk_jf exp(s_jf - s_if)`` for j <= i (0 above the diagonal): ``(..., c, c)``."""
    c, m = pq.shape[-2], pq.shape[-1]
    batch = 1
    for n in pq.shape[:-2]:
        batch *= n
    rows = max(1, min(c, _EXACT_BLOCK_ELEMENTS // max(1, batch * c * m)))
    neg_inf = xp.asarray(-float("inf"), dtype=pq.dtype, device=device_of(pq))
    blocks = []
    for r0 in range(0, c, rows):
        r1 = min(c, r0 + rows)
        diff = xp.expand_dims(sc, axis=-3) - xp.expand_dims(sc[..., r0:r1, :], axis=-2)   # (..., r, c, m)
        mask = xp.expand_dims(tril[r0:r1, :], axis=-1)                            # (r, c, 1) j <= i
        E = xp.exp(xp.where(mask, diff, neg_inf))                                 # (..., r, c, m) <= 1
        Wb = (E * xp.expand_dims(pk, axis=-3)) @ xp.expand_dims(pq[..., r0:r1, :], axis=-1)   # (..., r, c, 1)
        blocks.append(Wb[..., 0])
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=-2)          # (..., c, c)


def _exact_weights_bwd(dW, pq, pk, sc, *, xp, tril):
    """Cotangents of :func:`_exact_weights`.

    ``dpq_if = sum_j dW_ij pk_jf E_ijf`` and ``dpk_jf = sum_i dW_ij pq_if E_ijf``.
    """
    c, m = pq.shape[-2], pq.shape[-1]
    batch = 1
    for n in pq.shape[:-2]:
        batch *= n
    rows = max(1, min(c, _EXACT_BLOCK_ELEMENTS // max(1, batch * c * m)))
    neg_inf = xp.asarray(-float("inf"), dtype=pq.dtype, device=device_of(pq))
    dpq_blocks = []
    dpk = xp.zeros_like(pk)
    for r0 in range(0, c, rows):
        r1 = min(c, r0 + rows)
        diff = xp.expand_dims(sc, axis=-3) - xp.expand_dims(sc[..., r0:r1, :], axis=-2)   # (..., r, c, m)
        mask = xp.expand_dims(tril[r0:r1, :], axis=-1)
        E = xp.exp(xp.where(mask, diff, neg_inf))                                 # (..., r, c, m)
        dWE = E * xp.expand_dims(dW[..., r0:r1, :], axis=-1)                      # (..., r, c, m) dW_ij E_ijf
        dpq_blocks.append(xp.sum(dWE * xp.expand_dims(pk, axis=-3), axis=-2))     # (..., r, m)
        dpk = dpk + xp.sum(dWE * xp.expand_dims(pq[..., r0:r1, :], axis=-2), axis=-3)   # (..., c, m)
    dpq = dpq_blocks[0] if len(dpq_blocks) == 1 else xp.concat(dpq_blocks, axis=-2)
    return dpq, dpk


def _frame_chunk(phi_k, s, a, chunk_size, *, xp):
    """The frames of the chunk that starts at row `a`, shared by the forward and both backwards.

    Returns ``b`` (the chunk is rows a..b-1, c = b - a), its frames ``sc = s[..., a:b, :]: (..., c, m)``, the
    chunk-end frame ``E_end: (..., 1, m)``, the keys in that frame ``Kc = phi_k exp(sc - E_end): (..., c, m)``
    (entries <= 1 since s is nondecreasing), the frame of the state before the chunk ``Pprev: (..., 1, m)``
    and the state's decay to the chunk-end frame ``decay = exp(Pprev - E_end)^T: (..., m, 1)`` (both None for
    the first chunk, whose state is zero), and the keys' factor ``down = exp(sc - E_end): (..., c, m)``: the
    queries' factor on the chunk-frame path is its reciprocal (``Qc = phi_q / down``), one exponential per
    chunk element for both sides.
    """
    b = min(phi_k.shape[-2], a + chunk_size)
    sc = s[..., a:b, :]                                                           # (..., c, m)
    E_end = sc[..., -1:, :]                                                       # (..., 1, m) chunk end
    down = xp.exp(sc - E_end)                                                     # (..., c, m) <= 1
    Kc = phi_k[..., a:b, :] * down                                                # (..., c, m) <= 1
    Pprev = None if a == 0 else s[..., a - 1:a, :]                                # (..., 1, m) frame of S
    decay = None if Pprev is None else xp.matrix_transpose(xp.exp(Pprev - E_end))   # (..., m, 1) <= 1
    return b, sc, E_end, Kc, Pprev, decay, down


# chunk frame: numer_c = tril(Qc Kc^T) U_c + Qc (decay S),  S <- decay S + Kc^T U_c  (in the chunk end frame)
# exact path:  numer_c = W U_c + (q_c exp(P - s_c)) S,  W_ij = sum_f q_if k_jf exp(s_jf - s_if)
def _frames_chunk_fwd(pq, pk, ua, fr, S, ok, *, xp, tril):
    """One chunk of the frames forward, `fr` its :func:`_frame_chunk`, `S` the state in the frame ``Pprev``,
    `ok` its path (True: chunk frame). Returns ``(numer_c, S after the chunk, tril(Qc Kc^T) or None)``."""
    b, sc, E_end, Kc, Pprev, decay, down = fr
    if ok:
        Qc = pq / down  # (..., c, m) pq exp(E_end - sc) <= e^SPREAD_LIMIT
        A = Qc @ xp.matrix_transpose(Kc)                                          # (..., c, c)
        A = xp.where(tril, A, xp.zeros_like(A))
        numer_c = A @ ua                                                          # (..., c, d_v + 1) intra
        if decay is not None:
            S = decay * S                                                         # frame E_end
            numer_c = numer_c + Qc @ S                                            # inter
    else:
        A = None                                                                  # exact path: not kept
        numer_c = _exact_weights(pq, pk, sc, xp=xp, tril=tril) @ ua               # (..., c, d_v + 1) intra
        if decay is not None:  # each query in its own frame
            numer_c = numer_c + (pq * xp.exp(Pprev - sc)) @ S                     # (..., c, m) factors <= 1
            S = decay * S
    return numer_c, S + xp.matrix_transpose(Kc) @ ua, A                          # S in the frame E_end


@_dispatch.define("linear_attention.causal_frames_fwd")
def _causal_frames_fwd_reference(phi_q, phi_k, v_aug, s, chunk_size, stride):
    """Causal numerator and normaliser with per-feature frames ``s: (..., L, m)`` (nondecreasing along L).

    Parameters: ``phi_q, phi_k: (..., L, m)``, ``v_aug: (..., L, d_v + 1)``, ``s: (..., L, m)``,
    ``chunk_size: int``, ``stride``: keep the state before every stride-th chunk for the one-sweep backward
    (None: keep none). Returns ``numer_aug: (..., L, d_v + 1)`` (last column: the normaliser) and a
    :class:`KeptStates` (or None). Each chunk is :func:`_frames_chunk_fwd`. Extra memory O(L d_v + m d_v +
    C m), plus O(C^2 m) in a chunk that takes the exact path, plus what is kept (at most about ``2 L m``
    elements per batch index).
    """
    xp = namespace(phi_q, phi_k, v_aug, s)
    L, m = phi_q.shape[-2], phi_q.shape[-1]
    intra = [] if stride and _keep_intra(L, m, v_aug.shape[-1], chunk_size, stride) else None
    masks = _tril_masks(L, chunk_size, xp=xp, device=device_of(phi_q)) if L else {}
    batch = tuple(phi_q.shape[:-2])
    dev = device_of(phi_q)
    kept = _kept_buffer(batch, L, m, v_aug.shape[-1], chunk_size, stride, xp=xp, dtype=phi_q.dtype,
                        device=dev)
    S = xp.zeros(batch + (m, v_aug.shape[-1]), dtype=phi_q.dtype, device=dev)  # (..., m, d_v + 1) frame Pprev
    numer = xp.empty(tuple(v_aug.shape), dtype=phi_q.dtype, device=dev)          # (..., L, d_v + 1)
    starts, cheap = chunk_plan(s, chunk_size, xp=xp)
    for idx, (a, ok) in enumerate(zip(starts, cheap, strict=True)):
        if kept is not None and idx % stride == 0:
            kept[..., idx // stride, :, :] = xp.matrix_transpose(S)               # S^T, frame s[a - 1]
        fr = _frame_chunk(phi_k, s, a, chunk_size, xp=xp)
        b = fr[0]
        pq, pk, ua = phi_q[..., a:b, :], phi_k[..., a:b, :], v_aug[..., a:b, :]
        numer[..., a:b, :], S, A = _frames_chunk_fwd(pq, pk, ua, fr, S, ok, xp=xp, tril=masks[b - a])
        if intra is not None:
            intra.append(A)
    return numer, _kept_states(kept, intra)


def _times(d, phi, log_features):
    """A chunk's feature cotangent `d`, times its features `phi` for the cotangent of ``log phi``."""
    return d * phi if log_features else d


# chunk frame: dQc = Bm Kc + g (decay S)^T,  dphi_q = dQc / down            (Bm = tril(g U_c^T))
# exact path:  dphi_q = dW-term + (g S^T) exp(P - s_c)   (dW = Bm: the cotangent of the exact weights W)
def _frames_dq(gc, Bm, pq, pk, fr, ST, ok, *, xp, tril):
    """``dphi_q`` of one chunk from the transposed state `ST` ``(..., d_v + 1, m)`` in the frame ``Pprev``.
    Returns ``(dphi_q_c, dpk)``, ``dpk`` the exact path's key cotangent from the same pass (None on the chunk
    frame) for :func:`_frames_dk_dv`."""
    b, sc, E_end, Kc, Pprev, decay, down = fr
    if ok:
        dQc = Bm @ Kc                                                             # (..., c, m)
        if decay is not None:
            dQc = dQc + gc @ (xp.matrix_transpose(decay) * ST)
        return dQc / down, None                                                   # times exp(E_end - sc)
    dpq, dpk = _exact_weights_bwd(Bm, pq, pk, sc, xp=xp, tril=tril)
    if decay is not None:
        dpq = dpq + (gc @ ST) * xp.exp(Pprev - sc)
    return dpq, dpk


# chunk frame: dphi_k = (U_c G^T + Bm^T Qc) down,  dv_aug = Kc G + tril(Qc Kc^T)^T g,  G <- decay (G + Qc^T g)
# exact path:  dphi_k = (U_c G^T) down + dW-term,  dv_aug = Kc G + W^T g,  G <- decay G + (q exp(P - s))^T g
def _frames_dk_dv(gc, Bm, pq, pk, ua, fr, G, ok, A, dpk, *, xp, tril):
    """``dphi_k``, ``dv_aug`` of one chunk from the cotangent `G` of the state after it (its end frame), and
    `G` carried to the frame ``Pprev``. `A`: the forward's ``tril(Qc Kc^T)`` (None: recomputed); `dpk`: from
    :func:`_frames_dq` (None: recomputed on the exact path). Returns ``(dphi_k_c, dv_aug_c, G)``."""
    b, sc, E_end, Kc, Pprev, decay, down = fr
    dKc = ua @ xp.matrix_transpose(G)                                             # (..., c, m) via the state
    dua = Kc @ G                                                                  # (..., c, d_v + 1)
    if ok:
        Qc = pq / down  # (..., c, m) pq exp(E_end - sc) <= e^SPREAD_LIMIT
        if A is None:
            A = Qc @ xp.matrix_transpose(Kc)
            A = xp.where(tril, A, xp.zeros_like(A))                               # (..., c, c)
        dKc = dKc + xp.matrix_transpose(Bm) @ Qc
        dua = dua + xp.matrix_transpose(A) @ gc
        if decay is not None:
            G = decay * (G + xp.matrix_transpose(Qc) @ gc)
        return dKc * down, dua, G
    if dpk is None:
        _, dpk = _exact_weights_bwd(Bm, pq, pk, sc, xp=xp, tril=tril)
    W = _exact_weights(pq, pk, sc, xp=xp, tril=tril)
    dua = dua + xp.matrix_transpose(W) @ gc
    if decay is not None:
        G = decay * G + xp.matrix_transpose(pq * xp.exp(Pprev - sc)) @ gc
    return dKc * down + dpk, dua, G


def _frames_block_states(ST, phi_k, v_aug, s, starts, chunk_size, *, xp):
    """The transposed states before each chunk of a block (chunk `starts`), from the kept state `ST` before
    the first, and the :func:`_frame_chunk` of every chunk but the last (reused by the reverse pass)."""
    block, frames = [ST], {}
    for a in starts[:-1]:
        frames[a] = _frame_chunk(phi_k, s, a, chunk_size, xp=xp)
        b, sc, E_end, Kc, Pprev, decay, down = frames[a]
        ua = v_aug[..., a:b, :]
        ST = (ST if decay is None else xp.matrix_transpose(decay) * ST) + xp.matrix_transpose(ua) @ Kc
        block.append(ST)
    return block, frames


def _masked_gu(gc, ua, tril, *, xp):
    """``Bm = tril(g U_c^T): (..., c, c)``, g_i . v_aug_j for j <= i."""
    Bm = gc @ xp.matrix_transpose(ua)
    return xp.where(tril, Bm, xp.zeros_like(Bm))


@_dispatch.define("linear_attention.causal_frames_bwd")
def _causal_frames_bwd_reference(g, phi_q, phi_k, v_aug, s, chunk_size, kept, stride, log_features=False):
    """Backward of :func:`_causal_frames_fwd_reference` given ``g = d numer_aug: (..., L, d_v + 1)`` and what
    the forward kept (a :class:`KeptStates` for `stride`, or None).

    With kept states, one reverse sweep: the states inside a block of `stride` chunks recomputed from the
    block's kept state (:func:`_frames_block_states`), then per chunk :func:`_frames_dq` and
    :func:`_frames_dk_dv`, the chunk-frame weights ``tril(Qc Kc^T)`` the forward's when kept (see
    :func:`causal_bwd_stored`). Without, :func:`_causal_frames_bwd_recompute` (two sweeps). Returns
    ``dphi_q, dphi_k: (..., L, m)``, ``dv_aug: (..., L, d_v + 1)``; the frames' cotangent is
    ``phi_k dphi_k - phi_q dphi_q`` (formed by the caller: the output depends on s only through the
    differences ``s_j - s_i``). ``log_features=True``: the first two are the cotangents of ``log phi_q`` and
    ``log phi_k`` instead, ``dphi * phi``, formed chunk by chunk (FAVOR+'s gauge backward takes them: two
    passes over ``(..., L, m)`` saved).
    """
    if kept is None:
        return _causal_frames_bwd_recompute(g, phi_q, phi_k, v_aug, s, chunk_size, log_features)
    xp = namespace(g, phi_q, phi_k, v_aug, s)
    states, intra = kept
    dev = device_of(phi_q)
    masks = _tril_masks(phi_q.shape[-2], chunk_size, xp=xp, device=dev) if phi_q.shape[-2] else {}
    starts, cheap = chunk_plan(s, chunk_size, xp=xp)
    n = len(starts)
    dphi_q = xp.empty(tuple(phi_q.shape), dtype=phi_q.dtype, device=dev)        # (..., L, m)
    dphi_k = xp.empty(tuple(phi_k.shape), dtype=phi_q.dtype, device=dev)        # (..., L, m)
    dv_aug = xp.empty(tuple(v_aug.shape), dtype=phi_q.dtype, device=dev)        # (..., L, d_v + 1)
    G = xp.zeros(tuple(states.shape[:-3]) + (states.shape[-1], states.shape[-2]), dtype=states.dtype,
                 device=dev)                                                      # (..., m, d_v + 1)
    for blk in range((n - 1) // stride * stride, -1, -stride):
        block, frames = _frames_block_states(states[..., blk // stride, :, :], phi_k, v_aug, s,
                                             starts[blk:blk + stride], chunk_size, xp=xp)
        for idx in range(min(n, blk + stride) - 1, blk - 1, -1):
            a, ok = starts[idx], cheap[idx]
            fr = frames.pop(a) if a in frames else _frame_chunk(phi_k, s, a, chunk_size, xp=xp)
            b = fr[0]
            pq, pk, ua, gc = phi_q[..., a:b, :], phi_k[..., a:b, :], v_aug[..., a:b, :], g[..., a:b, :]
            tril = masks[b - a]
            Bm = _masked_gu(gc, ua, tril, xp=xp)                                  # (..., c, c)
            dq, dpk = _frames_dq(gc, Bm, pq, pk, fr, block[idx - blk], ok, xp=xp, tril=tril)
            A = None if intra is None else intra[idx]
            dk, dv, G = _frames_dk_dv(gc, Bm, pq, pk, ua, fr, G, ok, A, dpk, xp=xp, tril=tril)
            dv_aug[..., a:b, :] = dv
            dphi_q[..., a:b, :] = _times(dq, pq, log_features)
            dphi_k[..., a:b, :] = _times(dk, pk, log_features)
    return dphi_q, dphi_k, dv_aug


def _causal_frames_bwd_recompute(g, phi_q, phi_k, v_aug, s, chunk_size, log_features):
    """:func:`_causal_frames_bwd_reference` for a forward that kept nothing: a forward sweep recomputes the
    state for ``dphi_q`` (:func:`_frames_dq`); a reverse sweep carries the state's cotangent ``G`` (in each
    chunk's end frame) for the inter-chunk terms of ``dphi_k`` and ``dv_aug`` (:func:`_frames_dk_dv`). Chunks
    take the same path (chunk frame or exact) as in the forward. Memory: one state, nothing per chunk."""
    xp = namespace(g, phi_q, phi_k, v_aug, s)
    m = phi_q.shape[-1]
    batch = tuple(phi_q.shape[:-2])
    dev = device_of(phi_q)
    starts, cheap = chunk_plan(s, chunk_size, xp=xp)
    masks = _tril_masks(phi_q.shape[-2], chunk_size, xp=xp, device=dev) if starts else {}
    dphi_q = xp.empty(tuple(phi_q.shape), dtype=phi_q.dtype, device=dev)        # (..., L, m)
    dphi_k = xp.empty(tuple(phi_k.shape), dtype=phi_q.dtype, device=dev)        # (..., L, m)
    dv_aug = xp.empty(tuple(v_aug.shape), dtype=phi_q.dtype, device=dev)        # (..., L, d_v + 1)

    def chunk(a):
        fr = _frame_chunk(phi_k, s, a, chunk_size, xp=xp)
        b = fr[0]
        pq, pk, ua, gc = phi_q[..., a:b, :], phi_k[..., a:b, :], v_aug[..., a:b, :], g[..., a:b, :]
        return fr, b, pq, pk, ua, gc, masks[b - a], _masked_gu(gc, ua, masks[b - a], xp=xp)

    S = xp.zeros(batch + (m, v_aug.shape[-1]), dtype=phi_q.dtype, device=dev)
    for a, ok in zip(starts, cheap, strict=True):                                 # forward sweep: dphi_q
        fr, b, pq, pk, ua, gc, tril, Bm = chunk(a)
        dq, _ = _frames_dq(gc, Bm, pq, pk, fr, xp.matrix_transpose(S), ok, xp=xp, tril=tril)
        dphi_q[..., a:b, :] = _times(dq, pq, log_features)
        decay, Kc = fr[5], fr[3]
        S = (S if decay is None else decay * S) + xp.matrix_transpose(Kc) @ ua
    G = xp.zeros_like(S)                                                          # (..., m, d_v + 1)
    for a, ok in zip(reversed(starts), reversed(cheap), strict=True):             # reverse: dphi_k, dv_aug
        fr, b, pq, pk, ua, gc, tril, Bm = chunk(a)
        dk, dv, G = _frames_dk_dv(gc, Bm, pq, pk, ua, fr, G, ok, None, None, xp=xp, tril=tril)
        dv_aug[..., a:b, :] = dv
        dphi_k[..., a:b, :] = _times(dk, pk, log_features)
    return dphi_q, dphi_k, dv_aug
