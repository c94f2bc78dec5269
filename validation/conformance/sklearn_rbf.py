"""scikit-learn's ``RBFSampler`` (PyPI ``scikit-learn``): the validator's built-in target
(:mod:`validation.crosscheck.sklearn`, which states its bridges: ``gamma = 1/2``, ``random_weights_ =
omega.T``, a fresh random phase per omega).
"""

from __future__ import annotations

from ..crosscheck import sklearn as sk
from .base import Finding, Implementation, Row

__all__ = ["IMPLEMENTATION"]

_T = "tests/validation/conformance/test_sklearn_rbf.py::"
IMPLEMENTATION = Implementation(
    name="scikit-learn RBFSampler", family="random Fourier features (Gaussian kernel)",
    source="PyPI scikit-learn", subdir=None, dist="scikit-learn", requires=("sklearn",),
    rows=(
        Row("draw", "draw", None, "numpy", lambda s: sk.draw,
            note="RBFSampler(gamma=0.5, n_components=m, random_state=seed).random_weights_.T"),
        Row("features", "features", None, "numpy", lambda s: sk.features,
            note="RBFSampler(gamma=0.5) with random_weights_ = omega.T and its own phase"),
    ),
    findings=(
        Finding("draw", "unbiased", "pass", "pass",
                "gamma = 1/2 makes random_weights_ iid N(0, 1): unbiased positive-feature draws",
                _T + "test_weights_are_standard_normal"),
        Finding("features", "kernel", "pass", "pass",
                "sqrt(2/m) cos(x W + b) estimates exp(-gamma |q - k|^2) without bias, the documented kernel",
                _T + "test_kernel_estimate_is_unbiased"),
    ),
)
