"""Relative positional encodings: Horn et al. S1 (rotation) and S2 (clipped distances), exact Toeplitz-FFT
RPE, and FourierLearner (FLT) masks from their Fourier spectra."""

from .s1_rotation import *  # noqa: F401,F403  (Horn S1)
from .s1_rotation import __all__ as _s1_all
from .s2_clipped import *  # noqa: F401,F403  (Horn S2)
from .s2_clipped import __all__ as _s2_all
from .toeplitz import *  # noqa: F401,F403  (exact Toeplitz-FFT RPE)
from .toeplitz import __all__ as _toeplitz_all

from .spectra import *  # noqa: F401,F403  (FLT spectra and proposals)
from .spectra import __all__ as _spectra_all
from .flt import *  # noqa: F401,F403  (FLT features and Algorithm 1)
from .flt import __all__ as _flt_all

__all__: list[str] = []
__all__ += list(_s1_all) + list(_s2_all) + list(_toeplitz_all)
__all__ += list(_spectra_all) + list(_flt_all)
