"""Neural-network layers as forward/backward pairs, the transformer, losses, optimisers and the training loop.

Submodules: ``dense``, ``layernorm``, ``batchnorm``, ``activations``, ``dropout``, ``embedding``, ``loss``,
``optim``. ``mha``, ``transformer``, ``checkpoint`` and ``train`` are *not* imported here: ``refattn.features``
imports these layers (the generative spectra's MLP) and ``mha`` imports ``refattn.features``, so re-exporting
``mha`` here would be an import cycle; use ``from refattn.nn.transformer import ...``. ``train`` may import
tqdm and is never imported by ``import refattn``.
Note that ``refattn.nn.dense`` is the *function* (the flat re-export); import the module with
``from refattn.nn import dense as ...`` only via ``import refattn.nn.dense`` / ``from refattn.nn.dense import ...``.
"""

import sys as _sys

from .activations import *  # noqa: F401,F403
from .batchnorm import *  # noqa: F401,F403
from .dense import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
from .layernorm import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .optim import *  # noqa: F401,F403

_MODULES = ("activations", "batchnorm", "dense", "dropout", "embedding", "layernorm", "loss", "optim")
__all__: list[str] = [n for _m in _MODULES for n in _sys.modules[f"{__name__}.{_m}"].__all__]
