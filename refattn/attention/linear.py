r"""Linear (kernelized) attention on featurised queries and keys, bidirectional and causal.

Given feature maps phi_q = phi(q), phi_k = phi(k) whose inner products estimate (or equal) a kernel K(q, k),

    y_i = sum_j (phi_q_i . phi_k_j) v_j  /  sum_j (phi_q_i . phi_k_j)                  (bidirectional)
        = phi_q_i (phi_k^T v)  /  phi_q_i (phi_k^T 1)

(Choromanski et al. (FLT) Eq. (2); Chowdhury et al. Sec. 3, their Eq. (1) rewritten with feature maps; Horn et
al. Sec. 2.1; Katharopoulos et al.), computed in O(L m d_v) instead of O(L^2). The normaliser is fused into
the value product as an extra column of ones, ``v_aug = [v, 1]``, so one GEMM gives numerator and denominator
together: ``numer_aug_i = phi_q_i S`` with ``S = phi_k^T v_aug: (m, d_v + 1)``.

**Causal attention: the prefix sum.** With sums over j <= i, ``S`` becomes a running state. Read
:func:`linear_attention_step` first, the recurrent form (Katharopoulos et al.'s RNN view), one position at a
time::

    S_t = S_{t-1} + phi_k_t^T v_t          (m, d_v)      S_0 = 0
    z_t = z_{t-1} + phi_k_t                (m,)          z_0 = 0
    y_t = phi_q_t S_t / (phi_q_t . z_t)

It is the reference that ``linear_attention(..., causal=True)`` is tested against
(``tests/attention/test_causal_scan.py``). The fast form computes the same sums **chunk by chunk**: for rows
``[a, b)`` (``C = b - a``, :data:`DEFAULT_CHUNK_SIZE`), with ``Q = phi_q[a:b]``, ``K = phi_k[a:b]``,
``U = v_aug[a:b]`` and ``S_a`` the state after row a - 1,

    numer_aug[a:b] = tril(Q K^T) U + Q S_a      (intra-chunk: a masked (C, C) GEMM; the rest: the state)
    S_b            = S_a + K^T U                 (one (m, C) x (C, d_v + 1) GEMM per chunk)

so the (L, m, d_v) stack of the S_t is never formed (it would be L times the state): extra memory
O(L d_v + m d_v + C^2).
``C = 1`` is the recurrence itself; any C gives the same numbers up to rounding. The chunk loops live in the
private module ``_causal`` (:func:`~refattn.attention._causal.causal_fwd_states` and its backwards). For its
one-sweep backward the forward keeps the state before every ``ceil((d_v + 1) / 2C)``-th chunk and, while the
total stays within ``2 L m`` elements per batch index, each chunk's masked (C, C) weights
(``_causal.KeptStates``); the backward recomputes the states in between. With frames the kept states go
through the dispatched primitive pair, in one layout every backend reads (an accel forward may keep none; the
backward then recomputes them). The plain :func:`linear_attention` is inference: it keeps nothing (the same
scan, the same numbers bit for bit, without the copies and the memory a backward would read).

**The stabiliser's frames.** Positive random features overflow unless stabilised: a key
arrives as ``phi_k_j`` relative to a scale ``exp(s_j)`` (``k_log_scale``) and the raw product is never formed.
Two forms:

* **row log-scales** ``s: (..., L)``: the sums are carried relative to a running maximum, over all positions
  in bidirectional mode and over the prefix in causal mode, ``M_i = max_{j<=i} s_j`` (per position, also
  inside a chunk). The recurrence becomes ``S_t = exp(M_{t-1} - M_t) S_{t-1} + exp(s_t - M_t) phi_k_t^T v_t``
  (likewise z), every factor <= 1; a chunk weights ``tril(Q K^T)`` by ``exp(s_j - M_i)`` and rescales the
  state by ``exp(M_a - M_i)``. The output is exactly invariant to M, and M depends on the prefix alone.
* **per-feature frames** ``s: (..., L, m)`` (causal only): every feature column of the keys has its own scale,
  nondecreasing along L (its prefix maximum), and ``phi_q`` arrives in the reciprocal frame of its own
  position, so the weight of (i, j, f) is ``phi_q_if phi_k_jf exp(s_jf - s_if) <= phi_q_if phi_k_jf``. This
  keeps float32 accurate where a row scale underflows, and the normaliser is at least 1 for every query in
  exact arithmetic (the query's largest feature meets its own key maximum). The recurrence:
  ``S_t = diag(exp(s_{t-1} - s_t)) S_{t-1} + phi_k_t^T v_t``. A chunk ``[a, b)`` is computed in its end frame
  ``E = s_{b-1}``: ``Qc = phi_q exp(E - s)`` (>= 1), ``Kc = phi_k exp(s - E)`` (<= 1) and
  ``numer = tril(Qc Kc^T) U + Qc S`` with the state rescaled into that frame, all GEMMs. That is exact
  algebra, but it lets a later key of the chunk set the frame of an earlier query, so it is used only while
  the chunk's **spread** ``max_f (s_{b-1,f} - s_{a,f})`` is at most ``_causal.SPREAD_LIMIT`` (``Qc <= e^20``;
  every term that matters keeps at least ``e^-20`` of the float32 range). A chunk with a larger spread takes
  the exact path, the weights ``exp(s_jf - s_if)`` per (i, j, f) (O(C^2 m) exponentials for that chunk, in row
  blocks to bound memory). Both paths agree up to rounding; the frames of a prefix never depend on later
  positions.

Axes: ``...`` batch and heads, ``L`` positions, ``m`` feature width (m for positive maps, 2m for trig ones),
``d_v`` value width, ``C`` chunk length.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import _dispatch
from .._docs import fill_doc
from .._xp import (check_choice, check_finite, check_positive_int, check_shape, contract_rows, device_of,
                   namespace)
from ._causal import bcast2, causal_bwd_stored, causal_fwd_states, state_stride
from .normaliser import augment, check_normaliser, name_nonfinite

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

#: Default causal chunk length C (rows per chunk); BENCHMARKS.md has the sweep over C that chose it.
DEFAULT_CHUNK_SIZE = 32


class LinearAttentionCache(NamedTuple):
    """What :func:`linear_attention_bwd` needs from :func:`linear_attention_fwd` (fields in the source)."""

    phi_q: Array        # (..., L, m)
    phi_k: Array        # (..., L, m)
    v_aug: Array        # (..., L, d_v + 1)  [v, 1]
    k_log_scale: Array  # (..., L) row log-scales, (..., L, m) per-feature frames, or None
    M: Array            # row scales: (..., 1) max (bidirectional), (..., L) prefix maxima (causal); else None
    kv: Array           # bidirectional: (..., m, d_v + 1) = phi_k^T (w v_aug); causal: None
    z: Array            # (..., L, 1)  normaliser (relative to exp(M))
    y: Array            # (..., L, d_v) output
    causal: bool
    chunk_size: int
    # causal (every backend with frames, the reference with row scales): a _causal.KeptStates (the states
    # before every stride-th chunk, transposed and stacked (..., n_kept, d_v + 1, m), and the chunks' masked
    # intra-chunk weights when they fit the memory bound)
    states: Any = None
    stride: int = None  # state_stride(C, d_v + 1): the kept states hold <= about 2 L m elements


class LinearAttentionGrads(NamedTuple):
    """Gradients of :func:`linear_attention`: ``phi_q``, ``phi_k``, ``v``, ``k_log_scale`` (or ``None``)."""

    phi_q: Array        # (..., L, m)
    phi_k: Array        # (..., L, m)
    v: Array            # (..., L, d_v)
    k_log_scale: Array  # (..., L) or (..., L, m) like k_log_scale, or None when none was given


class LinearAttentionState(NamedTuple):
    """Recurrent state of causal linear attention after t steps (relative to exp(M))."""

    S: Array  # (..., m, d_v)  sum_{j<=t} exp(s_j - M) phi_k_j^T v_j
    z: Array  # (..., m)       sum_{j<=t} exp(s_j - M) phi_k_j
    M: Array  # (...) running maximum of row log-scales, or (..., m) the current frame (-inf at first)


# ----------------------------------------------------------------------------------------------------------
# validation


def _validate(phi_q, phi_k, v, k_log_scale, causal, chunk_size, on_nonpositive):
    xp = namespace(phi_q, phi_k, v, k_log_scale, names=("phi_q", "phi_k", "v", "k_log_scale"))
    sizes = check_shape("phi_q", phi_q, "..., L, m")
    check_shape("phi_k", phi_k, "..., L, m", sizes)
    check_shape("v", v, "..., L, d_v", sizes)
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool; got {causal!r}")
    if k_log_scale is not None:
        if k_log_scale.ndim == phi_k.ndim:
            check_shape("k_log_scale", k_log_scale, "..., L, m", sizes)
            if not causal:
                raise ValueError(
                    "k_log_scale: per-feature frames of shape (..., L, m) are for causal=True; in "
                    "bidirectional attention one frame (..., 1, m) cancels between the query and key "
                    "features: fold it into phi_q (positive_features_stable(q, omega, k_log_scale=...)) and "
                    "pass none here")
        else:
            check_shape("k_log_scale", k_log_scale, "..., L", sizes)
        check_finite("k_log_scale", k_log_scale, xp=xp)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    check_choice(on_nonpositive, "on_nonpositive", ("raise", "ignore"))
    return xp, chunk_size


_PARAMS = """
phi_q : (..., L, m) array
    Query features. Real floating (float64 reference, float32 supported).
phi_k : (..., L, m) array
    Key features (relative to ``exp(k_log_scale)`` when that is given); same batch axes, dtype and namespace
    as `phi_q`.
v : (..., L, d_v) array
    Values, same batch axes, dtype and namespace as `phi_q`.
causal : bool, default False
    Prefix sums (j <= i) instead of full sums.
k_log_scale : (..., L) or (..., L, m) array, optional
    Key scales, finite, in one of the two forms of the module docstring ("The stabiliser's frames").

    * ``(..., L)``, **row log-scales**: the keys' true features are ``phi_k * exp(k_log_scale)[..., None]``,
      combined with a running maximum so that they are never formed. Any feature map (trig ones included); in
      float32 positive features of large inputs can underflow this way (a query's dominant feature may sit
      where every key's row scale is small).
    * ``(..., L, m)``, **per-feature frames** (``causal=True`` only): nondecreasing along L (prefix maxima,
      from :func:`~refattn.features.key_frames.positive_key_features_stable`), with ``phi_q`` given in the
      reciprocal frame of its own position (folded in by ``positive_features_stable(q, omega,
      k_log_scale=...)``). Bidirectional attention needs no frame: one ``(..., 1, m)`` frame cancels between
      query and key features.
chunk_size : int, default 32
    Causal chunk length C (rows). Memory O(L m + m d_v + C^2); ignored when ``causal=False``.
on_nonpositive : {"raise", "ignore"}
    What to do with a non-positive normaliser (possible with trig features): raise a ``ValueError`` that gives
    the count and the minimum, or return the output as computed. It is never replaced silently.
"""

_RAISES = """
ValueError
    Shapes that do not match; per-feature frames with ``causal=False``; a non-finite `k_log_scale`; a
    normaliser or output that is not finite (the message names the non-finite input, or says the features
    overflow); a non-positive normaliser with ``on_nonpositive="raise"`` (negative estimates of trig features,
    or an underflow to 0, with the remedy).
TypeError
    Mixed namespaces or dtypes, or `causal` not a bool.
"""


@fill_doc(params=_PARAMS, raises=_RAISES)
def linear_attention(phi_q, phi_k, v, *, causal=False, k_log_scale=None, chunk_size=DEFAULT_CHUNK_SIZE,
                     on_nonpositive="raise"):
    r"""Linear attention ``phi_q (phi_k^T v) / phi_q (phi_k^T 1)`` (prefix sums when causal).

    Choromanski et al. (FLT) Eq. (2), ``D_hat^{-1} (Q' (K'^T V))`` with ``D_hat = diag(Q' (K'^T 1_L))``, which
    is Chowdhury et al.'s Eq. (1) rewritten with feature maps (Sec. 3, ``kappa(q, k) = phi(q) . phi(k)``):
    ``y_i = sum_{j in J(i)} (phi_q_i . phi_k_j) v_j / sum_{j in J(i)} phi_q_i . phi_k_j`` with J(i) all
    positions (bidirectional) or j <= i (causal: the prefix sum of the module docstring, whose readable form
    is :func:`linear_attention_step`).

    Backward (:func:`linear_attention_bwd`): with ``g = [dy / z, -sum(dy * y) / z]`` the cotangent of the
    augmented numerator ``[numer, z]``, bidirectional ``dphi_q = g kv^T``, ``dkv = phi_q^T g``, ``dphi_k = u
    dkv^T``, ``dv_aug = w phi_k dkv`` with ``u = w v_aug``, ``w = exp(s - M)``: four GEMMs against the
    forward's two. The log-scales' gradient is ``ds_j = v_aug_j . dv_aug_j`` (the output does not depend on
    M); with frames, ``ds = phi_k dphi_k - phi_q dphi_q`` (only differences ``s_j - s_i`` enter). Causal: the
    same through the prefix sums, one reverse sweep over the chunks from the kept states.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., L, d_v) array
        Same namespace, device and dtype as `phi_q`.

    Raises
    ------
    {raises}

    See Also
    --------
    linear_attention_fwd, linear_attention_bwd : the differentiable pair.
    linear_attention_step : one causal step in recurrent form, the reference of the chunked scan.
    refattn.attention.kernel_attention : the quadratic reference with the kernel ``phi(q) . phi(k)``.
    refattn.attention.favor_attention : feature maps and this function composed (FAVOR+).

    Examples
    --------
    Deterministic features (``elu(x) + 1``, Katharopoulos et al.) make the output exact:

    >>> import numpy as np
    >>> from refattn.attention import linear_attention
    >>> from refattn.features import elu_features
    >>> q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])     # (L, d) = (3, 2)
    >>> v = np.array([[1.0], [2.0], [3.0]])                     # (L, d_v) = (3, 1)
    >>> phi = elu_features(q)                                   # (L, m) = (3, 2)
    >>> linear_attention(phi, phi, v).round(4)
    array([[2.0667],
           [2.1333],
           [2.1   ]])
    >>> linear_attention(phi, phi, v, causal=True).round(4)     # prefix sums: row 0 sees v_0 only
    array([[1.    ],
           [1.5556],
           [2.1   ]])
    """
    xp, chunk_size = _validate(phi_q, phi_k, v, k_log_scale, causal, chunk_size, on_nonpositive)
    inputs = {"phi_q": phi_q, "phi_k": phi_k, "v": v, "k_log_scale": k_log_scale}
    return linear_attention_fwd_core(phi_q, phi_k, v, causal, k_log_scale, chunk_size, on_nonpositive, xp=xp,
                                     inputs=inputs, keep=False)[0]                # inference: nothing kept


@fill_doc(params=_PARAMS, raises=_RAISES)
def linear_attention_fwd(phi_q, phi_k, v, *, causal=False, k_log_scale=None, chunk_size=DEFAULT_CHUNK_SIZE,
                         on_nonpositive="raise"):
    r"""Forward of :func:`linear_attention` (see it for the equations), with the cache for the backward.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., L, d_v) array
        Same namespace, device and dtype as `phi_q`.
    cache : LinearAttentionCache
        What :func:`linear_attention_bwd` needs: the inputs, ``[v, 1]``, the normaliser ``z: (..., L, 1)``,
        `y`, and either ``kv = phi_k^T [v, 1]`` (bidirectional) or a few causal prefix states.

    Raises
    ------
    {raises}
    """
    xp, chunk_size = _validate(phi_q, phi_k, v, k_log_scale, causal, chunk_size, on_nonpositive)
    inputs = {"phi_q": phi_q, "phi_k": phi_k, "v": v, "k_log_scale": k_log_scale}
    return linear_attention_fwd_core(phi_q, phi_k, v, causal, k_log_scale, chunk_size, on_nonpositive, xp=xp,
                                     inputs=inputs)


def linear_attention_bwd(dy, cache: LinearAttentionCache) -> LinearAttentionGrads:
    r"""Gradients of :func:`linear_attention` (see it for the equations) for its four array arguments.

    Parameters
    ----------
    dy : (..., L, d_v) array
        Cotangent of the output `y`: its shape, dtype and namespace; finite.
    cache : LinearAttentionCache
        From :func:`linear_attention_fwd`.

    Returns
    -------
    LinearAttentionGrads
        ``phi_q: (..., L, m)``, ``phi_k: (..., L, m)``, ``v: (..., L, d_v)``, and ``k_log_scale`` of the shape
        of the `k_log_scale` given (``(..., L)`` or ``(..., L, m)``), or ``None`` when none was given. Same
        namespace and dtype as the inputs.

    Raises
    ------
    ValueError
        If `dy` is not of the output's shape or is not finite.
    TypeError
        If `dy` differs from the cache in namespace or dtype.
    """
    return linear_attention_bwd_core(dy, cache, xp=check_dy(dy, cache))


def check_dy(dy, cache):
    """The checks of :func:`linear_attention_bwd` on its cotangent (also FAVOR's); returns the namespace."""
    xp = namespace(dy, cache.phi_q, names=("dy", "cache.phi_q"))
    check_finite("dy", dy, xp=xp)
    check_shape("dy", dy, "..., L, d_v", check_shape("y", cache.y, "..., L, d_v"))
    return xp


# numer_aug = phi_q (phi_k^T [v, 1]), or its prefix sums by chunks (module docstring); scales relative to M
# y = numer_aug[..., :d_v] / z,  z = numer_aug[..., d_v]                                    (FLT Eq. (2))
def linear_attention_fwd_core(phi_q, phi_k, v, causal, s, chunk_size, on_nonpositive, *, xp, inputs,
                              keep=True):
    """Unchecked core of :func:`linear_attention_fwd` (see :func:`linear_attention`).

    Its only checks are on its result (the normaliser and the output, one reduction each); after a failure the
    arrays of `inputs` (``{name: array}`` of the public call) are searched for the non-finite one.
    ``keep=False`` (inference, :func:`linear_attention`): the causal scan keeps no states for the backward
    (its cache still serves :func:`linear_attention_bwd`, which then recomputes them in two sweeps).
    """
    d_v = v.shape[-1]
    v_aug = augment(v, xp=xp)                                                    # (..., L, d_v + 1)
    states = stride = None
    if not causal:
        if s is None:
            M, u = None, v_aug
        else:
            M = (xp.max(s, axis=-1, keepdims=True) if s.shape[-1]                 # (..., 1) global max
                 else xp.zeros((*s.shape[:-1], 1), dtype=s.dtype, device=device_of(s)))   # (no keys: 0)
            u = xp.expand_dims(xp.exp(s - M), axis=-1) * v_aug                    # (..., L, d_v + 1) w v_aug
        kv = contract_rows(phi_k, u)                                              # (..., m, d_v + 1)
        numer = phi_q @ kv                                                        # (..., L, d_v + 1)
    else:
        kv = None
        if s is not None and s.ndim == phi_k.ndim:                                # per-feature frames
            stride = state_stride(chunk_size, v_aug.shape[-1]) if keep else None  # every backend keeps them
            impl = _dispatch.implementation("linear_attention.causal_frames_fwd")
            (numer, states), M = impl(phi_q, phi_k, v_aug, s, chunk_size, stride), None
        else:
            kernel = _dispatch.kernel_for("linear_attention.causal_fwd")
            if kernel is not None:                                                # an accel kernel: no states
                numer, M = kernel(phi_q, phi_k, v_aug, s, chunk_size)
            elif not keep:
                numer, M, _ = causal_fwd_states(phi_q, phi_k, v_aug, s, chunk_size, None)
            else:  # keep states for the backward
                stride = state_stride(chunk_size, v_aug.shape[-1])
                numer, M, states = causal_fwd_states(phi_q, phi_k, v_aug, s, chunk_size, stride)
    z = numer[..., d_v:]                                                          # (..., L, 1)
    check_normaliser(z, on_nonpositive, xp=xp, inputs=inputs)
    y = numer[..., :d_v] / z                                                      # (..., L, d_v)
    if not bool(xp.all(xp.isfinite(y))):
        name_nonfinite(xp, **inputs)
    return y, LinearAttentionCache(phi_q, phi_k, v_aug, s, M, kv, z, y, causal, chunk_size, states, stride)


# g = [dy / z, -sum(dy * y) / z]:  dphi_q = g S^T,  dS = phi_q^T g,  dphi_k = [v, 1] dS^T,  dv_aug = phi_k dS
# (S = phi_k^T [v, 1], or its prefix sums; times exp(s - M) with scales);  ds_j = v_aug_j . dv_aug_j
def linear_attention_bwd_core(dy, cache, *, xp, frame_grad=True, log_features=False):
    """Unchecked core of :func:`linear_attention_bwd` (see :func:`linear_attention`).

    For FAVOR+'s gauge backward, which holds the frames fixed: ``frame_grad=False`` gives frames no cotangent
    (``k_log_scale=None``, two (L, m) passes saved); ``log_features=True`` returns the cotangents of ``log
    phi`` (``dphi * phi``) in the ``phi_q`` and ``phi_k`` fields, formed chunk by chunk by the causal frames
    primitive.
    """
    c = cache
    d_v = dy.shape[-1]
    dz = -xp.sum(dy * c.y, axis=-1, keepdims=True)                                # (..., L, 1) numer = y z
    g = xp.concat([dy, dz], axis=-1) / c.z                                        # (..., L, d_v + 1)
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
    elif s is not None and s.ndim == c.phi_k.ndim:                                # per-feature frames
        impl = _dispatch.implementation("linear_attention.causal_frames_bwd")    # from kept states, if any
        dphi_q, dphi_k, dv_aug = impl(g, c.phi_q, c.phi_k, c.v_aug, s, c.chunk_size, c.states, c.stride,
                                      log_features=log_features)
        if not frame_grad:
            ds = None
        else:                                                                     # (..., L, m)
            ds = dphi_k - dphi_q if log_features else c.phi_k * dphi_k - c.phi_q * dphi_q
        return LinearAttentionGrads(phi_q=dphi_q, phi_k=dphi_k, v=dv_aug[..., :d_v], k_log_scale=ds)
    else:
        kernel = _dispatch.kernel_for("linear_attention.causal_bwd")
        if kernel is None and c.states is not None:                               # one reverse sweep
            dphi_q, dphi_k, dv_aug = causal_bwd_stored(g, c.phi_q, c.phi_k, c.v_aug, s, c.M, c.chunk_size,
                                                        c.states, c.stride)
        else:
            impl = kernel or _dispatch.reference("linear_attention.causal_bwd")
            dphi_q, dphi_k, dv_aug = impl(g, c.phi_q, c.phi_k, c.v_aug, s, c.M, c.chunk_size)
    ds = None if s is None else xp.sum(c.v_aug * dv_aug, axis=-1)                 # (..., L)
    if log_features and not c.causal:                                             # fresh GEMM outputs
        dphi_q *= c.phi_q
        dphi_k *= c.phi_k
    elif log_features:
        dphi_q, dphi_k = dphi_q * c.phi_q, dphi_k * c.phi_k
    return LinearAttentionGrads(phi_q=dphi_q, phi_k=dphi_k, v=dv_aug[..., :d_v], k_log_scale=ds)


def linear_attention_step(state, phi_q_t, phi_k_t, v_t, k_log_scale_t=None, *, on_nonpositive="raise"):
    r"""One step of causal linear attention in recurrent form: the readable reference of the chunked scan.

    ``S_t = S_{t-1} + exp(s_t) phi_k_t^T v_t``, ``z_t = z_{t-1} + exp(s_t) phi_k_t``,
    ``out_t = phi_q_t S_t / phi_q_t z_t``, carried relative to the running maximum M of the log-scales (or in
    the per-feature frame of step t): row t of ``linear_attention(..., causal=True)``, one position at a time
    (the module docstring derives the chunked form from this recurrence).

    Parameters
    ----------
    state : LinearAttentionState or None
        ``None`` before the first step; else the state returned by the previous step (``S: (..., m, d_v)``,
        ``z: (..., m)``, ``M: (...)`` or ``(..., m)``), same namespace and dtype.
    phi_q_t : (..., m) array
        Query features of step t. Real floating.
    phi_k_t : (..., m) array
        Key features of step t; same batch axes, dtype and namespace as `phi_q_t`.
    v_t : (..., d_v) array
        Value of step t; finite.
    k_log_scale_t : (...) or (..., m) array, optional
        Row log-scale of this key (0 when omitted), or its per-feature frame (the prefix maximum at step t, as
        ``k_log_scale[..., t, :]`` of the causal call; ``phi_q_t`` then in the reciprocal frame). Use one form
        for every step.
    on_nonpositive : {"raise", "ignore"}
        Raise on a non-positive normaliser (with the count and the minimum), or return the output as computed.

    Returns
    -------
    out_t : (..., d_v) array
        Output at step t; same namespace and dtype as `phi_q_t`.
    state : LinearAttentionState
        The state after step t, to pass to the next step.

    Raises
    ------
    ValueError
        Mismatched shapes (inputs or `state`), non-finite `v_t`, `k_log_scale_t` or state (``state.M`` may be
        ``-inf``), or a non-finite or (with ``on_nonpositive="raise"``) non-positive normaliser.
    TypeError
        Mixed namespaces or dtypes.

    Examples
    --------
    Stepping through the sequence gives the rows of the causal call:

    >>> import numpy as np
    >>> from refattn.attention import linear_attention, linear_attention_step
    >>> from refattn.features import elu_features
    >>> phi = elu_features(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))   # (L, m) = (3, 2)
    >>> v = np.array([[1.0], [2.0], [3.0]])
    >>> state, outs = None, []
    >>> for t in range(3):
    ...     out_t, state = linear_attention_step(state, phi[t], phi[t], v[t])
    ...     outs.append(out_t)
    >>> np.stack(outs).round(4)
    array([[1.    ],
           [1.5556],
           [2.1   ]])
    >>> bool(np.allclose(np.stack(outs), linear_attention(phi, phi, v, causal=True)))
    True
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
    frames = k_log_scale_t.ndim == phi_k_t.ndim                                   # per-feature frame (..., m)
    check_shape("k_log_scale_t", k_log_scale_t, "..., m" if frames else "...", sizes)
    check_finite("k_log_scale_t", k_log_scale_t, xp=xp)
    check_finite("v_t", v_t, xp=xp)  # the normaliser check below sees phi_q_t and phi_k_t, not v_t
    m, d_v = phi_q_t.shape[-1], v_t.shape[-1]
    if state is None:
        state = LinearAttentionState(
            S=xp.zeros(batch + (m, d_v), dtype=phi_q_t.dtype, device=dev),
            z=xp.zeros(batch + (m,), dtype=phi_q_t.dtype, device=dev),
            M=xp.full(batch + ((m,) if frames else ()), -float("inf"), dtype=phi_q_t.dtype, device=dev),
        )
    else:
        namespace(state.S, phi_q_t, names=("state.S", "phi_q_t"))
        check_shape("state.S", state.S, "..., m, d_v", sizes)
        check_shape("state.z", state.z, "..., m", sizes)
        check_shape("state.M", state.M, "..., m" if frames else "...", sizes)
        check_finite("state.S", state.S, xp=xp)
        check_finite("state.z", state.z, xp=xp)
        if bool(xp.any(xp.isnan(state.M) | (state.M == float("inf")))):
            raise ValueError("state.M: expected finite values or -inf (an empty prefix); got NaN or +inf")
    if frames:
        # the frame of step t is at least every earlier one (prefix maxima); phi_k_t is in it already
        decay = xp.exp(state.M - k_log_scale_t)                                   # (..., m) <= 1
        S = xp.expand_dims(decay, axis=-1) * state.S + (
            xp.expand_dims(phi_k_t, axis=-1) * xp.expand_dims(v_t, axis=-2))      # (..., m, d_v)
        z = decay * state.z + phi_k_t                                             # (..., m)
        M_new = k_log_scale_t
    else:
        M_new = xp.maximum(state.M, k_log_scale_t)                                # (...)
        decay = xp.exp(state.M - M_new)                                           # (...) <= 1
        w = xp.exp(k_log_scale_t - M_new)                                         # (...) <= 1
        S = bcast2(decay, xp=xp) * state.S + bcast2(w, xp=xp) * (
            xp.expand_dims(phi_k_t, axis=-1) * xp.expand_dims(v_t, axis=-2))      # (..., m, d_v)
        z = xp.expand_dims(decay, axis=-1) * state.z + xp.expand_dims(w, axis=-1) * phi_k_t   # (..., m)
    numer = xp.squeeze(xp.expand_dims(phi_q_t, axis=-2) @ S, axis=-2)             # (..., d_v)
    denom = xp.sum(phi_q_t * z, axis=-1, keepdims=True)                           # (..., 1)
    check_normaliser(denom, on_nonpositive, xp=xp,
                     inputs={"phi_q_t": phi_q_t, "phi_k_t": phi_k_t, "v_t": v_t})
    return numer / denom, LinearAttentionState(S=S, z=z, M=M_new)
