r"""FourierLearner-Transformer attention (FLT Algorithm 1): RPE-masked softmax attention in linear time.

Choromanski et al., *Learning a Fourier Transform for Linear Relative Positional Encodings in Transformers*,
Algorithm 1, on the real features ``(N1, N2)`` of :mod:`refattn.rpe.flt` (Theorem 4.1, ``E[N1 N2^T] = N``):

**Algorithm 1** (:func:`flt_attention`): ``Q_hat = [N1, Q d^{-1/4}]``, ``K_hat = [N2, K d^{-1/4}]``, positive
random features of both (FAVOR+, one ``omega: (m, 2r + d)``) and linear attention, estimating
``softmax_attention(Q, K, V, mask_add=N)`` (Eq. 3: ``exp(N_hat + Q K^T / sqrt(d)) = exp(Q_hat K_hat^T)``).
exp(N_hat) is a *biased* estimate of exp(N) at finite r (Jensen), so the estimator converges as both r and m
grow.

Axes: ``...`` batch and heads, ``L`` positions, ``D`` position dimension, ``r`` frequencies (2r real
feature columns), ``d`` head width, ``m`` FAVOR+ projections, ``d_v`` value width.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, check_shape, namespace, sum_to_shape
from ..attention.linear import DEFAULT_CHUNK_SIZE
from ..attention.linear import linear_attention_bwd_core, linear_attention_fwd_core
from ..features.positive import positive_features_stable_bwd_core, positive_features_stable_fwd_core
from .flt import FLTFeaturesCache, flt_features_bwd_core, flt_features_fwd, flt_features_fwd_core
from .spectra import Proposal

__all__ = [
    "flt_attention",
    "flt_attention_fwd",
    "flt_attention_bwd",
    "FLTAttentionCache",
    "FLTAttentionGrads",
]

Array = Any


# shared docstring blocks (numpydoc entries filled in by fill_doc)

_ATTENTION_QKV = """
q : (..., L, d) array
    Queries, real floating (float64 reference, float32 supported); L >= 1, d >= 1.
k : (..., L, d) array
    Keys, same dtype and namespace as `q`.
v : (..., L, d_v) array
    Values.
pos : (L, D) or (..., L, D) array
    Positions (shared by every leading axis of `q` when 2-D; integers or floats).
eps : (r, D) array
    Proposal noise (:func:`refattn.random.draw_flt_noise`).
spectrum : spectrum NamedTuple
    The learnable g, as in :func:`~refattn.rpe.flt.flt_features`.
proposal : Proposal
    Location-scale proposal, as in :func:`~refattn.rpe.flt.flt_features`.
"""
_ATTENTION_OPTIONS = """
omega : (m, 2r + d) array
    FAVOR+ projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal`` with width 2r + d).
causal : bool
    Position i attends to j <= i only.
allow_truncation : bool
    Accept a truncated ('uniform') proposal.
chunk_size : int
    Causal chunk length of :func:`~refattn.attention.linear.linear_attention`.
"""
_Y = """
y : (..., L, d_v) array
    Dtype and namespace of `q`.
"""
_ATTENTION_RAISES = """
ValueError
    L = 0 or d = 0, `pos` without L rows or not broadcasting, `omega` not ``(m, 2r + d)``, non-finite input,
    or any error of :func:`~refattn.rpe.flt.flt_features_fwd`.
TypeError
    Mixed dtypes or namespaces, or a non-bool `causal`.
"""


class FLTAttentionCache(NamedTuple):
    r"""Cache of :func:`flt_attention_fwd` for :func:`flt_attention_bwd` (fields commented in the source)."""

    fcache: FLTFeaturesCache
    qcache: Any          # PositiveFeaturesCache of Q_hat
    kcache: Any          # PositiveFeaturesCache of K_hat
    lcache: Any          # LinearAttentionCache
    n1_shape: tuple      # shape of N1 before broadcasting to q's batch axes
    two_r: int
    d_scale: float       # d^{-1/4}


class FLTAttentionGrads(NamedTuple):
    r"""Gradients from :func:`flt_attention_bwd` (``pos`` and ``eps`` are always None)."""

    q: Array             # (..., L, d)
    k: Array             # (..., L, d)
    v: Array             # (..., L, d_v)
    pos: None
    eps: None
    spectrum: Any
    proposal: Proposal
    omega: Array         # (m, 2r + d)


@fill_doc(y=_Y, qkv=_ATTENTION_QKV, options=_ATTENTION_OPTIONS, raises=_ATTENTION_RAISES)
def flt_attention(q, k, v, pos, eps, spectrum, proposal, omega, *, causal=False, allow_truncation=False,
                  chunk_size=DEFAULT_CHUNK_SIZE):
    r"""FourierLearner-Transformer attention (FLT Algorithm 1): RPE-masked softmax attention in linear time.

    Estimates ``softmax_attention(q, k, v, mask_add=N, causal=causal)`` with ``N = rpe_mask(pos, spectrum)``
    in O(L m (d + r)) time: ``Q_hat = [N1, q d^{-1/4}]``, ``K_hat = [N2, k d^{-1/4}]`` (Algorithm 1 lines
    3-5; 2r + d columns in the real form; Eq. (3): ``exp(N_hat + q k^T / sqrt(d)) = exp(Q_hat K_hat^T)``),
    FAVOR+ positive features of both with one ``omega`` (line 7; row-stabilised, the keys' log-scale handed
    to linear attention) and linear attention (line 9), bidirectional or causal. The backward
    (:func:`flt_attention_bwd`) runs linear attention's backward, both positive-feature backwards, then
    :func:`~refattn.rpe.flt.flt_features_bwd` on the positional columns (summed back to the axes of `pos`).

    Parameters
    ----------
    {qkv}
    {options}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.random import draw_flt_noise, draw_gaussian
    >>> from refattn.rpe import GaussianKernel, kernel_proposal, flt_attention
    >>> q, k, v = np.random.default_rng(0).standard_normal((3, 2, 5, 4))    # (batch, L, d)
    >>> spectrum = GaussianKernel(C=np.asarray(1.0), length=np.asarray(2.0))
    >>> proposal = kernel_proposal(spectrum, 1)
    >>> eps = draw_flt_noise(np.random.default_rng(1), 16, 1)                # r = 16, D = 1
    >>> omega = draw_gaussian(np.random.default_rng(2), 64, 2 * 16 + 4)      # (m, 2r + d)
    >>> y = flt_attention(q, k, v, np.arange(5.0)[:, None], eps, spectrum, proposal, omega)
    >>> y.shape
    (2, 5, 4)
    """
    return _flt_attention_checked(q, k, v, pos, eps, spectrum, proposal, omega, causal, allow_truncation,
                                  chunk_size, keep=False)[0]                   # inference: nothing kept


@fill_doc(y=_Y, qkv=_ATTENTION_QKV, options=_ATTENTION_OPTIONS, raises=_ATTENTION_RAISES)
def flt_attention_fwd(q, k, v, pos, eps, spectrum, proposal, omega, *, causal=False, allow_truncation=False,
                      chunk_size=DEFAULT_CHUNK_SIZE):
    r"""Forward of :func:`flt_attention` with the cache for :func:`flt_attention_bwd`.

    See :func:`flt_attention` for the equations and shapes.

    Parameters
    ----------
    {qkv}
    {options}

    Returns
    -------
    {y}
    cache : FLTAttentionCache
        For :func:`flt_attention_bwd`.

    Raises
    ------
    {raises}
    """
    return _flt_attention_checked(q, k, v, pos, eps, spectrum, proposal, omega, causal, allow_truncation,
                                  chunk_size, keep=True)


def _flt_attention_checked(q, k, v, pos, eps, spectrum, proposal, omega, causal, allow_truncation,
                           chunk_size, *, keep):
    """:func:`flt_attention_fwd`; ``keep=False`` (:func:`flt_attention`): no causal states kept."""
    xp = namespace(q, k, v, omega, names=("q", "k", "v", "omega"))
    sizes = check_shape("q", q, "..., L, d")
    check_shape("k", k, "..., L, d", sizes)
    check_shape("v", v, "..., L, d_v", sizes)
    if q.shape[-2] < 1 or q.shape[-1] < 1:
        raise ValueError(f"q: expected shape (..., L, d) with L >= 1 and d >= 1 (the scale is d^(-1/4)); "
                         f"got {tuple(q.shape)}")
    check_finite("q", q, xp=xp)                                                   # before the concatenation
    check_finite("k", k, xp=xp)                                                   # hides their names
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool; got {causal!r}")
    if pos.ndim < 2 or pos.shape[-2] != q.shape[-2]:
        raise ValueError(f"pos: expected shape (L, D) or (..., L, D) with L = {q.shape[-2]} (from q); "
                         f"got {tuple(pos.shape)}")
    (N1, N2), fcache = flt_features_fwd(pos, eps, spectrum, proposal, allow_truncation=allow_truncation)
    two_r, d = N1.shape[-1], q.shape[-1]
    check_shape("omega", omega, f"m, {two_r + d}")
    if omega.shape[0] < 1:
        raise ValueError(f"omega: expected at least one projection row, shape (m, d) with m >= 1; "
                         f"got {tuple(omega.shape)}")
    check_finite("omega", omega, xp=xp)
    return _attention_from_features(q, k, v, pos, N1, N2, fcache, omega, causal, chunk_size, xp=xp,
                                    inputs={"q": q, "k": k, "v": v, "omega": omega}, keep=keep)


def flt_attention_bwd(dy, cache: FLTAttentionCache, *, omega_grad=True) -> FLTAttentionGrads:
    r"""Backward of :func:`flt_attention_fwd`: gradients of q, k, v, omega, the spectrum and the proposal.

    See :func:`flt_attention` for the equations and shapes.

    Parameters
    ----------
    dy : (..., L, d_v) array
        Cotangent of the output, finite, dtype and namespace of the forward.
    cache : FLTAttentionCache
        The cache returned by :func:`flt_attention_fwd`.
    omega_grad : bool
        ``False`` skips omega's gradient (``omega=None`` in the result): for callers whose omega is drawn, not
        learned (computed only on request).

    Returns
    -------
    FLTAttentionGrads
        ``q, k: (..., L, d)``, ``v: (..., L, d_v)``, ``spectrum`` (same container type), ``proposal``,
        ``omega: (m, 2r + d)`` or None; ``pos`` and ``eps`` are None.

    Raises
    ------
    ValueError
        A non-finite `dy`.
    """
    xp = namespace(dy, cache.lcache.phi_q, names=("dy", "cache.phi_q"))
    check_finite("dy", dy, xp=xp)
    check_shape("dy", dy, "..., L, d_v", check_shape("y", cache.lcache.y, "..., L, d_v"))
    return flt_attention_bwd_core(dy, cache, omega_grad=omega_grad, xp=xp)


# y = LinearAttention(phi(Q_hat), phi(K_hat), v),  Q_hat = [N1, q d^-1/4],  K_hat = [N2, k d^-1/4]  (Alg. 1)
# backward: linear attention -> positive features of Q_hat, K_hat -> flt_features_bwd on the first 2r columns
def flt_attention_fwd_core(q, k, v, pos, eps, spectrum, proposal, omega, *, causal,
                           chunk_size=DEFAULT_CHUNK_SIZE, xp, keep=True, weight=None):
    """Unchecked core of :func:`flt_attention_fwd` (the caller checked the arrays and ran
    :func:`~refattn.rpe.flt.check_flt_inputs`; linear attention's result checks remain; ``keep=False``: no
    causal states kept for a backward). ``weight: (L,)`` scales each token's RPE features
    (:func:`~refattn.rpe.flt.flt_features_fwd_core`; 0: a class token without a position)."""
    (N1, N2), fcache = flt_features_fwd_core(pos, eps, spectrum, proposal, xp=xp, weight=weight)
    return _attention_from_features(q, k, v, pos, N1, N2, fcache, omega, causal, chunk_size, xp=xp,
                                    inputs={"q": q, "k": k, "v": v, "omega": omega}, keep=keep)


def flt_attention_bwd_core(dy, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`flt_attention_bwd` (see :func:`flt_attention`)."""
    c = cache
    lg = linear_attention_bwd_core(dy, c.lcache, xp=xp)
    gq = positive_features_stable_bwd_core(lg.phi_q, None, c.qcache, omega_grad=omega_grad, xp=xp)
    gk = positive_features_stable_bwd_core(lg.phi_k, lg.k_log_scale, c.kcache, omega_grad=omega_grad, xp=xp)
    two_r = c.two_r
    dN1 = sum_to_shape(gq.x[..., :two_r], c.n1_shape, xp=xp)                 # (..., L, 2r) back to pos's axes
    dN2 = sum_to_shape(gk.x[..., :two_r], c.n1_shape, xp=xp)
    fg = flt_features_bwd_core(dN1, dN2, c.fcache, xp=xp)
    return FLTAttentionGrads(q=gq.x[..., two_r:] * c.d_scale, k=gk.x[..., two_r:] * c.d_scale, v=lg.v,
                             pos=None, eps=None, spectrum=fg.spectrum, proposal=fg.proposal,
                             omega=(gq.omega + gk.omega) if omega_grad else None)


def _attention_from_features(q, k, v, pos, N1, N2, fcache, omega, causal, chunk_size, *, xp, inputs, keep):
    """Algorithm 1, lines 5-9, from the features ``(N1, N2)``."""
    two_r, d = N1.shape[-1], q.shape[-1]
    batch = tuple(q.shape[:-1])                                                   # (..., L)
    try:
        N1b = xp.broadcast_to(N1, batch + (two_r,))                               # (..., L, 2r)
        N2b = xp.broadcast_to(N2, batch + (two_r,))
    except (ValueError, RuntimeError) as exc:
        raise ValueError(f"pos: leading axes {tuple(pos.shape[:-2])} do not broadcast to q's "
                         f"{tuple(q.shape[:-2])}") from exc
    d_scale = d ** -0.25
    q_hat = xp.concat([N1b, q * d_scale], axis=-1)                                # (..., L, 2r + d) line 5
    k_hat = xp.concat([N2b, k * d_scale], axis=-1)                                # (..., L, 2r + d)
    (phi_q, _), qcache = positive_features_stable_fwd_core(q_hat, omega, None, xp=xp)   # (..., L, m) line 7
    (phi_k, k_log), kcache = positive_features_stable_fwd_core(k_hat, omega, None, xp=xp)
    y, lcache = linear_attention_fwd_core(phi_q, phi_k, v, causal, k_log, chunk_size, "raise", xp=xp,
                                          inputs=inputs, keep=keep)               # (..., L, d_v) line 9
    return y, FLTAttentionCache(fcache, qcache, kcache, lcache, tuple(N1.shape), two_r, d_scale)
