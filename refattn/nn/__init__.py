"""Neural-network layers as forward/backward pairs, the transformer, losses, optimisers and the training loop.

Submodules: ``dense``, ``layernorm``, ``batchnorm``, ``activations``, ``dropout``, ``embedding``, ``loss``,
``optim`` are imported here. ``mha`` and ``transformer`` are loaded on first access of one of their names
(``refattn.nn.mha_fwd``, ``from refattn.nn import init_transformer``; PEP 562): ``refattn.features``
imports the layers above (the generative spectra's MLP) while ``mha`` imports ``refattn.features``, so importing
``mha`` eagerly here would be an import cycle. ``refattn/__init__`` re-exports both once every subpackage is
loaded. ``checkpoint`` and ``train`` (NumPy-only edges; ``train`` may import tqdm) are never imported by
``import refattn``.
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


_LAZY = ("mha", "transformer")


def __getattr__(name: str):
    """Load ``mha``/``transformer`` on first access of one of their public names (breaks the import cycle)."""
    import importlib

    for mod_name in _LAZY:
        mod = importlib.import_module(f"{__name__}.{mod_name}")
        if name == mod_name:
            return mod
        if name in getattr(mod, "__all__", ()):
            return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
