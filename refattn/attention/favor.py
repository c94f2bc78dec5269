r"""FAVOR / FAVOR+: the Performer's estimate of softmax attention, random features and linear attention.

Softmax attention ``softmax(q k^T / sqrt(d)) v`` uses the kernel ``exp(q . k / sqrt(d))``, which is
``softmax_kernel(q', k') = exp(q' . k')`` on the scaled inputs ``q' = d^{-1/4} q``, ``k' = d^{-1/4} k``. FAVOR
replaces it by random features ``phi(q') . phi(k')`` with that mean, and runs linear attention on them
(Choromanski et al.; Horn et al. Sec. 2.1, Eq. (1) with ``A ~ Q' K'^T``):

``features="positive"`` (FAVOR+)
    :func:`~refattn.features.positive.positive_features_stable`: ``phi = exp(u - max_row u)`` with the row
    log-scale ``max_row u - |x|^2/2 - log(m)/2``.
``features="hyperbolic"``
    the antithetic ``[omega; -omega]`` variant,
    :func:`~refattn.features.hyperbolic.hyperbolic_features_stable`.
``features="trig"`` (FAVOR as Horn et al. describe it)
    :func:`~refattn.features.trig.softmax_trig_features_stable`: RKS features with ``h(x) = exp(|x|^2/2)`` as
    the log-scale. Its estimates can be negative, so the normaliser can be zero or negative
    (:mod:`refattn.attention.normaliser`): ``on_nonpositive="raise"`` (default) raises a ``ValueError`` with
    the count and the minimum, ``"ignore"`` returns the output as computed.

**Stabilisation** (the frames of :mod:`refattn.attention.linear`). Positive and hyperbolic keys get
per-feature frames (:func:`~refattn.features.key_frames.positive_key_features_stable`): each feature column is
scaled by its own maximum over the keys (bidirectional) or over the prefix (causal, so no future key changes a
past output, not even through underflow), and that frame is folded into the query map before its row maximum
is taken. Every (query, feature) term is then represented relative to its own key feature's scale, and the
feature that dominates a query's kernel sum never underflows, so float32 FAVOR+ stays close to float64 for
large inputs (README, reliability). Bidirectional attention needs no scale afterwards (the frame cancels
between the two sides); causal attention takes the prefix frames as ``linear_attention(..., k_log_scale=(...,
L, m))`` (the frames are taught in :mod:`refattn.attention.linear`). Trig keys keep their row log-scale
``|k|^2/2`` (a row scale is the only one a signed feature allows), combined by ``linear_attention`` with a
running maximum.

**Backward.** ``linear_attention_bwd``, then the feature maps' backwards with the frames and row maxima held
fixed: they are a gauge (the output does not depend on them), so their cotangents sum to zero exactly.

Estimator properties (tested in ``tests/attention/test_favor.py``): the output converges to
``softmax_attention`` with RMS error proportional to ``m^{-1/2}``; it is a ratio of unbiased estimators and
therefore biased at O(1/m) (the claim ``horn.attention-matrix-unbiased``).

Axes: ``...`` batch and heads, ``L`` positions, ``d`` query/key width, ``d_v`` value width, ``m`` projections.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_choice, check_positive_int, check_shape, namespace, quiet_nonfinite
from ..features.projection import project_bwd
from ..features.hyperbolic import (HyperbolicFeaturesCache, antithetic_grad, hyperbolic_features_stable_bwd,
                                   hyperbolic_features_stable_fwd, hyperbolic_features_stable_fwd_core,
                                   hyperbolic_key_features_stable_bwd, hyperbolic_key_features_stable_fwd,
                                   hyperbolic_key_features_stable_fwd_core)
from ..features.key_frames import (positive_key_features_stable_bwd, positive_key_features_stable_fwd,
                                   positive_key_features_stable_fwd_core)
from ..features.positive import (positive_features_stable_bwd, positive_features_stable_fwd,
                                 positive_features_stable_fwd_core)
from ..features.trig import (softmax_trig_features_stable_bwd, softmax_trig_features_stable_bwd_core,
                             softmax_trig_features_stable_fwd, softmax_trig_features_stable_fwd_core)
from .linear import DEFAULT_CHUNK_SIZE, check_dy, linear_attention_bwd_core, linear_attention_fwd_core

__all__ = ["favor_attention", "favor_attention_fwd", "favor_attention_bwd", "FavorAttentionCache",
           "FavorAttentionGrads", "FAVOR_FEATURES"]

Array = Any

#: Feature map name -> (query map fwd, bwd, key map fwd, bwd). Positive and hyperbolic keys get per-feature
#: frames (``*_key_features_stable``) that are folded into the query map (``k_log_scale=``); trig keys keep
#: their row log-scale ``|k|^2/2`` (key map ``None``: the query map serves both).
FAVOR_FEATURES = {
    "positive": (positive_features_stable_fwd, positive_features_stable_bwd,
                 positive_key_features_stable_fwd, positive_key_features_stable_bwd),
    "hyperbolic": (hyperbolic_features_stable_fwd, hyperbolic_features_stable_bwd,
                   hyperbolic_key_features_stable_fwd, hyperbolic_key_features_stable_bwd),
    "trig": (softmax_trig_features_stable_fwd, softmax_trig_features_stable_bwd, None, None),
}

#: The unchecked cores (key map, query map) of the framed features: favor validates its inputs once.
_FRAMED_CORES = {
    "positive": (positive_key_features_stable_fwd_core, positive_features_stable_fwd_core),
    "hyperbolic": (hyperbolic_key_features_stable_fwd_core, hyperbolic_features_stable_fwd_core),
}


class FavorAttentionCache(NamedTuple):
    """What :func:`favor_attention_bwd` needs: the feature maps' and linear attention's caches, the scale."""

    q_cache: Any        # cache of the query feature map (on d^{-1/4} q)
    k_cache: Any        # cache of the key feature map (on d^{-1/4} k)
    attn_cache: Any     # LinearAttentionCache
    scale: float        # d^{-1/4}
    features: str


class FavorAttentionGrads(NamedTuple):
    """Gradients of :func:`favor_attention`: ``q``, ``k``, ``v``, ``omega`` (``None`` if not requested)."""

    q: Array      # (..., L, d)
    k: Array      # (..., L, d)
    v: Array      # (..., L, d_v)
    omega: Array  # (m, d)


_PARAMS = """
q, k : (..., L, d) array
    Queries and keys (unscaled: the d^{-1/4} scaling is applied here). Real floating (float64 reference,
    float32 supported); same batch axes, dtype and namespace.
v : (..., L, d_v) array
    Values, same batch axes, dtype and namespace as `q`.
omega : (m, d) array
    Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``, moved with
    ``refattn.random.as_xp``), shared by queries and keys; m >= 1, same dtype and namespace as `q`.
causal : bool, default False
    Prefix sums (j <= i).
features : {"positive", "hyperbolic", "trig"}
    The random feature map (see the module docstring): FAVOR+ (positive, m features), its antithetic variant
    (2m), or the trig features of FAVOR (2m; the normaliser can then be non-positive).
chunk_size : int, default 32
    Causal chunk length of ``linear_attention``.
on_nonpositive : {"raise", "ignore"}
    Raise on a non-positive normaliser (only trig features give one), or return the output as computed.
"""

_RAISES = """
ValueError
    Shapes that do not match (``omega`` must be ``(m, d)`` with ``d = q.shape[-1]``), non-finite input,
    unknown `features`, or a non-positive normaliser with ``on_nonpositive="raise"``.
TypeError
    Mixed namespaces or dtypes, or `causal` not a bool.
"""

_DY_RAISES = """
ValueError
    If `dy` is not of the output's shape or is not finite.
TypeError
    If `dy` differs from the cache in namespace or dtype.
"""


@fill_doc(params=_PARAMS, raises=_RAISES)
def favor_attention(q, k, v, omega, *, causal=False, features="positive", chunk_size=DEFAULT_CHUNK_SIZE,
                    on_nonpositive="raise"):
    r"""FAVOR(+) estimate of softmax attention: random features composed with linear attention.

    ``y_i = phi(q'_i) sum_j phi(k'_j)^T v_j / phi(q'_i) sum_j phi(k'_j)^T`` with ``q' = d^{-1/4} q``,
    ``k' = d^{-1/4} k`` and ``E[phi(q') . phi(k')] = exp(q . k / sqrt(d))`` (sums over j <= i when causal):
    Choromanski et al. (FLT) Eq. (2), whose rows of Q', K' are ``phi(d^{-1/4} q_i)``, ``phi(d^{-1/4} k_i)``;
    Horn et al. Sec. 2.1 (FAVOR estimating their Eq. (1)), an estimate of
    ``softmax_attention(q, k, v, causal=causal)`` whose RMS error falls as ``m^{-1/2}``. Keys of positive and
    hyperbolic features get per-feature frames (see the module docstring), so float32 stays accurate for large
    inputs.

    Backward (:func:`favor_attention_bwd`): ``linear_attention_bwd`` gives ``dphi_q, dphi_k, dv`` and the
    frames' cotangent; the key map's backward takes ``(dphi_k, dk_log_scale)``, the query map's
    ``(dphi_q, None)``; both chain through ``d^{-1/4}`` and their ``omega`` gradients add. For positive and
    hyperbolic features the frames and row maxima are held fixed (a gauge), so each map's backward reduces to
    ``du = dphi * phi`` through the projection.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., L, d_v) array
        The estimate; same namespace, device and dtype as `q`.

    Raises
    ------
    {raises}

    See Also
    --------
    favor_attention_fwd, favor_attention_bwd : the differentiable pair.
    refattn.attention.softmax_attention : the exact attention this estimates.
    refattn.attention.linear_attention : the attention step, given features.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.attention import favor_attention, softmax_attention
    >>> from refattn.random import draw_gaussian
    >>> x = 0.5 * np.random.default_rng(0).standard_normal((2, 16, 8))   # (B, L, d): q = k = v = x
    >>> omega = draw_gaussian(np.random.default_rng(1), 4096, 8)          # (m, d)
    >>> y = favor_attention(x, x, x, omega)
    >>> y.shape
    (2, 16, 8)
    >>> exact = softmax_attention(x, x, x)
    >>> bool(np.linalg.norm(y - exact) / np.linalg.norm(exact) < 0.1)    # relative error ~ m**-0.5
    True
    """
    xp, chunk_size = check_favor_inputs(q, k, v, omega, causal, features, chunk_size, on_nonpositive)
    return favor_attention_fwd_core(q, k, v, omega, causal=causal, features=features, chunk_size=chunk_size,
                                    on_nonpositive=on_nonpositive, xp=xp, keep=False)[0]   # inference


def check_favor_inputs(q, k, v, omega, causal, features, chunk_size, on_nonpositive):
    """The checks of :func:`favor_attention_fwd` (no data read); returns the namespace and chunk length."""
    xp = namespace(q, k, v, omega, names=("q", "k", "v", "omega"))
    sizes = check_shape("q", q, "..., L, d")
    check_shape("k", k, "..., L, d", sizes)
    check_shape("v", v, "..., L, d_v", sizes)
    check_shape("omega", omega, "m, d", sizes)
    if omega.shape[0] < 1:
        raise ValueError(f"omega: expected at least one projection row, shape (m, d) with m >= 1; "
                         f"got {tuple(omega.shape)}")
    check_choice(features, "features", tuple(FAVOR_FEATURES))
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool; got {causal!r}")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    check_choice(on_nonpositive, "on_nonpositive", ("raise", "ignore"))
    # No finiteness pass over the inputs here: a NaN or infinity in q, k or omega reaches every feature of its
    # rows and hence the normaliser, one in v the output; linear attention's two result checks (normaliser,
    # output) catch them and then name the culprit among these inputs.
    return xp, chunk_size


@fill_doc(params=_PARAMS, raises=_RAISES)
def favor_attention_fwd(q, k, v, omega, *, causal=False, features="positive", chunk_size=DEFAULT_CHUNK_SIZE,
                        on_nonpositive="raise"):
    r"""Forward of :func:`favor_attention` (see it for the equations), with the cache for the backward.

    Parameters
    ----------
    {params}

    Returns
    -------
    y : (..., L, d_v) array
        The estimate; same namespace, device and dtype as `q`.
    cache : FavorAttentionCache
        The feature maps' caches, the linear-attention cache, the scale ``d^{-1/4}`` and `features`, for
        :func:`favor_attention_bwd`.

    Raises
    ------
    {raises}
    """
    xp, chunk_size = check_favor_inputs(q, k, v, omega, causal, features, chunk_size, on_nonpositive)
    return favor_attention_fwd_core(q, k, v, omega, causal=causal, features=features, chunk_size=chunk_size,
                                    on_nonpositive=on_nonpositive, xp=xp)


# phi(x') with x' = d^{-1/4} x (framed keys, frame folded into the queries); then linear attention
#     y_i = phi(q'_i) sum_j phi(k'_j)^T v_j / phi(q'_i) sum_j phi(k'_j)^T      (FLT Eq. (2))
def favor_attention_fwd_core(q, k, v, omega, *, causal, features, chunk_size, on_nonpositive, xp, keep=True):
    """Unchecked core of :func:`favor_attention_fwd` (see :func:`favor_attention`); ``keep=False``: the causal
    scan keeps no states for the backward (inference)."""
    inputs = {"q": q, "k": k, "v": v, "omega": omega}
    scale = float(q.shape[-1]) ** -0.25
    with quiet_nonfinite(q, k, v, omega):
        if features == "trig":                                                    # (..., L, m'), row scales
            (phi_q, _), q_cache = softmax_trig_features_stable_fwd_core(q * scale, omega, xp=xp)
            (phi_k, k_log_scale), k_cache = softmax_trig_features_stable_fwd_core(k * scale, omega, xp=xp)
        else:                                                                     # per-feature key frames
            k_core, q_core = _FRAMED_CORES[features]
            (phi_k, frame), k_cache = k_core(k * scale, omega, causal=causal, xp=xp)   # (..., L|1, m') frame
            (phi_q, _), q_cache = q_core(q * scale, omega, frame, xp=xp)              # frame folded in
            k_log_scale = frame if causal else None                               # bidirectional: it cancels
    try:
        with quiet_nonfinite(q, k, v, omega):
            y, attn_cache = linear_attention_fwd_core(phi_q, phi_k, v, causal, k_log_scale, chunk_size,
                                                      on_nonpositive, xp=xp, inputs=inputs,
                                                      keep=keep)                  # (..., L, d_v)
    except ValueError as exc:
        if "underflowed" not in str(exc):
            raise
        qn = float(xp.max(xp.linalg.vector_norm(q, axis=-1))) * scale
        kn = float(xp.max(xp.linalg.vector_norm(k, axis=-1))) * scale
        raise ValueError(f"favor_attention (features={features!r}, {q.dtype}, largest |q'| = {qn:.3g}, "
                         f"|k'| = {kn:.3g} after the d^-1/4 scaling): {exc}") from exc
    return y, FavorAttentionCache(q_cache, k_cache, attn_cache, scale, features)


@fill_doc(raises=_DY_RAISES)
def favor_attention_bwd(dy, cache: FavorAttentionCache, *, omega_grad=True) -> FavorAttentionGrads:
    r"""Gradients of :func:`favor_attention` (see it for the equations) for `q`, `k`, `v` and `omega`.

    Parameters
    ----------
    dy : (..., L, d_v) array
        Cotangent of the output `y`: its shape, dtype and namespace; finite.
    cache : FavorAttentionCache
        From :func:`favor_attention_fwd`.
    omega_grad : bool, default True
        ``False``: the omega gradient is not computed and its field is ``None`` (style.md: computed only on
        request). A model whose omega is drawn, not learned, asks for none (``refattn.nn.kinds.favor``).

    Returns
    -------
    FavorAttentionGrads
        ``q: (..., L, d)``, ``k: (..., L, d)``, ``v: (..., L, d_v)`` and ``omega: (m, d)`` (``None`` with
        ``omega_grad=False``), in the dtype and namespace of the inputs.

    Raises
    ------
    {raises}
    """
    return favor_attention_bwd_core(dy, cache, omega_grad=omega_grad, xp=check_dy(dy, cache.attn_cache))


# dphi_q, dphi_k, dv from linear attention; then each map's backward, chained through d^{-1/4}:
#     dq = d^{-1/4} (dphi_q -> x),  dk = d^{-1/4} (dphi_k -> x),  domega = domega_q + domega_k
def favor_attention_bwd_core(dy, cache, *, omega_grad, xp):
    """Unchecked core of :func:`favor_attention_bwd` (see :func:`favor_attention`)."""
    c = cache
    if c.features == "trig":                                                      # trig: row log-scales
        ga = linear_attention_bwd_core(dy, c.attn_cache, xp=xp)
        gq = softmax_trig_features_stable_bwd_core((ga.phi_q, None), c.q_cache, omega_grad=omega_grad, xp=xp)
        gk = softmax_trig_features_stable_bwd_core((ga.phi_k, ga.k_log_scale), c.k_cache,
                                                   omega_grad=omega_grad, xp=xp)
        dq, dk, dwq, dwk = gq.x, gk.x, gq.omega, gk.omega
    else:
        # The frames and row maxima are a gauge: the output does not depend on them (they enter the query and
        # key features with opposite signs), so their cotangents from linear attention, the query map and the
        # key map sum to zero exactly, and each map's backward reduces to du = dphi * phi with the frame held
        # fixed: linear attention returns those log-feature cotangents (formed chunk by chunk when causal).
        ga = linear_attention_bwd_core(dy, c.attn_cache, xp=xp, frame_grad=False, log_features=True)
        dq, dwq = _gauge_bwd(ga.phi_q, c.q_cache, key=False, omega_grad=omega_grad, xp=xp)    # du_q
        dk, dwk = _gauge_bwd(ga.phi_k, c.k_cache, key=True, omega_grad=omega_grad, xp=xp)     # du_k
    domega = dwq + dwk if omega_grad else None                                    # (m, d)
    return FavorAttentionGrads(q=dq * c.scale, k=dk * c.scale, v=ga.v, omega=domega)


def _gauge_bwd(du, cache, *, key, omega_grad, xp):
    """``(dx, domega)`` of a stabilised positive/hyperbolic map with its frame and row maxima held fixed,
    from the cotangent of its exponent ``du = dphi * phi`` (``(..., L, m')``); keys' exponent
    ``u - |x|^2/2`` adds ``-sum_m(du) x`` (queries' norm term went into the dropped log-scale)."""
    inner = cache.inner if isinstance(cache, HyperbolicFeaturesCache) else cache
    dx, domega = project_bwd(du, inner.x, inner.omega, xp=xp, omega_grad=omega_grad)
    if key:
        dx = dx - xp.sum(du, axis=-1, keepdims=True) * inner.x                    # d(-|x|^2/2) = -x
    if isinstance(cache, HyperbolicFeaturesCache):
        domega = antithetic_grad(domega, inner.omega.shape[0] // 2)         # [omega; -omega] -> omega
    return dx, domega
