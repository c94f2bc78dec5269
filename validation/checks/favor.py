"""The omega contract's families: FAVOR-type maps that take one projection matrix ``omega: (m, d)``.

``features``: ``fn(x (..., L, d), omega (m, d)) -> phi``; ``attention``: ``fn(q, k, v, omega, causal) -> out``
(refattn ``favor_attention``, q and k scaled by ``d^{-1/4}`` inside). Each family names refattn's map, its
manual backward, and the kernel ``E[phi(q) . phi(k)]`` it estimates under iid Gaussian omega.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from refattn import features
from refattn.attention import favor_attention, favor_attention_bwd, favor_attention_fwd

__all__ = ["FEATURE_FAMILIES", "ATTENTION_FAMILIES", "KERNELS", "favor_ref"]


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


#: family name -> (reference map, reference gradients, the kernel it estimates)
FEATURE_FAMILIES: dict[str, tuple[Callable, Callable, str]] = {
    "positive": (*_fam("positive_features"), "softmax"),
    "positive-scaled": (*_fam("positive_features", True), "softmax-scaled"),
    "hyperbolic": (*_fam("hyperbolic_features"), "softmax"),
    "gaussian-positive": (*_fam("gaussian_positive_features"), "gaussian"),
    "trig": (*_fam("trig_features"), "gaussian"),
    "softmax-trig": (*_fam("softmax_trig_features"), "softmax"),
}
#: attention family -> favor_attention(features=...)
ATTENTION_FAMILIES = ("positive", "hyperbolic", "trig")


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


def favor_ref(family):
    """``(ref(q, k, v, omega, causal), grads(q, k, v, omega, causal, dy) -> [dq, dk, dv, domega])``."""

    def ref(q, k, v, omega, causal):
        return favor_attention(q, k, v, omega, causal=causal, features=family, on_nonpositive="ignore")

    def grads(q, k, v, omega, causal, c):
        y, cache = favor_attention_fwd(
            q, k, v, omega, causal=causal, features=family, on_nonpositive="ignore"
        )
        g = favor_attention_bwd(c, cache)
        return [g.q, g.k, g.v, g.omega]
    return ref, grads
