"""The transformer's training step (loss, gradients, one Adam update) under accel.use('numba') equals the
reference step, for a causal FAVOR+ language model (causal scan + fused positive features) and a causal elu
model (causal scan only); GPU tests skip cleanly without a device."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import accel  # noqa: E402
import refattn.nn.init as nninit  # noqa: E402
from refattn import _dispatch  # noqa: E402
from refattn.nn.optim import adam_init, adam_update  # noqa: E402
from refattn.nn.transformer import loss_and_grads  # noqa: E402
from refattn.tree import tree_leaves, tree_map  # noqa: E402


def _step(params, ids, labels, feats, cfg):
    loss, grads = loss_and_grads(params, ids, labels, feats, config=cfg)
    new, _ = adam_update(params, grads, adam_init(params), lr=1e-2)
    return loss, grads, new


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 2e-4)])
@pytest.mark.parametrize("att", [{"kind": "favor", "features": "positive", "m": 16, "draw": "orthogonal"},
                                 {"kind": "elu"}], ids=["favor-positive", "elu"])
def test_training_step_under_numba_equals_reference(att, dtype, tol):
    cfg = dict(task="lm", vocab_size=11, d_model=16, n_heads=2, n_layers=2, max_len=40, d_ff=24,
               attention=att, position="learned", dtype=dtype)
    rng = np.random.default_rng(0)
    params = nninit.init_transformer(rng, cfg)
    params = tree_map(lambda a: a + (0.1 * rng.standard_normal(a.shape)).astype(a.dtype), params)
    feats = nninit.draw_attention_features(rng, cfg)
    ids = rng.integers(0, 11, size=(3, 37))                          # L = 37: not a multiple of any block
    labels = rng.integers(0, 11, size=(3, 37))
    calls = []
    real = _dispatch.kernel_for

    loss0, g0, p0 = _step(params, ids, labels, feats, cfg)
    with accel.use("numba"):
        def spy(prim):
            k = real(prim)
            if k is not None:
                calls.append(prim)
            return k

        _dispatch.kernel_for = spy
        try:
            loss1, g1, p1 = _step(params, ids, labels, feats, cfg)
        finally:
            _dispatch.kernel_for = real
    if att["kind"] == "favor":                  # per-feature key frames: fused key and query maps
        assert "positive_key_features_stable" in calls and "positive_features_stable" in calls
        assert "linear_attention.causal_frames_fwd" in calls and "linear_attention.causal_frames_bwd" in calls
    else:                                       # row-scaled causal scan
        assert "linear_attention.causal_fwd" in calls and "linear_attention.causal_bwd" in calls
    np.testing.assert_allclose(float(loss1), float(loss0), rtol=tol)
    l1, l0 = tree_leaves(g1), tree_leaves(g0)
    assert len(l1) == len(l0) > 0
    for i, (a, b) in enumerate(zip(l1, l0, strict=True)):
        scale = float(np.max(np.abs(b))) if b.size else 1.0
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale, err_msg=f"gradient leaf {i}")
    for i, (a, b) in enumerate(zip(tree_leaves(p1), tree_leaves(p0), strict=True)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"updated parameter leaf {i}")


def test_gpu_backend_skips_cleanly_without_device():
    """The CuPy path needs a device: skipped here, never an error at collection."""
    if not accel.available()["cupy"]:
        pytest.skip("no CuPy with a CUDA device (extra 'gpu'); the CuPy path is tested on a device machine")
    import cupy  # pragma: no cover - needs a device

    from refattn import linear_attention  # pragma: no cover
    rng = np.random.default_rng(0)  # pragma: no cover
    q = cupy.asarray(np.exp(rng.standard_normal((2, 9, 4))))  # pragma: no cover
    v = cupy.asarray(rng.standard_normal((2, 9, 3)))  # pragma: no cover
    with accel.use("cupy"):  # pragma: no cover
        y = linear_attention(q, q, v, causal=True)
    np.testing.assert_allclose(cupy.asnumpy(y), linear_attention(cupy.asnumpy(q), cupy.asnumpy(q),
                                                                cupy.asnumpy(v), causal=True), rtol=1e-10)
