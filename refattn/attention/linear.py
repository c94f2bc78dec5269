r"""Linear (kernelized) attention on featurised queries and keys, bidirectional and causal.

Given feature maps phi_q = phi(q), phi_k = phi(k) whose inner products estimate (or equal) a kernel K(q, k),

    y_i = sum_j (phi_q_i . phi_k_j) v_j  /  sum_j (phi_q_i . phi_k_j)                  (bidirectional)
        = phi_q_i (phi_k^T v)  /  phi_q_i (phi_k^T 1)

(Horn et al. Eq. (2); Chowdhury et al. Eq. (2); Katharopoulos et al.), computed in O(L m d_v) instead of
O(L^2). In causal mode the sums run over j <= i: prefix sums, computed chunk by chunk (chunks of C rows: the
intra-chunk part as a masked (C, C) product, the rest through a running (m, d_v + 1) state), so extra memory
stays O(L m + m d_v): the (L, m, d_v) stack of prefix states is never formed (design.md trap 9).

The normaliser is fused into the value product as an extra column of ones, ``v_aug = [v, 1]``, so one GEMM
gives numerator and denominator together.

**Key log-scales.** Positive random features overflow unless stabilised (design.md trap 3). A key row may
arrive as ``phi_k_j * exp(s_j)`` with ``s = k_log_scale``: the raw product is never formed. The sums are
carried relative to a running maximum M of s: over all positions in bidirectional mode, over the *prefix*
j <= i in causal mode (M_i = max_{j<=i} s_j, per position, also inside a chunk), with the accumulated state
rescaled by exp(M_old - M_new) when the maximum grows. The output is exactly invariant to M (it scales
numerator and denominator alike), so M only controls rounding and underflow; in causal mode it depends on
the prefix alone, so the output for a prefix never depends on later tokens, even through underflow.

Axes: ``...`` batch and heads, ``L`` positions, ``m`` feature width (m' of the issues: m for positive maps, 2m
for trig ones), ``d_v`` value width.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import _dispatch
from .._xp import check_choice, check_finite, check_positive_int, check_shape, contract_rows, device_of, namespace

__all__ = [
    "linear_attention",
    "linear_attention_fwd",
    "linear_attention_bwd",
    "linear_attention_step",
    "LinearAttentionCache",
    "LinearAttentionGrads",
    "LinearAttentionState",
]

Array = Any

#: Default causal chunk length C (rows per chunk), chosen by measurement: benchmarks/attention.py sweeps C in
#: {16, 32, 48, 64}; C = 32 is fastest for forward and backward at H = 8, m = 256, d_v = 64 (see BENCHMARKS.md).
DEFAULT_CHUNK_SIZE = 32


class LinearAttentionCache(NamedTuple):
    phi_q: Array        # (..., L, m)
    phi_k: Array        # (..., L, m)
    v_aug: Array        # (..., L, d_v + 1)  [v, 1]
    k_log_scale: Array  # (..., L) or None
    M: Array            # bidirectional: (..., 1) max of k_log_scale; causal: (..., L) prefix maxima; or None
    kv: Array           # bidirectional: (..., m, d_v + 1) = phi_k^T (w v_aug); causal: None
    z: Array            # (..., L, 1)  normaliser (relative to exp(M))
    y: Array            # (..., L, d_v) output
    causal: bool
    chunk_size: int


class LinearAttentionGrads(NamedTuple):
    phi_q: Array        # (..., L, m)
    phi_k: Array        # (..., L, m)
    v: Array            # (..., L, d_v)
    k_log_scale: Array  # (..., L), or None when no k_log_scale was given


class LinearAttentionState(NamedTuple):
    """Recurrent state of causal linear attention after t steps (relative to exp(M))."""

    S: Array  # (..., m, d_v)  sum_{j<=t} exp(s_j - M) phi_k_j^T v_j
    z: Array  # (..., m)       sum_{j<=t} exp(s_j - M) phi_k_j
    M: Array  # (...)          running maximum of the key log-scales (-inf before the first step)


# ----------------------------------------------------------------------------------------------------------
# validation


def _validate(phi_q, phi_k, v, k_log_scale, causal, chunk_size, on_nonpositive):
    xp = namespace(phi_q, phi_k, v, k_log_scale, names=("phi_q", "phi_k", "v", "k_log_scale"))
    sizes = check_shape("phi_q", phi_q, "..., L, m")
    check_shape("phi_k", phi_k, "..., L, m", sizes)
    check_shape("v", v, "..., L, d_v", sizes)
    if k_log_scale is not None:
        check_shape("k_log_scale", k_log_scale, "..., L", sizes)
        check_finite("k_log_scale", k_log_scale, xp=xp)
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool; got {causal!r}")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    check_choice(on_nonpositive, "on_nonpositive", ("raise", "ignore"))
    return xp, chunk_size


def _name_nonfinite(xp, **arrays):
    """Called only after a non-finite normaliser or output: find and name the offending input."""
    for name, a in arrays.items():
        if a is not None:
            check_finite(name, a, xp=xp)
    raise ValueError(
        "linear_attention: the normaliser or output is not finite although every input is: the features "
        "overflow in the products; pass row-stabilised features with k_log_scale (design.md trap 3)"
    )


def _check_normaliser(z, on_nonpositive, *, xp, inputs):
    if not bool(xp.all(xp.isfinite(z))):
        _name_nonfinite(xp, **inputs)
    if on_nonpositive == "raise":
        bad = z <= 0
        if bool(xp.any(bad)):
            count = int(xp.sum(xp.astype(bad, xp.int64)))
            zmin = float(xp.min(z))
            raise ValueError(
                f"linear_attention: {count} non-positive normaliser(s) phi_q . sum_j phi_k_j (minimum {zmin:.3e}); "
                "trig features can give these (design.md trap 4). Pass on_nonpositive='ignore' to get the "
                "output as computed"
            )


def _augment(v, *, xp):
    ones = xp.ones(tuple(v.shape[:-1]) + (1,), dtype=v.dtype, device=device_of(v))
    return xp.concat([v, ones], axis=-1)                                          # (..., L, d_v + 1)


def _bcast2(x, *, xp):
    """(...,) -> (..., 1, 1) (expand_dims takes one axis in the 2024.12 standard)."""
    return xp.reshape(x, tuple(x.shape) + (1, 1))


def _tril_mask(c, *, xp, device):
    r = xp.arange(c, device=device)
    return xp.expand_dims(r, axis=1) >= xp.expand_dims(r, axis=0)                 # (c, c) j <= i


# ----------------------------------------------------------------------------------------------------------
# causal primitives (the hot loop; accel may replace these through the dispatch point)


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


def _causal_fwd_reference(phi_q, phi_k, v_aug, s, chunk_size):
    """Causal numerator and normaliser by chunked prefix sums.

    Parameters: ``phi_q, phi_k: (..., L, m)``, ``v_aug: (..., L, d_v + 1)``, ``s: (..., L)`` or None,
    ``chunk_size: int``. Returns ``numer_aug: (..., L, d_v + 1)`` (last column: the normaliser) and
    ``M: (..., L)`` prefix maxima of `s` (None when `s` is None). Extra memory O(L d_v + m d_v + C^2).
    """
    xp = namespace(phi_q, phi_k, v_aug)
    L, m = phi_q.shape[-2], phi_q.shape[-1]
    batch = tuple(phi_q.shape[:-2])
    dev = device_of(phi_q)
    S = xp.zeros(batch + (m, v_aug.shape[-1]), dtype=phi_q.dtype, device=dev)   # (..., m, d_v + 1) state
    Mp = xp.full(batch, -float("inf"), dtype=phi_q.dtype, device=dev) if s is not None else None
    # outputs are written chunk by chunk into preallocated arrays (concatenating hundreds of chunks along the
    # L axis costs as much as the GEMMs at L = 16384)
    numer = xp.empty(tuple(v_aug.shape), dtype=phi_q.dtype, device=dev)          # (..., L, d_v + 1)
    M = xp.empty(tuple(s.shape), dtype=s.dtype, device=dev) if s is not None else None   # (..., L)
    for a in range(0, L, chunk_size):
        b = min(L, a + chunk_size)
        pq, pk, ua = phi_q[..., a:b, :], phi_k[..., a:b, :], v_aug[..., a:b, :]
        tril = _tril_mask(b - a, xp=xp, device=dev)
        A = pq @ xp.matrix_transpose(pk)                                          # (..., c, c) phi_q_i . phi_k_j
        if s is None:
            A = xp.where(tril, A, xp.zeros_like(A))
            numer[..., a:b, :] = A @ ua + pq @ S                                  # (..., c, d_v + 1)
            S = S + xp.matrix_transpose(pk) @ ua                                  # (..., m, d_v + 1)
        else:
            s_c = s[..., a:b]                                                     # (..., c)
            Mi, E = _chunk_weights(s_c, Mp, xp=xp, tril=tril)
            inter = xp.expand_dims(xp.exp(xp.expand_dims(Mp, axis=-1) - Mi), axis=-1) * (pq @ S)
            numer[..., a:b, :] = (A * E) @ ua + inter                             # (..., c, d_v + 1)
            Mn = Mi[..., -1]                                                      # (...,) max over the prefix
            w = xp.expand_dims(xp.exp(s_c - xp.expand_dims(Mn, axis=-1)), axis=-1)  # (..., c, 1)
            S = _bcast2(xp.exp(Mp - Mn), xp=xp) * S + xp.matrix_transpose(pk) @ (w * ua)
            Mp = Mn
            M[..., a:b] = Mi
    return numer, M


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
            S = _bcast2(xp.exp(Mp - Mn), xp=xp) * S + xp.matrix_transpose(pk) @ (w * ua)
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
                R_prev = M[..., a - 1]                                            # M at the previous chunk end
                rq = xp.expand_dims(xp.exp(xp.expand_dims(R_prev, axis=-1) - Mi), axis=-1)  # (..., c, 1) <= 1
                G = _bcast2(xp.exp(R_prev - R), xp=xp) * G + xp.matrix_transpose(rq * pq) @ gc
    return dphi_q, dphi_k, dv_aug


# ----------------------------------------------------------------------------------------------------------
# public pair


def linear_attention_fwd(phi_q, phi_k, v, *, causal=False, k_log_scale=None, chunk_size=DEFAULT_CHUNK_SIZE,
                         on_nonpositive="raise"):
    r"""Linear attention on featurised inputs, and the cache for :func:`linear_attention_bwd`.

    Implements Horn et al. Eq. (2) / Chowdhury et al. Eq. (2) with the kernel replaced by feature inner
    products: ``y_i = sum_{j in J(i)} (phi_q_i . phi_k_j) v_j / sum_{j in J(i)} phi_q_i . phi_k_j`` with
    J(i) all positions (bidirectional) or j <= i (causal).

    Parameters
    ----------
    phi_q : (..., L, m) array
        Query features. Real floating.
    phi_k : (..., L, m) array
        Key features (relative to ``exp(k_log_scale)`` when that is given).
    v : (..., L, d_v) array
        Values.
    causal : bool
        Prefix sums (j <= i) instead of full sums.
    k_log_scale : (..., L) array, optional
        Key row log-scales: the keys' true features are ``phi_k * exp(k_log_scale)[..., None]``, combined with a
        running maximum (over all positions, or over the prefix in causal mode) so that they are never formed.
    chunk_size : int
        Causal chunk length C (rows). Memory O(L m + m d_v + C^2); ignored when ``causal=False``.
    on_nonpositive : {"raise", "ignore"}
        What to do with a non-positive normaliser (possible with trig features): raise a ``ValueError`` that
        gives the count and the minimum, or return the output as computed. It is never replaced silently.

    Returns
    -------
    y : (..., L, d_v) array
    cache : LinearAttentionCache
    """
    xp, chunk_size = _validate(phi_q, phi_k, v, k_log_scale, causal, chunk_size, on_nonpositive)
    d_v = v.shape[-1]
    v_aug = _augment(v, xp=xp)                                                    # (..., L, d_v + 1)
    s = k_log_scale
    if not causal:
        if s is None:
            M, u = None, v_aug
        else:
            M = xp.max(s, axis=-1, keepdims=True)                                 # (..., 1) global max
            u = xp.expand_dims(xp.exp(s - M), axis=-1) * v_aug                    # (..., L, d_v + 1) w v_aug
        kv = contract_rows(phi_k, u)                                              # (..., m, d_v + 1)
        numer = phi_q @ kv                                                        # (..., L, d_v + 1)
    else:
        kv = None
        impl = _dispatch.kernel_for("linear_attention.causal_fwd") or _causal_fwd_reference
        numer, M = impl(phi_q, phi_k, v_aug, s, chunk_size)
    z = numer[..., d_v:]                                                          # (..., L, 1)
    _check_normaliser(z, on_nonpositive, xp=xp,
                      inputs={"phi_q": phi_q, "phi_k": phi_k, "v": v, "k_log_scale": s})
    y = numer[..., :d_v] / z                                                      # (..., L, d_v)
    if not bool(xp.all(xp.isfinite(y))):
        _name_nonfinite(xp, phi_q=phi_q, phi_k=phi_k, v=v, k_log_scale=s)
    return y, LinearAttentionCache(phi_q, phi_k, v_aug, s, M, kv, z, y, causal, chunk_size)


def linear_attention_bwd(dy, cache: LinearAttentionCache) -> LinearAttentionGrads:
    r"""Gradients of :func:`linear_attention` for `phi_q`, `phi_k`, `v` and `k_log_scale`.

    With ``g = [dy / z, -sum(dy * y) / z]`` the cotangent of the augmented numerator ``[numer, z]``:
    bidirectional, ``dphi_q = g kv^T``, ``dkv = phi_q^T g``, ``dphi_k = u dkv^T``, ``dv_aug = w phi_k dkv``
    with ``u = w v_aug``, ``w = exp(s - M)``: four GEMMs against the forward's two. The gradient for the
    log-scales is ``ds_j = v_aug_j . dv_aug_j`` (the output does not depend on M). Causal: see
    ``_causal_bwd_reference``.

    Parameters
    ----------
    dy : (..., L, d_v) array
    cache : LinearAttentionCache
    """
    c = cache
    xp = namespace(dy, c.phi_q, names=("dy", "cache.phi_q"))
    check_shape("dy", dy, "..., L, d_v", check_shape("y", c.y, "..., L, d_v"))
    d_v = dy.shape[-1]
    dnumer = dy / c.z                                                             # (..., L, d_v)
    dz = -xp.sum(dnumer * c.y, axis=-1, keepdims=True)                            # (..., L, 1) numer = y z
    g = xp.concat([dnumer, dz], axis=-1)                                          # (..., L, d_v + 1)
    s = c.k_log_scale
    if not c.causal:
        dphi_q = g @ xp.matrix_transpose(c.kv)                                    # (..., L, m)
        dkv = contract_rows(c.phi_q, g)                                           # (..., m, d_v + 1)
        if s is None:
            dphi_k = c.v_aug @ xp.matrix_transpose(dkv)                           # (..., L, m)
            dv_aug = c.phi_k @ dkv                                                # (..., L, d_v + 1)
        else:
            w = xp.expand_dims(xp.exp(s - c.M), axis=-1)                          # (..., L, 1) recomputed
            dphi_k = (w * c.v_aug) @ xp.matrix_transpose(dkv)
            dv_aug = w * (c.phi_k @ dkv)
    else:
        impl = _dispatch.kernel_for("linear_attention.causal_bwd") or _causal_bwd_reference
        dphi_q, dphi_k, dv_aug = impl(g, c.phi_q, c.phi_k, c.v_aug, s, c.M, c.chunk_size)
    ds = None if s is None else xp.sum(c.v_aug * dv_aug, axis=-1)                 # (..., L)
    return LinearAttentionGrads(phi_q=dphi_q, phi_k=dphi_k, v=dv_aug[..., :d_v], k_log_scale=ds)


def linear_attention(phi_q, phi_k, v, *, causal=False, k_log_scale=None, chunk_size=DEFAULT_CHUNK_SIZE,
                     on_nonpositive="raise"):
    r"""Linear attention ``phi_q (phi_k^T v) / phi_q (phi_k^T 1)`` (prefix sums when causal).

    See :func:`linear_attention_fwd` for the arguments. Shapes: ``phi_q, phi_k: (..., L, m)``,
    ``v: (..., L, d_v)``, ``k_log_scale: (..., L)``; returns ``(..., L, d_v)``.
    """
    return linear_attention_fwd(phi_q, phi_k, v, causal=causal, k_log_scale=k_log_scale,
                                chunk_size=chunk_size, on_nonpositive=on_nonpositive)[0]


def linear_attention_step(state, phi_q_t, phi_k_t, v_t, k_log_scale_t=None, *, on_nonpositive="raise"):
    r"""One step of causal linear attention in recurrent form (the RNN view of Katharopoulos et al.).

    ``S_t = S_{t-1} + exp(s_t) phi_k_t^T v_t``, ``z_t = z_{t-1} + exp(s_t) phi_k_t``,
    ``out_t = phi_q_t S_t / phi_q_t z_t``, all carried relative to the running maximum M of the log-scales.

    Parameters
    ----------
    state : LinearAttentionState or None
        ``None`` before the first step.
    phi_q_t, phi_k_t : (..., m) array
    v_t : (..., d_v) array
    k_log_scale_t : (...) array, optional
        Log-scale of this key (0 when omitted).

    Returns
    -------
    out_t : (..., d_v) array
    state : LinearAttentionState
    """
    xp = namespace(phi_q_t, phi_k_t, v_t, k_log_scale_t, names=("phi_q_t", "phi_k_t", "v_t", "k_log_scale_t"))
    sizes = check_shape("phi_q_t", phi_q_t, "..., m")
    check_shape("phi_k_t", phi_k_t, "..., m", sizes)
    check_shape("v_t", v_t, "..., d_v", sizes)
    check_choice(on_nonpositive, "on_nonpositive", ("raise", "ignore"))
    batch = tuple(phi_q_t.shape[:-1])
    dev = device_of(phi_q_t)
    if k_log_scale_t is None:
        k_log_scale_t = xp.zeros(batch, dtype=phi_q_t.dtype, device=dev)
    check_shape("k_log_scale_t", k_log_scale_t, "...", sizes)
    check_finite("k_log_scale_t", k_log_scale_t, xp=xp)
    m, d_v = phi_q_t.shape[-1], v_t.shape[-1]
    if state is None:
        state = LinearAttentionState(
            S=xp.zeros(batch + (m, d_v), dtype=phi_q_t.dtype, device=dev),
            z=xp.zeros(batch + (m,), dtype=phi_q_t.dtype, device=dev),
            M=xp.full(batch, -float("inf"), dtype=phi_q_t.dtype, device=dev),
        )
    else:
        namespace(state.S, phi_q_t, names=("state.S", "phi_q_t"))
        check_shape("state.S", state.S, "..., m, d_v", sizes)
        check_shape("state.z", state.z, "..., m", sizes)
        check_shape("state.M", state.M, "...", sizes)
    M_new = xp.maximum(state.M, k_log_scale_t)                                    # (...)
    decay = xp.exp(state.M - M_new)                                               # (...) <= 1
    w = xp.exp(k_log_scale_t - M_new)                                             # (...) <= 1
    S = _bcast2(decay, xp=xp) * state.S + _bcast2(w, xp=xp) * (
        xp.expand_dims(phi_k_t, axis=-1) * xp.expand_dims(v_t, axis=-2))          # (..., m, d_v)
    z = xp.expand_dims(decay, axis=-1) * state.z + xp.expand_dims(w, axis=-1) * phi_k_t   # (..., m)
    numer = xp.squeeze(xp.expand_dims(phi_q_t, axis=-2) @ S, axis=-2)             # (..., d_v)
    denom = xp.sum(phi_q_t * z, axis=-1, keepdims=True)                           # (..., 1)
    _check_normaliser(denom, on_nonpositive, xp=xp,
                      inputs={"phi_q_t": phi_q_t, "phi_k_t": phi_k_t, "v_t": v_t})
    return numer / denom, LinearAttentionState(S=S, z=z, M=M_new)
