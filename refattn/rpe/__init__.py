"""Relative positional encodings: Horn et al. S1 (rotation) and S2 (clipped distances), exact Toeplitz-FFT
RPE, and FourierLearner (FLT) masks from their Fourier spectra.

**Boundary contract** (``tests/rpe/test_boundary.py``). Every public function and every ``*_bwd`` checks the
shape, dtype (real floating; positions may be integers, indices by nature) and finiteness of each array it is
given -- parameter containers (``spectrum.sigma``, ``proposal.scale``, ``params.freqs``) and cotangents
(``dy``, ``dg[0]``, ``dN[0]``, ``dQ_p``) included -- and raises ``ValueError``/``TypeError`` naming the
argument as passed. Empty sizes:

* empty results (the mathematically right answer): ``L = 0`` positions in ``s1_positional``,
  ``s1_relative_matrix``, ``s2_attention``, ``rpe_mask``, ``flt_features``; ``d_v = 0`` values in the
  attention functions; ``r = 0`` frequencies in ``flt_frequencies``, ``flt_importance_weights``,
  ``spectrum_g``; ``D = 0`` for the isotropic spectra; ``d = 0`` content width in ``s1_attention`` (the
  positional part remains);
* ``ValueError`` naming the argument where no result exists: ``L = 0`` in ``s1_attention``,
  ``toeplitz_attention[_dense]`` (``coeffs`` has 2L - 1 entries) and ``flt_attention``; ``d = 0`` in
  ``s2_attention`` and ``flt_attention`` (the scale d^(-1/2), d^(-1/4)); ``m = 0`` features in the Toeplitz
  functions (every normaliser is 0) and ``m = 0`` projection rows (``omega``) in the FAVOR+ paths; ``r = 0``
  in ``flt_features`` (the features are divided by r).
"""

from .s1_rotation import (  # Horn S1
    S1Params, s1_positional, s1_positional_fwd, s1_positional_bwd, s1_augment, s1_augment_fwd, s1_augment_bwd,
    s1_attention, s1_attention_fwd, s1_attention_bwd, s1_relative_term, s1_relative_matrix, S1PositionalGrads,
    S1AugmentGrads, S1AttentionGrads,
)
from .s2_clipped import (  # Horn S2
    s2_attention, s2_attention_fwd, s2_attention_bwd, s2_attention_naive, s2_logits, s2_class_index,
    S2AttentionCache, S2AttentionGrads, DEFAULT_CLIP,
)
from .toeplitz import (  # exact Toeplitz-FFT RPE
    toeplitz_attention, toeplitz_attention_fwd, toeplitz_attention_bwd, toeplitz_attention_dense,
    toeplitz_matrix, ToeplitzAttentionCache, ToeplitzAttentionGrads,
)
from .spectra import (  # FLT spectra and proposals
    GaussianMixture, GaussianKernel, LaplaceKernel, CauchyKernel, Box, SinPower, BSpline, GaussianBasis,
    Shifted, Proposal, PROPOSAL_KINDS, spectrum_g, spectrum_g_fwd, spectrum_g_bwd, spectrum_f, rpe_mask,
    proposal_log_density, check_spectrum, check_proposal, kernel_proposal, spectrum_dim, spectrum_arrays,
    check_proposal_shape, SpectrumGCache, SpectrumGGrads,
)
from .flt import (  # FLT features
    flt_frequencies, flt_importance_weights, flt_features, flt_features_fwd, flt_features_bwd,
    flt_mask_estimate, FLTFeaturesCache, FLTFeaturesGrads,
)
from .flt_linear import (  # FLT Algorithm 1
    flt_attention, flt_attention_fwd, flt_attention_bwd, FLTAttentionCache, FLTAttentionGrads,
)

__all__ = [
    "S1Params", "s1_positional", "s1_positional_fwd", "s1_positional_bwd", "s1_augment", "s1_augment_fwd",
    "s1_augment_bwd", "s1_attention", "s1_attention_fwd", "s1_attention_bwd", "s1_relative_term",
    "s1_relative_matrix", "S1PositionalGrads", "S1AugmentGrads", "S1AttentionGrads", "s2_attention",
    "s2_attention_fwd", "s2_attention_bwd", "s2_attention_naive", "s2_logits", "s2_class_index",
    "S2AttentionCache", "S2AttentionGrads", "DEFAULT_CLIP", "toeplitz_attention", "toeplitz_attention_fwd",
    "toeplitz_attention_bwd", "toeplitz_attention_dense", "toeplitz_matrix", "ToeplitzAttentionCache",
    "ToeplitzAttentionGrads", "GaussianMixture", "GaussianKernel", "LaplaceKernel", "CauchyKernel", "Box",
    "SinPower", "BSpline", "GaussianBasis", "Shifted", "Proposal", "PROPOSAL_KINDS", "spectrum_g",
    "spectrum_g_fwd", "spectrum_g_bwd", "spectrum_f", "rpe_mask", "proposal_log_density", "check_spectrum",
    "check_proposal", "kernel_proposal", "spectrum_dim", "spectrum_arrays", "check_proposal_shape",
    "SpectrumGCache", "SpectrumGGrads", "flt_frequencies", "flt_importance_weights", "flt_features",
    "flt_features_fwd", "flt_features_bwd", "flt_mask_estimate", "flt_attention", "flt_attention_fwd",
    "flt_attention_bwd", "FLTFeaturesCache", "FLTFeaturesGrads", "FLTAttentionCache", "FLTAttentionGrads",
]
