"""NumPy-only edge: draws and initialisations for positional encodings.

Families (keep each family's functions together):

* **Horn et al. S1** (``init_s1_params``): sinusoid frequencies initialised like absolute sinusoid encodings
  (Vaswani et al.: a geometric ladder ``omega_s = base^{-s / S}``), several lengthscales per position axis
  (the paper: 4, "initialized in a similar manner as conventional absolute positional encodings", App. A.2),
  and the rotation parameters ``alpha, beta`` of each (axis, lengthscale) block.
* FLT frequency draws (added by the FLT work).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import check_dtype_arg, check_rng

__all__ = ["init_s1_params"]


# ----------------------------------------------------------------------------------------------------------
# Horn et al. Strategy 1


def init_s1_params(rng: np.random.Generator, n_axes: int = 1, n_lengthscales: int = 4, *, base: float = 10000.0,
                   alpha: float = 1.0, beta_std: float = 0.1, batch_shape: tuple = (),
                   dtype: Any = np.float64):
    r"""Initial S1 parameters ``S1Params(freqs, alpha, beta)``, each of shape ``(*batch_shape, A, S)``.

    ``freqs[..., a, s] = base ** (-s / S)`` (s = 0..S-1, the same ladder on every axis: wavelengths from 2 pi to
    2 pi base^{(S-1)/S}, as the sinusoid encodings of Vaswani et al. with d_model = 2S); ``alpha = alpha``
    (so that at initialisation the positional logit ``sum alpha cos(omega Delta)`` peaks at Delta = 0, a locality
    prior); ``beta ~ N(0, beta_std^2)`` iid, the only random part (it breaks the Delta -> -Delta symmetry).

    Parameters
    ----------
    rng : numpy.random.Generator
        Required (None is rejected).
    n_axes : int
        A: 1 for sequences, 2 for image grids.
    n_lengthscales : int
        S (the paper: 4).
    base : float
        Ladder base (10000 as in Vaswani et al.; a smaller base suits short grids such as 32 x 32).
    alpha, beta_std : float
    batch_shape : tuple
        Leading axes (e.g. ``(H, 1, 1)``... or ``(H,)`` for per-head parameters broadcasting like heads).
    dtype : float32 or float64
    """
    from ..rpe.s1_rotation import S1Params

    check_rng(rng)
    dt = check_dtype_arg(dtype)
    for name, val in (("n_axes", n_axes), ("n_lengthscales", n_lengthscales)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val <= 0:
            raise ValueError(f"{name}: expected a positive integer; got {val!r}")
    if not (np.isfinite(base) and base > 0):
        raise ValueError(f"base: expected a positive finite number; got {base!r}")
    shape = tuple(int(s) for s in batch_shape) + (int(n_axes), int(n_lengthscales))
    ladder = float(base) ** (-np.arange(n_lengthscales) / n_lengthscales)               # (S,)
    freqs = np.broadcast_to(ladder, shape).astype(dt)                                   # (*b, A, S)
    alpha_arr = np.full(shape, float(alpha), dtype=dt)
    beta_arr = (float(beta_std) * rng.standard_normal(shape)).astype(dt)
    return S1Params(freqs=freqs, alpha=alpha_arr, beta=beta_arr)
