"""Accelerated kernels for refattn's hot primitives, switched in explicitly and only for a scope:
inside ``with accel.use("numba"):`` the core runs the numba kernels (see :mod:`accel.backends`)."""

from .backends import BACKENDS, BackendUnavailableError, available, use

__all__ = ["available", "use", "BackendUnavailableError", "BACKENDS"]
