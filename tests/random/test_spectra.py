"""Draws for the KL spectra (refattn.random.spectra): shapes, dtypes, the antithetic structure, FastFood's
diagonals' laws, generator initialisation, and argument checking."""

from __future__ import annotations

import numpy as np
import pytest

from refattn.random import (draw_fastfood, draw_generator_noise, draw_gmm_antithetic_noise, draw_gmm_noise,
                            init_gmm)
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
