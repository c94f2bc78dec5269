r"""Positive random features (PRF, FAVOR+), their row stabiliser, the KL Eq. (9) map and hyperbolic features.

**PRF for the softmax kernel** (Choromanski et al. Lemma 1; the identity before Chowdhury et al. Eq. (9)).
For ``omega ~ N(0, I_d)``, ``E[exp(omega . s)] = exp(|s|^2/2)``; with ``s = q + k``,

    E[exp(omega.q - |q|^2/2) exp(omega.k - |k|^2/2)] = exp(|q + k|^2/2 - |q|^2/2 - |k|^2/2) = exp(q . k),

so ``positive_features(x, omega) = exp(x omega^T - |x|^2/2) / sqrt(m)`` estimates the **softmax kernel**
:func:`~refattn.features.trig.softmax_kernel` without bias, and every estimate is positive.

**KL Eq. (9)** (Chowdhury et al.): ``PRF(x) = exp(-|x|^2) [exp(omega_1 . x), ...] / sqrt(M)``, offset
``|x|^2``
instead of ``|x|^2/2``. With ``omega ~ N(0, I)`` the same computation gives
``exp(|q + k|^2/2 - |q|^2 - |k|^2) = exp(-|q - k|^2/2)``: exactly (constant 1, unit bandwidth) the **Gaussian
kernel** :func:`~refattn.features.trig.gaussian_kernel`, not the softmax kernel (design.md trap 1):
:func:`gaussian_positive_features`. The two differ by ``exp(-|q|^2/2 - |k|^2/2)``; the query factor cancels in
attention's row normalisation, the key factor does not.

**Hyperbolic** (antithetic ``+-omega``): ``[exp(u), exp(-u)] exp(-|x|^2/2) / sqrt(2m)``, ``u = x omega^T``;
``phi(q) . phi(k) = (1/m) sum_i cosh(omega_i . (q + k)) exp(-|q|^2/2 - |k|^2/2)``, again unbiased for
``exp(q . k)``, with a smaller variance. It is :func:`positive_features` on the stacked projections
``[omega; -omega]`` (width 2m), and is written that way.

**Variances** (iid Gaussian omega, m projections; derived and Monte-Carlo-checked in
``tests/features/test_positive.py``), with ``s = q + k``:

    Var positive           = exp(2 q.k) (exp(|s|^2) - 1) / m
    Var hyperbolic         = exp(-|q|^2 - |k|^2) (exp(|s|^2) - 1)^2 / (2 m)
    Var gaussian_positive  = exp(-|q - k|^2) (exp(|s|^2) - 1) / m.

**Stabiliser** (design.md trap 3). ``exp(x omega^T - |x|^2/2)`` overflows or underflows for large inputs
(float32:
exponents beyond about +-88). :func:`positive_features_stable` returns ``(phi, log_scale)`` with

    phi       = exp(u - max_row u)                  in (0, 1], each row's maximum is exactly 1,
    log_scale = max_row u - |x|^2/2 - log(m)/2,     u = x omega^T,

so that ``phi * exp(log_scale)[..., None] == positive_features(x, omega)``: the ``1/sqrt(m)`` and the
``|x|^2/2``
offset are folded into the log-scale (they are constant along a row), which leaves one subtraction and one
``exp`` per feature entry. Keys pass ``log_scale`` to ``linear_attention(..., k_log_scale=...)``; queries drop
it (a per-row factor cancels between numerator and normaliser). This fused map is a dispatchable hot primitive
(``refattn._dispatch.kernel_for("positive_features_stable")``): a registered kernel has the signature and the
outputs of :func:`_positive_features_stable_reference`.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` input width, ``m`` projections (feature width m; 2m for
the
hyperbolic map).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import _dispatch
from .._xp import check_finite, check_shape, cumulative_max, device_of, namespace
from ._projection import check_x_omega, project, project_bwd, sq_norm_half

__all__ = [
    "positive_features", "positive_features_fwd", "positive_features_bwd",
    "positive_features_stable", "positive_features_stable_fwd", "positive_features_stable_bwd",
    "gaussian_positive_features", "gaussian_positive_features_fwd", "gaussian_positive_features_bwd",
    "hyperbolic_features", "hyperbolic_features_fwd", "hyperbolic_features_bwd",
    "hyperbolic_features_stable", "hyperbolic_features_stable_fwd", "hyperbolic_features_stable_bwd",
    "positive_key_features_stable", "positive_key_features_stable_fwd", "positive_key_features_stable_bwd",
    "hyperbolic_key_features_stable", "hyperbolic_key_features_stable_fwd",
    "hyperbolic_key_features_stable_bwd",
    "PositiveFeaturesCache", "PositiveFeaturesGrads", "HyperbolicFeaturesCache", "KeyFeaturesCache",
]

Array = Any


class PositiveFeaturesCache(NamedTuple):
    """What the positive maps' backwards need from their forwards."""

    x: Array       # (..., L, d)
    omega: Array   # (m, d)
    phi: Array     # (..., L, m) the returned features (stable maps: exp(u - max_row u))
    offset: float  # c in the exponent u - c |x|^2: 1/2 (softmax), 1 (KL Eq. 9); 1/2 for the stable map
    frame: Array = None  # (..., 1|L, m) key frame folded into a stable query map, or None


class PositiveFeaturesGrads(NamedTuple):
    """Gradients of the positive and hyperbolic maps: ``x``, ``omega`` and (folded frame) ``k_log_scale``."""

    x: Array       # (..., L, d)
    omega: Array   # (m, d), or None when not requested
    k_log_scale: Array = None  # (..., 1|L, m): only for a stable map with a folded key frame


class KeyFeaturesCache(NamedTuple):
    """What :func:`positive_key_features_stable_bwd` needs from :func:`positive_key_features_stable_fwd`."""

    x: Array       # (..., L, d)
    omega: Array   # (m, d)
    phi: Array     # (..., L, m) exp(l - P), exactly 1 where l attains its (prefix) maximum
    causal: bool   # prefix maxima (True) or maxima over all positions


class HyperbolicFeaturesCache(NamedTuple):
    """Cache of the hyperbolic maps: the positive map's cache on the stacked ``[omega; -omega]``."""

    inner: PositiveFeaturesCache  # cache of the positive map on [omega; -omega]


# ----------------------------------------------------------------------------------------------------------
# raw positive maps: exp(x omega^T - c |x|^2) / sqrt(m), c = 1/2 (softmax kernel) or 1 (KL Eq. 9, Gaussian)


def _raw_fwd(x, omega, offset):
    xp, m = check_x_omega(x, omega)
    return _raw_core(x, omega, offset, xp=xp)


def _raw_core(x, omega, offset, *, xp):
    """Unchecked core of :func:`positive_features_fwd` (``offset = 1/2``; 1 for the Gaussian map)."""
    m = omega.shape[0]
    u = project(x, omega, xp=xp)                                                  # (..., L, m) x omega^T
    shift = 2.0 * offset * sq_norm_half(x, xp=xp) + 0.5 * math.log(m)  # (..., L) c|x|^2 + log sqrt(m)
    phi = xp.exp(u - xp.expand_dims(shift, axis=-1))                              # (..., L, m)
    return phi, PositiveFeaturesCache(x, omega, phi, offset)


def _raw_bwd(dphi, cache, omega_grad=True):
    c = cache
    xp = namespace(dphi, c.phi, names=("dphi", "cache.phi"))
    check_shape("dphi", dphi, "..., L, m", check_shape("phi", c.phi, "..., L, m"))
    check_finite("dphi", dphi, xp=xp)
    return _raw_bwd_core(dphi, cache, omega_grad, xp=xp)


def _raw_bwd_core(dphi, cache, omega_grad=True, *, xp):
    """Unchecked core of :func:`positive_features_bwd`."""
    c = cache
    du = dphi * c.phi                                                             # (..., L, m) d exponent
    dx, domega = project_bwd(du, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    dx = dx - (2.0 * c.offset) * xp.sum(du, axis=-1, keepdims=True) * c.x         # d(-c|x|^2) = -2c x
    return PositiveFeaturesGrads(x=dx, omega=domega)


def positive_features_fwd(x, omega):
    r"""Raw positive random features ``exp(x omega^T - |x|^2/2) / sqrt(m)`` (FAVOR+), and the cache.

    Estimates the softmax kernel: ``E[phi(q) . phi(k)] = softmax_kernel(q, k) = exp(q . k)`` (Choromanski et
    al.
    Lemma 1; Chowdhury et al., the identity before Eq. (9)). Unstabilised: entries overflow (inf) or underflow
    (0) once ``|x omega_i - |x|^2/2|`` exceeds ~88 (float32) / ~709 (float64); attention should use
    :func:`positive_features_stable`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
        float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, m) array
        Positive; same namespace, dtype and device as `x`.
    cache : PositiveFeaturesCache
        For :func:`positive_features_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    positive_features, positive_features_bwd
    """
    return _raw_fwd(x, omega, 0.5)


def positive_features_bwd(dphi, cache: PositiveFeaturesCache, *, omega_grad=True) -> PositiveFeaturesGrads:
    r"""Backward of :func:`positive_features` (Choromanski et al. 2021, Performer, Lemma 1).

    With ``u = x omega^T - |x|^2/2``: ``du = dphi * phi``, ``dx = du omega - sum_m(du) x``,
    ``domega = du^T x``.

    Parameters
    ----------
    dphi : (..., L, m) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : PositiveFeaturesCache
        From :func:`positive_features_fwd`.
    omega_grad : bool, default True
        ``False``: ``domega`` is not computed and is ``None`` (a drawn, non-learnable omega).

    Returns
    -------
    PositiveFeaturesGrads
        ``x : (..., L, d)``, ``omega : (m, d)`` (or ``None``); ``k_log_scale`` is ``None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    return _raw_bwd(dphi, cache, omega_grad)


def positive_features(x, omega):
    r"""Positive random features (FAVOR+) ``exp(x omega^T - |x|^2/2) / sqrt(m)`` (Performer Lemma 1).

    Unbiased for :func:`~refattn.features.trig.softmax_kernel` ``exp(q . k)`` with ``omega ~ N(0, I_d)``
    (Choromanski et al. 2021, Lemma 1; the identity before Chowdhury et al. Eq. (9)), every estimate
    positive, ``Var = exp(2 q.k) (exp(|q + k|^2) - 1) / m``. Raw: overflows (inf) or underflows (0) for large
    inputs; attention should use :func:`positive_features_stable`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
        float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, m) array
        Positive; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    positive_features_fwd, positive_features_bwd : the differentiable pair.
    positive_features_stable : the same map, never overflowing.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import positive_features, softmax_kernel
    >>> from refattn.random import draw_gaussian
    >>> positive_features(np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2))     # x: (L, d), omega: (m, d)
    array([[0.70710678, 0.70710678],
           [1.0288343 , 0.62401954]])
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)
    >>> estimate = positive_features(q, omega) @ positive_features(k, omega).T
    >>> bool(np.allclose(estimate, softmax_kernel(q, k), atol=0.1))
    True
    """
    return positive_features_fwd(x, omega)[0]


def gaussian_positive_features_fwd(x, omega):
    r"""Chowdhury et al. Eq. (9): ``exp(x omega^T - |x|^2) / sqrt(m)``, and the cache.

    With ``omega ~ N(0, I_d)`` this estimates the **Gaussian** kernel
    ``gaussian_kernel(q, k) = exp(-|q - k|^2/2)`` exactly in expectation (constant 1:
    ``exp(|q+k|^2/2 - |q|^2 - |k|^2) = exp(-|q-k|^2/2)``), not ``exp(q . k)`` as the sentence before the
    equation might suggest. Raw (unstabilised), like :func:`positive_features`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, m) array
        Positive; same namespace, dtype and device as `x`.
    cache : PositiveFeaturesCache
        For :func:`gaussian_positive_features_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    gaussian_positive_features, gaussian_positive_features_bwd
    """
    return _raw_fwd(x, omega, 1.0)


def gaussian_positive_features_bwd(dphi, cache: PositiveFeaturesCache) -> PositiveFeaturesGrads:
    r"""Backward of :func:`gaussian_positive_features` (Chowdhury et al. Eq. (9)).

    As :func:`positive_features_bwd` with the offset's derivative ``d(-|x|^2)/dx = -2x``:
    ``dx = du omega - 2 sum_m(du) x``, ``du = dphi * phi``.

    Parameters
    ----------
    dphi : (..., L, m) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : PositiveFeaturesCache
        From :func:`gaussian_positive_features_fwd`.

    Returns
    -------
    PositiveFeaturesGrads
        ``x : (..., L, d)``, ``omega : (m, d)``; ``k_log_scale`` is ``None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    return _raw_bwd(dphi, cache)


def gaussian_positive_features(x, omega):
    r"""The PRF map of Chowdhury et al. Eq. (9), ``exp(x omega^T - |x|^2) / sqrt(m)``.

    Unbiased for :func:`~refattn.features.trig.gaussian_kernel` ``exp(-|q - k|^2/2)`` with
    ``omega ~ N(0, I)`` -- the Gaussian kernel, not the softmax kernel (offset ``|x|^2``, not ``|x|^2/2``;
    design.md trap 1), ``Var = exp(-|q - k|^2) (exp(|q + k|^2) - 1) / m``. Raw (unstabilised).

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, m) array
        Positive; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    gaussian_positive_features_fwd, gaussian_positive_features_bwd : the differentiable pair.
    positive_features : the softmax-kernel map (offset ``|x|^2/2``).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import gaussian_kernel, gaussian_positive_features
    >>> from refattn.random import draw_gaussian
    >>> gaussian_positive_features(np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2))
    array([[0.70710678, 0.70710678],
           [0.55069531, 0.33401359]])
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)
    >>> estimate = gaussian_positive_features(q, omega) @ gaussian_positive_features(k, omega).T
    >>> bool(np.allclose(estimate, gaussian_kernel(q, k), atol=0.05))
    True
    """
    return gaussian_positive_features_fwd(x, omega)[0]


# ----------------------------------------------------------------------------------------------------------
# stabilised positive map (the fused hot primitive)


@_dispatch.define("positive_features_stable")
def _positive_features_stable_reference(x, omega, k_log_scale=None):
    r"""The fused positive map with its row stabiliser (reference for the ``"positive_features_stable"``
    dispatch point; inputs already validated).

    ``x: (..., L, d)``, ``omega: (m, d)``, ``k_log_scale: (..., 1, m)``, ``(..., L, m)`` or None (0) ->
    ``phi: (..., L, m) = exp(u' - max_row u')``, ``log_scale: (..., L) = max_row u' - |x|^2/2 - log(m)/2``
    with
    ``u' = x omega^T + k_log_scale``. Elementwise work after the GEMM: (one add,) one max pass, one in-place
    subtraction, one exp.
    """
    xp = namespace(x, omega)
    m = omega.shape[0]
    u = project(x, omega, xp=xp)                                                  # (..., L, m) fresh array
    if k_log_scale is not None:
        u += k_log_scale                                                          # (..., L, m) fold the frame
    M = xp.max(u, axis=-1, keepdims=True)                                         # (..., L, 1) row max
    u -= M                                                                        # in place: (..., L, m) <= 0
    phi = xp.exp(u)                                                               # (..., L, m) in (0, 1]
    log_scale = M[..., 0] - sq_norm_half(x, xp=xp) - 0.5 * math.log(m)           # (..., L)
    return phi, log_scale


def _check_frame(k_log_scale, x, m, *, xp, name="k_log_scale"):
    """A key frame for a query map: ``(..., 1, m)`` or ``(..., L, m)`` with x's batch axes, finite."""
    sizes = check_shape("x", x, "..., L, d")
    check_shape(name, k_log_scale, "..., F, m", {"...": sizes["..."], "m": (m, "omega")})
    if k_log_scale.shape[-2] not in (1, x.shape[-2]):
        raise ValueError(f"{name}: expected shape (..., 1, m) (one frame) or (..., L, m) with L = "
                         f"{x.shape[-2]} (from x); got {tuple(k_log_scale.shape)}")
    check_finite(name, k_log_scale, xp=xp)


def _stable_fwd(x, omega, k_log_scale):
    """Unchecked core of :func:`positive_features_stable_fwd` (inputs validated by the caller)."""
    impl = _dispatch.implementation("positive_features_stable")
    phi, log_scale = impl(x, omega, k_log_scale)
    return (phi, log_scale), PositiveFeaturesCache(x, omega, phi, 0.5, k_log_scale)


def positive_features_stable_fwd(x, omega, *, k_log_scale=None):
    r"""Row-stabilised positive random features ``(phi, log_scale)`` (FAVOR+), and the cache.

    ``phi * exp(log_scale)[..., None] == positive_features(x, omega)``, the unbiased estimator of
    ``softmax_kernel(q, k) = exp(q . k)`` (Choromanski et al. 2021, Lemma 1), without ever forming the raw
    values::

        phi = exp(u - max_row u) in (0, 1],    log_scale = max_row u - |x|^2/2 - log(m)/2,    u = x omega^T.

    (The ``1/sqrt(m)`` lives in ``log_scale``.) **Queries in the keys' frame.** With ``k_log_scale`` (the
    per-feature key frame returned by :func:`positive_key_features_stable`) the frame is folded into the
    exponent before the row maximum is taken, ``u = x omega^T + k_log_scale``, so that
    ``phi * exp(log_scale[..., None] - k_log_scale) == positive_features(x, omega)``: every (query, feature)
    term is represented relative to its own key feature's scale, and the product with the keys' features never
    underflows for the feature that dominates a query's kernel sum (issue 22). When a kernel is registered for
    the dispatch point ``"positive_features_stable"`` (``accel.use(...)``), it computes ``(phi, log_scale)``
    instead of :func:`_positive_features_stable_reference`, with the same signature and outputs.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
        float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.
    k_log_scale : (..., 1, m) or (..., L, m) array, optional
        A key frame to fold into the exponent (queries of FAVOR+; from
        :func:`positive_key_features_stable`), with the batch axes of `x`, same namespace and dtype, finite.
        ``None`` (default): no frame.

    Returns
    -------
    (phi, log_scale) : ((..., L, m), (..., L)) arrays
        ``phi`` in (0, 1], each row's maximum exactly 1; same namespace, dtype and device as `x`. Without a
        frame, for keys pass ``log_scale`` as ``linear_attention(..., k_log_scale=...)`` (row scales); for
        queries drop it (it cancels in the row normalisation).
    cache : PositiveFeaturesCache
        For :func:`positive_features_stable_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, `k_log_scale` has another
        shape than ``(..., 1, m)`` or ``(..., L, m)``, or an input is not finite.
    TypeError
        If `x`, `omega` and `k_log_scale` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    positive_features_stable, positive_features_stable_bwd
    """
    xp, m = check_x_omega(x, omega)
    if k_log_scale is not None:
        namespace(x, k_log_scale, names=("x", "k_log_scale"))
        _check_frame(k_log_scale, x, m, xp=xp)
    return _stable_fwd(x, omega, k_log_scale)


def positive_features_stable_bwd(dout, cache: PositiveFeaturesCache, *,
                                 omega_grad=True) -> PositiveFeaturesGrads:
    r"""Gradients of :func:`positive_features_stable` from the cotangent pair ``(dphi, dlog_scale)``.

    ``dlog_scale`` may be ``None`` (queries: their log-scale is dropped because it cancels). With
    ``g = dphi * phi``, ``a`` the (first) argmax of each row and ``e_a`` its one-hot vector, the exponent's
    cotangent is ``du = g + e_a (dlog_scale - sum_m g)`` (the row maximum moves phi and log_scale in opposite
    directions), then ``dx = du omega - dlog_scale x``, ``domega = du^T x`` and, with a folded frame,
    ``dk_log_scale = du`` summed to the frame's shape. The argmax is recomputed from ``phi`` (its entry is
    exactly 1).

    Parameters
    ----------
    dout : tuple of ((..., L, m) array, (..., L) array or None)
        ``(dphi, dlog_scale)``; same namespace and dtype as the cache, finite.
    cache : PositiveFeaturesCache
        From :func:`positive_features_stable_fwd`.
    omega_grad : bool, default True
        ``False``: ``domega`` is not computed and is ``None`` (a drawn, non-learnable omega).

    Returns
    -------
    PositiveFeaturesGrads
        ``x : (..., L, d)``, ``omega : (m, d)`` (or ``None``) and ``k_log_scale`` with the folded frame's
        shape (``None`` without a frame).

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    dphi, dls = dout
    c = cache
    xp = namespace(dphi, c.phi, dls, names=("dphi", "cache.phi", "dlog_scale"))
    sizes = check_shape("phi", c.phi, "..., L, m")
    check_shape("dphi", dphi, "..., L, m", sizes)
    if dls is not None:
        check_shape("dlog_scale", dls, "..., L", sizes)
        check_finite("dlog_scale", dls, xp=xp)
    check_finite("dphi", dphi, xp=xp)
    return _stable_bwd(dphi, dls, c, omega_grad=omega_grad, xp=xp)


def _stable_bwd(dphi, dls, c, *, omega_grad, xp):
    """Unchecked core of :func:`positive_features_stable_bwd`."""
    m = c.phi.shape[-1]
    g = dphi * c.phi                                                              # (..., L, m)
    a = xp.argmax(c.phi, axis=-1, keepdims=True)                                  # (..., L, 1) row argmax
    onehot = xp.astype(xp.arange(m, device=device_of(c.phi)) == a, c.phi.dtype)   # (..., L, m)
    corr = -xp.sum(g, axis=-1, keepdims=True)                                     # (..., L, 1)
    if dls is not None:
        corr = corr + xp.expand_dims(dls, axis=-1)
    du = g + onehot * corr                                                        # (..., L, m)
    dx, domega = project_bwd(du, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    if dls is not None:
        dx = dx - xp.expand_dims(dls, axis=-1) * c.x                              # d(-|x|^2/2) = -x
    dframe = None
    if c.frame is not None:
        dframe = du if c.frame.shape[-2] == du.shape[-2] else xp.sum(du, axis=-2, keepdims=True)
    return PositiveFeaturesGrads(x=dx, omega=domega, k_log_scale=dframe)


def positive_features_stable(x, omega, *, k_log_scale=None):
    r"""Row-stabilised positive random features (FAVOR+): ``positive_features = phi * exp(log_scale)``.

    ``phi = exp(u - max_row u)`` and ``log_scale = max_row u - |x|^2/2 - log(m)/2``, ``u = x omega^T``: the
    unbiased estimator of ``exp(q . k)`` of Choromanski et al. 2021, Lemma 1, never overflowing (design.md
    trap 3). With ``k_log_scale`` a key frame is folded in (see :func:`positive_features_stable_fwd`).

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
        float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.
    k_log_scale : (..., 1, m) or (..., L, m) array, optional
        A key frame to fold into the exponent (queries of FAVOR+; from
        :func:`positive_key_features_stable`), with the batch axes of `x`, same namespace and dtype, finite.
        ``None`` (default): no frame.

    Returns
    -------
    phi : (..., L, m) array
        Entries in (0, 1], each row's maximum exactly 1; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        Keys (no frame): pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, `k_log_scale` has another
        shape than ``(..., 1, m)`` or ``(..., L, m)``, or an input is not finite.
    TypeError
        If `x`, `omega` and `k_log_scale` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    positive_features_stable_fwd, positive_features_stable_bwd : the differentiable pair.
    positive_key_features_stable : keys with per-feature frames.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import positive_features, positive_features_stable
    >>> x, omega = np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2)
    >>> phi, log_scale = positive_features_stable(x, omega)
    >>> phi
    array([[1.        , 1.        ],
           [1.        , 0.60653066]])
    >>> log_scale
    array([-0.34657359,  0.02842641])
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], positive_features(x, omega)))
    True
    """
    return positive_features_stable_fwd(x, omega, k_log_scale=k_log_scale)[0]


# ----------------------------------------------------------------------------------------------------------
# keys with per-feature frames (issue 22): every feature column carries its own scale


@_dispatch.define("positive_key_features_stable")
def _key_features_reference(x, omega, causal):
    r"""Keys' positive features in per-feature frames (reference for ``"positive_key_features_stable"``;
    inputs already validated).

    ``x: (..., L, d)``, ``omega: (m, d)`` -> ``phi: (..., L, m) = exp(l - P)`` and
    ``k_log_scale = P - log(m)/2`` with ``l = x omega^T - |x|^2/2``: ``P: (..., 1, m)`` is the maximum of
    ``l`` over the positions (bidirectional), ``(..., L, m)`` its running maximum over the prefix (causal).
    """
    xp = namespace(x, omega)
    m = omega.shape[0]
    ell = project(x, omega, xp=xp)                                                # (..., L, m) fresh array
    ell -= xp.expand_dims(sq_norm_half(x, xp=xp), axis=-1)                        # l = u - |x|^2/2
    if causal:
        P = cumulative_max(ell, axis=-2, xp=xp)                                   # (..., L, m) prefix maxima
    else:
        P = xp.max(ell, axis=-2, keepdims=True)                                   # (..., 1, m) column maxima
    ell -= P                                                                      # in place: <= 0
    return xp.exp(ell), P - 0.5 * math.log(m)                                    # (..., L, m) in (0, 1]


def _key_fwd(x, omega, causal):
    """Unchecked core of :func:`positive_key_features_stable_fwd`."""
    impl = _dispatch.implementation("positive_key_features_stable")
    phi, k_log_scale = impl(x, omega, causal)
    return (phi, k_log_scale), KeyFeaturesCache(x, omega, phi, causal)


def positive_key_features_stable_fwd(x, omega, *, causal=False):
    r"""Keys' positive random features with a **per-feature** stabiliser ``(phi, k_log_scale)``, and cache.

    ``phi * exp(k_log_scale) == positive_features(x, omega)`` (Choromanski et al. 2021, Lemma 1) with::

        phi = exp(l - P) in (0, 1],    k_log_scale = P - log(m)/2,    l = x omega^T - |x|^2/2,

    where ``P`` is, per feature, the maximum of ``l`` over all positions (``causal=False``: shape
    ``(..., 1, m)``) or over the prefix ``j <= i`` (``causal=True``: ``(..., L, m)``, so no later key sets the
    scale of an earlier one: design.md trap 3). Every feature column holds its largest key at exactly 1, so a
    query whose kernel sum is dominated by one feature meets that feature's keys at full precision; a per-row
    key scale cannot do that (issue 22: float32 FAVOR+ at ``|q'| = |k'| = 60``). Fold ``k_log_scale`` into the
    queries with ``positive_features_stable(q, omega, k_log_scale=...)``; causal attention then takes it as
    ``linear_attention(..., causal=True, k_log_scale=...)``, bidirectional attention needs nothing more (the
    frame cancels between the query and key features).

    Parameters
    ----------
    x : (..., L, d) array
        Keys (already scaled). Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.
    causal : bool, default False
        Prefix maxima instead of maxima over all positions.

    Returns
    -------
    (phi, k_log_scale) : ((..., L, m), (..., 1, m) or (..., L, m)) arrays
        ``phi`` in (0, 1]; same namespace, dtype and device as `x`.
    cache : KeyFeaturesCache
        For :func:`positive_key_features_stable_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype or are not real floating, or `causal` is not a bool.

    See Also
    --------
    positive_key_features_stable, positive_key_features_stable_bwd
    """
    xp, m = check_x_omega(x, omega)
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool; got {causal!r}")
    return _key_fwd(x, omega, causal)


def positive_key_features_stable_bwd(dout, cache: KeyFeaturesCache, *,
                                     omega_grad=True) -> PositiveFeaturesGrads:
    r"""Gradients of :func:`positive_key_features_stable` from ``(dphi, dk_log_scale)``.

    With ``g = dphi * phi`` the cotangent of ``l`` is ``g`` plus, at each maximiser, what its maximum carries:
    ``dP - g`` (``phi = exp(l - P)`` and ``k_log_scale = P - log(m)/2``). Bidirectional: the column argmax
    receives ``sum_L (dP - g)``. Causal: position i's ``dP_i - g_i`` goes to the last position ``a(i) <= i``
    where the running maximum was attained (segment sums, from a reverse cumulative sum and the next
    maximiser's index). ``dk_log_scale`` may be ``None`` (zero). Then ``dx = dl omega - sum_m(dl) x`` and
    ``domega = dl^T x``.

    Parameters
    ----------
    dout : tuple of ((..., L, m) array, (..., 1, m) or (..., L, m) array or None)
        ``(dphi, dk_log_scale)``, each with its output's shape; same namespace and dtype as the cache, finite.
    cache : KeyFeaturesCache
        From :func:`positive_key_features_stable_fwd`.
    omega_grad : bool, default True
        ``False``: ``domega`` is not computed and is ``None`` (a drawn, non-learnable omega).

    Returns
    -------
    PositiveFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)`` (or ``None``); ``k_log_scale`` is ``None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    dphi, dP = dout
    c = cache
    xp = namespace(dphi, c.phi, dP, names=("dphi", "cache.phi", "dk_log_scale"))
    sizes = check_shape("phi", c.phi, "..., L, m")
    check_shape("dphi", dphi, "..., L, m", sizes)
    check_finite("dphi", dphi, xp=xp)
    if dP is not None:
        check_finite("dk_log_scale", dP, xp=xp)
    if dP is not None:
        check_shape("dk_log_scale", dP, "..., L, m" if c.causal else "..., 1, m", dict(sizes))
    g = dphi * c.phi                                                              # (..., L, m)
    L = c.phi.shape[-2]
    dev = device_of(c.phi)
    if not c.causal:
        r = -xp.sum(g, axis=-2, keepdims=True)                                    # (..., 1, m) at the maxima
        if dP is not None:
            r = r + dP
        a = xp.argmax(c.phi, axis=-2, keepdims=True)                              # (..., 1, m) column argmax
        pos = xp.reshape(xp.arange(L, device=dev), (L, 1))                        # (L, 1)
        dl = g + xp.astype(pos == a, g.dtype) * r                                 # (..., L, m)
    else:
        r = -g if dP is None else dP - g                                          # (..., L, m) at the maxima
        mark = c.phi == 1                                                         # (..., L, m) l_j = P_j
        B = xp.flip(xp.cumulative_sum(xp.flip(r, axis=-2), axis=-2), axis=-2)  # (..., L, m) sum_{i >= j} r_i
        idx = xp.reshape(xp.astype(xp.arange(L, device=dev), g.dtype), (L, 1))    # (L, 1) positions
        nxt = xp.where(mark, idx, xp.asarray(float(L), dtype=g.dtype, device=dev))  # (..., L, m)
        nxt = -xp.flip(cumulative_max(-xp.flip(nxt, axis=-2), axis=-2, xp=xp), axis=-2)  # min over i >= j
        shape = tuple(g.shape[:-2]) + (1, g.shape[-1])
        fill_L = xp.full(shape, float(L), dtype=g.dtype, device=dev)
        nxt = xp.concat([nxt[..., 1:, :], fill_L], axis=-2)                      # first maximiser after j
        B_ext = xp.concat([B, xp.zeros(shape, dtype=g.dtype, device=dev)], axis=-2)   # (..., L + 1, m)
        Bn = xp.take_along_axis(B_ext, xp.astype(nxt, xp.int64), axis=-2)        # (..., L, m)
        dl = g + xp.where(mark, B - Bn, xp.zeros_like(g))                        # segment sums at maximisers
    dx, domega = project_bwd(dl, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    dx = dx - xp.sum(dl, axis=-1, keepdims=True) * c.x                            # d(-|x|^2/2) = -x
    return PositiveFeaturesGrads(x=dx, omega=domega)


def positive_key_features_stable(x, omega, *, causal=False):
    r"""Keys' positive random features with a per-feature stabiliser, ``phi * exp(k_log_scale)``.

    ``phi * exp(k_log_scale) == positive_features(x, omega)`` (Choromanski et al. 2021, Lemma 1), each
    feature column scaled by its own maximum over the keys (the prefix maximum when ``causal=True``); see
    :func:`positive_key_features_stable_fwd`. Fold ``k_log_scale`` into the queries with
    ``positive_features_stable(q, omega, k_log_scale=...)``.

    Parameters
    ----------
    x : (..., L, d) array
        Keys (already scaled). Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.
    causal : bool, default False
        Prefix maxima (no later key sets the scale of an earlier one) instead of maxima over all positions.

    Returns
    -------
    phi : (..., L, m) array
        Entries in (0, 1], each column's (prefix) maximum exactly 1; same namespace, dtype and device as `x`.
    k_log_scale : (..., 1, m) or (..., L, m) array
        Per-feature frame: ``(..., 1, m)`` bidirectional, ``(..., L, m)`` causal.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype or are not real floating, or `causal` is not a bool.

    See Also
    --------
    positive_key_features_stable_fwd, positive_key_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import positive_features, positive_key_features_stable
    >>> k, omega = np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2)
    >>> phi, k_log_scale = positive_key_features_stable(k, omega)
    >>> phi
    array([[0.68728928, 1.        ],
           [1.        , 0.8824969 ]])
    >>> k_log_scale
    array([[ 0.02842641, -0.34657359]])
    >>> bool(np.allclose(phi * np.exp(k_log_scale), positive_features(k, omega)))
    True
    """
    return positive_key_features_stable_fwd(x, omega, causal=causal)[0]


# ----------------------------------------------------------------------------------------------------------
# hyperbolic (antithetic) maps


def _antithetic(omega, *, xp):
    return xp.concat([omega, -omega], axis=0)                                     # (2m, d) [omega; -omega]


def _antithetic_grad(domega2, m):
    if domega2 is None:                                                           # not requested
        return None
    return domega2[:m, :] - domega2[m:, :]                                        # (m, d)


def hyperbolic_features_fwd(x, omega):
    r"""Hyperbolic positive features ``[exp(u), exp(-u)] exp(-|x|^2/2) / sqrt(2m)``, and the cache.

    Antithetic projections ``+-omega``, ``u = x omega^T``.

    Estimates ``softmax_kernel(q, k) = exp(q . k)``:
    ``phi(q) . phi(k) = (1/m) sum_i cosh(omega_i . (q + k)) exp(-|q|^2/2 - |k|^2/2)`` (Choromanski et al.
    2021, the hyperbolic variant of Lemma 1). Raw (unstabilised).

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
        float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, 2m) array
        ``exp(+u)`` half first; positive; same namespace, dtype and device as `x`.
    cache : HyperbolicFeaturesCache
        For :func:`hyperbolic_features_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    hyperbolic_features, hyperbolic_features_bwd
    """
    xp, _ = check_x_omega(x, omega)
    phi, cache = positive_features_fwd(x, _antithetic(omega, xp=xp))              # (..., L, 2m)
    return phi, HyperbolicFeaturesCache(cache)


def hyperbolic_features_bwd(dphi, cache: HyperbolicFeaturesCache) -> PositiveFeaturesGrads:
    r"""Backward of :func:`hyperbolic_features`: :func:`positive_features_bwd` on ``[omega; -omega]``.

    The two halves' projection gradients combine as ``domega = domega_+ - domega_-``.

    Parameters
    ----------
    dphi : (..., L, 2m) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : HyperbolicFeaturesCache
        From :func:`hyperbolic_features_fwd`.

    Returns
    -------
    PositiveFeaturesGrads
        ``x : (..., L, d)``, ``omega : (m, d)``; ``k_log_scale`` is ``None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    g = positive_features_bwd(dphi, cache.inner)
    return PositiveFeaturesGrads(x=g.x, omega=_antithetic_grad(g.omega, g.omega.shape[0] // 2))


def hyperbolic_features(x, omega):
    r"""Hyperbolic positive features ``[exp(u), exp(-u)] exp(-|x|^2/2) / sqrt(2m)``, u = x omega^T.

    Unbiased for :func:`~refattn.features.trig.softmax_kernel` ``exp(q . k)`` with ``omega ~ N(0, I_d)``
    (Choromanski et al. 2021, the hyperbolic form of Lemma 1), with a smaller variance than
    :func:`positive_features`: ``Var = exp(-|q|^2 - |k|^2) (exp(|q + k|^2) - 1)^2 / (2m)``. Raw
    (unstabilised): attention should use :func:`hyperbolic_features_stable`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
        float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, 2m) array
        ``exp(+u)`` half first; positive; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    hyperbolic_features_fwd, hyperbolic_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import hyperbolic_features, softmax_kernel
    >>> from refattn.random import draw_gaussian
    >>> hyperbolic_features(np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2))
    array([[0.5       , 0.5       , 0.5       , 0.5       ],
           [0.72749571, 0.44124845, 0.09845584, 0.16232623]])
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)
    >>> estimate = hyperbolic_features(q, omega) @ hyperbolic_features(k, omega).T
    >>> bool(np.allclose(estimate, softmax_kernel(q, k), atol=0.1))
    True
    """
    return hyperbolic_features_fwd(x, omega)[0]


def hyperbolic_features_stable_fwd(x, omega, *, k_log_scale=None):
    r"""Row-stabilised hyperbolic features ``(phi, log_scale)`` and the cache.

    :func:`positive_features_stable` on ``[omega; -omega]`` (width 2m), so that
    ``phi * exp(log_scale)[..., None] == hyperbolic_features(x, omega)`` (Choromanski et al. 2021, Lemma 1).

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
        float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.
    k_log_scale : (..., 1, 2m) or (..., L, 2m) array, optional
        A key frame to fold into the exponent (queries of FAVOR+; from
        :func:`hyperbolic_key_features_stable`), with the batch axes of `x`, same namespace and dtype,
        finite. ``None`` (default): no frame.

    Returns
    -------
    (phi, log_scale) : ((..., L, 2m), (..., L)) arrays
        ``phi`` in (0, 1], each row's maximum exactly 1; same namespace, dtype and device as `x`.
    cache : HyperbolicFeaturesCache
        For :func:`hyperbolic_features_stable_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, `k_log_scale` has another
        shape than ``(..., 1, 2m)`` or ``(..., L, 2m)``, or an input is not finite.
    TypeError
        If `x`, `omega` and `k_log_scale` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    hyperbolic_features_stable, hyperbolic_features_stable_bwd
    """
    xp, m = check_x_omega(x, omega)
    if k_log_scale is not None:
        namespace(x, k_log_scale, names=("x", "k_log_scale"))
        _check_frame(k_log_scale, x, 2 * m, xp=xp)
    out, cache = _stable_fwd(x, _antithetic(omega, xp=xp), k_log_scale)
    return out, HyperbolicFeaturesCache(cache)


def hyperbolic_features_stable_bwd(dout, cache: HyperbolicFeaturesCache, *,
                                   omega_grad=True) -> PositiveFeaturesGrads:
    r"""Backward of :func:`hyperbolic_features_stable` from ``(dphi, dlog_scale)``.

    :func:`positive_features_stable_bwd` on ``[omega; -omega]``, then ``domega = domega_+ - domega_-``.

    Parameters
    ----------
    dout : tuple of ((..., L, 2m) array, (..., L) array or None)
        ``(dphi, dlog_scale)``; ``dlog_scale`` may be ``None`` (queries). Same namespace and dtype as the
        cache, finite.
    cache : HyperbolicFeaturesCache
        From :func:`hyperbolic_features_stable_fwd`.
    omega_grad : bool, default True
        ``False``: ``domega`` is not computed and is ``None`` (a drawn, non-learnable omega).

    Returns
    -------
    PositiveFeaturesGrads
        ``x : (..., L, d)``, ``omega : (m, d)`` (or ``None``) and ``k_log_scale`` with the folded frame's
        shape (``None`` without a frame).

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    g = positive_features_stable_bwd(dout, cache.inner, omega_grad=omega_grad)
    return PositiveFeaturesGrads(x=g.x, omega=_antithetic_grad(g.omega, cache.inner.omega.shape[0] // 2),
                                 k_log_scale=g.k_log_scale)


def hyperbolic_features_stable(x, omega, *, k_log_scale=None):
    r"""Row-stabilised hyperbolic features: :func:`hyperbolic_features` as ``phi * exp(log_scale)``.

    :func:`positive_features_stable` on the antithetic projections ``[omega; -omega]`` (Choromanski et al.
    2021, Lemma 1, hyperbolic form), never overflowing.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys (already scaled, e.g. by d^{-1/4} for softmax attention). Real floating (float32 or
        float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.
    k_log_scale : (..., 1, 2m) or (..., L, 2m) array, optional
        A key frame to fold into the exponent (queries of FAVOR+; from
        :func:`hyperbolic_key_features_stable`), with the batch axes of `x`, same namespace and dtype,
        finite. ``None`` (default): no frame.

    Returns
    -------
    phi : (..., L, 2m) array
        Entries in (0, 1], each row's maximum exactly 1; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        Keys (no frame): pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, `k_log_scale` has another
        shape than ``(..., 1, 2m)`` or ``(..., L, 2m)``, or an input is not finite.
    TypeError
        If `x`, `omega` and `k_log_scale` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    hyperbolic_features_stable_fwd, hyperbolic_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import hyperbolic_features, hyperbolic_features_stable
    >>> x, omega = np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2)
    >>> phi, log_scale = hyperbolic_features_stable(x, omega)
    >>> phi.shape, log_scale.shape
    ((2, 4), (2,))
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], hyperbolic_features(x, omega)))
    True
    """
    return hyperbolic_features_stable_fwd(x, omega, k_log_scale=k_log_scale)[0]


def hyperbolic_key_features_stable_fwd(x, omega, *, causal=False):
    r"""Keys' hyperbolic features with per-feature frames ``(phi, k_log_scale)``, and the cache.

    :func:`positive_key_features_stable_fwd` on ``[omega; -omega]``: ``phi * exp(k_log_scale) ==
    hyperbolic_features(x, omega)`` (Choromanski et al. 2021, Lemma 1, hyperbolic form).

    Parameters
    ----------
    x : (..., L, d) array
        Keys (already scaled). Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.
    causal : bool, default False
        Prefix maxima instead of maxima over all positions.

    Returns
    -------
    (phi, k_log_scale) : ((..., L, 2m), (..., 1, 2m) or (..., L, 2m)) arrays
        ``phi`` in (0, 1]; same namespace, dtype and device as `x`.
    cache : HyperbolicFeaturesCache
        For :func:`hyperbolic_key_features_stable_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype or are not real floating, or `causal` is not a bool.

    See Also
    --------
    hyperbolic_key_features_stable, hyperbolic_key_features_stable_bwd
    """
    xp, _ = check_x_omega(x, omega)
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool; got {causal!r}")
    out, cache = _key_fwd(x, _antithetic(omega, xp=xp), causal)
    return out, HyperbolicFeaturesCache(cache)


def hyperbolic_key_features_stable_bwd(dout, cache: HyperbolicFeaturesCache, *,
                                       omega_grad=True) -> PositiveFeaturesGrads:
    r"""Backward of :func:`hyperbolic_key_features_stable` from ``(dphi, dk_log_scale)``.

    :func:`positive_key_features_stable_bwd` on ``[omega; -omega]``, then ``domega = domega_+ - domega_-``.

    Parameters
    ----------
    dout : tuple of ((..., L, 2m) array, (..., 1, 2m) or (..., L, 2m) array or None)
        ``(dphi, dk_log_scale)``, each with its output's shape (``dk_log_scale`` may be ``None``); same
        namespace and dtype as the cache, finite.
    cache : HyperbolicFeaturesCache
        From :func:`hyperbolic_key_features_stable_fwd`.
    omega_grad : bool, default True
        ``False``: ``domega`` is not computed and is ``None`` (a drawn, non-learnable omega).

    Returns
    -------
    PositiveFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)`` (or ``None``); ``k_log_scale`` is ``None``.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    g = positive_key_features_stable_bwd(dout, cache.inner, omega_grad=omega_grad)
    return PositiveFeaturesGrads(x=g.x, omega=_antithetic_grad(g.omega, cache.inner.omega.shape[0] // 2))


def hyperbolic_key_features_stable(x, omega, *, causal=False):
    r"""Keys' hyperbolic features with per-feature stabilisers, ``phi * exp(k_log_scale)``.

    :func:`positive_key_features_stable` on the antithetic projections ``[omega; -omega]``:
    ``phi * exp(k_log_scale) == hyperbolic_features(x, omega)`` (Choromanski et al. 2021, Lemma 1). Fold
    ``k_log_scale`` into the queries with ``hyperbolic_features_stable(q, omega, k_log_scale=...)``.

    Parameters
    ----------
    x : (..., L, d) array
        Keys (already scaled). Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.
    causal : bool, default False
        Prefix maxima instead of maxima over all positions.

    Returns
    -------
    phi : (..., L, 2m) array
        Entries in (0, 1]; same namespace, dtype and device as `x`.
    k_log_scale : (..., 1, 2m) or (..., L, 2m) array
        Per-feature frame: ``(..., 1, 2m)`` bidirectional, ``(..., L, 2m)`` causal.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype or are not real floating, or `causal` is not a bool.

    See Also
    --------
    hyperbolic_key_features_stable_fwd, hyperbolic_key_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import hyperbolic_features, hyperbolic_key_features_stable
    >>> k, omega = np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2)
    >>> phi, k_log_scale = hyperbolic_key_features_stable(k, omega, causal=True)
    >>> phi.shape, k_log_scale.shape
    ((2, 4), (2, 4))
    >>> bool(np.allclose(phi * np.exp(k_log_scale), hyperbolic_features(k, omega)))
    True
    """
    return hyperbolic_key_features_stable_fwd(x, omega, causal=causal)[0]
