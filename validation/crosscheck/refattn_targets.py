"""The built-in ``refattn`` target (the self-check): refattn's own draws, features and FAVOR attention in the
candidate contracts, for every family ``--as`` names, through the NumPy adapter or the torch adapter
(refattn's core on tensors, refattn's manual backward as the torch gradient)."""

from __future__ import annotations

import numpy as np

from refattn import features
from refattn.attention import favor_attention_bwd, favor_attention_fwd
from refattn.random import draw_orthogonal

from ..base import Target, UsageError
from ..checks.favor import (ATTENTION_FAMILIES, FEATURE_MAPS, favor_ref, gaussian_trig_attention_bwd,
                            gaussian_trig_attention_fwd)
from ..families import FAMILIES
from .torch import refattn_function

__all__ = ["target"]

_FAVOR_FEATURES = {"positive": "positive", "hyperbolic": "hyperbolic", "softmax-trig": "trig"}


def _draw(seed, m, d):
    return draw_orthogonal(np.random.default_rng(seed), m, d)


def _features(family: str, framework: str) -> Target:
    fn_name, scaled = FEATURE_MAPS[family]
    note = f"refattn.features.{fn_name}" + (" of d^-1/4 x" if scaled else "")
    if framework == "numpy":
        base = getattr(features, fn_name)
    else:
        base = refattn_function(getattr(features, fn_name + "_fwd"), getattr(features, fn_name + "_bwd"),
                                ("x", "omega"))
        note += " on tensors, manual backward"
    if not scaled:
        return Target(base, framework, family, note)
    return Target(lambda x, omega: base(x * float(x.shape[-1]) ** -0.25, omega), framework, family, note)


def _attention(family: str, framework: str) -> Target:
    if family == "gaussian-trig":
        fwd, bwd, note = (gaussian_trig_attention_fwd, gaussian_trig_attention_bwd,
                          "linear attention on refattn trig_features of d^-1/4 q, d^-1/4 k")
        static = {}
    else:
        fwd, bwd = favor_attention_fwd, favor_attention_bwd
        static = {"features": _FAVOR_FEATURES[family], "on_nonpositive": "ignore"}
        note = f"refattn.attention.favor_attention(features={_FAVOR_FEATURES[family]!r})"
    if framework == "numpy":
        ref = favor_ref(family)[0]
        return Target(ref, "numpy", family, note)
    fs = {c: refattn_function(fwd, bwd, ("q", "k", "v", "omega"), causal=c, **static) for c in (False, True)}
    return Target(lambda q, k, v, omega, causal: fs[bool(causal)](q, k, v, omega), "torch", family,
                  note + " on tensors, manual backward")


def target(kind: str, framework: str | None, family: str | None = None) -> Target:
    if family is not None and family in FAMILIES:
        return FAMILIES[family].refattn_target(kind, framework or "numpy")
    framework = framework or "numpy"
    if kind == "draw":
        if framework != "numpy":
            raise UsageError(f"target refattn, kind draw: draws are NumPy-only (refattn.random); got "
                             f"--framework {framework}")
        return Target(_draw, "numpy", None, "refattn.random.draw_orthogonal(default_rng(seed), m, d)")
    if framework not in ("numpy", "torch"):
        raise UsageError(f"target refattn: --framework {framework} is not supported (numpy or torch)")
    family = family or "positive"
    if kind == "features":
        if family not in FEATURE_MAPS:
            raise UsageError(f"target refattn --as {family}: no features map (features families: "
                             f"{', '.join(FEATURE_MAPS)})")
        return _features(family, framework)
    if family not in ATTENTION_FAMILIES:
        raise UsageError(f"target refattn --as {family}: no attention contract (attention families: "
                         f"{', '.join(ATTENTION_FAMILIES)})")
    return _attention(family, framework)
