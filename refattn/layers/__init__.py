"""Layers as forward/backward pairs, below the feature maps and the models.

Dense, layer norm, batch norm, activations (ReLU, leaky ReLU, tanh, GELU), inverted dropout, embeddings
(tokens, patches, positions) and losses (softmax cross-entropy, MSE). ``refattn.features`` (the generative
spectra's MLP) and ``refattn.nn`` (the transformer) build on them; they import nothing above ``_xp``.
Initial parameters and dropout masks are drawn at the NumPy edge: :mod:`refattn.random.layers`.
"""

from .dense import (
    DenseParams, DenseCache, DenseGrads, dense, dense_fwd, dense_bwd,
)

from .layernorm import (
    LayerNormParams, LayerNormCache, LayerNormGrads, layernorm, layernorm_fwd, layernorm_bwd,
)

from .batchnorm import (
    BatchNormParams, BatchNormState, BatchNormOutput, BatchNormCache, BatchNormGrads, batchnorm,
    batchnorm_fwd, batchnorm_bwd,
)

from .activations import (
    ActivationGrads, relu, relu_fwd, relu_bwd, leaky_relu, leaky_relu_fwd, leaky_relu_bwd, LeakyReluCache,
    tanh, tanh_fwd, tanh_bwd, gelu, gelu_fwd, gelu_bwd,
)

from .dropout import (
    DropoutCache, DropoutGrads, dropout, dropout_fwd, dropout_bwd,
)

from .embeddings import (
    token_embedding, token_embedding_fwd, token_embedding_bwd, TokenEmbeddingGrads, patchify, unpatchify,
    patch_embedding, patch_embedding_fwd, patch_embedding_bwd, PatchEmbeddingGrads,
    sinusoid_position_table, position_embedding, position_embedding_fwd, position_embedding_bwd,
    PositionEmbeddingGrads,
)

from .losses import (
    CrossEntropyCache, CrossEntropyGrads, softmax_cross_entropy, softmax_cross_entropy_fwd,
    softmax_cross_entropy_bwd, MseGrads, mse, mse_fwd, mse_bwd, one_hot,
)

__all__ = [
    "DenseParams", "DenseCache", "DenseGrads", "dense", "dense_fwd", "dense_bwd", "LayerNormParams",
    "LayerNormCache", "LayerNormGrads", "layernorm", "layernorm_fwd", "layernorm_bwd", "BatchNormParams",
    "BatchNormState", "BatchNormOutput", "BatchNormCache", "BatchNormGrads", "batchnorm", "batchnorm_fwd",
    "batchnorm_bwd", "ActivationGrads", "relu", "relu_fwd", "relu_bwd", "leaky_relu", "leaky_relu_fwd",
    "leaky_relu_bwd", "LeakyReluCache", "tanh", "tanh_fwd", "tanh_bwd", "gelu", "gelu_fwd", "gelu_bwd",
    "DropoutCache", "DropoutGrads", "dropout", "dropout_fwd", "dropout_bwd", "token_embedding",
    "token_embedding_fwd", "token_embedding_bwd", "TokenEmbeddingGrads", "patchify", "unpatchify",
    "patch_embedding", "patch_embedding_fwd", "patch_embedding_bwd", "PatchEmbeddingGrads",
    "sinusoid_position_table", "position_embedding", "position_embedding_fwd", "position_embedding_bwd",
    "PositionEmbeddingGrads", "CrossEntropyCache", "CrossEntropyGrads", "softmax_cross_entropy",
    "softmax_cross_entropy_fwd", "softmax_cross_entropy_bwd", "MseGrads", "mse", "mse_fwd", "mse_bwd",
    "one_hot",
]
