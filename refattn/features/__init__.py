"""Feature maps: one module per family (deterministic, trig, positive with its key frames and hyperbolic
variant, and the learnable spectra: GMM, FastFood on the fast Walsh-Hadamard transform, generative)."""

from .deterministic import (
    elu_features, elu_features_fwd, elu_features_bwd, elu_kernel, EluFeaturesGrads, relu_features,
    relu_features_fwd, relu_features_bwd, relu_kernel, ReluFeaturesGrads,
)
from .trig import (
    trig_features, trig_features_fwd, trig_features_bwd, TrigFeaturesCache, TrigFeaturesGrads,
    softmax_trig_features, softmax_trig_features_fwd, softmax_trig_features_bwd,
    softmax_trig_features_stable, softmax_trig_features_stable_fwd, softmax_trig_features_stable_bwd,
    SoftmaxTrigFeaturesCache, gaussian_kernel, softmax_kernel, trig_mse, softmax_trig_mse,
)
from .positive import (
    positive_features, positive_features_fwd, positive_features_bwd, positive_features_stable,
    positive_features_stable_fwd, positive_features_stable_bwd, gaussian_positive_features,
    gaussian_positive_features_fwd, gaussian_positive_features_bwd, PositiveFeaturesCache,
    PositiveFeaturesGrads, positive_mse, gaussian_positive_mse,
)
from .key_frames import (
    positive_key_features_stable, positive_key_features_stable_fwd, positive_key_features_stable_bwd,
    KeyFeaturesCache,
)
from .hyperbolic import (
    hyperbolic_features, hyperbolic_features_fwd, hyperbolic_features_bwd, hyperbolic_features_stable,
    hyperbolic_features_stable_fwd, hyperbolic_features_stable_bwd, hyperbolic_key_features_stable,
    hyperbolic_key_features_stable_fwd, hyperbolic_key_features_stable_bwd, HyperbolicFeaturesCache,
    hyperbolic_mse,
)
from .gmm_spectrum import (
    GMMParams, gmm_weights, gmm_antithetic_params, gmm_frequencies, gmm_frequencies_fwd,
    gmm_frequencies_bwd, GMMFrequenciesGrads,
)
from .gmm import (
    gmm_rks_features, gmm_rks_features_fwd, gmm_rks_features_bwd,
    gmm_prf_features, gmm_prf_features_fwd, gmm_prf_features_bwd, gmm_prf_features_stable,
    gmm_prf_features_stable_fwd, gmm_prf_features_stable_bwd, GMMFeaturesGrads, gmm_rks_kernel,
    gmm_prf_kernel, gmm_rks_mse, gmm_rks_antithetic_mse, gmm_prf_mse,
)
from .fwht import fwht, fwht_fwd, fwht_bwd, FwhtGrads
from .fastfood_transform import (
    FastFoodParams, FASTFOOD_VARIANTS, padded_dim,
    fastfood_projection, fastfood_projection_fwd, fastfood_projection_bwd, FastFoodGrads, fastfood_matrix,
)
from .fastfood import (
    fastfood_rks_features, fastfood_rks_features_fwd, fastfood_rks_features_bwd, fastfood_prf_features,
    fastfood_prf_features_fwd, fastfood_prf_features_bwd, fastfood_prf_features_stable,
    fastfood_prf_features_stable_fwd, fastfood_prf_features_stable_bwd, fastfood_rks_kernel,
    fastfood_prf_kernel,
)
from .generator_network import (
    GeneratorParams, GeneratorState, GeneratorOutput, GeneratorGrads, generator, generator_fwd, generator_bwd,
    generator_param_count,
)
from .generative import (
    GenerativeOutput, GenerativeGrads, generative_rks_features,
    generative_rks_features_fwd, generative_rks_features_bwd, generative_prf_features,
    generative_prf_features_fwd, generative_prf_features_bwd, generative_prf_features_stable,
    generative_prf_features_stable_fwd, generative_prf_features_stable_bwd,
)

__all__ = [
    "elu_features", "elu_features_fwd", "elu_features_bwd", "elu_kernel", "EluFeaturesGrads",
    "relu_features", "relu_features_fwd", "relu_features_bwd", "relu_kernel", "ReluFeaturesGrads",
    "trig_features", "trig_features_fwd", "trig_features_bwd", "TrigFeaturesCache", "TrigFeaturesGrads",
    "softmax_trig_features", "softmax_trig_features_fwd", "softmax_trig_features_bwd",
    "softmax_trig_features_stable", "softmax_trig_features_stable_fwd", "softmax_trig_features_stable_bwd",
    "SoftmaxTrigFeaturesCache", "gaussian_kernel", "softmax_kernel", "trig_mse", "softmax_trig_mse",
    "positive_mse", "gaussian_positive_mse", "hyperbolic_mse", "positive_features",
    "positive_features_fwd", "positive_features_bwd", "positive_features_stable",
    "positive_features_stable_fwd", "positive_features_stable_bwd", "gaussian_positive_features",
    "gaussian_positive_features_fwd", "gaussian_positive_features_bwd", "hyperbolic_features",
    "hyperbolic_features_fwd", "hyperbolic_features_bwd", "hyperbolic_features_stable",
    "hyperbolic_features_stable_fwd", "hyperbolic_features_stable_bwd", "positive_key_features_stable",
    "positive_key_features_stable_fwd", "positive_key_features_stable_bwd",
    "hyperbolic_key_features_stable", "hyperbolic_key_features_stable_fwd",
    "hyperbolic_key_features_stable_bwd", "PositiveFeaturesCache", "PositiveFeaturesGrads",
    "HyperbolicFeaturesCache", "KeyFeaturesCache", "GMMParams", "gmm_weights", "gmm_antithetic_params",
    "gmm_frequencies", "gmm_frequencies_fwd", "gmm_frequencies_bwd", "GMMFrequenciesGrads",
    "gmm_rks_features", "gmm_rks_features_fwd", "gmm_rks_features_bwd", "gmm_prf_features",
    "gmm_prf_features_fwd", "gmm_prf_features_bwd", "gmm_prf_features_stable",
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
    "generative_prf_features_stable_bwd",
]
