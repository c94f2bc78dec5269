"""CuPy (CUDA) kernels for refattn's hot primitives, one module per primitive; the table in
:mod:`accel.cupy.kernels` (importing this package does not import CuPy)."""
