"""The KL-Transformer authors' GMM maps: findings established without the validator; skip without the
checkout."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from validation.conformance import kl_transformer as kl  # noqa: E402

D = 16


def test_gmm_prf_closed_form(sources):
    rng = np.random.default_rng(0)
    x, om = 0.5 * rng.standard_normal((2, 3, 8, D)), rng.standard_normal((32, D))
    phi = kl.gmm_prf(sources(kl.SUBDIR))(torch.from_numpy(x), torch.from_numpy(om)).detach().numpy()
    want = np.exp(x @ om.T - np.sum(x * x, -1, keepdims=True)) / np.sqrt(32)      # Eq. 9's offset |x|^2
    np.testing.assert_allclose(phi, want, rtol=1e-12)


def test_gmm_rks_estimates_twice_the_kernel(sources):
    """With mean 0 both halves are the [cos, sin] features of the same projections, each scaled by
    1/sqrt(m): phi(x).phi(y) = 2 (1/m) sum_j cos(w_j.(x - y)) exactly, whose mean over draws is twice
    exp(-|x - y|^2/2) (checked by Monte Carlo: the standard error from the spread of 300 estimates)."""
    fn = kl.gmm_rks(sources(kl.SUBDIR))
    rng = np.random.default_rng(1)
    x = 0.15 * rng.standard_normal((1, 1, 2, D))
    est = []
    for _ in range(300):
        om = rng.standard_normal((32, D))
        p = fn(torch.from_numpy(x), torch.from_numpy(om)).detach().numpy()[0, 0]
        exact = 2 * np.mean(np.cos(om @ (x[0, 0, 0] - x[0, 0, 1])))
        np.testing.assert_allclose(p[0] @ p[1], exact, rtol=1e-12)
        est.append(p[0] @ p[1])
    est = np.array(est)
    se, kern = est.std(ddof=1) / np.sqrt(len(est)), np.exp(-np.sum((x[0, 0, 0] - x[0, 0, 1]) ** 2) / 2)
    assert abs(est.mean() - 2 * kern) / se < 4
    assert abs(est.mean() - kern) / se > 10


# ---- FastFood: the block (1/sqrt(D)) S H G Pi H B written out with scipy's Hadamard matrix

def _fastfood_draw(rng, n_blocks, D):
    G = rng.standard_normal((n_blocks, D))
    S = np.sqrt(rng.chisquare(D, (n_blocks, D))) / np.linalg.norm(G, axis=1, keepdims=True)
    B = rng.choice([-1.0, 1.0], (n_blocks, D))
    perm = np.stack([rng.permutation(D) for _ in range(n_blocks)])
    return S, G, B, perm


def _fastfood_matrix(S, G, B, perm, xp=np):
    import scipy.linalg
    n_blocks, D = S.shape
    H = xp.asarray(scipy.linalg.hadamard(D).astype(np.float64))
    rows = []
    for b in range(n_blocks):
        Pi = xp.asarray(np.eye(D)[perm[b]])                                       # (Pi z)_i = z[perm_i]
        rows.append(S[b][:, None] * (H @ (G[b][:, None] * (Pi @ (H * B[b][None, :])))) / np.sqrt(D))
    return xp.concatenate(rows) if xp is np else xp.cat(rows)                      # (M, D) block-major


def _torch(*arrays, grad=False):
    return [torch.tensor(a, requires_grad=grad) for a in arrays]


def test_fastfood_rks_closed_form(sources):
    """Values: [cos u, sin u] / sqrt(M), u = x_pad V^T. Gradients: autograd through their Hadamard transform
    equals autograd through the explicit matrix product (float64 rounding)."""
    fn = kl.fastfood_rks(sources(kl.SUBDIR))
    rng = np.random.default_rng(2)
    S, G, B, perm = _fastfood_draw(rng, 2, D)
    x = 0.3 * rng.standard_normal((2, 3, 5, 12))
    u = np.pad(x, [(0, 0)] * 3 + [(0, 4)]) @ _fastfood_matrix(S, G, B, perm).T
    want = np.concatenate([np.cos(u), np.sin(u)], -1) / np.sqrt(2 * D)
    tx, tS, tG, tB = _torch(x, S, G, B, grad=True)
    phi = fn(tx, tS, tG, tB, torch.from_numpy(perm))
    np.testing.assert_allclose(phi.detach().numpy(), want, rtol=0, atol=1e-13)
    C = torch.from_numpy(rng.standard_normal(want.shape))
    got = torch.autograd.grad((phi * C).sum(), (tx, tS, tG, tB))
    rx, rS, rG, rB = _torch(x, S, G, B, grad=True)
    ur = torch.nn.functional.pad(rx, (0, 4)) @ _fastfood_matrix(rS, rG, rB, perm, xp=torch).T
    ref = torch.autograd.grad(((torch.cat([ur.cos(), ur.sin()], -1) / np.sqrt(2 * D)) * C).sum(),
                              (rx, rS, rG, rB))
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-10, atol=1e-12)


def test_fastfood_rks_kernel_has_the_half(sources):
    """softmax_temp = 1, the docstring's kernel exp(-|x - y|^2) against exp(-|x - y|^2 / 2), |x - y| = 1:
    over 400 fresh draws of one block the mean estimate is within 4 standard errors (from the spread of the
    estimates) of the latter and more than 10 from the former (they differ by 0.24; the standard error is
    about 0.01)."""
    fn = kl.fastfood_rks(sources(kl.SUBDIR))
    rng = np.random.default_rng(3)
    x = rng.standard_normal(D)
    y = x + rng.standard_normal(D) / 4
    y = x + (y - x) / np.linalg.norm(y - x)                                          # |x - y| = 1
    X = torch.from_numpy(np.stack([x, y]))
    est = []
    for _ in range(400):
        S, G, B, perm = _fastfood_draw(rng, 1, D)
        p = fn(X, *_torch(S, G, B), torch.from_numpy(perm)).numpy()
        est.append(p[0] @ p[1])
    est = np.array(est)
    se = est.std(ddof=1) / np.sqrt(len(est))
    assert abs(est.mean() - np.exp(-0.5)) / se < 4
    assert abs(est.mean() - np.exp(-1.0)) / se > 10


def test_fastfood_prf_cannot_be_constructed_and_its_forward_is_the_closed_form(sources):
    """Constructing FastFoodPositiveFeatures raises TypeError (super() of a class it does not derive from);
    the bridged map is exp(u - |x|^2) / sqrt(M), whose rows of V being exactly N(0, I) make its mean the
    Gaussian kernel exp(-|q - k|^2 / 2)."""
    s = sources(kl.SUBDIR)
    ff = kl.fastfood_module(s)
    with pytest.raises(TypeError, match="super"):
        ff.FastFoodPositiveFeatures(D, softmax_temp=1.0)
    fn = kl.fastfood_prf(s)
    rng = np.random.default_rng(4)
    S, G, B, perm = _fastfood_draw(rng, 2, D)
    x = 0.3 * rng.standard_normal((2, 3, 5, 12))
    u = np.pad(x, [(0, 0)] * 3 + [(0, 4)]) @ _fastfood_matrix(S, G, B, perm).T
    want = np.exp(u - np.sum(x * x, -1, keepdims=True)) / np.sqrt(2 * D)
    phi = fn(*_torch(x, S, G, B), torch.from_numpy(perm)).numpy()
    np.testing.assert_allclose(phi, want, rtol=1e-12)


# ---- generative maps: the generator written out in NumPy (evaluation-mode batch norm)

M = 24


def _generator_draw(rng):
    n = 4
    params = {"W": [rng.standard_normal((D, D)) / np.sqrt(D) for _ in range(n + 1)],
              "b": [0.1 * rng.standard_normal(D) for _ in range(n + 1)],
              "gamma": [1 + 0.2 * rng.standard_normal(D) for _ in range(n)],
              "beta": [0.1 * rng.standard_normal(D) for _ in range(n)]}
    state = {"mean": [0.1 * rng.standard_normal(D) for _ in range(n)],
             "var": [rng.uniform(0.5, 2.0, D) for _ in range(n)]}
    return rng.standard_normal((M, D)), params, state


def _omega(noise, params, state):
    h = noise
    for i in range(len(params["gamma"])):
        z = h @ params["W"][i] + params["b"][i]
        z = params["gamma"][i] * (z - state["mean"][i]) / np.sqrt(state["var"][i] + 1e-5) + params["beta"][i]
        h = np.where(z > 0, z, 0.01 * z)
    return np.tanh(h @ params["W"][-1] + params["b"][-1])


def _as_torch(tree, grad=False):
    return {k: [torch.tensor(a, requires_grad=grad) for a in v] for k, v in tree.items()}


def test_generative_rks_closed_form(sources):
    """Values: [cos, sin](x omega^T) / sqrt(M) with the NumPy generator's omega. Gradients: autograd of
    <C, phi> in W_1[0, 0] and gamma_2[3] against central differences (h = 1e-6) of the NumPy closed form."""
    fn = kl.generative_rks(sources(kl.SUBDIR))
    rng = np.random.default_rng(5)
    noise, params, state = _generator_draw(rng)
    x = 0.4 * rng.standard_normal((2, 3, 5, D))

    def closed(params):
        u = x @ _omega(noise, params, state).T
        return np.concatenate([np.cos(u), np.sin(u)], -1) / np.sqrt(M)
    tp = _as_torch(params, grad=True)
    phi = fn(torch.from_numpy(x), torch.from_numpy(noise), tp, _as_torch(state))
    np.testing.assert_allclose(phi.detach().numpy(), closed(params), rtol=0, atol=1e-13)
    C = rng.standard_normal(phi.shape)
    (phi * torch.from_numpy(C)).sum().backward()
    for key, i, idx in (("W", 0, (0, 0)), ("gamma", 1, (3,))):
        def f(delta, key=key, i=i, idx=idx):
            p = {k: [a.copy() for a in v] for k, v in params.items()}
            p[key][i][idx] += delta
            return float(np.sum(C * closed(p)))
        fd = (f(1e-6) - f(-1e-6)) / 2e-6
        np.testing.assert_allclose(float(tp[key][i].grad[idx]), fd, rtol=1e-6)


def test_generative_prf_estimates_half_the_kernel(sources):
    """At n_dims = 2M + 1 the map is exp(x omega^T - |x|^2) / sqrt(2M): M features scaled for 2M, so
    phi phi^T is exactly half of the 1/sqrt(M) map's. Built as their models build it (n_dims = N = 64, its own
    draw), the buffer has (N - 1) // 2 = 31 rows and the scale is 1/sqrt(63): the estimate is 31/63 of the
    kernel."""
    s = sources(kl.SUBDIR)
    fn = kl.generative_prf(s)
    rng = np.random.default_rng(6)
    noise, params, state = _generator_draw(rng)
    x = 0.4 * rng.standard_normal((2, 3, 5, D))
    unit = np.exp(x @ _omega(noise, params, state).T - np.sum(x * x, -1, keepdims=True)) / np.sqrt(M)
    phi = fn(torch.from_numpy(x), torch.from_numpy(noise), _as_torch(params), _as_torch(state))
    np.testing.assert_allclose(phi.detach().numpy(), unit / np.sqrt(2), rtol=1e-12)
    ff = kl.fourier_features(s)
    fm = ff.GenerativePositiveRandomFeatures(D, [D] * 5, n_dims=64, softmax_temp=1.0).double().eval()
    torch.manual_seed(0)
    fm.new_feature_map("cpu", torch.float64)
    tx = torch.from_numpy(x)
    with torch.no_grad():
        omega = fm.generator(fm.omega).numpy()
        phi = fm(tx).numpy()
    assert omega.shape == (31, D)
    want = np.exp(x @ omega.T - np.sum(x * x, -1, keepdims=True)) / np.sqrt(63)
    np.testing.assert_allclose(phi, want, rtol=1e-12)
