"""Numba (CPU) kernels for refattn's hot primitives, one module per primitive; the table in
:mod:`accel.numba.kernels`."""
