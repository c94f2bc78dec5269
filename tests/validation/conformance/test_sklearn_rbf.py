"""scikit-learn RBFSampler's findings, established without the validator (moments and a Monte Carlo mean)."""

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.kernel_approximation import RBFSampler  # noqa: E402

D = 16


def weight_moment_z(gamma):
    """z-scores of the mean and variance of RBFSampler's weights against N(0, 1): over N iid entries the mean
    has standard error 1/sqrt(N) and the sample variance sqrt(2/N) (Gaussian fourth moment 3)."""
    w = RBFSampler(gamma=gamma, n_components=4000, random_state=0).fit(np.zeros((1, D))).random_weights_
    n = w.size
    return w.mean() * np.sqrt(n), (w.var() - 1.0) / np.sqrt(2.0 / n)


def test_weights_are_standard_normal():
    zm, zv = weight_moment_z(0.5)
    assert abs(zm) < 4 and abs(zv) < 4, (zm, zv)
    zm, zv = weight_moment_z(1.0)               # gamma = 1 (variance 2) is told apart
    assert zv > 50


def test_kernel_estimate_is_unbiased():
    rng = np.random.default_rng(0)
    q = rng.standard_normal(D)
    q *= 0.8 / np.linalg.norm(q)
    k = -q / 2
    est = np.array([s.transform(q[None])[0] @ s.transform(k[None])[0] for s in
                    (RBFSampler(gamma=0.5, n_components=64, random_state=i).fit(np.zeros((1, D)))
                     for i in range(400))])
    se = est.std(ddof=1) / np.sqrt(len(est))    # the mean of 400 independent estimates
    diff2 = np.sum((q - k) ** 2)
    assert abs(est.mean() - np.exp(-diff2 / 2)) / se < 4
    assert abs(est.mean() - np.exp(-diff2)) / se > 10   # the kernel without the 1/2 is told apart
