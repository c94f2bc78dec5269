"""Horn et al.'s S1 and S2 code: findings established without the validator; skip without the checkout."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("einops")

from validation.conformance import horn  # noqa: E402

D = 16


def test_s1_eps_and_batch_maximum(sources):
    """Their softmax_kernel for keys: ratio (exp(u - |x'|^2/2 - max u) + 1e-4), the max over the whole
    tensor: a batch element's keys change another element's features beyond the common factor."""
    _, _, rpp = horn.modules(sources(horn.SUBDIR))
    rng = np.random.default_rng(0)
    k = torch.from_numpy(0.5 * rng.standard_normal((2, 1, 8, D)))
    om = torch.from_numpy(rng.standard_normal((32, D)))
    phi = rpp.softmax_kernel(k, projection_matrix=om, is_query=False).numpy()
    ks = k.numpy() * D ** -0.25
    u = ks @ om.numpy().T
    exact = np.exp(u - 0.5 * np.sum(ks * ks, -1, keepdims=True) - u.max()) / np.sqrt(32)
    np.testing.assert_allclose(phi - exact, 1e-4 / np.sqrt(32), rtol=1e-9, atol=1e-15)
    k2 = k.clone()
    k2[0] *= 6.0                                        # batch element 0 only
    phi2 = rpp.softmax_kernel(k2, projection_matrix=om, is_query=False).numpy()
    ratio = phi2[1] / phi[1]                            # element 1: no longer one common factor
    assert ratio.max() / ratio.min() > 1.01


def test_s1_causal_leak(sources):
    _, _, rpp = horn.modules(sources(horn.SUBDIR))
    rng = np.random.default_rng(1)
    q, k, v = (0.5 * rng.standard_normal((1, 1, 24, D)) for _ in range(3))
    om = rng.standard_normal((32, D))
    big = 6.0 * om[np.argmax(np.linalg.norm(om, axis=1))]
    q2, v2 = (np.concatenate([a, rng.standard_normal((1, 1, 8, D))], 2) for a in (q, v))
    k2 = np.concatenate([k, np.broadcast_to(big, (1, 1, 8, D))], 2)
    fa = rpp.FastAttention(D, 32, causal=True)
    fa.projection_matrix = torch.from_numpy(om)
    with torch.no_grad():
        short = fa(*(torch.from_numpy(a) for a in (q, k, v))).numpy()
        full = fa(*(torch.from_numpy(a) for a in (q2, k2, v2))).numpy()[:, :, :24]
    assert np.max(np.abs(full - short)) / np.max(np.abs(short)) > 1e-3


def s2_exact(q, v, w, k, img, cls_at):
    """Exact S2 softmax on an img x img grid with a class token last; the class token as a query at
    position `cls_at` ((y, x), or None: no position, the clipped distance k to every key), as a key always at
    distance k."""
    n = img * img
    pos = [divmod(i, img) for i in range(n)]
    L = n + 1
    c = np.full((L, L), k)
    for i in range(n):
        for j in range(n):
            c[i, j] = min(abs(pos[i][0] - pos[j][0]) + abs(pos[i][1] - pos[j][1]), k)
    if cls_at is not None:
        for j in range(n):
            c[n, j] = min(abs(cls_at[0] - pos[j][0]) + abs(cls_at[1] - pos[j][1]), k)
    logits = np.take_along_axis(q @ w.T / math.sqrt(q.shape[-1]), c, axis=-1)   # (L, L): q_i . w_c(i, j)
    a = np.exp(logits - logits.max(-1, keepdims=True))
    return (a / a.sum(-1, keepdims=True)) @ v


def test_s2_class_token_query_sits_below_the_grid(sources):
    fn = horn.s2_grid_cls(sources(horn.SUBDIR))
    rng = np.random.default_rng(2)
    img, k = 5, 3
    q, v = (rng.standard_normal((26, D)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal((k + 1, D)).astype(np.float32)
    t = [torch.from_numpy(a) for a in (q[None], v[None], w)]
    y = fn(*t, k, (img, img)).numpy()[0]
    q64, v64, w64 = (a.astype(np.float64) for a in (q, v, w))
    below, none = s2_exact(q64, v64, w64, k, img, (img, 0)), s2_exact(q64, v64, w64, k, img, None)
    scale = np.max(np.abs(none))
    assert np.max(np.abs(y[:25] - none[:25])) < 1e-5 * scale      # image tokens: exact
    assert np.max(np.abs(y[25] - below[25])) < 1e-5 * scale       # class token: below the grid
    assert np.max(np.abs(y[25] - none[25])) > 1e-2 * scale         # not positionless


def test_s2_float64_raises(sources):
    fn = horn.s2_grid_cls(sources(horn.SUBDIR))
    rng = np.random.default_rng(3)
    q, v = (torch.from_numpy(rng.standard_normal((1, 26, D))) for _ in range(2))
    with pytest.raises(RuntimeError, match="Double|Float"):
        fn(q, v, torch.from_numpy(rng.standard_normal((4, D))), 3, (5, 5))
