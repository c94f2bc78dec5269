r"""Trigonometric random features (random Fourier features / Random Kitchen Sinks) and the kernels they
estimate.

**RKS** (Rahimi & Recht; Chowdhury et al. Eq. (3)). With projections ``omega_i ~ N(0, I_d)``, i = 1..m,

    phi(x) = [cos(x . omega_1), ..., cos(x . omega_m), sin(x . omega_1), ..., sin(x . omega_m)] / sqrt(m)

has ``phi(q) . phi(k) = (1/m) sum_i cos(omega_i . (q - k))``, whose mean is the characteristic function of
``N(0, I)`` at ``q - k``: the **Gaussian kernel** ``exp(-|q - k|^2 / 2)`` (:func:`gaussian_kernel`; Bochner,
Chowdhury et al. Eq. (2)). It is *not* the softmax kernel (design.md trap 1).

**Softmax-trig** (Horn et al. Sec. 2.1: FAVOR with ``h(x) = exp(|x|^2/2)``, ``f_1 = sin``, ``f_2 = cos``).
Since ``exp(q . k) = exp(|q|^2/2) exp(|k|^2/2) exp(-|q - k|^2/2)``, the map ``exp(|x|^2/2) phi(x)`` estimates
the
**softmax kernel** ``exp(q . k)`` (:func:`softmax_kernel`) without bias. Its row factor ``exp(|x|^2/2)``
overflows float32 at |x| ~ 13.3; :func:`softmax_trig_features_stable` returns it as a log-scale instead
(``(trig_features(x), |x|^2/2)``), to be handed to ``linear_attention(..., k_log_scale=...)`` for keys and
dropped for queries (it scales a whole row of numerator and denominator alike).

**Variance** (iid Gaussian omega, derived in ``tests/features/test_trig.py`` and checked there by Monte
Carlo):
each ``cos(omega . delta)`` with ``delta = q - k`` has mean ``e^{-|delta|^2/2}`` and
``E cos^2 = (1 + e^{-2|delta|^2}) / 2``, so

    MSE_RKS(q, k)     = (1 - exp(-|q - k|^2))^2 / (2 m)
    MSE_softmax-trig  = exp(|q|^2 + |k|^2) (1 - exp(-|q - k|^2))^2 / (2 m).

The estimate can be zero or negative, so the normaliser of trig linear attention can be too (design.md trap
4):
``linear_attention`` reports it (``on_nonpositive``); nothing here hides it.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` input width, ``m`` projections (feature width 2m),
``Lq``/``Lk`` query/key positions of a kernel matrix.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import limits
from .._xp import check_finite, check_shape, namespace
from ._projection import check_x_omega, project, project_bwd, sq_norm_half

__all__ = [
    "trig_features", "trig_features_fwd", "trig_features_bwd", "TrigFeaturesCache", "TrigFeaturesGrads",
    "softmax_trig_features", "softmax_trig_features_fwd", "softmax_trig_features_bwd",
    "softmax_trig_features_stable", "softmax_trig_features_stable_fwd", "softmax_trig_features_stable_bwd",
    "SoftmaxTrigFeaturesCache",
    "gaussian_kernel", "softmax_kernel",
]

Array = Any


class TrigFeaturesCache(NamedTuple):
    """What :func:`trig_features_bwd` needs from :func:`trig_features_fwd`."""

    x: Array      # (..., L, d)
    omega: Array  # (m, d)
    # (..., L, 2m)  [cos u, sin u] / sqrt(m), u = x omega^T (the backward reads cos and sin from it)
    phi: Array


class TrigFeaturesGrads(NamedTuple):
    """Gradients of the trig maps: ``x`` and ``omega`` (``None`` when not requested)."""

    x: Array      # (..., L, d)
    omega: Array  # (m, d)


class SoftmaxTrigFeaturesCache(NamedTuple):
    """What :func:`softmax_trig_features_bwd` needs from :func:`softmax_trig_features_fwd`."""

    trig: TrigFeaturesCache  # the RKS part
    log_h: Array             # (..., L)  |x|^2 / 2
    phi: Array               # (..., L, 2m) the returned features (exp(log_h) * trig; the raw map only)


# ----------------------------------------------------------------------------------------------------------
# kernels (closed forms)


def _check_qk(q, k, extra=1):
    """The closed-form kernels' boundary: q: (..., Lq, d), k: (..., Lk, d), same batch, finite; the
    (..., Lq, Lk) result (times `extra`) within ``refattn.limits``. Empty Lq, Lk or batch give an empty
    result; d = 0 gives the kernel at q = k = 0 (all ones)."""
    xp = namespace(q, k, names=("q", "k"))
    sizes = check_shape("q", q, "..., Lq, d")
    check_shape("k", k, "..., Lk, d", sizes)
    n = extra * 8 * q.shape[-2] * k.shape[-2]
    for s in q.shape[:-2]:
        n *= s
    limits.check_nbytes(n, "q, k (the (..., Lq, Lk) kernel matrix)")
    check_finite("q", q, xp=xp)
    check_finite("k", k, xp=xp)
    return xp


def softmax_kernel(q, k):
    r"""The softmax (exponential) kernel matrix ``K(q, k) = exp(q^T k)`` (closed form).

    Unscaled: softmax attention's ``exp(q . k / sqrt(d))`` (Horn et al. Eq. (1)) is this kernel on
    ``d^{-1/4} q`` and ``d^{-1/4} k``. Estimated without bias by :func:`softmax_trig_features` (Horn et al.
    Sec. 2.1) and by the positive and hyperbolic maps of :mod:`refattn.features.positive` (Choromanski et al.
    2021, Performer, Lemma 1; the identity before Chowdhury et al. Eq. (9)).

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating (float32 or float64), finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.

    Returns
    -------
    K : (..., Lq, Lk) array
        ``exp(q @ k^T)``; same namespace, dtype and device as `q`. Overflows (inf) for ``q . k`` above
        about 88 (float32) or 709 (float64).

    Raises
    ------
    ValueError
        If the shapes disagree, an input is not finite, or the ``(..., Lq, Lk)`` result exceeds
        ``refattn.limits``.
    TypeError
        If `q` and `k` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    gaussian_kernel : what the RKS map estimates instead.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import softmax_kernel
    >>> softmax_kernel(np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]]))
    array([[1.0512711 , 1.64872127],
           [1.22140276, 1.        ]])
    """
    xp = _check_qk(q, k)
    return xp.exp(q @ xp.matrix_transpose(k))                                     # (..., Lq, Lk)


def gaussian_kernel(q, k):
    r"""The Gaussian (RBF, unit bandwidth) kernel matrix ``K(q, k) = exp(-|q - k|^2 / 2)`` (closed form).

    The kernel whose spectral density is ``N(0, I_d)`` (Bochner's theorem, Chowdhury et al. Eq. (2)).
    Computed as ``exp(q . k - |q|^2/2 - |k|^2/2)`` (no (Lq, Lk, d) difference array), clipped at 1.
    Estimated without bias by :func:`trig_features` (RKS, Chowdhury et al. Eq. (3)) and by
    :func:`refattn.features.positive.gaussian_positive_features` (Chowdhury et al. Eq. (9) with
    ``omega ~ N(0, I)``).

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating (float32 or float64), finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.

    Returns
    -------
    K : (..., Lq, Lk) array
        Entries in [0, 1]; same namespace, dtype and device as `q`.

    Raises
    ------
    ValueError
        If the shapes disagree, an input is not finite, or the ``(..., Lq, Lk)`` result exceeds
        ``refattn.limits``.
    TypeError
        If `q` and `k` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    softmax_kernel : ``exp(q . k)``; differs by the row factors ``exp(|q|^2/2) exp(|k|^2/2)``.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import gaussian_kernel
    >>> gaussian_kernel(np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]]))
    array([[0.76720595, 0.77880078],
           [0.69419665, 0.36787944]])
    """
    xp = _check_qk(q, k)
    e = (q @ xp.matrix_transpose(k)
         - xp.expand_dims(sq_norm_half(q, xp=xp), axis=-1)
         - xp.expand_dims(sq_norm_half(k, xp=xp), axis=-2))                       # (..., Lq, Lk) = -|q-k|^2/2
    return xp.exp(xp.minimum(e, xp.zeros_like(e)))                                # rounding can make e > 0


# ----------------------------------------------------------------------------------------------------------
# RKS / trig features


def trig_features_fwd(x, omega):
    r"""RKS features ``[cos(x omega^T), sin(x omega^T)] / sqrt(m)`` (Chowdhury et al. Eq. (3)), and the cache.

    Estimates the Gaussian kernel: ``E[phi(q) . phi(k)] = gaussian_kernel(q, k) = exp(-|q - k|^2/2)`` for
    ``omega`` rows ``~ N(0, I_d)`` (iid or Haar-orthogonal with chi norms). The estimate can be zero or
    negative (see the module docstring).

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, 2m) array
        Cosines first, then sines; same namespace, dtype and device as `x`.
    cache : TrigFeaturesCache
        ``(x, omega, phi)`` for :func:`trig_features_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    trig_features, trig_features_bwd
    """
    xp, m = check_x_omega(x, omega)
    return _trig_core(x, omega, xp=xp)


def _trig_core(x, omega, *, xp):
    """Unchecked core of :func:`trig_features_fwd`."""
    m = omega.shape[0]
    u = project(x, omega, xp=xp)                                                  # (..., L, m)
    c = 1.0 / math.sqrt(m)
    phi = xp.concat([xp.cos(u) * c, xp.sin(u) * c], axis=-1)                      # (..., L, 2m) Eq. (3)
    return phi, TrigFeaturesCache(x, omega, phi)


def trig_features_bwd(dphi, cache: TrigFeaturesCache, *, omega_grad=True) -> TrigFeaturesGrads:
    r"""Backward of :func:`trig_features` (Chowdhury et al. Eq. (3)).

    With ``u = x omega^T``: ``du = (-sin u dphi_cos + cos u dphi_sin) / sqrt(m)``, then ``dx = du omega``
    and ``domega = du^T x``.

    Parameters
    ----------
    dphi : (..., L, 2m) array
        Cotangent of the features (cosine half first); same namespace and dtype as the cache, finite.
    cache : TrigFeaturesCache
        From :func:`trig_features_fwd`.
    omega_grad : bool, default True
        ``False``: ``domega`` is not computed and is ``None`` (a drawn, non-learnable omega).

    Returns
    -------
    TrigFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)`` (or ``None``).

    Raises
    ------
    ValueError
        If ``dphi.shape`` differs from the features' shape or `dphi` is not finite.
    TypeError
        If `dphi` and the cache differ in namespace or dtype.
    """
    c = cache
    xp = namespace(dphi, c.phi, names=("dphi", "cache.phi"))
    check_finite("dphi", dphi, xp=xp)
    check_shape("dphi", dphi, "..., L, m2", check_shape("phi", c.phi, "..., L, m2"))
    return _trig_bwd_core(dphi, cache, omega_grad=omega_grad, xp=xp)


def _trig_bwd_core(dphi, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`trig_features_bwd`."""
    c = cache
    m = c.omega.shape[0]
    cos_s, sin_s = c.phi[..., :m], c.phi[..., m:]  # (..., L, m) cos u/sqrt(m), ...
    du = cos_s * dphi[..., m:] - sin_s * dphi[..., :m]                            # (..., L, m)
    dx, domega = project_bwd(du, c.x, c.omega, xp=xp, omega_grad=omega_grad)
    return TrigFeaturesGrads(x=dx, omega=domega)


def trig_features(x, omega):
    r"""RKS features ``[cos(x omega^T), sin(x omega^T)] / sqrt(m)`` (Chowdhury et al. Eq. (3)).

    Unbiased for :func:`gaussian_kernel` with ``omega ~ N(0, I_d)`` (Bochner, Chowdhury et al. Eq. (2)), with
    ``MSE = (1 - exp(-|q - k|^2))^2 / (2m)``; *not* for the softmax kernel (use
    :func:`softmax_trig_features` for that).

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, 2m) array
        Cosines first, then sines; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    trig_features_fwd, trig_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import gaussian_kernel, trig_features
    >>> from refattn.random import draw_gaussian
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5]])                      # (L, d) = (2, 2)
    >>> trig_features(x, np.eye(2))                                  # omega: (m, d) = (2, 2)
    array([[0.70710678, 0.70710678, 0.        , 0.        ],
           [0.38205142, 0.62054458, 0.59500984, 0.33900505]])
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)
    >>> estimate = trig_features(q, omega) @ trig_features(k, omega).T
    >>> bool(np.allclose(estimate, gaussian_kernel(q, k), atol=0.02))
    True
    """
    return trig_features_fwd(x, omega)[0]


# ----------------------------------------------------------------------------------------------------------
# softmax-trig (Horn et al. Sec. 2.1)


def softmax_trig_features_fwd(x, omega):
    r"""Horn et al.'s FAVOR map ``exp(|x|^2/2) [cos(x omega^T), sin(x omega^T)] / sqrt(m)``, and the cache.

    Estimates the softmax kernel: ``E[phi(q) . phi(k)] = softmax_kernel(q, k) = exp(q . k)`` (Horn et al.
    Sec. 2.1, ``h(x) = exp(|x|^2/2)``). Raw: the factor ``exp(|x|^2/2)`` overflows float32
    for ``|x| > ~13.3`` and float64 for ``|x| > ~37.7``; use :func:`softmax_trig_features_stable` in
    attention.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, 2m) array
        ``exp(|x|^2/2) trig_features(x, omega)``; same namespace, dtype and device as `x`.
    cache : SoftmaxTrigFeaturesCache
        For :func:`softmax_trig_features_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    softmax_trig_features, softmax_trig_features_bwd
    """
    t, tcache = trig_features_fwd(x, omega)                                       # (..., L, 2m)
    xp = namespace(x)
    log_h = sq_norm_half(x, xp=xp)                                                # (..., L)
    phi = xp.expand_dims(xp.exp(log_h), axis=-1) * t                              # (..., L, 2m)
    return phi, SoftmaxTrigFeaturesCache(tcache, log_h, phi)


def softmax_trig_features_bwd(dphi, cache: SoftmaxTrigFeaturesCache) -> TrigFeaturesGrads:
    r"""Backward of :func:`softmax_trig_features` (Horn et al. Sec. 2.1).

    With ``phi = h t``, ``h = exp(|x|^2/2)`` and ``t`` the RKS features: ``dt = h dphi`` goes through
    :func:`trig_features_bwd`, plus ``x sum_m(dphi * phi)`` from ``dh/dx = h x``.

    Parameters
    ----------
    dphi : (..., L, 2m) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : SoftmaxTrigFeaturesCache
        From :func:`softmax_trig_features_fwd`.

    Returns
    -------
    TrigFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)``.

    Raises
    ------
    ValueError
        If ``dphi.shape`` differs from the features' shape or `dphi` is not finite.
    TypeError
        If `dphi` and the cache differ in namespace or dtype.
    """
    c = cache
    xp = namespace(dphi, c.phi, names=("dphi", "cache.phi"))
    check_finite("dphi", dphi, xp=xp)
    check_shape("dphi", dphi, "..., L, m2", check_shape("phi", c.phi, "..., L, m2"))
    h = xp.expand_dims(xp.exp(c.log_h), axis=-1)                                  # (..., L, 1)
    g = trig_features_bwd(h * dphi, c.trig)
    dlog_h = xp.sum(dphi * c.phi, axis=-1, keepdims=True)                         # (..., L, 1)
    return TrigFeaturesGrads(x=g.x + dlog_h * c.trig.x, omega=g.omega)


def softmax_trig_features(x, omega):
    r"""Softmax-trig features ``exp(|x|^2/2) [cos u, sin u] / sqrt(m)``, u = x omega^T (Horn et al. Sec. 2.1).

    FAVOR with ``h(x) = exp(|x|^2/2)``, ``f_1 = sin``, ``f_2 = cos``: unbiased for :func:`softmax_kernel`
    ``exp(q . k)`` with ``omega ~ N(0, I_d)``, with
    ``MSE = exp(|q|^2 + |k|^2) (1 - exp(-|q - k|^2))^2 / (2m)``.
    Raw: overflows for large ``|x|``; attention should use :func:`softmax_trig_features_stable`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, 2m) array
        Cosine half first; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    softmax_trig_features_fwd, softmax_trig_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import softmax_kernel, softmax_trig_features
    >>> from refattn.random import draw_gaussian
    >>> softmax_trig_features(np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2))
    array([[0.70710678, 0.70710678, 0.        , 0.        ],
           [0.71376603, 1.1593299 , 1.11162473, 0.63334481]])
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> omega = draw_gaussian(np.random.default_rng(0), 20000, 2)
    >>> estimate = softmax_trig_features(q, omega) @ softmax_trig_features(k, omega).T
    >>> bool(np.allclose(estimate, softmax_kernel(q, k), atol=0.05))
    True
    """
    return softmax_trig_features_fwd(x, omega)[0]


def softmax_trig_features_stable_fwd(x, omega):
    r"""Horn et al.'s softmax-trig map with its row factor returned as a log-scale, and the cache.

    ``phi * exp(log_scale)[..., None]`` equals :func:`softmax_trig_features` ``(x, omega)`` (Horn et al.
    Sec. 2.1); nothing overflows.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    (phi, log_scale) : ((..., L, 2m), (..., L)) arrays
        ``phi = trig_features(x, omega)``, ``log_scale = |x|^2 / 2``. For keys pass ``log_scale`` as
        ``linear_attention(..., k_log_scale=...)``; for queries drop it (it cancels per row). Same namespace,
        dtype and device as `x`.
    cache : TrigFeaturesCache
        For :func:`softmax_trig_features_stable_bwd`.

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    softmax_trig_features_stable, softmax_trig_features_stable_bwd
    """
    t, tcache = trig_features_fwd(x, omega)                                       # (..., L, 2m)
    xp = namespace(x)
    return (t, sq_norm_half(x, xp=xp)), tcache                                    # log_scale (..., L)


def _softmax_trig_stable_core(x, omega, *, xp):
    """Unchecked core of :func:`softmax_trig_features_stable_fwd`."""
    t, tcache = _trig_core(x, omega, xp=xp)                                       # (..., L, 2m)
    return (t, sq_norm_half(x, xp=xp)), tcache                                    # log_scale (..., L)


def _softmax_trig_stable_bwd_core(dout, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`softmax_trig_features_stable_bwd` (``dout = (dphi, dlog_scale or None)``)."""
    dphi, dls = dout
    g = _trig_bwd_core(dphi, cache, omega_grad=omega_grad, xp=xp)
    if dls is None:
        return g
    return TrigFeaturesGrads(x=g.x + xp.expand_dims(dls, axis=-1) * cache.x, omega=g.omega)


def softmax_trig_features_stable_bwd(dout, cache: TrigFeaturesCache, *,
                                     omega_grad=True) -> TrigFeaturesGrads:
    r"""Backward of :func:`softmax_trig_features_stable` from the cotangent pair ``(dphi, dlog_scale)``.

    ``phi`` goes through :func:`trig_features_bwd`; ``log_scale = |x|^2/2`` adds ``dlog_scale x``
    (``d(|x|^2/2)/dx = x``).

    Parameters
    ----------
    dout : tuple of ((..., L, 2m) array, (..., L) array or None)
        ``(dphi, dlog_scale)``; ``dlog_scale`` may be ``None`` (queries, whose log-scale is dropped). Same
        namespace and dtype as the cache, finite.
    cache : TrigFeaturesCache
        From :func:`softmax_trig_features_stable_fwd`.
    omega_grad : bool, default True
        ``False``: ``domega`` is not computed and is ``None``.

    Returns
    -------
    TrigFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)`` (or ``None``).

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    dphi, dls = dout
    g = trig_features_bwd(dphi, cache, omega_grad=omega_grad)
    if dls is None:
        return g
    xp = namespace(dls, cache.x, names=("dlog_scale", "cache.x"))
    check_shape("dlog_scale", dls, "..., L", check_shape("x", cache.x, "..., L, d"))
    check_finite("dlog_scale", dls, xp=xp)
    return TrigFeaturesGrads(x=g.x + xp.expand_dims(dls, axis=-1) * cache.x, omega=g.omega)


def softmax_trig_features_stable(x, omega):
    r"""Softmax-trig features as ``(trig_features(x, omega), |x|^2/2)``: the row factor as a log-scale.

    ``phi * exp(log_scale)[..., None] == softmax_trig_features(x, omega)`` (Horn et al. Sec. 2.1), the
    unbiased estimator of :func:`softmax_kernel`, without the overflow of ``exp(|x|^2/2)``.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite.
    omega : (m, d) array
        Projections (``refattn.random.draw_gaussian`` / ``draw_orthogonal``), m >= 1; same namespace and
        dtype as `x`.

    Returns
    -------
    phi : (..., L, 2m) array
        ``trig_features(x, omega)``; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        ``|x|^2 / 2``. Keys: pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it (it cancels
        per row).

    Raises
    ------
    ValueError
        If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
    TypeError
        If `x` and `omega` differ in namespace or dtype, or are not real floating.

    See Also
    --------
    softmax_trig_features_stable_fwd, softmax_trig_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import softmax_trig_features, softmax_trig_features_stable
    >>> x, omega = np.array([[0.0, 0.0], [1.0, 0.5]]), np.eye(2)
    >>> phi, log_scale = softmax_trig_features_stable(x, omega)
    >>> log_scale
    array([0.   , 0.625])
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], softmax_trig_features(x, omega)))
    True
    """
    return softmax_trig_features_stable_fwd(x, omega)[0]
