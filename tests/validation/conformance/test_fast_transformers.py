"""fast-transformers' findings, established without the validator; skip without the checkout."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from validation.conformance import fast_transformers as ft  # noqa: E402

from .test_performer_pytorch import first_coordinate_z, positive_estimate_z  # noqa: E402

D = 16
NO_EXTENSION = "needs the causal_product_cpu extension (python -m validation.conformance.layout --build)"


def closed_form_favor(x, om):
    """The hyperbolic positive map of d^{-1/4} x: [exp(u - |x'|^2/2), exp(-u - |x'|^2/2)] / sqrt(2m)."""
    xs = x * x.shape[-1] ** -0.25
    u, h = xs @ om.T, 0.5 * np.sum(xs * xs, -1, keepdims=True)
    return np.concatenate([np.exp(u - h), np.exp(-u - h)], -1) / np.sqrt(2 * om.shape[0])


def linear_attention(pq, pk, v, causal):
    if not causal:
        return (pq @ (pk.swapaxes(-1, -2) @ v)) / (pq @ pk.sum(-2)[..., None])
    kv = np.cumsum(pk[..., :, :, None] * v[..., :, None, :], axis=-3)
    return np.einsum("...lm,...lmd->...ld", pq, kv) / np.einsum("...lm,...lm->...l", pq,
                                                                   np.cumsum(pk, -2))[..., None]


def test_draw_first_coordinate_is_not_sign_symmetric(sources):
    fn = ft.draw(sources(ft.SUBDIR))
    draws = [fn(s, D, D).numpy().astype(np.float64) for s in range(600)]
    assert abs(first_coordinate_z(draws)) > 8
    assert positive_estimate_z(draws, np.full(D, 0.6 / np.sqrt(D))) < -5      # biased low along all-ones


def test_favor_closed_form(sources):
    rng = np.random.default_rng(0)
    x, om = rng.standard_normal((2, 3, 8, D)), rng.standard_normal((32, D))
    phi = ft.favor(sources(ft.SUBDIR))(torch.from_numpy(x), torch.from_numpy(om)).numpy()
    np.testing.assert_allclose(phi, closed_form_favor(x, om), rtol=1e-12)


def test_random_fourier_kernel_has_the_half(sources):
    """Over 400 independent omegas the mean of phi(x).phi(y) is exp(-t|x-y|^2/2), t = 1/sqrt(d) (standard
    error from the spread of the 400 estimates), and not the docstring's exp(-t|x-y|^2)."""
    fn = ft.random_fourier(sources(ft.SUBDIR))
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(D), rng.standard_normal(D)
    x, y = x * 1.5 / np.linalg.norm(x), y * 1.5 / np.linalg.norm(y)
    xy = torch.from_numpy(np.stack([x, y]))
    est = []
    for _ in range(400):
        p = fn(xy, torch.from_numpy(rng.standard_normal((32, D)))).numpy()
        est.append(p[0] @ p[1])
    est = np.array(est)
    se, t, r2 = est.std(ddof=1) / np.sqrt(len(est)), D ** -0.5, np.sum((x - y) ** 2)
    assert abs(est.mean() - np.exp(-t * r2 / 2)) / se < 4
    assert abs(est.mean() - np.exp(-t * r2)) / se > 10


def test_attention_equals_favor(sources):
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 2, 12, D)).astype(np.float32) for _ in range(3))
    om = rng.standard_normal((32, D)).astype(np.float32)
    fn = ft.linear_attention(sources(ft.SUBDIR))
    f64 = [a.astype(np.float64) for a in (q, k, v, om)]
    for causal in (False, True):
        if causal and not ft.causal_available(sources(ft.SUBDIR)):
            pytest.skip(NO_EXTENSION)
        y = fn(*(torch.from_numpy(a) for a in (q, k, v, om)), causal).numpy()
        ref = linear_attention(closed_form_favor(f64[0], f64[3]), closed_form_favor(f64[1], f64[3]), f64[2],
                               causal)
        assert np.max(np.abs(y - ref)) / np.max(np.abs(ref)) < 1e-5   # float32 rounding, eps = 1e-6


def test_causal_float32_and_float64(sources):
    root = sources(ft.SUBDIR)
    if not ft.causal_available(root):
        pytest.skip(NO_EXTENSION)
    fn = ft.linear_attention(root)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 16, D)).astype(np.float32) for _ in range(3))
    om = rng.standard_normal((32, D)).astype(np.float32)
    full = fn(*(torch.from_numpy(a) for a in (q, k, v, om)), True).numpy()
    short = fn(*(torch.from_numpy(a[:, :, :10]) for a in (q, k, v)), torch.from_numpy(om), True).numpy()
    assert np.max(np.abs(full[:, :, :10] - short)) <= 1e-6 * np.max(np.abs(short))   # prefixes kept
    with pytest.raises(RuntimeError, match="Float"):
        fn(*(torch.from_numpy(a.astype(np.float64)) for a in (q, k, v, om)), True)
