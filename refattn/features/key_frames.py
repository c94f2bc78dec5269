r"""Keys' positive random features with one frame per feature (the keys' side of FAVOR+ attention).

:func:`positive_key_features_stable` scales every feature column by its own maximum over the keys (over the
prefix, causally), so no column underflows; the queries take the frame through
``positive_features_stable(q, omega, k_log_scale=...)`` (:mod:`refattn.features.positive`). The antithetic
version is :func:`refattn.features.hyperbolic.hyperbolic_key_features_stable`.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` input width, ``m`` projections (the feature width).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import _dispatch
from .._docs import fill_doc
from .._xp import check_finite, check_shape, cumulative_max, device_of, namespace
from .projection import (BWD_RAISES, OMEGA_GRAD_PARAMETER, X_OMEGA_PARAMETERS, check_x_omega, project,
                          project_bwd, sq_norm_half)
from .positive import PositiveFeaturesGrads

__all__ = [
    "positive_key_features_stable", "positive_key_features_stable_fwd", "positive_key_features_stable_bwd",
    "KeyFeaturesCache",
]

Array = Any

_CAUSAL_DOC = """
causal : bool, default False
    Prefix maxima (no later key sets the scale of an earlier one) instead of maxima over all positions.
"""
_RAISES_DOC = """
Raises
------
ValueError
    If ``omega.shape[-1] != x.shape[-1]``, m = 0, `x` has fewer than 2 axes, or an input is not finite.
TypeError
    If `x` and `omega` differ in namespace or dtype or are not real floating, or `causal` is not a bool.
"""


class KeyFeaturesCache(NamedTuple):
    """What :func:`positive_key_features_stable_bwd` needs from :func:`positive_key_features_stable_fwd`."""

    x: Array       # (..., L, d)
    omega: Array   # (m, d)
    phi: Array     # (..., L, m) exp(l - P), exactly 1 where l attains its (prefix) maximum
    causal: bool   # prefix maxima (True) or maxima over all positions


def check_causal(causal):
    """The key maps' option `causal`: a bool."""
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool; got {causal!r}")


@_dispatch.define("positive_key_features_stable")
def _key_features_reference(x, omega, causal):
    r"""The keys' map in per-feature frames: the reference of the ``"positive_key_features_stable"`` dispatch
    point (inputs already validated; equations in :func:`positive_key_features_stable`)."""
    xp = namespace(x, omega)
    m = omega.shape[0]
    ell = project(x, omega, xp=xp)                                                # (..., L, m) fresh array
    sq = sq_norm_half(x, xp=xp)                                                   # (..., L)
    sq = sq + (sq - sq)            # an infinite key: NaN, not l = -inf (phi = 0, the key silently dropped)
    ell -= xp.expand_dims(sq, axis=-1)                                            # l = u - |x|^2/2
    if causal:
        P = cumulative_max(ell, axis=-2, xp=xp)                                   # (..., L, m) prefix maxima
    else:
        P = xp.max(ell, axis=-2, keepdims=True)                                   # (..., 1, m) column maxima
    ell -= P                                                                      # in place: <= 0
    return xp.exp(ell), P - 0.5 * math.log(m)                                    # (..., L, m) in (0, 1]


# phi = exp(l - P),  k_log_scale = P - log(m)/2,  l = x omega^T - |x|^2/2,  P = (prefix) column max of l
# dl = g + [l = P] (segment sum of dP - g),  g = dphi * phi;  dx = dl omega - sum_m(dl) x;  domega = dl^T x
def positive_key_features_stable_fwd_core(x, omega, *, causal=False, xp):
    """Unchecked core of :func:`positive_key_features_stable_fwd` (the dispatched kernel or the reference)."""
    if x.shape[-2] == 0:                   # no keys: empty features; the frame of no column is 0
        dev = device_of(x)
        phi = xp.zeros((*x.shape[:-1], omega.shape[0]), dtype=x.dtype, device=dev)
        k_log_scale = xp.zeros((*x.shape[:-2], 0 if causal else 1, omega.shape[0]), dtype=x.dtype, device=dev)
        return (phi, k_log_scale), KeyFeaturesCache(x, omega, phi, causal)
    impl = _dispatch.implementation("positive_key_features_stable")
    phi, k_log_scale = impl(x, omega, causal)
    return (phi, k_log_scale), KeyFeaturesCache(x, omega, phi, causal)


def positive_key_features_stable_bwd_core(dphi, dP, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`positive_key_features_stable_bwd` (``dP``: the frame's cotangent or None)."""
    c = cache
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


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, causal=_CAUSAL_DOC, raises=_RAISES_DOC)
def positive_key_features_stable(x, omega, *, causal=False):
    r"""Keys' positive random features with a per-feature stabiliser, ``phi * exp(k_log_scale)``.

    ``phi * exp(k_log_scale) == positive_features(x, omega)`` (Choromanski et al. 2021, Lemma 1) with::

        phi = exp(l - P) in (0, 1],    k_log_scale = P - log(m)/2,    l = x omega^T - |x|^2/2,

    where ``P`` is, per feature, the maximum of ``l`` over all positions (``causal=False``: shape
    ``(..., 1, m)``) or over the prefix ``j <= i`` (``causal=True``: ``(..., L, m)``, so no later key sets the
    scale of an earlier one: the prefix invariance of :mod:`refattn.attention.linear`). Every feature column
    holds its largest key at exactly 1, so a query whose kernel sum is dominated by one feature meets that
    feature's keys at full precision, which a per-row key scale cannot do (float32 FAVOR+ at ``|q'| = |k'| =
    60``). Fold ``k_log_scale`` into the queries with ``positive_features_stable(q, omega, k_log_scale=...)``;
    causal attention then takes it as ``linear_attention(..., causal=True, k_log_scale=...)``, bidirectional
    attention needs nothing more (the frame cancels between the query and key features).

    **Backward.** With ``g = dphi * phi`` the cotangent of ``l`` is ``g`` plus, at each maximiser, what its
    maximum carries: ``dP - g``. Bidirectional: the column argmax receives ``sum_L (dP - g)``. Causal:
    position i's ``dP_i - g_i`` goes to the last position ``a(i) <= i`` where the running maximum was attained
    (segment sums, from a reverse cumulative sum and the next maximiser's index). ``dk_log_scale`` may be
    ``None`` (zero). Then ``dx = dl omega - sum_m(dl) x`` and ``domega = dl^T x``.

    {x_omega_parameters}
    {causal}

    Returns
    -------
    phi : (..., L, m) array
        Entries in (0, 1], each column's (prefix) maximum exactly 1; same namespace, dtype and device as `x`.
    k_log_scale : (..., 1, m) or (..., L, m) array
        Per-feature frame: ``(..., 1, m)`` bidirectional, ``(..., L, m)`` causal.

    {raises}

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


@fill_doc(x_omega_parameters=X_OMEGA_PARAMETERS, causal=_CAUSAL_DOC)
def positive_key_features_stable_fwd(x, omega, *, causal=False):
    """:func:`positive_key_features_stable` and the cache for its backward (maths and errors there).

    {x_omega_parameters}
    {causal}

    Returns
    -------
    (phi, k_log_scale) : ((..., L, m), (..., 1, m) or (..., L, m)) arrays
        The features and their per-feature frames.
    cache : KeyFeaturesCache
        For :func:`positive_key_features_stable_bwd`.
    """
    xp, _ = check_x_omega(x, omega)
    check_causal(causal)
    return positive_key_features_stable_fwd_core(x, omega, causal=causal, xp=xp)


@fill_doc(omega_grad=OMEGA_GRAD_PARAMETER, raises=BWD_RAISES)
def positive_key_features_stable_bwd(dout, cache: KeyFeaturesCache, *,
                                     omega_grad=True) -> PositiveFeaturesGrads:
    """Gradients of :func:`positive_key_features_stable` (equations there) from ``(dphi, dk_log_scale)``.

    Parameters
    ----------
    dout : tuple of ((..., L, m) array, (..., 1, m) or (..., L, m) array or None)
        ``(dphi, dk_log_scale)``, each with its output's shape; same namespace and dtype as the cache, finite.
    cache : KeyFeaturesCache
        From :func:`positive_key_features_stable_fwd`.
    {omega_grad}

    Returns
    -------
    PositiveFeaturesGrads
        ``x : (..., L, d)`` and ``omega : (m, d)`` (or ``None``); ``k_log_scale`` is ``None``.

    {raises}
    """
    dphi, dP = dout
    c = cache
    xp = namespace(dphi, c.phi, dP, names=("dphi", "cache.phi", "dk_log_scale"))
    sizes = check_shape("phi", c.phi, "..., L, m")
    check_shape("dphi", dphi, "..., L, m", sizes)
    check_finite("dphi", dphi, xp=xp)
    if dP is not None:
        check_finite("dk_log_scale", dP, xp=xp)
        check_shape("dk_log_scale", dP, "..., L, m" if c.causal else "..., 1, m", dict(sizes))
    return positive_key_features_stable_bwd_core(dphi, dP, c, omega_grad=omega_grad, xp=xp)
