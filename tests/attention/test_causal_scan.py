"""The naive form beside the fast one: ``linear_attention_step`` is the reference of the chunked causal scan.

The recurrence ``S_t = S_{t-1} + phi_k_t^T v_t``, ``z_t = z_{t-1} + phi_k_t``,
``y_t = phi_q_t S_t / phi_q_t z_t`` (module docstring of ``refattn.attention.linear``), run one position at a
time, must give the rows of ``linear_attention(..., causal=True)`` for every chunk length: 1 (the recurrence
itself), 3, 32 (the default) and chunks that do not divide L, with no key scales, row log-scales and
per-feature frames (both chunk paths). Float64, tolerances at the rounding level.
"""

from __future__ import annotations

import numpy as np
import pytest

from refattn import linear_attention, linear_attention_step
from refattn.attention import _causal

B, L, M_FEAT, D_V = 2, 37, 5, 3          # L = 37: no chunk length below divides it except 1
TOL = dict(rtol=1e-11, atol=1e-13)


def _inputs(rng, scales):
    phi_q = np.exp(rng.standard_normal((B, L, M_FEAT)))                       # positive features
    phi_k = np.exp(rng.standard_normal((B, L, M_FEAT)))
    v = rng.standard_normal((B, L, D_V))
    if scales == "none":
        s = None
    elif scales == "rows":
        s = 4.0 * rng.standard_normal((B, L))                                  # row log-scales, any sign
    else:                                                          # per-feature frames (prefix maxima)
        s = np.maximum.accumulate(2.0 * rng.standard_normal((B, L, M_FEAT)), axis=-2)
        s[..., L // 2:, 1] += 30.0                                             # one feature jumps by e^30
    return phi_q, phi_k, v, s


def _recurrent(phi_q, phi_k, v, s):
    """The naive form: one ``linear_attention_step`` per position."""
    state, outs = None, []
    for t in range(phi_q.shape[-2]):
        out_t, state = linear_attention_step(state, phi_q[:, t], phi_k[:, t], v[:, t],
                                             None if s is None else s[:, t])
        outs.append(out_t)
    return np.stack(outs, axis=1)                                              # (B, L, d_v)


@pytest.mark.parametrize("scales", ["none", "rows", "frames"])
@pytest.mark.parametrize("chunk_size", [1, 3, 32, 10, L, 64], ids=lambda c: f"C{c}")
def test_recurrent_step_is_the_reference_of_the_chunked_scan(rng, scales, chunk_size):
    phi_q, phi_k, v, s = _inputs(rng, scales)
    y = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=chunk_size)
    np.testing.assert_allclose(y, _recurrent(phi_q, phi_k, v, s), **TOL)


@pytest.mark.parametrize("path", ["chunk_frame", "exact"])
@pytest.mark.parametrize("chunk_size", [3, 32, 10])
def test_recurrent_step_matches_both_frame_paths(rng, monkeypatch, path, chunk_size):
    """With frames, every chunk on the chunk-frame path (GEMMs), then every chunk on the exact path."""
    monkeypatch.setattr(_causal, "SPREAD_LIMIT", float("inf") if path == "chunk_frame" else -1.0)
    phi_q, phi_k, v, s = _inputs(rng, "frames")
    s[..., L // 2:, 1] -= 25.0                                     # a jump of e^5: the chunk frame is safe
    y = linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=chunk_size)
    np.testing.assert_allclose(y, _recurrent(phi_q, phi_k, v, s), **TOL)
