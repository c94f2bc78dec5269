"""The KL-Transformer authors' code (cs1160701/OnLearningTheKernel, from a source checkout: its fork of
fast-transformers, ``fast_transformers/feature_maps/fourier_features.py``), GMM-PRF and GMM-RKS maps.

Their GMM maps are one Gaussian per attention head, with a learnable mean and covariance, its random
features paired with the mirrored mean (GMM-RKS: ``omega_p = Sigma^T n + mu`` and ``omega_m = Sigma^T n -
mu``, the same noise n; GMM-PRF: ``omega = exp(sigma / 2) n + mu``, a diagonal covariance). The validator's
``gmm-rks`` / ``gmm-prf`` contracts (C weighted components with full covariances) are not expressible in
them, so the rows run their maps through the omega contract with the spectrum set to the standard normal.

Bridged conventions (nothing else):

* **import**: the checkout's package, also named ``fast_transformers``, is imported as
  ``kl_fast_transformers``
  (so that it and idiap's can load side by side); only ``feature_maps`` (pure Python) is used.
* **layout**: the maps take ``(N, L, H, d)`` with per-head parameters; the contract's ``(B, H, L, d)`` is
  permuted and back.
* **draws substituted**: the ``omega`` buffer (``(d, n)``) is set to the contract's ``omega.T`` and
  ``new_feature_map`` is not called; the learnable spectrum is the identity: mean 0, GMM-PRF's log-variance
  ``sigma`` 0, GMM-RKS's ``sigma`` the identity matrix.
* **scalings**: ``softmax_temp = 1`` (their argument; default ``1/sqrt(d)``, applied as ``x sqrt(t)``), so
  that the maps see ``x`` as given: GMM-PRF is then the family ``gaussian-positive``, GMM-RKS (width 4 n:
  ``[cos u_p, sin u_p, cos u_m, sin u_m] sqrt(4 / n_dims)``) ``gaussian-trig``.
"""

from __future__ import annotations

import importlib
import os

from .base import Finding, Implementation, Row, load_package, source_path

__all__ = ["IMPLEMENTATION", "fourier_features", "gmm_prf", "gmm_rks"]

SUBDIR = "OnLearningTheKernel"
ALIAS = "kl_fast_transformers"


def fourier_features(sources: str):
    root = os.path.join(source_path(sources, SUBDIR), "fast_transformers")
    load_package(ALIAS, root, run_init=False)
    return importlib.import_module(ALIAS + ".feature_maps.fourier_features")


def gmm_prf(sources: str):
    """``fn(x, omega)``: ``GaussianMixturePositive(d, n_heads=H, n_dims=m, softmax_temp=1)``, mean 0,
    log-variance 0, ``omega`` buffer ``omega.T``."""
    ff = fourier_features(sources)

    def fn(x, omega):
        import torch
        m, d = omega.shape
        B, H, L, _ = x.shape
        fm = ff.GaussianMixturePositive(d, n_heads=H, n_dims=m, softmax_temp=1.0).to(x.dtype)
        with torch.no_grad():
            fm.mean.zero_()
            fm.sigma.zero_()
        fm.omega = omega.T
        return fm(x.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)
    return fn


def gmm_rks(sources: str):
    """``fn(x, omega)``: ``GaussianMixtureFourierFeatures(d, n_heads=H, n_dims=4m, softmax_temp=1)``, mean 0,
    ``sigma`` the identity per head, ``omega`` buffer ``omega.T``."""
    ff = fourier_features(sources)

    def fn(x, omega):
        import torch
        m, d = omega.shape
        B, H, L, _ = x.shape
        fm = ff.GaussianMixtureFourierFeatures(d, n_heads=H, n_dims=4 * m, softmax_temp=1.0).to(x.dtype)
        with torch.no_grad():
            fm.mean.zero_()
            fm.sigma.copy_(torch.eye(d, dtype=x.dtype).expand(H, d, d))
        fm.omega = omega.T
        return fm(x.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)
    return fn


_T = "tests/validation/conformance/test_kl_transformer.py::"
IMPLEMENTATION = Implementation(
    name="KL-Transformer (OnLearningTheKernel)", family="GMM-PRF, GMM-RKS (learnable spectra)",
    source="https://github.com/cs1160701/OnLearningTheKernel", subdir=SUBDIR, dist=None, requires=("torch",),
    rows=(
        Row("GaussianMixturePositive (GMM-PRF)", "features", "gaussian-positive", "torch", gmm_prf,
            note="standard-normal spectrum (mean 0, log-variance 0), softmax_temp = 1, omega buffer = "
                 "omega.T"),
        Row("GaussianMixtureFourierFeatures (GMM-RKS)", "features", "gaussian-trig", "torch", gmm_rks,
            note="standard-normal spectrum (mean 0, sigma = I), softmax_temp = 1, n_dims = 4m, "
                 "omega buffer = "
                 "omega.T"),
    ),
    findings=(
        Finding("GaussianMixturePositive (GMM-PRF)", "values", "pass", "pass",
                "with the standard-normal spectrum GaussianMixturePositive is "
                "refattn's positive Gaussian map "
                "exp(w.x - |x|^2) / sqrt(m) (Eq. 9's offset |x|^2)", _T + "test_gmm_prf_closed_form"),
        Finding("GaussianMixtureFourierFeatures (GMM-RKS)", "values", "FAIL", "defect",
                "compared through the kernel estimates (its width is 4m, refattn's 2m), phi(X) phi(X)^T is "
                "exactly twice refattn's Gaussian [cos, sin] estimate on the same projections",
                _T + "test_gmm_rks_estimates_twice_the_kernel",
                "scale by sqrt(2 / n_dims) instead of sqrt(4 / n_dims) in "
                "GaussianMixtureFourierFeatures.forward"),
        Finding("GaussianMixtureFourierFeatures (GMM-RKS)", "gradients", "FAIL", "defect",
                "its gradient is the derivative of its own forward (central differences agree), so it "
                "carries the same factor 2", _T + "test_gmm_rks_estimates_twice_the_kernel",
                "the same change"),
        Finding("GaussianMixtureFourierFeatures (GMM-RKS)", "unbiased", "FAIL", "defect",
                "each head lists the mirrored mean's [cos, sin] features beside the mean's, both scaled by "
                "sqrt(4 / n_dims) = 1/sqrt(n): the estimate is twice the kernel of the spectrum (the paper's "
                "sqrt(pi_c) = sqrt(1/2) weights are missing); it cancels in attention, but not against the "
                "smoothing feature the authors append",
                _T + "test_gmm_rks_estimates_twice_the_kernel",
                "scale by sqrt(2 / n_dims) instead of sqrt(4 / n_dims) in "
                "GaussianMixtureFourierFeatures.forward"),
        Finding("GaussianMixtureFourierFeatures (GMM-RKS)", "kernel", "FAIL", "defect",
                "the same factor 2: the estimate matches no known kernel, being twice the Gaussian one",
                _T + "test_gmm_rks_estimates_twice_the_kernel", "the same change"),
    ),
)
