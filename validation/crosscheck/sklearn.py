"""The built-in ``sklearn-rbf`` target: scikit-learn's ``RBFSampler`` in the candidate contracts.

``RBFSampler(gamma, n_components=m)`` draws ``W = sqrt(2 gamma) N(0, 1)^{d x m}`` and a random phase
``b ~ U(0, 2 pi)^m`` and maps ``x -> sqrt(2/m) cos(x W + b)``: ``E[phi(q) . phi(k)] = exp(-gamma |q - k|^2)``.
With ``gamma = 1/2`` this is the unit Gaussian kernel ``exp(-|q - k|^2/2)`` and ``W^T`` has rows ``N(0,
I_d)``, the same law as refattn's omega, so the adapter is honest:

* ``draw``: ``RBFSampler(gamma=0.5, n_components=m, random_state=seed).fit(zeros((1, d))).random_weights_.T``.
* ``features``: a sampler fitted on ``x``'s dtype with ``random_weights_ = omega^T`` (the given projections)
  and its own random phase, from ``random_state`` = CRC-32 of omega's bytes rounded to float16: every omega
  gets a fresh phase, as the estimator needs (with one fixed phase the estimate has the bias ``(1/m) sum_r
  cos(2 b_r) exp(-|q + k|^2/2)``). The rounding makes the phase a function of the draw rather than of its
  last bits: a Haar-orthogonal omega comes from a QR decomposition, whose last bits differ with the LAPACK
  kernels a CPU selects (OpenBLAS's Haswell and AVX-512 kernels), and a hash of them would give each
  machine different phases and different Monte Carlo figures (docs/guide/validation.md). Two omegas a few
  float64 roundings apart round to one float16 array but for an entry within that distance of a float16
  rounding boundary (about 2^-40 of the entries). Width m (one cosine per projection, not refattn's ``[cos,
  sin]`` pairs of width 2m), so there is no refattn family to compare values with; ``kernel`` and
  ``unbiased`` say what it estimates.
"""

from __future__ import annotations

import zlib

import numpy as np

from ..base import Target, UsageError

__all__ = ["draw", "features", "target"]


def _sampler(m, seed):
    from sklearn.kernel_approximation import RBFSampler
    return RBFSampler(gamma=0.5, n_components=m, random_state=seed)


def draw(seed, m, d):
    return _sampler(m, int(seed)).fit(np.zeros((1, d))).random_weights_.T.copy()             # (m, d)


def features(x, omega):
    m, d = omega.shape
    with np.errstate(over="ignore"):                                                # |omega| > 65504: inf
        seed = zlib.crc32(np.ascontiguousarray(omega, dtype=np.float16).tobytes())          # see above
    s = _sampler(m, seed).fit(np.zeros((1, d), dtype=x.dtype))
    s.random_weights_ = np.ascontiguousarray(omega.T)                                     # (d, m) given omega
    phi = s.transform(x.reshape(-1, d))                                                      # (N, m)
    return phi.reshape(x.shape[:-1] + (m,))


def target(kind: str, framework: str | None) -> Target:
    if framework not in (None, "numpy"):
        raise UsageError(f"target sklearn-rbf takes NumPy arrays; got --framework {framework}")
    if kind == "attention":
        raise UsageError("target sklearn-rbf: RBFSampler is a feature map; kinds draw and features only")
    if kind == "draw":
        return Target(draw, "numpy", None, "RBFSampler(gamma=0.5, n_components=m, "
                                           "random_state=seed).random_weights_.T")
    return Target(features, "numpy", None, "RBFSampler(gamma=0.5) with random_weights_ = omega.T, its own "
                                           "phase")
