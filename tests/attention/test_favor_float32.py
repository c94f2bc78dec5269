"""Float32 FAVOR+ at large norms: over |q'| = |k'| = R in 10..60 (after the d^{-1/4} scaling), keys in random
directions or along rows of omega, bidirectional and causal, positive and hyperbolic features, the float32
output and gradients stay finite and within 1e-3 normwise of float64 on the same inputs and omega. The full
grid (d = 64, m = 256, 20 seeds, L = 256) is benchmarks/favor_float32.py; this is its CI-sized version.

Must-fail companion: row-scaled keys (one log-scale per key instead of per-feature frames) raise or miss the
bound on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest

from refattn import linear_attention
from refattn.attention import favor_attention_bwd, favor_attention_fwd
from refattn.attention import favor as _favor
from refattn.features.positive import positive_features_stable
from refattn.random import draw_gaussian

D, M, L = 64, 128, 96


def _case(R, keys, seed=0):
    rng = np.random.default_rng([22, seed])
    omega = draw_gaussian(rng, M, D)
    q = rng.standard_normal((1, L, D))
    q *= R / np.linalg.norm(q, axis=-1, keepdims=True)
    if keys == "aligned":
        rows = omega[rng.integers(0, M, size=L)]
        k = (R * rows / np.linalg.norm(rows, axis=-1, keepdims=True))[None]
    else:
        k = rng.standard_normal((1, L, D))
        k *= R / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((1, L, 8))
    dy = rng.standard_normal((1, L, 8))
    s = D ** 0.25
    return [a.astype(np.float32) for a in (q * s, k * s, v, omega, dy)]


def _normwise(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("R", [10.0, 30.0, 60.0])
@pytest.mark.parametrize("keys", ["random", "aligned"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("features", ["positive", "hyperbolic"])
def test_float32_within_1e3_of_float64(R, keys, causal, features):
    q, k, v, omega, dy = _case(R, keys)
    out = {}
    for dt in ("float32", "float64"):
        args = [a.astype(dt) for a in (q, k, v, omega)]
        y, cache = favor_attention_fwd(*args, causal=causal, features=features, chunk_size=16)
        g = favor_attention_bwd(dy.astype(dt), cache)
        out[dt] = (y, g.q, g.k, g.v, g.omega)
    for name, a, b in zip(("y", "dq", "dk", "dv", "domega"), out["float32"], out["float64"], strict=True):
        assert a.dtype == np.float32 and np.all(np.isfinite(a)), name
        err = _normwise(a, b)
        assert err <= 1e-3, f"{name}: normwise float32 error {err:.3e} > 1e-3 at R = {R} ({keys}, {features})"


def test_row_scaled_keys_fail_the_same_bound():
    """Must fail: with one log-scale per key row (k_log_scale of shape (..., L)) float32 raises on a zero
    normaliser or misses the bound at R = 60, aligned keys -- the defect that per-feature frames fix."""
    q, k, v, omega, _ = _case(60.0, "aligned")
    s = 1.0
    phi_q64, _ = positive_features_stable(q.astype(np.float64) * s, omega.astype(np.float64))
    phi_k64, ls64 = positive_features_stable(k.astype(np.float64) * s, omega.astype(np.float64))
    y64 = linear_attention(phi_q64, phi_k64, v.astype(np.float64), k_log_scale=ls64)
    phi_q, _ = positive_features_stable(q, omega)
    phi_k, ls = positive_features_stable(k, omega)
    try:
        y32 = linear_attention(phi_q, phi_k, v, k_log_scale=ls)
    except ValueError as exc:
        assert "underflowed to 0 in float32" in str(exc) and "float64" in str(exc)
        return
    assert _normwise(y32, y64) > 1e-3


def test_underflow_message_names_dtype_and_remedy():
    """A normaliser that is exactly 0 with finite inputs is an underflow: the message says so, with the dtype
    and the remedies (float64, smaller inputs, per-feature key frames)."""
    phi_q = np.array([[1.0, 0.0], [0.5, 0.5]], dtype=np.float32)
    phi_k = np.array([[0.0, 1.0], [0.0, 1.0]], dtype=np.float32)
    v = np.ones((2, 1), dtype=np.float32)
    msg = (r"1 normaliser\(s\) underflowed to 0 in float32 although every input is finite.*Remedy: compute "
           r"in float64, or use inputs of smaller norm")
    with pytest.raises(ValueError, match=msg):
        linear_attention(phi_q, phi_k, v)


def test_favor_adds_the_norms_to_an_underflow(monkeypatch):
    """favor_attention re-raises an underflow with the feature map, the dtype and the largest |q'|, |k'|."""
    q, k, v, omega, _ = _case(60.0, "random")

    def underflowing(*args, **kwargs):
        raise ValueError("linear_attention: 3 normaliser(s) underflowed to 0 in float32 although ...")

    monkeypatch.setattr(_favor, "linear_attention_fwd_core", underflowing)
    msg = (r"favor_attention \(features='positive', float32, largest \|q'\| = 60, \|k'\| = 60 after the "
           r"d\^-1/4 scaling\): linear_attention: 3 normaliser\(s\) underflowed")
    with pytest.raises(ValueError, match=msg):
        favor_attention_fwd(q, k, v, omega)
