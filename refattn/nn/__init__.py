"""Models: configuration, attention kinds, multi-head attention, the transformer, optimisers, initialisation.

Submodules: ``config`` (pure-Python configuration checks), ``kinds`` (one module per attention kind),
``mha``, ``transformer``, ``optim``, ``init`` (NumPy edge: draws a model from the kinds' declarations). The
layers the models are built from live in :mod:`refattn.layers`. ``checkpoint`` and ``train`` (NumPy-only
edges; ``train`` may import tqdm) are not imported here: ``from refattn.nn.train import train``.
"""

from .config import check_attention_config, check_config
from .init import draw_attention_features, features_for_step, init_mha, init_transformer
from .kinds import ATTENTION_KINDS, AttentionKind, Draw
from .mha import MHACache, MHAGrads, merge_heads, mha, mha_bwd, mha_fwd, split_heads
from .optim import (AdamState, SGDState, adam_init, adam_update, adamw_update, clip_by_global_norm,
                    global_norm, sgd_init, sgd_update)
from .transformer import (TransformerGrads, block_bwd, block_fwd, loss_and_grads, transformer,
                          transformer_bwd, transformer_fwd, transformer_loss_bwd, transformer_loss_fwd)

__all__ = [n for n in dir() if not n.startswith("_")]
