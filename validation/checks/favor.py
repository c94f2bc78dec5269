"""The omega contract's families: FAVOR-type maps that take one projection matrix ``omega: (m, d)``.

``features``: ``fn(x (..., L, d), omega (m, d)) -> phi``; ``attention``: ``fn(q, k, v, omega, causal) -> out``
(q and k scaled by ``d^{-1/4}`` inside). Each family names refattn's map, its manual backward, and the kernel
``E[phi(q) . phi(k)]`` it estimates under iid Gaussian omega:

============================  ======================================  ===================================
family                        features (``x`` as given)               attention (``d^{-1/4}`` q, k)
============================  ======================================  ===================================
``positive``                  ``exp(x w - |x|^2/2)/sqrt(m)``: softmax  favor_attention, "positive"
``positive-scaled``           the same of ``d^{-1/4} x``               --
``hyperbolic``                antithetic ``[exp(+), exp(-)]``          favor_attention, "hyperbolic"
``hyperbolic-scaled``         the same of ``d^{-1/4} x``               --
``gaussian-positive``         ``exp(x w - |x|^2)/sqrt(m)``: Gaussian   --
``gaussian-trig``             ``[cos, sin](x w)/sqrt(m)``: Gaussian    linear attention on those features:
                                                                      Gaussian-kernel attention
``softmax-trig``              ``exp(|x|^2/2) [cos, sin]``: softmax     ``favor_attention(features="trig")``
============================  ======================================  ===================================
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import numpy as np

from refattn import features
from refattn.attention import favor_attention, favor_attention_bwd, favor_attention_fwd
from refattn.attention.linear import linear_attention_bwd, linear_attention_fwd

__all__ = ["FEATURE_FAMILIES", "ATTENTION_FAMILIES", "KERNELS", "FEATURE_MAPS", "favor_ref",
           "gaussian_trig_attention_fwd", "gaussian_trig_attention_bwd", "RENAMED"]


def _fam(fn_name: str, scaled: bool = False):
    def ref(x, omega):
        s = float(x.shape[-1]) ** -0.25 if scaled else 1.0
        return getattr(features, fn_name)(x * s, omega)

    def grads(x, omega, c):
        s = float(x.shape[-1]) ** -0.25 if scaled else 1.0
        y, cache = getattr(features, fn_name + "_fwd")(x * s, omega)
        g = getattr(features, fn_name + "_bwd")(c, cache)
        return [g.x * s, g.omega]
    return ref, grads


#: family name -> (refattn's map, whether x is scaled by d^-1/4 first)
FEATURE_MAPS: dict[str, tuple[str, bool]] = {
    "positive": ("positive_features", False),
    "positive-scaled": ("positive_features", True),
    "hyperbolic": ("hyperbolic_features", False),
    "hyperbolic-scaled": ("hyperbolic_features", True),
    "gaussian-positive": ("gaussian_positive_features", False),
    "gaussian-trig": ("trig_features", False),
    "softmax-trig": ("softmax_trig_features", False),
}
_KERNEL_OF = {"positive": "softmax", "positive-scaled": "softmax-scaled", "hyperbolic": "softmax",
              "hyperbolic-scaled": "softmax-scaled", "gaussian-positive": "gaussian",
              "gaussian-trig": "gaussian",
              "softmax-trig": "softmax"}
#: family name -> (reference map, reference gradients, the kernel it estimates)
FEATURE_FAMILIES: dict[str, tuple[Callable, Callable, str]] = {
    name: (*_fam(fn, scaled), _KERNEL_OF[name]) for name, (fn, scaled) in FEATURE_MAPS.items()
}
#: attention family -> the attention its output converges to (a target of the attention kernel check)
ATTENTION_FAMILIES: dict[str, str] = {"positive": "softmax-scaled", "hyperbolic": "softmax-scaled",
                                      "softmax-trig": "softmax-scaled", "gaussian-trig": "gaussian-scaled"}
_FAVOR_FEATURES = {"positive": "positive", "hyperbolic": "hyperbolic", "softmax-trig": "trig"}
#: names no longer accepted by --as, and what to use instead
RENAMED = {"trig": "gaussian-trig (the Gaussian [cos, sin] map) or softmax-trig (FAVOR's trig map of the "
                   "softmax kernel)"}


def sqdist(X, Y):
    return np.sum(X * X, -1)[:, None] + np.sum(Y * Y, -1)[None, :] - 2 * X @ Y.T       # (P, Q)


#: kernel name -> (description, K(X, Y) for X: (P, d), Y: (Q, d))
KERNELS: dict[str, tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "softmax": ("exp(q.k)", lambda X, Y: np.exp(X @ Y.T)),
    "softmax-scaled": ("exp(q.k/sqrt(d)) (d^-1/4 applied inside)",
                       lambda X, Y: np.exp(X @ Y.T / math.sqrt(X.shape[-1]))),
    "gaussian": ("exp(-|q-k|^2/2)", lambda X, Y: np.exp(-0.5 * sqdist(X, Y))),
    "gaussian-scaled": ("exp(-|q-k|^2/(2 sqrt(d))) (d^-1/4 applied inside)",
                        lambda X, Y: np.exp(-0.5 * sqdist(X, Y) / math.sqrt(X.shape[-1]))),
}


class GaussianTrigCache(NamedTuple):
    """The caches of :func:`gaussian_trig_attention_fwd`."""

    cq: Any
    ck: Any
    lin: Any
    s: float


class GaussianTrigGrads(NamedTuple):
    q: Any
    k: Any
    v: Any
    omega: Any


# out = linear attention of phi(d^-1/4 q), phi(d^-1/4 k), phi = [cos, sin](x omega^T) / sqrt(m)
def gaussian_trig_attention_fwd(q, k, v, omega, *, causal=False):
    """Gaussian random-feature attention (the ``gaussian-trig`` family) and the cache for its backward: linear
    attention on refattn's trig features of ``d^{-1/4} q`` and ``d^{-1/4} k`` (one omega); it estimates
    softmax attention with the logits ``-|q - k|^2 / (2 sqrt(d))``. Works on any array-API arrays."""
    s = float(q.shape[-1]) ** -0.25
    pq, cq = features.trig_features_fwd(q * s, omega)
    pk, ck = features.trig_features_fwd(k * s, omega)
    y, lin = linear_attention_fwd(pq, pk, v, causal=causal, on_nonpositive="ignore")
    return y, GaussianTrigCache(cq, ck, lin, s)


def gaussian_trig_attention_bwd(dy, cache: GaussianTrigCache) -> GaussianTrigGrads:
    """Gradients of :func:`gaussian_trig_attention_fwd` (refattn's manual backwards, chained)."""
    gl = linear_attention_bwd(dy, cache.lin)
    gq = features.trig_features_bwd(gl.phi_q, cache.cq)
    gk = features.trig_features_bwd(gl.phi_k, cache.ck)
    return GaussianTrigGrads(gq.x * cache.s, gk.x * cache.s, gl.v, gq.omega + gk.omega)


def favor_ref(family):
    """``(ref(q, k, v, omega, causal), grads(q, k, v, omega, causal, dy) -> [dq, dk, dv, domega])``."""
    if family == "gaussian-trig":
        def ref(q, k, v, omega, causal):
            return gaussian_trig_attention_fwd(q, k, v, omega, causal=causal)[0]

        def grads(q, k, v, omega, causal, c):
            g = gaussian_trig_attention_bwd(c, gaussian_trig_attention_fwd(q, k, v, omega, causal=causal)[1])
            return [g.q, g.k, g.v, g.omega]
        return ref, grads
    feats = _FAVOR_FEATURES[family]

    def ref(q, k, v, omega, causal):
        return favor_attention(q, k, v, omega, causal=causal, features=feats, on_nonpositive="ignore")

    def grads(q, k, v, omega, causal, c):
        y, cache = favor_attention_fwd(
            q, k, v, omega, causal=causal, features=feats, on_nonpositive="ignore"
        )
        g = favor_attention_bwd(c, cache)
        return [g.q, g.k, g.v, g.omega]
    return ref, grads
