"""The KL-Transformer authors' code (cs1160701/OnLearningTheKernel, from a source checkout: its fork of
fast-transformers, ``fast_transformers/feature_maps/fourier_features.py`` and ``fastfood.py``): GMM-PRF and
GMM-RKS maps (omega contract, standard spectrum), FastFood and generative maps (the families' own contracts).

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

Their FastFood maps (``FastFoodRandomFeatures``, ``FastFoodPositiveFeatures``) have the ``fastfood-rks`` /
``fastfood-prf`` contracts' block ``(1/sqrt(D)) S H G Pi H B`` with the unnormalised Hadamard matrix, ``Pi z =
z[P]`` and ``S = chi(D) / ||G||``, but one block only (``n_samples`` is "currently ignored") and no padding
(``D = d`` must be a power of two). Bridged (nothing else): ``softmax_temp = 1``; ``x`` zero-padded to the
contract's D; one instance per block, its ``S``, ``G``, ``B``, ``P`` attributes set to the block's draw
(tensors of the contract, so gradients reach them); the blocks' ``[cos u_b, sin u_b] / sqrt(D)`` regrouped
into ``[cos u, sin u]`` (PRF: concatenated) and scaled by ``1/sqrt(n_blocks)``; ``FastFoodPositiveFeatures``
is built through ``FastFoodRandomFeatures.__init__`` because its own ``__init__`` raises (a finding).

Their generative maps (``GenerativeRandomFourierFeatures``, ``GenerativePositiveRandomFeatures``) are the
``generative-rks`` / ``generative-prf`` generator (``GeneratorBlock``: Linear, BatchNorm1d, leaky ReLU 0.01;
last layer Linear, tanh; batch-norm eps 1e-5). Bridged (nothing else): ``noise_dims`` read from the contract's
widths; evaluation mode; ``torch.func.functional_call`` with the contract's tensors (``nn.Linear.weight =
W.T``, batch-norm weight, bias, running mean and variance, the ``omega`` buffer = the noise, M rows);
``softmax_temp = 1``; ``n_dims = 2M`` for the RKS map (its buffer has ``n_dims // 2`` rows) and ``n_dims = 2M
+ 1`` for the PRF map (its ``__init__`` passes ``n_dims - 1`` on, so its buffer then has M rows).
"""

from __future__ import annotations

import importlib
import os

from .base import Finding, Implementation, Row, load_package, source_path

__all__ = ["IMPLEMENTATION", "fourier_features", "fastfood_module", "gmm_prf", "gmm_rks", "fastfood_rks",
           "fastfood_prf", "generative_rks", "generative_prf"]

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


def fastfood_module(sources: str):
    root = os.path.join(source_path(sources, SUBDIR), "fast_transformers")
    load_package(ALIAS, root, run_init=False)
    return importlib.import_module(ALIAS + ".feature_maps.fastfood")


def _fastfood(sources: str, which: str):
    ff = fastfood_module(sources)

    def block_map(D):
        if which == "rks":
            return ff.FastFoodRandomFeatures(D, softmax_temp=1.0)
        fm = ff.FastFoodPositiveFeatures.__new__(ff.FastFoodPositiveFeatures)   # its __init__ raises
        ff.FastFoodRandomFeatures.__init__(fm, D, softmax_temp=1.0)
        return fm

    def fn(x, S, G, B, perm):
        import torch
        n_blocks, D = S.shape
        xp = torch.nn.functional.pad(x, (0, D - x.shape[-1]))
        parts = []
        for b in range(n_blocks):
            fm = block_map(D)
            fm.S, fm.G, fm.B, fm.P = S[b], G[b], B[b], perm[b].long()
            parts.append(fm(xp))
        if which == "rks":                                   # [cos u_b, sin u_b] per block -> [cos u, sin u]
            parts = [p[..., :D] for p in parts] + [p[..., D:] for p in parts]
        return torch.cat(parts, dim=-1) / n_blocks ** 0.5
    return fn


def fastfood_rks(sources: str):
    """``fn(x, S, G, B, perm)``: one ``FastFoodRandomFeatures(D, softmax_temp=1)`` per block with its ``S``,
    ``G``, ``B``, ``P`` set to the block's draw, on ``x`` zero-padded to D; the blocks' cos and sin halves
    concatenated and scaled by ``1/sqrt(n_blocks)``."""
    return _fastfood(sources, "rks")


def fastfood_prf(sources: str):
    """``fn(x, S, G, B, perm)``: as :func:`fastfood_rks` with ``FastFoodPositiveFeatures`` (built through
    ``FastFoodRandomFeatures.__init__``: its own raises ``TypeError``)."""
    return _fastfood(sources, "prf")


def _generative(sources: str, which: str):
    ff = fourier_features(sources)

    def fn(x, noise, params, state):
        import torch
        M, d_noise = noise.shape
        n = len(params["gamma"])
        widths = [d_noise] + [params["W"][i].shape[1] for i in range(n)]
        d = x.shape[-1]
        if which == "rks":
            fm = ff.GenerativeRandomFourierFeatures(d, widths, n_dims=2 * M, softmax_temp=1.0)
        else:
            fm = ff.GenerativePositiveRandomFeatures(d, widths, n_dims=2 * M + 1, softmax_temp=1.0)
        fm = fm.to(x.dtype).eval()
        tensors = {"omega": noise}
        for i in range(n + 1):
            pre = f"generator.generator_layers.{i}."
            tensors[pre + "linear.weight"] = params["W"][i].T
            tensors[pre + "linear.bias"] = params["b"][i]
            if i < n:
                tensors[pre + "batch_norm.weight"] = params["gamma"][i]
                tensors[pre + "batch_norm.bias"] = params["beta"][i]
                tensors[pre + "batch_norm.running_mean"] = state["mean"][i]
                tensors[pre + "batch_norm.running_var"] = state["var"][i]
        return torch.func.functional_call(fm, tensors, (x,))
    return fn


def generative_rks(sources: str):
    """``fn(x, noise, params, state)``: ``GenerativeRandomFourierFeatures(d, noise_dims, n_dims=2M,
    softmax_temp=1)`` in evaluation mode, its parameters, batch-norm statistics and ``omega`` buffer (the
    noise) the contract's (``W`` transposed into ``nn.Linear.weight``)."""
    return _generative(sources, "rks")


def generative_prf(sources: str):
    """``fn(x, noise, params, state)``: ``GenerativePositiveRandomFeatures(d, noise_dims, n_dims=2M + 1,
    softmax_temp=1)`` (its buffer then has the noise's M rows), set as in :func:`generative_rks`."""
    return _generative(sources, "prf")


_T = "tests/validation/conformance/test_kl_transformer.py::"
IMPLEMENTATION = Implementation(
    name="KL-Transformer (OnLearningTheKernel)",
    family="GMM-PRF, GMM-RKS, FastFood, generative (learnable spectra)",
    source="https://github.com/cs1160701/OnLearningTheKernel", subdir=SUBDIR, dist=None, requires=("torch",),
    rows=(
        Row("GaussianMixturePositive (GMM-PRF)", "features", "gaussian-positive", "torch", gmm_prf,
            note="standard-normal spectrum (mean 0, log-variance 0), softmax_temp = 1, omega buffer = "
                 "omega.T"),
        Row("GaussianMixtureFourierFeatures (GMM-RKS)", "features", "gaussian-trig", "torch", gmm_rks,
            note="standard-normal spectrum (mean 0, sigma = I), softmax_temp = 1, n_dims = 4m, "
                 "omega buffer = "
                 "omega.T"),
        Row("FastFoodRandomFeatures (FastFood-RKS)", "features", "fastfood-rks", "torch", fastfood_rks,
            note="one instance per block, S, G, B, P set to the draw, x zero-padded to D, softmax_temp = 1, "
                 "blocks regrouped, 1/sqrt(n_blocks)"),
        Row("FastFoodPositiveFeatures (FastFood-PRF)", "features", "fastfood-prf", "torch", fastfood_prf,
            note="built through FastFoodRandomFeatures.__init__ (its own raises); one instance per block, as "
                 "FastFood-RKS"),
        Row("GenerativeRandomFourierFeatures (Generative-RKS)", "features", "generative-rks", "torch",
            generative_rks,
            note="evaluation mode, functional_call with the contract's tensors (weight = W.T, omega = "
                 "noise), n_dims = 2M, softmax_temp = 1"),
        Row("GenerativePositiveRandomFeatures (Generative-PRF)", "features", "generative-prf", "torch",
            generative_prf,
            note="as Generative-RKS, n_dims = 2M + 1 (its buffer then has the noise's M rows)"),
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
        Finding("FastFoodRandomFeatures (FastFood-RKS)", "values", "pass", "pass",
                "each block is refattn's FastFood block (1/sqrt(D)) S H G Pi H B on the same S, G, B, P: the "
                "map is [cos u, sin u] / sqrt(D) of u = x V^T", _T + "test_fastfood_rks_closed_form"),
        Finding("FastFoodRandomFeatures (FastFood-RKS)", "gradients", "pass", "pass",
                "autograd through their Hadamard transform gives refattn's gradients in x, S, G and B",
                _T + "test_fastfood_rks_closed_form"),
        Finding("FastFoodRandomFeatures (FastFood-RKS)", "kernel", "pass", "defect",
                "FastFoodRandomFeatures estimates exp(-t |x - y|^2 / 2) (t = softmax_temp), while its "
                "docstring states exp(-t ||x - y||^2) (and SmoothedFastFoodRandomFeatures' K(x, y) = "
                "exp(-|x - y|^2) + s): the documentation is off by the factor 1/2",
                _T + "test_fastfood_rks_kernel_has_the_half",
                "state the kernel as exp(-t |x - y|^2 / 2) in the docstrings (or scale x by sqrt(2 t))"),
        Finding("FastFoodPositiveFeatures (FastFood-PRF)", "values", "pass", "defect",
                "its forward is refattn's FastFood-PRF block exp(u - |x|^2) / sqrt(D), but the class cannot "
                "be constructed: its __init__ calls super(SmoothedFastFoodRandomFeatures, self), a class it "
                "does not derive from, so FastFoodPositiveFeatures(...) raises TypeError (the listops "
                "'fsgb-positive-fastfood' model cannot be built)",
                _T + "test_fastfood_prf_cannot_be_constructed_and_its_forward_is_the_closed_form",
                "super(FastFoodPositiveFeatures, self).__init__(...) in FastFoodPositiveFeatures.__init__"),
        Finding("FastFoodPositiveFeatures (FastFood-PRF)", "kernel", "pass", "pass",
                "with the construction bridged, its mean estimate is exp(-|q - k|^2 / 2)",
                _T + "test_fastfood_prf_cannot_be_constructed_and_its_forward_is_the_closed_form"),
        Finding("GenerativeRandomFourierFeatures (Generative-RKS)", "values", "pass", "pass",
                "in evaluation mode its generator is the contract's (Linear, BatchNorm1d with eps "
                "1e-5, leaky ReLU 0.01; Linear, tanh) and its map [cos, sin](x omega^T) sqrt(2 / n_dims) = "
                "1/sqrt(M)",
                _T + "test_generative_rks_closed_form"),
        Finding("GenerativeRandomFourierFeatures (Generative-RKS)", "gradients", "pass", "pass",
                "autograd through their generator gives refattn's manual backward in x and every generator "
                "parameter", _T + "test_generative_rks_closed_form"),
        Finding("GenerativePositiveRandomFeatures (Generative-PRF)", "values", "FAIL", "defect",
                "it divides by sqrt(n_dims) (n_dims its reduced n_dims - 1) while emitting one feature per "
                "frequency of a buffer with n_dims // 2 rows: with M frequencies phi phi^T is half refattn's "
                "estimate (exactly, at n_dims = 2M + 1; (N/2 - 1) / (N - 1), 31/63, at their even "
                "n_dims = N = 64); the factor cancels in attention's normaliser",
                _T + "test_generative_prf_estimates_half_the_kernel",
                "offset 0.5 * log(self.omega.shape[0]) instead of 0.5 * log(self.n_dims) in "
                "GenerativePositiveRandomFeatures.forward"),
        Finding("GenerativePositiveRandomFeatures (Generative-PRF)", "gradients", "FAIL", "defect",
                "its gradient is the derivative of its own forward (central differences agree), so it "
                "carries the same factor 1/2", _T + "test_generative_prf_estimates_half_the_kernel",
                "the same change"),
        Finding("GenerativePositiveRandomFeatures (Generative-PRF)", "kernel", "FAIL", "defect",
                "the same factor: its mean estimate over fresh noise is half refattn's generative-prf kernel",
                _T + "test_generative_prf_estimates_half_the_kernel", "the same change"),
    ),
)

