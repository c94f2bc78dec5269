"""Test helpers for accel: the registered kernels are wrapped (thread-safety lock); compare the
raw kernels."""


def unwrap(fn):
    """The raw kernel behind a registered (lock-wrapped) kernel; ``None`` stays ``None``."""
    return getattr(fn, "__wrapped__", fn)
