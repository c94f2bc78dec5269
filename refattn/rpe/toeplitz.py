r"""Exact 1-D relative positional encoding for kernelized attention by FFT Toeplitz products.

An RPE mask N(i - j) enters softmax attention additively, ``softmax(N + q k^T / sqrt(d))``, i.e. it multiplies
the kernel by ``exp(N(i - j))``. With features whose inner products give (or estimate) the kernel, the
attention matrix becomes ``C * (phi_q phi_k^T)`` with the Toeplitz matrix ``C_ij = c(i - j)`` (Luo et al.
2021; FLT Eq. (2) with the mask exponentiated). Writing ``U_j = phi_k_j^T [v_j, 1]`` (one channel per pair
(feature a, value column e)),

    numer_i = sum_a phi_q_ia  sum_j c(i - j) U_j,ae     (last column e = d_v: the normaliser z_i)
    y_i     = numer_i[:d_v] / z_i

and ``sum_j c(i - j) U_j`` is a convolution along the sequence for each of the ``m (d_v + 1)`` channels: a
real FFT of size N >= 2L - 1 gives it in O(m d_v L log L) instead of O(L^2 (m + d_v)).

Coefficient layout: ``coeffs[..., i - j + L - 1] = c(i - j)`` for i - j in
[-(L - 1), L - 1], so ``coeffs`` has 2L - 1 entries; ``coeffs = exp(N)`` for a mask N. In causal mode the
entries with i - j < 0 (``coeffs[..., :L - 1]``) are ignored (treated as 0) and get zero gradient.

**Two implementations, one result.**

* *NumPy/SciPy fast path* (NumPy arrays; the NumPy-only edge module
  ``refattn/rpe/_toeplitz_numpy.py``): ``scipy.fft.rfft``/``irfft`` along the contiguous last axis of a
  ``(ca, d_v + 1, N)`` block (``ca`` features of one head and all their value columns in one call, the
  sequence zero-padded in place), N = ``scipy.fft.next_fast_len(2L - 1, real=True)``; ``workers`` threads,
  spread over the heads when there are several (else inside the FFTs).
* *Array-API path* (every other namespace: array_api_strict, CuPy, ...): ``xp.fft.rfft``/``irfft`` along the
  sequence axis of ``(..., L, ca, d_v + 1)`` blocks, N the next power of two.

**Memory bound.** Channels are processed in chunks of ``ca`` features (all ``d_v + 1`` value columns of each).
NumPy path: one head at a time, ``ca`` the largest value with ``N ca (d_v + 1) <= chunk_elements`` (at least
1); about 3 temporaries of ``N ca (d_v + 1)`` real/complex entries (default ``chunk_elements = 2**21``: 8 MiB
in float32 for the real block, 16 MiB for its spectrum). Array-API path: the chunk spans the batch,
``B N ca (d_v + 1) <= chunk_elements`` (B = product of the leading axes). Either way the extra memory is
``O(max(chunk_elements, B N (d_v + 1)) + B L (m + d_v))`` and the full ``(..., N, m, d_v + 1)`` spectrum is
never formed unless it fits in one chunk.

**Crossover.** The FFT path costs ~``5 B m (d_v + 1) N log2 N`` flops against ``2 B L^2 (m + d_v)`` for the
dense path (:func:`toeplitz_attention_dense`); ``benchmarks/rpe.py`` measures the L where it starts to win
(BENCHMARKS.md, Toeplitz section).

**Causality and rounding.** In causal mode the FFT still mixes every position in floating point: the output
for a prefix changes at the rounding level (~eps times the size of the whole sum) when later tokens change.
Use the dense path or chunked linear attention where bitwise prefix stability matters.

Axes: ``...`` batch and heads, ``L`` positions, ``m`` feature width, ``d_v`` value width, ``e = d_v + 1``,
``N`` FFT size, ``F = N // 2 + 1`` frequencies.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import array_api_compat

from .. import limits
from .._xp import (
    check_choice,
    check_finite,
    check_positive_int,
    check_shape,
    device_of,
    namespace,
    sum_to_shape,
)
from .._docs import fill_doc
from ..attention.normaliser import augment, check_normaliser
from . import _toeplitz_numpy as _np_path

__all__ = [
    "toeplitz_attention",
    "toeplitz_attention_fwd",
    "toeplitz_attention_bwd",
    "toeplitz_attention_dense",
    "toeplitz_matrix",
    "ToeplitzAttentionCache",
    "ToeplitzAttentionGrads",
]

Array = Any

#: Entries of one chunk's temporaries (see the module docstring); 2**21 float32 = 8 MiB.
DEFAULT_CHUNK_ELEMENTS = 2**21


class ToeplitzAttentionCache(NamedTuple):
    r"""Cache of :func:`toeplitz_attention_fwd` for :func:`toeplitz_attention_bwd` (fields in the source)."""

    phi_q: Array        # (..., L, m)
    phi_k: Array        # (..., L, m)
    v_aug: Array        # (..., L, d_v + 1)  [v, 1]
    coeffs: Array       # (*c, 2L - 1) as given (broadcastable to (..., 2L - 1))
    h_hat: Array        # (*c, N // 2 + 1) complex: spectrum of the wrapped (causally masked) kernel
    z: Array            # (..., L, 1)  normaliser
    y: Array            # (..., L, d_v)
    causal: bool
    n_fft: int
    chunk: int          # features per chunk (ca)
    workers: int | None  # SciPy FFT threads (NumPy path)


class ToeplitzAttentionGrads(NamedTuple):
    r"""Gradients from :func:`toeplitz_attention_bwd`: ``phi_q``, ``phi_k``, ``v`` and ``coeffs``."""

    phi_q: Array   # (..., L, m)
    phi_k: Array   # (..., L, m)
    v: Array       # (..., L, d_v)
    coeffs: Array  # same shape as coeffs


def _next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _causal_coeffs(coeffs, L, *, xp):
    """Zero the entries with i - j < 0 (the first L - 1)."""
    n = xp.arange(2 * L - 1, device=device_of(coeffs))
    return xp.where(n >= L - 1, coeffs, xp.zeros_like(coeffs))                     # (*c, 2L - 1)


def _wrapped_kernel(coeffs, L, n_fft, *, xp):
    """h[t mod N] = c(t) for t in [-(L-1), L-1], zero elsewhere: ``[c(0..L-1), 0..., c(-(L-1)..-1)]``."""
    pad = xp.zeros(tuple(coeffs.shape[:-1]) + (n_fft - (2 * L - 1),), dtype=coeffs.dtype,
                   device=device_of(coeffs))
    return xp.concat([coeffs[..., L - 1:], pad, coeffs[..., :L - 1]], axis=-1)    # (*c, N)


def _validate(phi_q, phi_k, v, coeffs, causal, chunk_elements, on_nonpositive, workers=None):
    xp = namespace(phi_q, phi_k, v, coeffs, names=("phi_q", "phi_k", "v", "coeffs"))
    sizes = check_shape("phi_q", phi_q, "..., L, m")
    check_shape("phi_k", phi_k, "..., L, m", sizes)
    check_shape("v", v, "..., L, d_v", sizes)
    L = phi_q.shape[-2]
    batch = tuple(phi_q.shape[:-2])
    if L < 1 or phi_q.shape[-1] < 1:
        raise ValueError(f"phi_q: expected shape (..., L, m) with L >= 1 positions (coeffs has 2L - 1 "
                         f"entries) and m >= 1 features (with none every normaliser is 0); "
                         f"got {tuple(phi_q.shape)}")
    if coeffs.ndim < 1 or coeffs.shape[-1] != 2 * L - 1:
        raise ValueError(f"coeffs: expected shape (..., 2L - 1) = (..., {2 * L - 1}) with L = {L} "
                         f"(from phi_q); got {tuple(coeffs.shape)}")
    cb = tuple(coeffs.shape[:-1])
    if len(cb) > len(batch) or any(c not in (1, b) for c, b in zip(cb[::-1], batch[::-1], strict=False)):
        raise ValueError(f"coeffs: leading axes {cb} must broadcast to the batch axes {batch} of phi_q "
                         f"(shape (..., 2L - 1)); got {tuple(coeffs.shape)}")
    for name, a in (("phi_q", phi_q), ("phi_k", phi_k), ("v", v), ("coeffs", coeffs)):
        check_finite(name, a, xp=xp)
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool; got {causal!r}")
    chunk_elements = check_positive_int(chunk_elements, "chunk_elements")
    check_choice(on_nonpositive, "on_nonpositive", ("raise", "ignore"))
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers == 0):
        raise ValueError(f"workers: expected None or a nonzero int (SciPy's convention: negative counts "
                         f"from the number of CPUs); got {workers!r}")
    return xp, chunk_elements


# ----------------------------------------------------------------------------------------------------------
# array-API path: xp.fft along the sequence axis of (..., L, ca, e) blocks


def _chunk_features_batched(batch, n_fft, m, e, chunk_elements):
    b = math.prod(batch)
    return max(1, min(m, chunk_elements // max(1, b * n_fft * e)))


def _numer_generic(phi_q, phi_k, v_aug, h_hat, n_fft, ca, *, xp):
    """``numer = [sum_j c(i - j) (phi_q_i . phi_k_j) v_aug_j]_i``: ``(..., L, e)`` (array-API namespaces)."""
    L, m, e = phi_q.shape[-2], phi_q.shape[-1], v_aug.shape[-1]
    hh = xp.reshape(h_hat, tuple(h_hat.shape) + (1, 1))                            # (*c, F, 1, 1)
    numer = xp.zeros(tuple(phi_q.shape[:-2]) + (L, e), dtype=v_aug.dtype, device=device_of(v_aug))
    for a0 in range(0, m, ca):
        a1 = min(m, a0 + ca)
        U = xp.expand_dims(phi_k[..., a0:a1], axis=-1) * xp.expand_dims(v_aug, axis=-2)  # (..., L, ca, e)
        # (., L, ca, e)
        T = xp.fft.irfft(xp.fft.rfft(U, n=n_fft, axis=-3) * hh, n=n_fft, axis=-3)[..., :L, :, :]
        numer = numer + xp.sum(xp.expand_dims(phi_q[..., a0:a1], axis=-1) * T, axis=-2)  # (..., L, e)
    return numer


def _grads_generic(g, c, *, xp):
    """``(dphi_q, dphi_k, dv_aug, corr_hat)`` for the cotangent ``g: (..., L, e)`` of numer (array-API)."""
    L, m, N = c.phi_q.shape[-2], c.phi_q.shape[-1], c.n_fft
    hh = xp.reshape(c.h_hat, tuple(c.h_hat.shape) + (1, 1))                        # (*c, F, 1, 1)
    dq_parts, dk_parts = [], []
    dv_aug = xp.zeros_like(c.v_aug)                                                # (..., L, e)
    corr_hat = None                                                                # (..., F) complex
    for a0 in range(0, m, c.chunk):
        a1 = min(m, a0 + c.chunk)
        pk = xp.expand_dims(c.phi_k[..., a0:a1], axis=-1)                          # (..., L, ca, 1)
        U = pk * xp.expand_dims(c.v_aug, axis=-2)                                  # (..., L, ca, e)
        U_hat = xp.fft.rfft(U, n=N, axis=-3)                                       # (..., F, ca, e)
        T = xp.fft.irfft(U_hat * hh, n=N, axis=-3)[..., :L, :, :]                 # (..., L, ca, e) recomputed
        dq_parts.append(xp.sum(T * xp.expand_dims(g, axis=-2), axis=-1))           # (..., L, ca)
        dT = xp.expand_dims(c.phi_q[..., a0:a1], axis=-1) * xp.expand_dims(g, axis=-2)  # (..., L, ca, e)
        dT_hat = xp.fft.rfft(dT, n=N, axis=-3)                                     # (..., F, ca, e)
        dU = xp.fft.irfft(dT_hat * xp.conj(hh), n=N, axis=-3)[..., :L, :, :]       # (..., L, ca, e) C^T dT
        dk_parts.append(xp.sum(dU * xp.expand_dims(c.v_aug, axis=-2), axis=-1))    # (..., L, ca)
        dv_aug = dv_aug + xp.sum(dU * pk, axis=-2)                                 # (..., L, e)
        part = xp.sum(xp.sum(dT_hat * xp.conj(U_hat), axis=-1), axis=-1)           # (..., F)
        corr_hat = part if corr_hat is None else corr_hat + part
    cat = dq_parts[0] if len(dq_parts) == 1 else xp.concat(dq_parts, axis=-1)      # (..., L, m)
    cat_k = dk_parts[0] if len(dk_parts) == 1 else xp.concat(dk_parts, axis=-1)    # (..., L, m)
    return cat, cat_k, dv_aug, corr_hat


# ----------------------------------------------------------------------------------------------------------
# the pair

_Y = """
y : (..., L, d_v) array
    Dtype and namespace of `phi_q`.
"""
_ARRAYS = r"""
phi_q : (..., L, m) array
    Query features, real floating (float64 reference, float32 supported); L >= 1, m >= 1.
phi_k : (..., L, m) array
    Key features, same dtype and namespace as `phi_q`.
v : (..., L, d_v) array
    Values.
coeffs : (\*c, 2L - 1) array
    Multiplicative coefficients, ``coeffs[..., i - j + L - 1] = c(i - j)`` multiplies ``phi_q_i . phi_k_j``;
    the leading axes ``*c`` broadcast to ``...`` (e.g. ``(2L - 1,)`` shared, or ``(H, 1, 2L - 1)`` per head).
causal : bool
    Only j <= i (``coeffs[..., :L - 1]`` is then unused).
"""

_KNOBS = """
chunk_elements : int
    Memory knob: entries of one chunk's temporaries (see the module docstring for the bound).
on_nonpositive : {"raise", "ignore"}
    What to do with a non-positive normaliser.
workers : int or None
    Threads on the NumPy path (None: SciPy's default, 1 unless set by ``scipy.fft.set_workers``; negative:
    counted back from the number of CPUs): over the heads (flattened batch) when there are several, else
    inside ``scipy.fft``. The result does not depend on it. Ignored by other namespaces.
"""

_RAISES = """
ValueError
    L = 0 or m = 0, `coeffs` not ``(..., 2L - 1)`` or not broadcasting, non-finite input, a bad
    `chunk_elements`/`workers`, or (``on_nonpositive="raise"``) a non-positive normaliser.
TypeError
    Mixed dtypes or namespaces, or a non-bool `causal`.
"""


@fill_doc(y=_Y, arrays=_ARRAYS, knobs=_KNOBS, raises=_RAISES)
def toeplitz_attention(phi_q, phi_k, v, coeffs, *, causal=False, chunk_elements=DEFAULT_CHUNK_ELEMENTS,
                       on_nonpositive="raise", workers=None):
    r"""Kernelized attention with the multiplicative Toeplitz RPE ``c(i - j)``, by FFT in O(m d_v L log L).

    ``y_i = sum_j c(i - j) (phi_q_i . phi_k_j) v_j / sum_j c(i - j) (phi_q_i . phi_k_j)``, sums over all j
    (bidirectional) or j <= i (causal); ``c(t) = coeffs[..., t + L - 1]`` (= exp(N(t)) for a Toeplitz mask
    ``N_ij = f(i - j)``, FLT Definition 3.1; Luo et al. 2021). The module docstring derives the FFT form.

    Backward (:func:`toeplitz_attention_bwd`): with ``g = [dy / z, -sum(dy * y) / z]`` (cotangent of
    ``numer``) and ``dT_i = phi_q_i^T g_i`` per channel, ``dphi_q_ia = sum_e g_ie T_iae`` (T recomputed),
    ``dU = C^T dT`` (the adjoint Toeplitz product: the conjugate spectrum), ``dphi_k_ja = sum_e dU_jae
    v_aug_je``, ``dv_aug_je = sum_a dU_jae phi_k_ja``, and ``dc(t) = sum_{i - j = t} sum_ae dT_iae U_jae``, a
    cross-correlation summed over channels in the frequency domain (``sum_ch FFT(dT) conj(FFT(U))``); zero
    for t < 0 in causal mode.

    Parameters
    ----------
    {arrays}
    {knobs}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe import toeplitz_attention, toeplitz_attention_dense
    >>> rng = np.random.default_rng(0)
    >>> phi_q, phi_k = np.exp(0.3 * rng.standard_normal((2, 2, 5, 8)))   # positive features (..., L, m)
    >>> v = rng.standard_normal((2, 5, 3))
    >>> coeffs = np.exp(-0.5 * np.abs(np.arange(-4, 5.0)))              # c(t) = exp(-|t|/2), 2L - 1 entries
    >>> y = toeplitz_attention(phi_q, phi_k, v, coeffs)
    >>> y.shape
    (2, 5, 3)
    >>> bool(np.allclose(y, toeplitz_attention_dense(phi_q, phi_k, v, coeffs)))
    True
    """
    return toeplitz_attention_fwd(phi_q, phi_k, v, coeffs, causal=causal, chunk_elements=chunk_elements,
                                  on_nonpositive=on_nonpositive, workers=workers)[0]


@fill_doc(y=_Y, arrays=_ARRAYS, knobs=_KNOBS, raises=_RAISES)
def toeplitz_attention_fwd(phi_q, phi_k, v, coeffs, *, causal=False, chunk_elements=DEFAULT_CHUNK_ELEMENTS,
                           on_nonpositive="raise", workers=None):
    r"""Forward of :func:`toeplitz_attention` with the cache for :func:`toeplitz_attention_bwd`.

    See :func:`toeplitz_attention` for the equations and shapes.

    Parameters
    ----------
    {arrays}
    {knobs}

    Returns
    -------
    {y}
    cache : ToeplitzAttentionCache
        For :func:`toeplitz_attention_bwd`.

    Raises
    ------
    {raises}
    """
    xp, chunk_elements = _validate(phi_q, phi_k, v, coeffs, causal, chunk_elements, on_nonpositive, workers)
    return toeplitz_attention_fwd_core(phi_q, phi_k, v, coeffs, causal=causal, chunk_elements=chunk_elements,
                                       on_nonpositive=on_nonpositive, workers=workers, xp=xp)


def toeplitz_attention_bwd(dy, cache: ToeplitzAttentionCache) -> ToeplitzAttentionGrads:
    r"""Backward of :func:`toeplitz_attention_fwd`: gradients of `phi_q`, `phi_k`, `v` and `coeffs`.

    See :func:`toeplitz_attention` for the equations and shapes.

    Parameters
    ----------
    dy : (..., L, d_v) array
        Cotangent of the output, finite, dtype and namespace of the forward.
    cache : ToeplitzAttentionCache
        The cache returned by :func:`toeplitz_attention_fwd`.

    Returns
    -------
    ToeplitzAttentionGrads
        ``phi_q, phi_k: (..., L, m)``, ``v: (..., L, d_v)``, ``coeffs`` of the shape of the coefficients given
        (summed over broadcast axes).

    Raises
    ------
    ValueError
        `dy` not of the output's shape, or not finite.
    """
    xp = namespace(dy, cache.phi_q, names=("dy", "cache.phi_q"))
    check_shape("dy", dy, "..., L, d_v", check_shape("y", cache.y, "..., L, d_v", source="the output y"))
    check_finite("dy", dy, xp=xp)
    return toeplitz_attention_bwd_core(dy, cache, xp=xp)


# numer_i = sum_a phi_q_ia sum_j c(i - j) U_j,ae  (U_j = phi_k_j^T [v_j, 1], FFT convolution);  y = numer / z
# dphi_q = g T,  dU = C^T (phi_q^T g),  dc(t) = sum_{i - j = t} <dT_i, U_j>,  g = [dy, -sum(dy * y)] / z
def toeplitz_attention_fwd_core(phi_q, phi_k, v, coeffs, *, causal, chunk_elements, on_nonpositive, workers,
                                xp):
    """Unchecked core of :func:`toeplitz_attention_fwd` (its result checks stay: normaliser, output)."""
    L, m, d_v = phi_q.shape[-2], phi_q.shape[-1], v.shape[-1]
    e = d_v + 1
    c_eff = _causal_coeffs(coeffs, L, xp=xp) if causal else coeffs                 # (*c, 2L - 1)
    v_aug = augment(v, xp=xp)                                                      # (..., L, e)
    if array_api_compat.is_numpy_array(phi_q):                                     # NumPy/SciPy fast path
        n_fft = _np_path.fast_len(L)
        h_hat = _np_path.kernel_spectrum(_wrapped_kernel(c_eff, L, n_fft, xp=xp))  # (*c, F)
        ca = max(1, min(m, chunk_elements // (n_fft * e)))
        numer = _np_path.numer(phi_q, phi_k, v_aug, h_hat, n_fft, ca, workers)     # (..., L, e)
    else:                                                                          # array-API path
        n_fft = _next_pow2(2 * L - 1)
        h_hat = xp.fft.rfft(_wrapped_kernel(c_eff, L, n_fft, xp=xp), axis=-1)      # (*c, F)
        ca = _chunk_features_batched(tuple(phi_q.shape[:-2]), n_fft, m, e, chunk_elements)
        numer = _numer_generic(phi_q, phi_k, v_aug, h_hat, n_fft, ca, xp=xp)      # (..., L, e)
    z = numer[..., d_v:]                                                           # (..., L, 1)
    check_normaliser(z, on_nonpositive, xp=xp, where="toeplitz_attention",
                     inputs={"phi_q": phi_q, "phi_k": phi_k, "v": v, "coeffs": coeffs})
    y = numer[..., :d_v] / z                                                       # (..., L, d_v)
    return y, ToeplitzAttentionCache(phi_q, phi_k, v_aug, coeffs, h_hat, z, y, causal, n_fft, ca, workers)


def toeplitz_attention_bwd_core(dy, cache, *, xp):
    """Unchecked core of :func:`toeplitz_attention_bwd` (see :func:`toeplitz_attention`)."""
    c = cache
    L, N = c.phi_q.shape[-2], c.n_fft
    d_v = dy.shape[-1]
    dnumer = dy / c.z                                                              # (..., L, d_v)
    dz = -xp.sum(dnumer * c.y, axis=-1, keepdims=True)                             # (..., L, 1)
    g = xp.concat([dnumer, dz], axis=-1)                                           # (..., L, e)
    if array_api_compat.is_numpy_array(c.phi_q):                                   # NumPy/SciPy fast path
        dphi_q, dphi_k, dv_aug, corr_hat = _np_path.grads(g, c)
        r = _np_path.correlation(corr_hat, N, c.workers)                           # (..., N) r_t, t mod N
    else:
        dphi_q, dphi_k, dv_aug, corr_hat = _grads_generic(g, c, xp=xp)
        r = xp.fft.irfft(corr_hat, n=N, axis=-1)                                   # (..., N) r_t, t mod N
    dc = xp.concat([r[..., N - (L - 1):], r[..., :L]], axis=-1)                   # (..., 2L - 1) t = 1-L..L-1
    if c.causal:
        dc = _causal_coeffs(dc, L, xp=xp)
    dcoeffs = sum_to_shape(dc, tuple(c.coeffs.shape), xp=xp)                       # (*c, 2L - 1)
    return ToeplitzAttentionGrads(phi_q=dphi_q, phi_k=dphi_k, v=dv_aug[..., :d_v], coeffs=dcoeffs)


def toeplitz_matrix(coeffs, L):
    r"""The dense Toeplitz matrix ``C_ij = coeffs[..., i - j + L - 1]``.

    ``toeplitz_matrix(N_coeffs, L)`` is also the additive mask ``N`` for ``softmax_attention(mask_add=N)``
    when given the mask values instead of their exponentials.

    Parameters
    ----------
    coeffs : (\*c, 2L - 1) array
        Coefficients ``c(t)`` for t = -(L - 1)..L - 1, real floating, finite.
    L : int
        Number of positions, L >= 1.

    Returns
    -------
    C : (\*c, L, L) array
        Dtype and namespace of `coeffs`.

    Raises
    ------
    ValueError
        `coeffs` not ``(..., 2L - 1)``, or non-finite.
    MemoryError
        The result over :mod:`refattn.limits`' memory bound.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe import toeplitz_matrix
    >>> toeplitz_matrix(np.arange(5.0), 3)       # entry i - j + 2
    array([[2., 1., 0.],
           [3., 2., 1.],
           [4., 3., 2.]])
    """
    xp = namespace(coeffs, names=("coeffs",))
    L = check_positive_int(L, "L")
    check_finite("coeffs", coeffs, xp=xp)
    if coeffs.ndim < 1 or coeffs.shape[-1] != 2 * L - 1:
        raise ValueError(f"coeffs: expected shape (..., 2L - 1) = (..., {2 * L - 1}); "
                         f"got {tuple(coeffs.shape)}")
    nbytes = math.prod(coeffs.shape[:-1]) * L * L * (8 + xp.finfo(coeffs.dtype).bits // 8)  # index + values
    limits.check_nbytes(nbytes, f"toeplitz_matrix(coeffs, L={L})")
    r = xp.arange(L, device=device_of(coeffs))
    idx = xp.reshape(xp.expand_dims(r, axis=1) - xp.expand_dims(r, axis=0) + (L - 1), (L * L,))  # (L L,)
    flat = xp.take(coeffs, idx, axis=-1)                                           # (*c, L L)
    return xp.reshape(flat, tuple(coeffs.shape[:-1]) + (L, L))                     # (*c, L, L)


@fill_doc(arrays=_ARRAYS)
def toeplitz_attention_dense(phi_q, phi_k, v, coeffs, *, causal=False):
    r"""Quadratic reference: ``A = C * (phi_q phi_k^T)`` (lower triangle when causal), ``y = A v / A 1``.

    O(L^2) memory: for tests, benchmarks and short sequences (checked against :mod:`refattn.limits`).

    Parameters
    ----------
    {arrays}

    Returns
    -------
    y : (..., L, d_v) array
        Same value as :func:`toeplitz_attention` to rounding.

    Raises
    ------
    ValueError
        As :func:`toeplitz_attention`.
    MemoryError
        The ``(L, L)`` matrices over :mod:`refattn.limits`' memory bound.
    """
    xp, _ = _validate(phi_q, phi_k, v, coeffs, causal, 1, "ignore")
    L = phi_q.shape[-2]
    B = math.prod(phi_q.shape[:-2])
    limits.check_nbytes(3 * B * L * L * (xp.finfo(phi_q.dtype).bits // 8),
                        f"phi_q (L = {L}, batch {B}): the dense (L, L) path")
    C = toeplitz_matrix(_causal_coeffs(coeffs, L, xp=xp) if causal else coeffs, L)  # (*c, L, L)
    A = C * (phi_q @ xp.matrix_transpose(phi_k))                                   # (..., L, L)
    return (A @ v) / xp.sum(A, axis=-1, keepdims=True)                             # (..., L, d_v)
