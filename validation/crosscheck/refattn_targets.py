"""The built-in ``refattn`` target (the self-check): refattn's own draws, features and FAVOR attention in the
candidate contracts, through the NumPy adapter or the torch adapter (refattn's core on tensors, refattn's
manual backward as the torch gradient)."""

from __future__ import annotations

import numpy as np

from refattn.attention import favor_attention, favor_attention_bwd, favor_attention_fwd
from refattn.features import positive_features, positive_features_bwd, positive_features_fwd
from refattn.random import draw_orthogonal

from ..base import Target, UsageError
from ..families import FAMILIES
from .torch import refattn_function

__all__ = ["target"]


def _draw(seed, m, d):
    return draw_orthogonal(np.random.default_rng(seed), m, d)


def target(kind: str, framework: str | None, family: str | None = None) -> Target:
    if family is not None and family in FAMILIES:
        return FAMILIES[family].refattn_target(kind, framework or "numpy")
    framework = framework or "numpy"
    if kind == "draw":
        if framework != "numpy":
            raise UsageError(f"target refattn, kind draw: draws are NumPy-only (refattn.random); got "
                             f"--framework {framework}")
        return Target(_draw, "numpy", None, "refattn.random.draw_orthogonal(default_rng(seed), m, d)")
    if framework == "numpy":
        if kind == "features":
            return Target(positive_features, "numpy", "positive", "refattn.features.positive_features")
        return Target(lambda q, k, v, omega, causal: favor_attention(q, k, v, omega, causal=causal),
                      "numpy", "positive", "refattn.attention.favor_attention(features='positive')")
    if framework == "torch":
        if kind == "features":
            f = refattn_function(positive_features_fwd, positive_features_bwd, ("x", "omega"))
            return Target(f, "torch", "positive", "refattn positive_features on tensors, manual backward")
        fs = {
            c: refattn_function(favor_attention_fwd, favor_attention_bwd, ("q", "k", "v", "omega"), causal=c)
            for c in (False, True)
        }
        return Target(lambda q, k, v, omega, causal: fs[bool(causal)](q, k, v, omega), "torch", "positive",
                      "refattn favor_attention on tensors, manual backward")
    raise UsageError(f"target refattn: --framework {framework} is not supported (numpy or torch)")
