"""performer-pytorch's findings, established without the validator (closed forms and direct probes)."""

import numpy as np
import pytest

from refattn.attention import favor_attention

torch = pytest.importorskip("torch")
pytest.importorskip("performer_pytorch")

from validation.conformance import performer_pytorch as adapter  # noqa: E402
from validation.crosscheck import performer_pytorch as pp  # noqa: E402

D = 16


def first_coordinate_z(draws):
    """z of the mean of u_00 = omega_00 / |omega_0| over the draws: under Haar u_00 is sign-symmetric with
    variance exactly 1/d, so the mean's standard error is 1 / sqrt(d n)."""
    u = np.array([w[0, 0] / np.linalg.norm(w[0]) for w in draws])
    return u.mean() / (1.0 / np.sqrt(D * len(u)))


def positive_estimate_z(draws, x):
    """z of the mean of phi(x).phi(x) = mean_j exp(2 w_j.x - |x|^2) against exp(|x|^2), its value under
    Gaussian marginals; standard error from the sample spread over independent draws."""
    est = np.array([np.mean(np.exp(2 * w @ x - x @ x)) for w in draws])
    return (est.mean() - np.exp(x @ x)) / (est.std(ddof=1) / np.sqrt(len(est)))


def haar_draw(rng):
    q, r = np.linalg.qr(rng.standard_normal((D, D)))
    return (q * np.sign(np.diag(r))).T * np.sqrt(rng.chisquare(D, D))[:, None]


def test_draw_first_coordinate_is_not_sign_symmetric():
    draws = [pp.draw(s, D, D).numpy().astype(np.float64) for s in range(600)]
    z = first_coordinate_z(draws)
    assert abs(z) > 8, z                      # measured -18.9: the unsigned QR's first coordinate
    x = np.full(D, 0.6 / np.sqrt(D))
    assert positive_estimate_z(draws, x) < -5  # biased low along all-ones
    rng = np.random.default_rng(0)             # the same statistics on Haar draws stay within noise
    ref = [haar_draw(rng) for _ in range(600)]
    assert abs(first_coordinate_z(ref)) < 4
    assert abs(positive_estimate_z(ref, x)) < 4


def test_features_offset_is_eps_times_max():
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((2, 2, 8, D)))
    om = torch.from_numpy(rng.standard_normal((32, D)))
    phi = adapter_softmax_kernel(x, om, eps=1e-4)
    xs = x.numpy() * D ** -0.25
    u = xs @ om.numpy().T
    M = u.max(axis=(-1, -2), keepdims=True)   # its key maximum over positions and features
    exact = np.exp(u - 0.5 * np.sum(xs * xs, -1, keepdims=True) - M) / np.sqrt(32)
    np.testing.assert_allclose(phi.numpy() - exact, 1e-4 / np.sqrt(32), rtol=1e-9, atol=1e-15)


def adapter_softmax_kernel(x, omega, eps):
    import performer_pytorch.performer_pytorch as m
    return m.softmax_kernel(x, projection_matrix=omega, is_query=False, eps=eps)


def inputs(seed, L=32, scale=0.5):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, 2, L, D)) for _ in range(3))
    return scale * q, scale * k, v, rng.standard_normal((64, D))


def test_eps0_attention_equals_favor():
    q, k, v, om = inputs(2)
    t = [torch.from_numpy(a) for a in (q, k, v, om)]
    for causal in (False, True):
        ref = favor_attention(q, k, v, om, causal=causal)
        with torch.no_grad():
            y0 = adapter.attention_eps0(*t, causal).numpy()
            y = pp.attention(*t, causal).numpy()
        assert np.max(np.abs(y0 - ref)) / np.max(np.abs(ref)) < 1e-12
        assert np.max(np.abs(y - ref)) / np.max(np.abs(ref)) > 1e-4     # the default eps moves it


def test_causal_prefix_depends_on_later_keys():
    q, k, v, om = inputs(3, L=24)
    big = 8.0 * om[np.argmax(np.linalg.norm(om, axis=1))] / np.linalg.norm(om, axis=1).max() * np.sqrt(D)
    rng = np.random.default_rng(4)
    k2 = np.concatenate([k, np.broadcast_to(big, (1, 2, 8, D))], axis=2)
    q2 = np.concatenate([q, 0.5 * rng.standard_normal((1, 2, 8, D))], axis=2)
    v2 = np.concatenate([v, rng.standard_normal((1, 2, 8, D))], axis=2)
    for fn, leaks in ((pp.attention, True), (adapter.attention_eps0, False)):
        with torch.no_grad():
            short = fn(*(torch.from_numpy(a) for a in (q, k, v, om)), True).numpy()
            full = fn(*(torch.from_numpy(a) for a in (q2, k2, v2, om)), True).numpy()[:, :, :24]
        change = np.max(np.abs(full - short)) / np.max(np.abs(short))
        assert (change > 1e-3) if leaks else (change < 1e-10), (fn, change)


def test_gradient_is_not_the_derivative_of_its_forward():
    """The directional derivative of sum(out * c) along a random dq, by central differences (step 1e-6,
    truncation O(h^2) ~ 1e-12 relative), against the autograd gradient: they differ with the default eps and
    agree with eps = 0."""
    q, k, v, om = inputs(5, L=16)
    rng = np.random.default_rng(6)
    c, dq = rng.standard_normal(q.shape), rng.standard_normal(q.shape)
    for fn, agrees in ((pp.attention, False), (adapter.attention_eps0, True)):
        for causal in (False, True):
            tq = torch.from_numpy(q).requires_grad_(True)
            out = fn(tq, *(torch.from_numpy(a) for a in (k, v, om)), causal)
            (g,) = torch.autograd.grad((out * torch.from_numpy(c)).sum(), tq)
            h = 1e-6
            with torch.no_grad():
                f = [float((fn(torch.from_numpy(q + s * h * dq), *(torch.from_numpy(a) for a in (k, v, om)),
                                causal) * torch.from_numpy(c)).sum()) for s in (1, -1)]
            fd, ad = (f[0] - f[1]) / (2 * h), float((g.numpy() * dq).sum())
            rel = abs(fd - ad) / abs(fd)
            assert (rel < 1e-6) if agrees else (rel > 1e-4), (fn, causal, rel)


def test_eps0_underflows_to_nan():
    """Keys of the first 4 positions far below the last key's exponent: with eps = 0 their features
    underflow to 0 after dividing by the global maximum, and causal rows 0-3 are 0/0; the default eps keeps
    them finite."""
    q, k, v, om = inputs(7, L=8)
    top = om[np.argmax(np.linalg.norm(om, axis=1))]
    k[..., 7, :] = 500.0 * top / np.linalg.norm(top)          # its x'.w ~ 250 |w| > 745: the rest underflow
    t = [torch.from_numpy(a) for a in (q, k, v, om)]
    with torch.no_grad():
        y0 = adapter.attention_eps0(*t, True).numpy()
        y = pp.attention(*t, True).numpy()
    assert np.isnan(y0[..., :4, :]).all() and np.isfinite(y).all()
