"""Validate once, at the public boundary: a FAVOR forward checks its inputs' shapes and dtypes, runs the
unchecked cores of the feature maps and of linear attention, and checks only its result -- two host syncs
(normaliser, output) bidirectional, three causal (plus the chunk plan of the guarded frames path). A counting
wrapper around array_api_strict counts the host syncs (``bool``/``float``/``int`` of an array) and the
finiteness passes per input array; a non-finite input is still named."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import count_host_syncs

from refattn import favor_attention, linear_attention
from refattn.attention import favor_attention_fwd

xs = pytest.importorskip("array_api_strict")


@pytest.fixture
def counter(monkeypatch):
    return count_host_syncs(monkeypatch)


def _inputs(rng, L=20):
    q, k = (xs.asarray(rng.standard_normal((2, L, 8))) for _ in range(2))
    v = xs.asarray(rng.standard_normal((2, L, 3)))
    omega = xs.asarray(rng.standard_normal((16, 8)))
    return q, k, v, omega


@pytest.mark.parametrize("features", ["positive", "hyperbolic"])
@pytest.mark.parametrize("causal, budget", [(False, 2), (True, 3)], ids=["bidir", "causal"])
def test_favor_forward_syncs(counter, rng, features, causal, budget):
    q, k, v, omega = _inputs(rng)
    favor_attention_fwd(q, k, v, omega, causal=causal, features=features, chunk_size=8)
    assert counter["syncs"] <= budget, f"{counter['syncs']} host syncs (budget {budget})"
    ids = {id(a): n for n, a in zip("q k v omega".split(), (q, k, v, omega), strict=True)}
    per_input = {n: sum(1 for i in counter["isfinite"] if i == ident) for ident, n in ids.items()}
    assert all(c <= 1 for c in per_input.values()), per_input


def test_linear_attention_checks_its_inputs_once(counter, rng):
    phi_q, phi_k = (xs.asarray(np.exp(rng.standard_normal((2, 9, 4)))) for _ in range(2))
    v = xs.asarray(rng.standard_normal((2, 9, 3)))
    s = xs.asarray(rng.standard_normal((2, 9)))
    linear_attention(phi_q, phi_k, v, causal=True, k_log_scale=s, chunk_size=4)
    assert counter["isfinite"].count(id(s)) == 1                   # the one input not covered by the result
    assert counter["syncs"] <= 3                                   # k_log_scale, normaliser, output


@pytest.mark.parametrize("bad", ["q", "k", "v", "omega"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_nonfinite_input_is_still_named(rng, bad, causal):
    arrays = dict(zip("q k v omega".split(), (np.asarray(a) for a in _inputs(rng)), strict=True))
    arrays[bad] = arrays[bad].copy()
    arrays[bad][(0,) * (arrays[bad].ndim - 2) + (1, 2)] = np.nan if bad != "omega" else np.inf
    with pytest.raises(ValueError, match=rf"^{bad}: expected finite values; got 1 non-finite entry"):
        favor_attention(arrays["q"], arrays["k"], arrays["v"], arrays["omega"], causal=causal)
