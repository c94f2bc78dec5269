"""The attention-kind declarations (refattn.nn.kinds): one module per kind, a stated omega policy, the mha
docstring table complete, and FAVOR's drawn omega gets no gradient computed."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from refattn.attention.favor import favor_attention_bwd, favor_attention_fwd
from refattn.nn.kinds import ATTENTION_KINDS


def test_every_kind_is_one_module_with_an_omega_policy():
    for name, kind in ATTENTION_KINDS.items():
        assert kind.name == name
        assert kind.omega in ("none", "redrawn", "learnable"), (name, kind.omega)
        module = sys.modules[kind.fwd.__module__]
        assert module.__name__.startswith("refattn.nn.kinds."), (name, module.__name__)
        assert "omega:" in (module.__doc__ or "") or kind.fwd.__module__.endswith(".base"), name


def test_mha_docstring_lists_every_kind():
    doc = sys.modules["refattn.nn.mha"].__doc__
    missing = [name for name in ATTENTION_KINDS if f"``{name}``" not in doc]
    assert not missing, f"kinds missing from refattn.nn.mha's table: {missing}"


@pytest.mark.parametrize("features", ["positive", "hyperbolic", "trig"])
def test_favor_backward_skips_the_drawn_omega_gradient(features):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    omega = rng.standard_normal((8, 4))
    y, cache = favor_attention_fwd(q, k, v, omega, features=features, on_nonpositive="ignore")
    dy = rng.standard_normal(y.shape)
    full, skipped = favor_attention_bwd(dy, cache), favor_attention_bwd(dy, cache, omega_grad=False)
    assert skipped.omega is None and full.omega is not None
    for name in ("q", "k", "v"):
        np.testing.assert_array_equal(getattr(skipped, name), getattr(full, name))


def test_favor_kind_requests_no_omega_gradient(monkeypatch):
    """The FAVOR kind runs favor_attention_bwd's core with omega_grad=False (computed only on request)."""
    mod = sys.modules["refattn.nn.kinds.favor"]
    seen = []
    orig = mod.favor_attention_bwd_core

    def spy(dy, cache, **kw):
        seen.append(kw.get("omega_grad", True))
        return orig(dy, cache, **kw)

    monkeypatch.setattr(mod, "favor_attention_bwd_core", spy)
    kind = ATTENTION_KINDS["favor"]
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 5, 4)) for _ in range(3))
    opts = {"features": "positive", "on_nonpositive": "raise"}
    o, cache = kind.fwd(q, k, v, {}, {"omega": rng.standard_normal((8, 4))}, causal=False, options=opts)
    kind.bwd(np.ones_like(o), cache)
    assert seen == [False]


def test_gmm_s_init_sets_the_initial_bandwidth_and_is_checked():
    """``s_init`` scales the initial covariance factors (S = s_init I) for both maps; bad values are named."""
    from refattn.nn.config import check_config
    from refattn.nn.init import init_transformer

    base = dict(task="classify", vocab_size=5, n_classes=3, d_model=8, n_heads=2, n_layers=1, max_len=4)
    for cov, eye in (("full", np.eye(4)), ("diagonal", np.ones(4))):
        for s in (1.0, 0.25):
            cfg = check_config({**base, "attention": {"kind": "gmm", "covariance": cov, "s_init": s}})
            S = init_transformer(np.random.default_rng(0), cfg)["blocks"][0]["attn"]["attn"]["gmm"].S
            np.testing.assert_array_equal(S, np.broadcast_to(s * eye, S.shape))
    for bad in (0, -1.0, float("inf"), float("nan"), True, "1"):
        with pytest.raises(ValueError, match=r"^attention.s_init: expected a positive finite number"):
            check_config({**base, "attention": {"kind": "gmm", "s_init": bad}})
