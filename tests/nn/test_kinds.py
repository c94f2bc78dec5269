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


def _digest(tree):
    import hashlib

    from refattn.tree import tree_paths

    h = hashlib.sha256()
    for path, a in tree_paths(tree, ""):
        h.update(path.encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def _gmm_model(**att):
    return dict(task="classify", input="patches", patch=1, image_shape=(1, 12, 3), d_model=16, n_heads=2,
                n_layers=2, d_ff=16, max_len=12, position="learned", readout="first", n_classes=9,
                attention={"kind": "gmm", "m": 8, **att}, dtype="float64")


# sha256 (first 16 hex digits) of init_transformer(default_rng(3), _gmm_model(...)), every leaf path and its
# bytes, computed with the code before the ``init`` option existed: a configuration without it (or with the
# default) must keep drawing exactly these parameters (cache keys and committed records depend on them)
_DEFAULT_DIGESTS = {("full", 1.0): "c88333aaa51b7b5b", ("full", 0.25): "7f1837ef138541d2",
                    ("diagonal", 1.0): "57d7ec4303ef638a", ("diagonal", 0.25): "94d85c43765a1efd"}


@pytest.mark.parametrize("features", ["rks", "prf"])
@pytest.mark.parametrize("cov_s", sorted(_DEFAULT_DIGESTS))
def test_gmm_default_init_draws_what_it_drew_before_the_option(features, cov_s):
    from refattn.nn.init import init_transformer

    cov, s = cov_s
    att = dict(features=features, covariance=cov, s_init=s,
               on_nonpositive="ignore" if features == "rks" else None)
    plain = init_transformer(np.random.default_rng(3), _gmm_model(**att))
    named = init_transformer(np.random.default_rng(3), _gmm_model(**att, init="scaled-identity"))
    assert _digest(plain) == _digest(named) == _DEFAULT_DIGESTS[cov_s]


@pytest.mark.parametrize("features", ["rks", "prf"])
def test_gmm_authors_init_draws_the_authors_start_from_the_block_stream(features):
    """``init="authors"``: each layer's mixture is :func:`init_gmm_authors` with the model's heads, drawn from
    that block's attention stream (the transformer's stream layout: one child per block, its first child to
    the attention, whose fifth child draws the kind's parameters); everything else is the default's draw."""
    from refattn.nn.init import init_transformer
    from refattn.random import init_gmm_authors

    att = dict(features=features, covariance="full", on_nonpositive="ignore" if features == "rks" else None)
    cfg = _gmm_model(**att, init="authors")
    got = init_transformer(np.random.default_rng(3), cfg)
    blocks = np.random.default_rng(3).spawn(3 + cfg["n_layers"])[3:]
    for block, rb in zip(got["blocks"], blocks, strict=True):
        want = init_gmm_authors(rb.spawn(3)[0].spawn(5)[4], 2, 8, features=features, heads=2)
        for a, b in zip(block["attn"]["attn"]["gmm"], want, strict=True):
            np.testing.assert_array_equal(a, b)
    default = init_transformer(np.random.default_rng(3), _gmm_model(**att))
    for name in ("embed", "pos", "head"):
        assert _digest(got[name]) == _digest(default[name])
    assert not np.array_equal(got["blocks"][0]["attn"]["attn"]["gmm"].S,
                              got["blocks"][1]["attn"]["attn"]["gmm"].S)


def test_gmm_init_option_is_checked():
    from refattn.nn.config import check_config

    def check(**att):
        check_config(_gmm_model(**att))

    with pytest.raises(ValueError, match=r"^attention.init: expected one of 'scaled-identity', 'authors'; "
                                         r"got 'xavier'"):
        check(init="xavier")
    with pytest.raises(ValueError, match=r"^attention.s_init: scales the 'scaled-identity' start only; got "
                                         r"s_init = 0.25 with init='authors'"):
        check(init="authors", s_init=0.25)
    with pytest.raises(ValueError, match=r"^attention.covariance: init='authors' with features='rks' draws "
                                         r"the authors' full \(d, d\) factor; got covariance='diagonal'"):
        check(init="authors", features="rks", covariance="diagonal", on_nonpositive="ignore")
    check(init="authors", features="prf", covariance="diagonal")
