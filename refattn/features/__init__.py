"""Feature maps: one module per family (deterministic, trig, positive, orthogonal draws, learnable spectra)."""

from .deterministic import *  # noqa: F401,F403
from .deterministic import __all__ as _det_all

__all__ = list(_det_all)

from .trig import *  # noqa: E402,F401,F403  (RKS / softmax-trig features, softmax and Gaussian kernels)
from .trig import __all__ as _trig_all  # noqa: E402
from .positive import *  # noqa: E402,F401,F403  (PRF / FAVOR+, KL Eq. 9, hyperbolic)
from .positive import __all__ as _pos_all  # noqa: E402

__all__ += list(_trig_all) + list(_pos_all)
from .gmm import *  # noqa: E402,F401,F403  (KL GMM-RKS / GMM-PRF learnable spectra)
from .gmm import __all__ as _gmm_all  # noqa: E402
from .fastfood import *  # noqa: E402,F401,F403  (KL FastFood-RKS / -PRF, fwht)
from .fastfood import __all__ as _ff_all  # noqa: E402

__all__ += list(_gmm_all) + list(_ff_all)
from .generative import *  # noqa: E402,F401,F403  (KL Generative-RKS / -PRF: generator MLP spectra)
from .generative import __all__ as _gen_all  # noqa: E402

__all__ += list(_gen_all)
