"""Feature maps: one module per family (deterministic, trig, positive, orthogonal draws, learnable spectra)."""

from .deterministic import *  # noqa: F401,F403
from .deterministic import __all__ as _det_all

__all__ = list(_det_all)
