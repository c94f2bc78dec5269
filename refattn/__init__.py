"""refattn: the reference implementation of kernelized (linear) attention with relative positional encodings.

Array-API-generic core: every public function takes arrays from any array-API library (NumPy, CuPy,
array_api_strict, ...) and returns arrays of the same library, dtype and device. Randomness is drawn only in
:mod:`refattn.random` (NumPy generators) and handed to the core as arrays.

The flat namespace re-exports each subpackage's ``__all__`` (attention, features, rpe, nn).
"""

from . import attention, features, nn, random, rpe
from .attention import *  # noqa: F401,F403
from .features import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .rpe import *  # noqa: F401,F403

# mha and transformer import features, which import nn's layers: re-export them once everything is loaded.
from .nn import mha as _mha, transformer as _transformer  # noqa: E402
from .nn.mha import *  # noqa: E402,F401,F403
from .nn.transformer import *  # noqa: E402,F401,F403

__version__ = "0.1.0"

__all__ = (["__version__"] + list(attention.__all__) + list(features.__all__) + list(rpe.__all__)
           + list(nn.__all__) + list(_mha.__all__) + list(_transformer.__all__))
