"""Relative positional encodings: Horn et al. S1 (rotation) and S2 (clipped distances), exact Toeplitz-FFT
RPE, and FourierLearner (FLT) masks from their Fourier spectra.

**Boundary contract** (``tests/rpe/test_boundary.py``). Every public function and every ``*_bwd`` checks the
shape, dtype (real floating; positions may be integers, indices by nature) and finiteness of each array it is
given -- parameter containers (``spectrum.sigma``, ``proposal.scale``, ``params.freqs``) and cotangents
(``dy``, ``dg[0]``, ``dN[0]``, ``dQ_p``) included -- and raises ``ValueError``/``TypeError`` naming the
argument as passed. Empty sizes:

* empty results (the mathematically right answer): ``L = 0`` positions in ``s1_positional``,
  ``s1_relative_matrix``, ``s2_attention``, ``rpe_mask``, ``flt_features``; ``d_v = 0`` values in the
  attention functions; ``r = 0`` frequencies in ``flt_frequencies``, ``flt_importance_weights``,
  ``spectrum_g``; ``D = 0`` for the isotropic spectra; ``d = 0`` content width in ``s1_attention`` (the
  positional part remains);
* ``ValueError`` naming the argument where no result exists: ``L = 0`` in ``s1_attention``,
  ``toeplitz_attention[_dense]`` (``coeffs`` has 2L - 1 entries) and ``flt_attention``; ``d = 0`` in
  ``s2_attention`` and ``flt_attention`` (the scale d^(-1/2), d^(-1/4)); ``m = 0`` features in the Toeplitz
  functions (every normaliser is 0) and ``m = 0`` projection rows (``omega``) in the FAVOR+ paths; ``r = 0``
  in ``flt_features`` (the features are divided by r).
"""

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
