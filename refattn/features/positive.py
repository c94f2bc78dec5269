r"""Positive random features (PRF, FAVOR+) ``exp(x omega^T - c |x|^2) / sqrt(m)`` and their row stabiliser.

:func:`positive_features` (c = 1/2: the softmax kernel), :func:`gaussian_positive_features` (c = 1, Chowdhury
et al. Eq. (9): the Gaussian kernel), :func:`positive_features_stable` (the first as ``(phi, log_scale)``;
the dispatch point ``"positive_features_stable"``) and the estimates' MSEs. Keys with one frame per feature
are in :mod:`refattn.features.key_frames`, the antithetic maps in :mod:`refattn.features.hyperbolic`. Axes:
``...`` batch and heads, ``L`` positions, ``d`` input width, ``m`` projections (the feature width).

**The estimate and its MSE**, both offsets (iid ``omega_i ~ N(0, I_d)``, ``s = q + k``): ``phi(q) . phi(k)``
is the mean of m iid ``Y_i = exp(omega_i . s - c|q|^2 - c|k|^2)``. From ``E exp(omega . a) = exp(|a|^2/2)``,
``E Y = exp(|s|^2/2 - c|q|^2 - c|k|^2)`` and ``E Y^2 = exp(2|s|^2 - 2c|q|^2 - 2c|k|^2) = (E Y)^2
exp(|s|^2)``, so the MSE (``Var Y / m``: unbiased) is ``(E Y)^2 (exp(|s|^2) - 1) / m``. c = 1/2: ``E Y =
exp(q . k)``, the softmax kernel (Choromanski et al. 2021, Lemmas 1 and 2); c = 1: ``E Y = exp(-|q -
k|^2/2)``, the Gaussian kernel. Every estimate is positive.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import _dispatch
from .._docs import fill_doc
from .._xp import check_finite, check_shape, device_of, namespace
from .projection import (BWD_RAISES, OMEGA_GRAD_PARAMETER, X_OMEGA_PARAMETERS, X_OMEGA_RAISES, check_x_omega,
                          project, project_bwd, sq_norm_half)
from .trig import MSE_SECTIONS, mse_terms, nonneg

__all__ = [
    "positive_features", "positive_features_fwd", "positive_features_bwd",
    "positive_features_stable", "positive_features_stable_fwd", "positive_features_stable_bwd",
    "gaussian_positive_features", "gaussian_positive_features_fwd", "gaussian_positive_features_bwd",
    "PositiveFeaturesCache", "PositiveFeaturesGrads", "positive_mse", "gaussian_positive_mse",
]

Array = Any

_DPHI_DOC = """
Parameters
----------
dphi : (..., L, m) array
    Cotangent of the features; same namespace and dtype as the cache, finite.
cache : PositiveFeaturesCache
    From the map's ``_fwd``.
"""
GRADS_RETURNS = """
Returns
-------
PositiveFeaturesGrads
    ``x : (..., L, d)``; ``omega : (m, d)``, ``None`` when `omega_grad` is False; ``k_log_scale``: the folded
    key frame's gradient, its shape (a stable query map with a frame), else ``None``.
"""
_FRAME_DOC = """
k_log_scale : (..., 1, m) or (..., L, m) array, optional
    A key frame to fold into the exponent (queries of FAVOR+; from :func:`positive_key_features_stable`), with
    the batch axes of `x`, same namespace and dtype, finite. ``None`` (default): no frame.
"""
_STABLE_RAISES_DOC = """
Raises
------
ValueError
    If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, `k_log_scale` has another shape
    than ``(..., 1, m)`` or ``(..., L, m)``, or an input is not finite.
TypeError
    If `x`, `omega` and `k_log_scale` differ in namespace or dtype, or are not real floating.
"""
_RAW_RETURNS_DOC = """
Returns
-------
phi : (..., L, m) array
    Positive; same namespace, dtype and device as `x`.
"""


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


# ----------------------------------------------------------------------------------------------------------
# raw positive maps: exp(x omega^T - c |x|^2) / sqrt(m), c = 1/2 (softmax kernel) or 1 (KL Eq. 9, Gaussian)


def _check_dphi(dphi, cache):
    """A raw map's backward boundary: `dphi` has the features' shape and namespace, finite."""
    xp = namespace(dphi, cache.phi, names=("dphi", "cache.phi"))
    check_shape("dphi", dphi, "..., L, m", check_shape("phi", cache.phi, "..., L, m"))
    check_finite("dphi", dphi, xp=xp)
    return xp


# phi = exp(u - c |x|^2) / sqrt(m),  u = x omega^T,  c = offset (1/2: softmax kernel, 1: Gaussian kernel)
# du = dphi * phi;  dx = du omega - 2c sum_m(du) x;  domega = du^T x
def positive_features_fwd_core(x, omega, *, offset=0.5, xp):
    """Unchecked core of :func:`positive_features_fwd` (and, with ``offset=1``, the Gaussian map's)."""
    m = omega.shape[0]
    u = project(x, omega, xp=xp)                                                  # (..., L, m) x omega^T
    shift = 2.0 * offset * sq_norm_half(x, xp=xp) + 0.5 * math.log(m)  # (..., L) c|x|^2 + log sqrt(m)
    phi = xp.exp(u - xp.expand_dims(shift, axis=-1))                              # (..., L, m)
    return phi, PositiveFeaturesCache(x, omega, phi, offset)


def positive_features_bwd_core(dphi, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`positive_features_bwd` (and of the Gaussian map's)."""
    c = cache
    du = dphi * c.phi                                                             # (..., L, m) d exponent
    dx, domega = project_bwd(du, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    dx = dx - (2.0 * c.offset) * xp.sum(du, axis=-1, keepdims=True) * c.x         # d(-c|x|^2) = -2c x
    return PositiveFeaturesGrads(x=dx, omega=domega)


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, returns=_RAW_RETURNS_DOC, raises=X_OMEGA_RAISES)
def positive_features(x, omega):
    r"""Positive random features (FAVOR+) ``exp(x omega^T - |x|^2/2) / sqrt(m)`` (Performer Lemma 1).

    ``phi(q) . phi(k)`` estimates :func:`~refattn.features.trig.softmax_kernel` ``exp(q . k)`` without bias
    (c = 1/2 in the module docstring's derivation; MSE :func:`positive_mse`). Raw: entries overflow or
    underflow once ``|x omega_i - |x|^2/2|`` exceeds ~88 (float32) / ~709 (float64); attention should use
    :func:`positive_features_stable`. Backward: with ``du = dphi * phi``, ``dx = du omega - sum_m(du) x`` and
    ``domega = du^T x``.

    {x_omega_parameters}

    {returns}

    {raises}

    See Also
    --------
    positive_features_fwd, positive_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import positive_features as phi, softmax_kernel
    >>> from refattn.random import draw_gaussian
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])      # (L, d)
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)                          # (m, d)
    >>> bool(np.allclose(phi(q, omega) @ phi(k, omega).T, softmax_kernel(q, k), atol=0.1))
    True
    """
    return positive_features_fwd(x, omega)[0]


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS)
def positive_features_fwd(x, omega):
    """:func:`positive_features` and the cache for its backward (equations, shapes and errors there).

    {x_omega_parameters}

    Returns
    -------
    (phi, cache) : ((..., L, m) array, PositiveFeaturesCache)
    """
    xp, _ = check_x_omega(x, omega)
    return positive_features_fwd_core(x, omega, xp=xp)


@fill_doc(dphi=_DPHI_DOC, omega_grad=OMEGA_GRAD_PARAMETER, returns=GRADS_RETURNS, raises=BWD_RAISES)
def positive_features_bwd(dphi, cache: PositiveFeaturesCache, *, omega_grad=True) -> PositiveFeaturesGrads:
    """Gradients of :func:`positive_features` (equations there) from the features' cotangent.

    {dphi}
    {omega_grad}

    {returns}

    {raises}
    """
    xp = _check_dphi(dphi, cache)
    return positive_features_bwd_core(dphi, cache, omega_grad=omega_grad, xp=xp)


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, returns=_RAW_RETURNS_DOC, raises=X_OMEGA_RAISES)
def gaussian_positive_features(x, omega):
    r"""The PRF map of Chowdhury et al. Eq. (9), ``exp(x omega^T - |x|^2) / sqrt(m)``.

    Eq. (9) writes ``PRF(x) = exp(-|x|^2) [exp(omega_1 . x), ...] / sqrt(M)``: offset ``|x|^2``, not
    ``|x|^2/2`` (c = 1 in the module docstring's derivation), so ``phi(q) . phi(k)`` estimates ``exp(-|q -
    k|^2/2)``: the **Gaussian kernel** :func:`~refattn.features.trig.gaussian_kernel`, not the softmax kernel
    the sentence before the equation suggests; the two differ by ``exp(-|q|^2/2 - |k|^2/2)``, whose key
    factor does not cancel in attention. MSE: :func:`gaussian_positive_mse`. Raw. Backward: that of
    :func:`positive_features` with ``dx = du omega - 2 sum_m(du) x``.

    {x_omega_parameters}

    {returns}

    {raises}

    See Also
    --------
    gaussian_positive_features_fwd, gaussian_positive_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import gaussian_kernel, gaussian_positive_features as phi
    >>> from refattn.random import draw_gaussian
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)
    >>> bool(np.allclose(phi(q, omega) @ phi(k, omega).T, gaussian_kernel(q, k), atol=0.05))
    True
    """
    return gaussian_positive_features_fwd(x, omega)[0]


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS)
def gaussian_positive_features_fwd(x, omega):
    """:func:`gaussian_positive_features` and the cache for its backward (equations, shapes and errors there).

    {x_omega_parameters}

    Returns
    -------
    (phi, cache) : ((..., L, m) array, PositiveFeaturesCache)
    """
    xp, _ = check_x_omega(x, omega)
    return positive_features_fwd_core(x, omega, offset=1.0, xp=xp)


@fill_doc(dphi=_DPHI_DOC, returns=GRADS_RETURNS, raises=BWD_RAISES)
def gaussian_positive_features_bwd(dphi, cache: PositiveFeaturesCache) -> PositiveFeaturesGrads:
    """Gradients of :func:`gaussian_positive_features` (equations there) from the features' cotangent.

    {dphi}

    {returns}

    {raises}
    """
    xp = _check_dphi(dphi, cache)
    return positive_features_bwd_core(dphi, cache, xp=xp)


# ----------------------------------------------------------------------------------------------------------
# stabilised positive map (the fused hot primitive)


@_dispatch.define("positive_features_stable")
def _positive_features_stable_reference(x, omega, k_log_scale=None):
    """Reference of the dispatch point ``"positive_features_stable"`` (see :func:`positive_features_stable`):
    after the GEMM, (one add,) one max pass, one in-place subtraction, one exp."""
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


def check_frame(k_log_scale, x, m, *, xp, name="k_log_scale"):
    """A key frame for a query map: ``(..., 1, m)`` or ``(..., L, m)`` with x's batch axes, finite."""
    sizes = check_shape("x", x, "..., L, d")
    check_shape(name, k_log_scale, "..., F, m", {"...": sizes["..."], "m": (m, "omega")})
    if k_log_scale.shape[-2] not in (1, x.shape[-2]):
        raise ValueError(f"{name}: expected shape (..., 1, m) (one frame) or (..., L, m) with L = "
                         f"{x.shape[-2]} (from x); got {tuple(k_log_scale.shape)}")
    check_finite(name, k_log_scale, xp=xp)


# phi = exp(u - max_row u),  log_scale = max_row u - |x|^2/2 - log(m)/2,  u = x omega^T + k_log_scale
# du = g + e_a (dlog_scale - sum_m g), g = dphi * phi, a = row argmax;  dx = du omega - dlog_scale x
def positive_features_stable_fwd_core(x, omega, k_log_scale, *, xp):
    """Unchecked core of :func:`positive_features_stable_fwd` (the dispatched kernel or the reference)."""
    impl = _dispatch.implementation("positive_features_stable")
    phi, log_scale = impl(x, omega, k_log_scale)
    return (phi, log_scale), PositiveFeaturesCache(x, omega, phi, 0.5, k_log_scale)


def positive_features_stable_bwd_core(dphi, dls, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`positive_features_stable_bwd` (``dls``: the log-scale's cotangent or None)."""
    c = cache
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


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, frame=_FRAME_DOC, raises=_STABLE_RAISES_DOC)
def positive_features_stable(x, omega, *, k_log_scale=None):
    r"""Row-stabilised positive random features (FAVOR+): ``positive_features = phi * exp(log_scale)``.

    ``exp(x omega^T - |x|^2/2)`` overflows or underflows for large inputs (float32: exponents beyond about
    +-88). This map returns instead::

        phi       = exp(u - max_row u)                  in (0, 1], each row's maximum exactly 1,
        log_scale = max_row u - |x|^2/2 - log(m)/2,     u = x omega^T:

    the ``1/sqrt(m)`` and the ``|x|^2/2`` offset, constant along a row, live in the log-scale (a query's
    cancels between numerator and normaliser; Choromanski et al. 2021, Lemma 1, holds for the product).

    **Queries in the keys' frame** (why: ``docs/guide/features.md``). A key frame ``k_log_scale`` (of
    :func:`positive_key_features_stable`) is folded into the exponent before the row maximum, ``u = x omega^T
    + k_log_scale``, and ``phi * exp(log_scale[..., None] - k_log_scale)`` equals the raw map.

    **Backward.** With ``g = dphi * phi`` and ``e_a`` the one-hot of each row's (first) argmax (recomputed
    from ``phi``, where it is exactly 1), the exponent's cotangent is ``du = g + e_a (dlog_scale - sum_m g)``
    (the row maximum moves phi and log_scale in opposite directions); then ``dx = du omega - dlog_scale x``,
    ``domega = du^T x`` and, with a folded frame, ``dk_log_scale = du`` summed to the frame's shape.

    {x_omega_parameters}
    {frame}

    Returns
    -------
    phi : (..., L, m) array
        Entries in (0, 1], each row's maximum exactly 1; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        Keys (no frame): pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it.

    {raises}

    See Also
    --------
    positive_features_stable_fwd, positive_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import positive_features, positive_features_stable
    >>> x, omega = np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2)
    >>> phi, log_scale = positive_features_stable(x, omega)
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], positive_features(x, omega)))
    True
    """
    return positive_features_stable_fwd(x, omega, k_log_scale=k_log_scale)[0]


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, frame=_FRAME_DOC)
def positive_features_stable_fwd(x, omega, *, k_log_scale=None):
    """:func:`positive_features_stable` and the cache for its backward (equations, shapes and errors there).

    {x_omega_parameters}
    {frame}

    Returns
    -------
    ((phi, log_scale), cache) : (((..., L, m), (..., L)) arrays, PositiveFeaturesCache)
    """
    xp, m = check_x_omega(x, omega)
    if k_log_scale is not None:
        namespace(x, k_log_scale, names=("x", "k_log_scale"))
        check_frame(k_log_scale, x, m, xp=xp)
    return positive_features_stable_fwd_core(x, omega, k_log_scale, xp=xp)


@fill_doc(omega_grad=OMEGA_GRAD_PARAMETER, returns=GRADS_RETURNS, raises=BWD_RAISES)
def positive_features_stable_bwd(dout, cache: PositiveFeaturesCache, *,
                                 omega_grad=True) -> PositiveFeaturesGrads:
    """Gradients of :func:`positive_features_stable` (equations there) from ``(dphi, dlog_scale)``.

    Parameters
    ----------
    dout : tuple of ((..., L, m) array, (..., L) array or None)
        ``(dphi, dlog_scale)``, ``dlog_scale`` ``None`` for queries; cache's namespace and dtype, finite.
    cache : PositiveFeaturesCache
        From :func:`positive_features_stable_fwd`.
    {omega_grad}

    {returns}

    {raises}
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
    return positive_features_stable_bwd_core(dphi, dls, c, omega_grad=omega_grad, xp=xp)


# ----------------------------------------------------------------------------------------------------------
# closed-form MSEs (iid omega_i ~ N(0, I_d)); E exp(omega . a) = exp(|a|^2/2)


@fill_doc(sections=MSE_SECTIONS)
def positive_mse(q, k, m):
    r"""MSE of :func:`positive_features`' softmax-kernel estimate, ``exp(2 q.k) (exp(|q + k|^2) - 1) / m``.

    The module docstring's ``(E Y)^2 (exp(|s|^2) - 1) / m`` with ``E Y = exp(q . k)`` (iid ``omega_i ~ N(0,
    I_d)``, ``s = q + k``): Choromanski et al. 2021, Lemma 2's ``exp(|s|^2) SM^2(q, k) (1 - exp(-|s|^2)) /
    m``. Small where ``q + k`` is small (opposite vectors), not where ``q = k``. Haar-orthogonal blocks
    (``draw_orthogonal``) give another (smaller) MSE.

    {sections}

    See Also
    --------
    refattn.features.hyperbolic_mse : the antithetic (hyperbolic) map's smaller MSE.
    refattn.features.softmax_trig_mse : the trig estimator of the same kernel.
    validation.assert_mse_matches : tests such a formula against Monte Carlo draws.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import positive_mse
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> positive_mse(q, k, 64)
    array([[0.01856481, 0.47495578],
           [0.08433884, 0.099829  ]])
    """
    xp, qk, qq, kk, m = mse_terms(q, k, m)
    ss = nonneg(qq + kk + 2.0 * qk, xp=xp)                                        # (..., Lq, Lk) |q + k|^2
    return xp.exp(2.0 * qk) * xp.expm1(ss) / m


@fill_doc(sections=MSE_SECTIONS)
def gaussian_positive_mse(q, k, m):
    r"""MSE of :func:`gaussian_positive_features`' Gaussian-kernel estimate (Chowdhury et al. Eq. (9)).

    ``exp(-|q - k|^2) (exp(|q + k|^2) - 1) / m``: the module docstring's ``(E Y)^2 (exp(|s|^2) - 1) / m``
    with ``E Y = exp(-|q - k|^2/2)`` (c = 1; iid ``omega_i ~ N(0, I_d)``, ``s = q + k``).

    {sections}

    See Also
    --------
    positive_mse : the softmax-kernel map's MSE.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import gaussian_positive_mse
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> gaussian_positive_mse(q, k, 64)
    array([[0.00988747, 0.10597696],
           [0.02724425, 0.01351039]])
    """
    xp, qk, qq, kk, m = mse_terms(q, k, m)
    ss = nonneg(qq + kk + 2.0 * qk, xp=xp)                                        # (..., Lq, Lk) |q + k|^2
    dd = nonneg(qq + kk - 2.0 * qk, xp=xp)                                        # (..., Lq, Lk) |q - k|^2
    return xp.exp(-dd) * xp.expm1(ss) / m
