"""refattn: the reference implementation of kernelized (linear) attention with relative positional encodings.

Array-API-generic core: every public function takes arrays from any array-API library (NumPy, CuPy,
array_api_strict, ...) and returns arrays of the same library, dtype and device. Randomness is drawn only in
:mod:`refattn.random` (NumPy generators) and handed to the core as arrays.

Layers of the package, each importing only those below it (``tests/test_architecture.py`` enforces it)::

    nn (models) -> rpe -> attention -> features -> layers -> _xp / _dispatch / tree
    random (NumPy edge: draws) -> layers, features, rpe, _xp;  nothing in refattn imports accel, validation,
    paper_checks

The top level holds what a user calls: the feature maps and their exact kernels (the oracles), the attention
functions (softmax, kernel, linear, FAVOR+, S1, S2, Toeplitz, FLT) and their dense references, the MSE
formulas, the draws of :mod:`refattn.random` (``draw_*``) and the model's entry points (:func:`transformer`,
:func:`init_transformer`, :func:`loss_and_grads`). The differentiable pairs (``f_fwd`` / ``f_bwd``), their
caches and gradient types, parameter containers and building blocks stay in their subpackage
(``refattn.attention.favor_attention_fwd``); the layers are in :mod:`refattn.layers`, the training loop in
:mod:`refattn.nn.train`.
"""

from . import attention, features, layers, limits, nn, random, rpe, tree
from .attention import (exp_dot_kernel, favor_attention, kernel_attention, linear_attention,
                        linear_attention_step, softmax_attention)
from .features import (elu_features, elu_kernel, fastfood_prf_features, fastfood_prf_features_stable,
                       fastfood_prf_kernel, fastfood_rks_features, fastfood_rks_kernel, gaussian_kernel,
                       gaussian_positive_features, generative_prf_features, generative_prf_features_stable,
                       generative_rks_features, gmm_prf_features, gmm_prf_features_stable, gmm_prf_kernel,
                       gmm_prf_mse, gmm_rks_antithetic_mse, gmm_rks_features, gmm_rks_kernel, gmm_rks_mse,
                       hyperbolic_features, hyperbolic_features_stable, hyperbolic_key_features_stable,
                       positive_features, positive_features_stable, positive_key_features_stable,
                       relu_features, relu_kernel, softmax_kernel, softmax_trig_features,
                       softmax_trig_features_stable, trig_features)
from .nn import init_transformer, loss_and_grads, transformer
from .random import (draw_dropout_mask, draw_fastfood, draw_flt_noise, draw_gaussian, draw_generator_noise,
                     draw_gmm_antithetic_noise, draw_gmm_noise, draw_orthogonal)
from .rpe import (flt_attention, flt_features, flt_mask_estimate, rpe_mask, s1_attention, s2_attention,
                  s2_attention_naive, toeplitz_attention, toeplitz_attention_dense)

#: The package version (as in ``pyproject.toml``).
__version__ = "0.2.0"

__all__ = [n for n in dir() if not n.startswith("_")]
