"""Draws for the KL spectra (refattn.random.spectra): shapes, dtypes, the antithetic structure, FastFood's
diagonals' laws, generator initialisation, and argument checking."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.random import (draw_fastfood, draw_generator_noise, draw_gmm_antithetic_noise, draw_gmm_noise,
                            init_gmm, init_gmm_authors)
from validation import assert_mean_within_se, mean_test


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gmm_shapes_and_dtypes(rng, dtype):
    p = init_gmm(rng, 3, 5, dtype=dtype)
    assert p.logits.shape == (3,) and p.mu.shape == (3, 5) and p.S.shape == (3, 5, 5)
    assert all(a.dtype == dtype for a in p)
    np.testing.assert_array_equal(p.S[1], np.eye(5))
    pd = init_gmm(rng, 2, 4, covariance="diagonal", s_scale=0.5)
    assert pd.S.shape == (2, 4) and np.all(pd.S == 0.5)
    n = draw_gmm_noise(rng, 3, 12, 5, dtype=dtype)
    assert n.shape == (3, 4, 5) and n.dtype == dtype


# The KL authors' GMM start (init_gmm_authors). Each law is checked by the mean of the squared entries, a sum
# of N iid terms x^2 with x ~ U(-b, b): E x^2 = b^2 / 3 and Var x^2 = E x^4 - (E x^2)^2 = b^4 / 5 - b^4 / 9
# = 4 b^4 / 45, so the mean's relative SE is sqrt(4 / 45 / N) / (1 / 3) = sqrt(0.8 / N). mean_test takes the
# SE from the replicates (ddof 1) and allows 5 of them (a correct draw fails one time in 1.7 million).
# RKS factor entries: C = 64, d = 16 -> N = 16384, relative SE 0.70 %, so a deviation of 3.5 % is caught; the
# fan of an (H, d, d) tensor without the heads, sqrt(6 / (d^2 + d)), gives a variance (d^2 + H d) / (d^2 + d)
# = 320 / 272 = 1.18 times the authors' at H = 4: 25 SE away. The means (N = 1024, relative SE 2.8 %): the
# PRF bound 1 / sqrt(d) in place of 1 / d is 16 times the variance. PRF log-variances s = log S^2 (N =
# 1024): a factor exp(s) read as the standard deviation (not exp(s / 2)) gives log S^2 = 2 s, 4 times the
# variance.
_C, _D, _H = 64, 16, 4


def _squares(x):
    return np.asarray(x, dtype=np.float64).reshape(-1, 1) ** 2                     # (N, 1) replicates of x^2


def test_gmm_authors_rks_law(seed):
    p = init_gmm_authors(np.random.default_rng(seed), _C, _D, features="rks", heads=_H)
    assert p.S.shape == (_C, _D, _D) and p.mu.shape == (_C, _D)
    np.testing.assert_array_equal(p.logits, np.zeros(_C))
    b = np.sqrt(6 / (_D ** 2 + _H * _D))
    assert np.abs(p.S).max() <= b and np.abs(p.mu).max() <= 1 / _D
    assert mean_test(_squares(p.S), np.array([b ** 2 / 3])).passed                   # E[S S^T] = 2/(d+H) I
    assert not mean_test(_squares(p.S), np.array([6 / (_D ** 2 + _D) / 3])).passed   # the fan without H
    assert mean_test(_squares(p.mu), np.array([1 / (3 * _D ** 2)])).passed
    assert not mean_test(_squares(p.mu), np.array([1 / (3 * _D)])).passed           # PRF's bound 1/sqrt(d)


@pytest.mark.parametrize("covariance", ["diagonal", "full"])
def test_gmm_authors_prf_law(seed, covariance):
    p = init_gmm_authors(np.random.default_rng(seed), _C, _D, features="prf", heads=_H, covariance=covariance)
    std = p.S if covariance == "diagonal" else np.diagonal(p.S, axis1=-2, axis2=-1)   # (C, d)
    if covariance == "full":                                   # the diagonal start as a (d, d) factor
        np.testing.assert_array_equal(p.S, std[:, :, None] * np.eye(_D))
    b = np.sqrt(6 / (_D + _H))
    log_var = np.log(std ** 2)                                 # the authors' parameter sigma_h
    assert np.abs(log_var).max() <= b * (1 + 1e-12) and np.abs(p.mu).max() <= 1 / np.sqrt(_D)
    assert mean_test(_squares(log_var), np.array([b ** 2 / 3])).passed
    assert not mean_test(_squares(np.log(std)), np.array([b ** 2 / 3])).passed      # std = exp(sigma)
    assert mean_test(_squares(p.mu), np.array([1 / (3 * _D)])).passed
    assert not mean_test(_squares(p.mu), np.array([1 / (3 * _D ** 2)])).passed      # RKS's bound 1/d


def test_gmm_authors_bad_arguments(rng):
    with pytest.raises(ValueError, match="features: expected 'rks' or 'prf'; got 'favor'"):
        init_gmm_authors(rng, 2, 4, features="favor", heads=2)
    with pytest.raises(ValueError, match="covariance: the authors' GMM-RKS start is a full"):
        init_gmm_authors(rng, 2, 4, features="rks", heads=2, covariance="diagonal")
    with pytest.raises(ValueError, match="heads: expected a positive integer; got 0"):
        init_gmm_authors(rng, 2, 4, features="prf", heads=0)


def test_antithetic_noise_is_shared(rng):
    n = draw_gmm_antithetic_noise(rng, 10, 3)
    assert n.shape == (2, 5, 3)
    np.testing.assert_array_equal(n[0], n[1])


def test_gmm_noise_is_standard_normal(rng):
    n = draw_gmm_noise(rng, 2, 20000, 3).reshape(-1, 3)
    assert_mean_within_se(n, np.zeros(3))
    assert_mean_within_se(n ** 2, np.ones(3))
    assert not mean_test(n ** 2, 1.1 * np.ones(3)).passed


def test_fastfood_diagonals(rng):
    p = draw_fastfood(rng, 64 * 200, 60)                      # d = 60 pads to 64
    assert p.S.shape == p.G.shape == p.B.shape == p.perm.shape == (200, 64)
    assert set(np.unique(p.B)) == {-1.0, 1.0}
    np.testing.assert_array_equal(np.sort(p.perm, axis=1), np.tile(np.arange(64), (200, 1)))
    # S ||G||_F = s ~ chi(64): E s^2 = 64
    s2 = (p.S * np.linalg.norm(p.G, axis=1, keepdims=True)) ** 2
    assert_mean_within_se(s2.reshape(-1, 1), np.array([64.0]))
    assert_mean_within_se(p.G.reshape(-1, 1) ** 2, np.array([1.0]))
    assert np.all(draw_fastfood(rng, 16, 16, s_law="identity").S == 1.0)


def test_generator_noise(rng):
    n = draw_generator_noise(rng, 8, 3, dtype=np.float32)
    assert n.shape == (8, 3) and n.dtype == np.float32


def test_bad_arguments(rng):
    with pytest.raises(TypeError, match="rng: expected a numpy.random.Generator"):
        draw_gmm_noise(None, 2, 4, 3)
    with pytest.raises(TypeError, match="rng"):
        draw_generator_noise(np.random.RandomState(0), 2, 3)
    with pytest.raises(ValueError, match="d: expected a positive integer; got 0"):
        init_gmm(rng, 2, 0)
    with pytest.raises(TypeError, match="C: expected a positive integer"):
        init_gmm(rng, 2.0, 3)
    with pytest.raises(TypeError, match="dtype"):
        draw_gmm_noise(rng, 2, 4, 3, dtype=np.int32)
    with pytest.raises(ValueError, match=r"M: expected a multiple of the padded width D = 8 \(d = 5"):
        draw_fastfood(rng, 12, 5)
