"""refattn: the reference implementation of kernelized (linear) attention with relative positional encodings.

Array-API-generic core: every public function takes arrays from any array-API library (NumPy, CuPy,
array_api_strict, ...) and returns arrays of the same library, dtype and device. Randomness is drawn only in
:mod:`refattn.random` (NumPy generators) and handed to the core as arrays.

Layers of the package, each importing only those below it (``tests/test_architecture.py`` enforces it)::

    nn (models) -> rpe -> attention -> features -> layers -> _xp / _dispatch / tree
    random (NumPy edge: draws) -> layers, features, rpe, _xp;  nothing in refattn imports accel, validation,
    paper_checks

The flat namespace re-exports the public names of ``attention``, ``features``, ``layers``, ``rpe`` and ``nn``
(``refattn.favor_attention`` is ``refattn.attention.favor_attention``).
"""

from . import attention, features, layers, nn, random, rpe, tree
from .attention import (
    softmax_attention, softmax_attention_fwd, softmax_attention_bwd, SoftmaxAttentionCache,
    SoftmaxAttentionGrads, kernel_attention, exp_dot_kernel, linear_attention, linear_attention_fwd,
    linear_attention_bwd, linear_attention_step, LinearAttentionCache, LinearAttentionGrads,
    LinearAttentionState, favor_attention, favor_attention_fwd, favor_attention_bwd, FavorAttentionCache,
    FavorAttentionGrads,
)
from .features import (
    elu_features, elu_features_fwd, elu_features_bwd, elu_kernel, EluFeaturesGrads, relu_features,
    relu_features_fwd, relu_features_bwd, relu_kernel, ReluFeaturesGrads, trig_features, trig_features_fwd,
    trig_features_bwd, TrigFeaturesCache, TrigFeaturesGrads, softmax_trig_features,
    softmax_trig_features_fwd, softmax_trig_features_bwd, softmax_trig_features_stable,
    softmax_trig_features_stable_fwd, softmax_trig_features_stable_bwd, SoftmaxTrigFeaturesCache,
    gaussian_kernel, softmax_kernel, positive_features, positive_features_fwd, positive_features_bwd,
    positive_features_stable, positive_features_stable_fwd, positive_features_stable_bwd,
    gaussian_positive_features, gaussian_positive_features_fwd, gaussian_positive_features_bwd,
    hyperbolic_features, hyperbolic_features_fwd, hyperbolic_features_bwd, hyperbolic_features_stable,
    hyperbolic_features_stable_fwd, hyperbolic_features_stable_bwd, PositiveFeaturesCache,
    PositiveFeaturesGrads, HyperbolicFeaturesCache, GMMParams, gmm_weights, gmm_antithetic_params,
    gmm_frequencies, gmm_frequencies_fwd, gmm_frequencies_bwd, GMMFrequenciesGrads, gmm_rks_features,
    gmm_rks_features_fwd, gmm_rks_features_bwd, gmm_prf_features, gmm_prf_features_fwd,
    gmm_prf_features_bwd, gmm_prf_features_stable, gmm_prf_features_stable_fwd,
    gmm_prf_features_stable_bwd, GMMFeaturesGrads, gmm_rks_kernel, gmm_prf_kernel, gmm_rks_mse,
    gmm_rks_antithetic_mse, gmm_prf_mse, fwht, fwht_fwd, fwht_bwd, FwhtGrads, FastFoodParams,
    FASTFOOD_VARIANTS, padded_dim, fastfood_projection, fastfood_projection_fwd, fastfood_projection_bwd,
    FastFoodGrads, fastfood_matrix, fastfood_rks_features, fastfood_rks_features_fwd,
    fastfood_rks_features_bwd, fastfood_prf_features, fastfood_prf_features_fwd, fastfood_prf_features_bwd,
    fastfood_prf_features_stable, fastfood_prf_features_stable_fwd, fastfood_prf_features_stable_bwd,
    fastfood_rks_kernel, fastfood_prf_kernel, GeneratorParams, GeneratorState, GeneratorOutput,
    GeneratorGrads, GenerativeOutput, GenerativeGrads, generator, generator_fwd, generator_bwd,
    generator_param_count, generative_rks_features, generative_rks_features_fwd,
    generative_rks_features_bwd, generative_prf_features, generative_prf_features_fwd,
    generative_prf_features_bwd, generative_prf_features_stable, generative_prf_features_stable_fwd,
    generative_prf_features_stable_bwd,
)
from .layers import (
    DenseParams, DenseCache, DenseGrads, dense, dense_fwd, dense_bwd, LayerNormParams, LayerNormCache,
    LayerNormGrads, layernorm, layernorm_fwd, layernorm_bwd, BatchNormParams, BatchNormState,
    BatchNormOutput, BatchNormCache, BatchNormGrads, batchnorm, batchnorm_fwd, batchnorm_bwd,
    ActivationGrads, relu, relu_fwd, relu_bwd, leaky_relu, leaky_relu_fwd, leaky_relu_bwd, LeakyReluCache,
    tanh, tanh_fwd, tanh_bwd, gelu, gelu_fwd, gelu_bwd, DropoutCache, DropoutGrads, dropout, dropout_fwd,
    dropout_bwd, token_embedding, token_embedding_fwd, token_embedding_bwd, TokenEmbeddingGrads, patchify,
    unpatchify, patch_embedding, patch_embedding_fwd, patch_embedding_bwd, PatchEmbeddingGrads,
    sinusoid_position_table, position_embedding, position_embedding_fwd, position_embedding_bwd,
    PositionEmbeddingGrads, CrossEntropyCache, CrossEntropyGrads, softmax_cross_entropy,
    softmax_cross_entropy_fwd, softmax_cross_entropy_bwd, MseGrads, mse, mse_fwd, mse_bwd, one_hot,
)
from .rpe import (
    S1Params, s1_positional, s1_positional_fwd, s1_positional_bwd, s1_augment, s1_augment_fwd,
    s1_augment_bwd, s1_attention, s1_attention_fwd, s1_attention_bwd, s1_relative_term, s1_relative_matrix,
    S1PositionalGrads, S1AugmentGrads, S1AttentionGrads, s2_attention, s2_attention_fwd, s2_attention_bwd,
    s2_attention_naive, s2_logits, s2_class_index, S2AttentionCache, S2AttentionGrads, DEFAULT_CLIP,
    toeplitz_attention, toeplitz_attention_fwd, toeplitz_attention_bwd, toeplitz_attention_dense,
    toeplitz_matrix, ToeplitzAttentionCache, ToeplitzAttentionGrads, GaussianMixture, GaussianKernel,
    LaplaceKernel, CauchyKernel, Box, SinPower, BSpline, GaussianBasis, Shifted, Proposal, PROPOSAL_KINDS,
    spectrum_g, spectrum_g_fwd, spectrum_g_bwd, spectrum_f, rpe_mask, proposal_log_density, check_spectrum,
    check_proposal, kernel_proposal, spectrum_dim, spectrum_arrays, check_proposal_shape, SpectrumGCache,
    SpectrumGGrads, flt_frequencies, flt_importance_weights, flt_features, flt_features_fwd,
    flt_features_bwd, flt_mask_estimate, flt_attention, flt_attention_fwd, flt_attention_bwd,
    FLTFeaturesCache, FLTFeaturesGrads, FLTAttentionCache, FLTAttentionGrads,
)
from .nn import (
    check_attention_config, check_config, ATTENTION_KINDS, AttentionKind, Draw, MHACache, MHAGrads, mha,
    mha_fwd, mha_bwd, split_heads, merge_heads, SGDState, AdamState, sgd_init, sgd_update, adam_init,
    adam_update, adamw_update, global_norm, clip_by_global_norm, TransformerGrads, transformer,
    transformer_fwd, transformer_bwd, transformer_loss_fwd, transformer_loss_bwd, loss_and_grads,
    block_fwd, block_bwd, init_mha, draw_attention_features, features_for_step, init_transformer,
)

__version__ = "0.2.0"

__all__ = [
    "__version__", "attention", "features", "layers", "nn", "random", "rpe", "tree",
    "softmax_attention", "softmax_attention_fwd", "softmax_attention_bwd", "SoftmaxAttentionCache",
    "SoftmaxAttentionGrads", "kernel_attention", "exp_dot_kernel", "linear_attention",
    "linear_attention_fwd", "linear_attention_bwd", "linear_attention_step", "LinearAttentionCache",
    "LinearAttentionGrads", "LinearAttentionState", "favor_attention", "favor_attention_fwd",
    "favor_attention_bwd", "FavorAttentionCache", "FavorAttentionGrads", "elu_features",
    "elu_features_fwd", "elu_features_bwd", "elu_kernel", "EluFeaturesGrads", "relu_features",
    "relu_features_fwd", "relu_features_bwd", "relu_kernel", "ReluFeaturesGrads", "trig_features",
    "trig_features_fwd", "trig_features_bwd", "TrigFeaturesCache", "TrigFeaturesGrads",
    "softmax_trig_features", "softmax_trig_features_fwd", "softmax_trig_features_bwd",
    "softmax_trig_features_stable", "softmax_trig_features_stable_fwd", "softmax_trig_features_stable_bwd",
    "SoftmaxTrigFeaturesCache", "gaussian_kernel", "softmax_kernel", "positive_features",
    "positive_features_fwd", "positive_features_bwd", "positive_features_stable",
    "positive_features_stable_fwd", "positive_features_stable_bwd", "gaussian_positive_features",
    "gaussian_positive_features_fwd", "gaussian_positive_features_bwd", "hyperbolic_features",
    "hyperbolic_features_fwd", "hyperbolic_features_bwd", "hyperbolic_features_stable",
    "hyperbolic_features_stable_fwd", "hyperbolic_features_stable_bwd", "PositiveFeaturesCache",
    "PositiveFeaturesGrads", "HyperbolicFeaturesCache", "GMMParams", "gmm_weights",
    "gmm_antithetic_params", "gmm_frequencies", "gmm_frequencies_fwd", "gmm_frequencies_bwd",
    "GMMFrequenciesGrads", "gmm_rks_features", "gmm_rks_features_fwd", "gmm_rks_features_bwd",
    "gmm_prf_features", "gmm_prf_features_fwd", "gmm_prf_features_bwd", "gmm_prf_features_stable",
    "gmm_prf_features_stable_fwd", "gmm_prf_features_stable_bwd", "GMMFeaturesGrads", "gmm_rks_kernel",
    "gmm_prf_kernel", "gmm_rks_mse", "gmm_rks_antithetic_mse", "gmm_prf_mse", "fwht", "fwht_fwd",
    "fwht_bwd", "FwhtGrads", "FastFoodParams", "FASTFOOD_VARIANTS", "padded_dim", "fastfood_projection",
    "fastfood_projection_fwd", "fastfood_projection_bwd", "FastFoodGrads", "fastfood_matrix",
    "fastfood_rks_features", "fastfood_rks_features_fwd", "fastfood_rks_features_bwd",
    "fastfood_prf_features", "fastfood_prf_features_fwd", "fastfood_prf_features_bwd",
    "fastfood_prf_features_stable", "fastfood_prf_features_stable_fwd", "fastfood_prf_features_stable_bwd",
    "fastfood_rks_kernel", "fastfood_prf_kernel", "GeneratorParams", "GeneratorState", "GeneratorOutput",
    "GeneratorGrads", "GenerativeOutput", "GenerativeGrads", "generator", "generator_fwd", "generator_bwd",
    "generator_param_count", "generative_rks_features", "generative_rks_features_fwd",
    "generative_rks_features_bwd", "generative_prf_features", "generative_prf_features_fwd",
    "generative_prf_features_bwd", "generative_prf_features_stable", "generative_prf_features_stable_fwd",
    "generative_prf_features_stable_bwd", "DenseParams", "DenseCache", "DenseGrads", "dense", "dense_fwd",
    "dense_bwd", "LayerNormParams", "LayerNormCache", "LayerNormGrads", "layernorm", "layernorm_fwd",
    "layernorm_bwd", "BatchNormParams", "BatchNormState", "BatchNormOutput", "BatchNormCache",
    "BatchNormGrads", "batchnorm", "batchnorm_fwd", "batchnorm_bwd", "ActivationGrads", "relu", "relu_fwd",
    "relu_bwd", "leaky_relu", "leaky_relu_fwd", "leaky_relu_bwd", "LeakyReluCache", "tanh", "tanh_fwd",
    "tanh_bwd", "gelu", "gelu_fwd", "gelu_bwd", "DropoutCache", "DropoutGrads", "dropout", "dropout_fwd",
    "dropout_bwd", "token_embedding", "token_embedding_fwd", "token_embedding_bwd", "TokenEmbeddingGrads",
    "patchify", "unpatchify", "patch_embedding", "patch_embedding_fwd", "patch_embedding_bwd",
    "PatchEmbeddingGrads", "sinusoid_position_table", "position_embedding", "position_embedding_fwd",
    "position_embedding_bwd", "PositionEmbeddingGrads", "CrossEntropyCache", "CrossEntropyGrads",
    "softmax_cross_entropy", "softmax_cross_entropy_fwd", "softmax_cross_entropy_bwd", "MseGrads", "mse",
    "mse_fwd", "mse_bwd", "one_hot", "S1Params", "s1_positional", "s1_positional_fwd", "s1_positional_bwd",
    "s1_augment", "s1_augment_fwd", "s1_augment_bwd", "s1_attention", "s1_attention_fwd",
    "s1_attention_bwd", "s1_relative_term", "s1_relative_matrix", "S1PositionalGrads", "S1AugmentGrads",
    "S1AttentionGrads", "s2_attention", "s2_attention_fwd", "s2_attention_bwd", "s2_attention_naive",
    "s2_logits", "s2_class_index", "S2AttentionCache", "S2AttentionGrads", "DEFAULT_CLIP",
    "toeplitz_attention", "toeplitz_attention_fwd", "toeplitz_attention_bwd", "toeplitz_attention_dense",
    "toeplitz_matrix", "ToeplitzAttentionCache", "ToeplitzAttentionGrads", "GaussianMixture",
    "GaussianKernel", "LaplaceKernel", "CauchyKernel", "Box", "SinPower", "BSpline", "GaussianBasis",
    "Shifted", "Proposal", "PROPOSAL_KINDS", "spectrum_g", "spectrum_g_fwd", "spectrum_g_bwd",
    "spectrum_f", "rpe_mask", "proposal_log_density", "check_spectrum", "check_proposal",
    "kernel_proposal", "spectrum_dim", "spectrum_arrays", "check_proposal_shape", "SpectrumGCache",
    "SpectrumGGrads", "flt_frequencies", "flt_importance_weights", "flt_features", "flt_features_fwd",
    "flt_features_bwd", "flt_mask_estimate", "flt_attention", "flt_attention_fwd", "flt_attention_bwd",
    "FLTFeaturesCache", "FLTFeaturesGrads", "FLTAttentionCache", "FLTAttentionGrads",
    "check_attention_config", "check_config", "ATTENTION_KINDS", "AttentionKind", "Draw", "MHACache",
    "MHAGrads", "mha", "mha_fwd", "mha_bwd", "split_heads", "merge_heads", "SGDState", "AdamState",
    "sgd_init", "sgd_update", "adam_init", "adam_update", "adamw_update", "global_norm",
    "clip_by_global_norm", "TransformerGrads", "transformer", "transformer_fwd", "transformer_bwd",
    "transformer_loss_fwd", "transformer_loss_bwd", "loss_and_grads", "block_fwd", "block_bwd", "init_mha",
    "draw_attention_features", "features_for_step", "init_transformer",
]
