"""fast-transformers (idiap/fast-transformers, from a source checkout: its pip build needs CUDA).

The checkout's pure-Python modules are imported as the package ``fast_transformers`` (its ``attention``
subpackage registered without running its ``__init__``, which imports every compiled extension); causal
attention needs the CPU extension ``causal_product_cpu``, built by :mod:`validation.conformance.layout` into
``build/causal_product_cpu/`` of the sources directory (without it the causal mode raises, and the report
says so).

Bridged conventions (nothing else):

* **layout**: its attention takes ``(N, L, H, E)``; the adapter permutes the contract's ``(B, H, L, d)``
  and back; masks are ``FullMask`` / ``TriangularCausalMask`` and full ``LengthMask`` s (no padding).
* **draws substituted**: the feature maps hold ``omega: (d, n_dims / 2)`` and redraw it in
  ``new_feature_map`` at every attention call; the adapter sets ``omega = omega_contract.T`` and makes that
  instance's ``new_feature_map`` a no-op. ``draw`` calls ``orthogonal_random_matrix_`` on a ``(d, m)`` buffer
  after ``torch.manual_seed(seed)`` and returns its transpose.
* **scalings**: ``Favor`` is the hyperbolic map with ``sqrt(softmax_temp) = d^{-1/4}`` applied inside
  (``n_dims = 2m``: family ``hyperbolic-scaled``).
* **dtype**: the attention rows run in float32: the causal CPU kernel takes nothing else (the ``dtype``
  check shows the float64 call).
"""

from __future__ import annotations

import importlib
import os

from .base import Finding, Implementation, Row, load_extension, load_package, source_path

__all__ = ["IMPLEMENTATION", "package", "draw", "favor", "random_fourier", "linear_attention"]

SUBDIR = "fast-transformers"
ALIAS = "fast_transformers"
EXTENSION = os.path.join("build", "causal_product_cpu", "causal_product_cpu.so")


def package(sources: str, sub: str):
    """The submodule `sub` of the checkout's ``fast_transformers``."""
    root = os.path.join(source_path(sources, SUBDIR), "fast_transformers")
    load_package(ALIAS, root)
    if sub.startswith("attention"):
        load_package(ALIAS + ".attention", os.path.join(root, "attention"), run_init=False)
    return importlib.import_module(f"{ALIAS}.{sub}")


def causal_available(sources: str) -> bool:
    return os.path.isfile(os.path.join(os.path.abspath(sources), EXTENSION))


def draw(sources: str):
    ff = package(sources, "feature_maps.fourier_features")

    def fn(seed, m, d):
        import torch
        w = torch.zeros(d, m)
        with torch.random.fork_rng():
            torch.manual_seed(int(seed))
            ff.orthogonal_random_matrix_(w)
        return w.T.contiguous()
    return fn


def _with_omega(fm, omega):
    fm.omega = omega.T
    fm.new_feature_map = lambda *a, **k: None          # the given omega, never redrawn
    return fm


def favor(sources: str):
    ff = package(sources, "feature_maps.fourier_features")

    def fn(x, omega):
        m, d = omega.shape
        return _with_omega(ff.Favor(d, n_dims=2 * m), omega)(x)
    return fn


def random_fourier(sources: str):
    ff = package(sources, "feature_maps.fourier_features")

    def fn(x, omega):
        m, d = omega.shape
        return _with_omega(ff.RandomFourierFeatures(d, n_dims=2 * m), omega)(x)
    return fn


def linear_attention(sources: str, eps: float = 1e-6):
    """``fn(q, k, v, omega, causal)``: ``LinearAttention`` / ``CausalLinearAttention`` with ``Favor``."""
    ff = package(sources, "feature_maps.fourier_features")
    masking = package(sources, "masking")
    lin = package(sources, "attention.linear_attention")

    def fn(q, k, v, omega, causal):
        import torch
        m, d = omega.shape
        B, H, L, _ = q.shape
        fmap = _with_omega(ff.Favor(d, n_dims=2 * m), omega)
        lengths = masking.LengthMask(torch.full((B,), L, dtype=torch.long), max_len=L)
        if causal:
            if not causal_available(sources):
                raise RuntimeError(f"causal mode needs the extension {EXTENSION} under the sources directory")
            load_extension(ALIAS + ".causal_product.causal_product_cpu",
                           os.path.join(os.path.abspath(sources), EXTENSION))
            cl = package(sources, "attention.causal_linear_attention")
            att, mask = cl.CausalLinearAttention(d, eps=eps), masking.TriangularCausalMask(L)
        else:
            att, mask = lin.LinearAttention(d, eps=eps), masking.FullMask(L, L)
        att.feature_map = fmap
        out = att(*(t.permute(0, 2, 1, 3) for t in (q, k, v)), mask, lengths, lengths)
        return out.permute(0, 2, 1, 3)
    return fn


_T = "tests/validation/conformance/test_fast_transformers.py::"
IMPLEMENTATION = Implementation(
    name="fast-transformers", family="FAVOR+ (hyperbolic positive features), random Fourier features",
    source="https://github.com/idiap/fast-transformers", subdir=SUBDIR, dist=None, requires=("torch",),
    rows=(
        Row("orthogonal_random_matrix_", "draw", None, "torch", draw,
            note="orthogonal_random_matrix_ on a (d, m) buffer after torch.manual_seed(seed), transposed"),
        Row("Favor features", "features", "hyperbolic-scaled", "torch", favor,
            note="Favor(d, n_dims=2m) with omega = omega.T, no redraw"),
        Row("RandomFourierFeatures", "features", None, "torch", random_fourier,
            note="RandomFourierFeatures(d, n_dims=2m) with omega = omega.T, no redraw"),
        Row("LinearAttention + Favor", "attention", "hyperbolic", "torch", linear_attention, dtype="float32",
            note="LinearAttention / CausalLinearAttention(d, Favor, eps=1e-6) on (N, L, H, E), float32 (the "
                 "causal CPU kernel takes float32 only: see dtype)"),
    ),
    findings=(
        Finding("orthogonal_random_matrix_", "haar", "FAIL", "defect",
                "the orthogonal blocks are torch QR's Q without the sign(diag R) correction, so the "
                "projection directions are not Haar-distributed",
                _T + "test_draw_first_coordinate_is_not_sign_symmetric",
                "multiply Q's columns by sign(diag(R)) after torch.linalg.qr in orthogonal_random_matrix_"),
        Finding("orthogonal_random_matrix_", "unbiased", "FAIL", "defect",
                "through those draws the positive-feature estimate of exp(|x|^2) is biased, by an amount "
                "that depends on the direction of x", _T + "test_draw_first_coordinate_is_not_sign_symmetric",
                "the same sign correction"),
        Finding("Favor features", "values", "pass", "pass",
                "Favor is refattn's hyperbolic positive map of d^{-1/4} x on the same projections",
                _T + "test_favor_closed_form"),
        Finding("RandomFourierFeatures", "kernel", "pass", "defect",
                "RandomFourierFeatures estimates exp(-t |x - y|^2 / 2) (t = "
                "softmax_temp), while its docstring "
                "states exp(-t |x - y|^2): the kernel is the scaled Gaussian, the documentation is off by "
                "the factor 1/2",
                _T + "test_random_fourier_kernel_has_the_half",
                "state the kernel as exp(-t |x - y|^2 / 2) in the docstring (or scale x by "
                "sqrt(2 t) to match "
                "the stated one)"),
        Finding("LinearAttention + Favor", "values", "pass", "pass",
                "LinearAttention and CausalLinearAttention with Favor are refattn's hyperbolic FAVOR+ on the "
                "same omega, within float32 rounding (the eps = 1e-6 in the normaliser is below it)",
                _T + "test_attention_equals_favor"),
        Finding("LinearAttention + Favor", "prefix_invariance", "pass", "pass",
                "its causal path (the causal_product kernel, no stabiliser to leak) keeps prefixes unchanged",
                _T + "test_causal_float32_and_float64"),
        Finding("LinearAttention + Favor", "dtype", "FAIL", "defect",
                "the CPU causal_product kernel reads its inputs through accessor<float, 4>, so float64 "
                "inputs raise 'expected scalar type Float but found Double'",
                _T + "test_causal_float32_and_float64",
                "dispatch causal_dot_product on the input dtype (AT_DISPATCH_FLOATING_TYPES) instead of "
                "hard-coding float"),
    ),
)
