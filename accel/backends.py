r"""Switching a backend on for a scope: :func:`use`, :func:`available`, the error when one is missing.

Accelerated kernels for refattn's hot primitives are switched in explicitly and only for a scope::

    import accel
    accel.available()                      # {'numba': True, 'cupy': False}
    with accel.use("numba"):
        y = refattn.linear_attention(phi_q, phi_k, v, causal=True)    # the numba causal scan runs here
    y = refattn.linear_attention(phi_q, phi_k, v, causal=True)        # and the reference here

**Mechanism.** The core never imports ``accel``. It asks one small dispatch point,
:func:`refattn._dispatch.kernel_for`, at each named hot primitive (``"linear_attention.causal_fwd"``,
``"linear_attention.causal_bwd"``, ``"linear_attention.causal_frames_fwd"``,
``"linear_attention.causal_frames_bwd"``, ``"positive_features_stable"``, ``"fwht"``, ``"s2_window_sums"``,
``"contract_rows"``) and runs the reference when it answers ``None``. :func:`use` registers the backend's
kernels with :func:`refattn._dispatch.register` (on first use, never at import) and enters
:func:`refattn._dispatch.use_backend`, which sets a ``contextvars.ContextVar``: the switch is per thread and
per asyncio task, nestable, and restored on exit and on error. Outside every ``use`` scope refattn is the pure
reference. Kernels keep the reference's signatures and results (to a dtype tolerance stated in each module);
one that cannot take the given arrays raises ``TypeError`` -- it never falls back silently.

Backends:

=========  ==========================================  ===============================================
name       needs                                       what runs inside ``use(name)``
=========  ==========================================  ===============================================
``numba``  ``pip install 'refattn[accel]'`` (numba)    the kernels of ``accel/numba/`` (CPU, NumPy
                                                       arrays only)
``cupy``   ``pip install 'refattn[gpu]'`` and a CUDA   the kernels of ``accel/cupy/`` (CUDA, CuPy
           device (``cupy-cuda12x`` for CUDA 12,       arrays only): the chunk-parallel causal scans
           ``cupy-cuda13x`` for CUDA 13,               (row log-scales and per-feature frames), the
           ``cupy-cuda11x`` for CUDA 11)               fused positive-feature map and
                                                       ``contract_rows``; everything else is the
                                                       array-API reference running on CuPy arrays
=========  ==========================================  ===============================================

Layers: this module (``available``, ``use``) loads a backend's ``kernels`` module on first use
(:mod:`accel.numba.kernels`, :mod:`accel.cupy.kernels`), which imports the kernel modules of its backend; they
share the argument checks of ``accel/_checks.py``. refattn is reached only through ``refattn._dispatch``.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Callable, Iterator

from refattn import _dispatch

__all__ = ["available", "use", "BackendUnavailableError", "BACKENDS", "PROBES"]

#: Backend name -> the package it needs and the extra that installs it.
BACKENDS = {
    "numba": {"package": "numba", "extra": "accel", "installs": "numba>=0.59"},
    "cupy": {"package": "cupy", "extra": "gpu",
             "installs": "cupy-cuda12x>=13 (for CUDA 13 install cupy-cuda13x, "
                         "for CUDA 11 cupy-cuda11x instead)"},
}


class BackendUnavailableError(ImportError):
    """An accelerator backend was asked for that does not import or work here."""


def _probe_numba() -> tuple[bool, str]:
    try:
        importlib.import_module("numba")
    except ImportError as exc:
        return False, f"package 'numba' does not import ({exc})"
    return True, ""


def _probe_cupy() -> tuple[bool, str]:
    try:
        cupy = importlib.import_module("cupy")
    except ImportError as exc:
        return False, f"package 'cupy' does not import ({exc})"
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - CUDA runtime errors have many types
        return False, f"package 'cupy' imports but finds no CUDA device ({type(exc).__name__}: {exc})"
    if n < 1:
        return False, "package 'cupy' imports but finds no CUDA device"
    return True, ""


#: Availability probes, one per backend (tests replace them to simulate a missing package).
PROBES: dict[str, Callable[[], tuple[bool, str]]] = {"numba": _probe_numba, "cupy": _probe_cupy}


def available() -> dict[str, bool]:
    """Which backends import and work here: ``{"numba": bool, "cupy": bool}`` (cupy needs a CUDA device)."""
    return {name: PROBES[name]()[0] for name in BACKENDS}


def _registrar(name: str) -> Callable[[], None]:
    # The kernel modules import numba or CuPy, optional packages: a backend's kernels load on its first use,
    # never when accel is imported.
    if name == "numba":
        from .numba.kernels import register
    else:
        from .cupy.kernels import register
    return register


@contextlib.contextmanager
def use(name: str) -> Iterator[None]:
    """Run the enclosed block with backend `name`'s kernels at the core's hot primitives.

    Parameters
    ----------
    name : {"numba", "cupy"}

    Raises
    ------
    ValueError
        Unknown backend name.
    BackendUnavailableError
        (an ``ImportError``) The backend's package does not import or has no device here; the message names
        the package and the extra that installs it.
    """
    if not isinstance(name, str) or name not in BACKENDS:
        raise ValueError(f"accel.use: unknown backend {name!r}; expected one of {sorted(BACKENDS)}")
    ok, why = PROBES[name]()
    if not ok:
        info = BACKENDS[name]
        raise BackendUnavailableError(
            f"accel.use({name!r}): backend unavailable: {why}; install it with pip install "
            f"'refattn[{info['extra']}]' (the {info['extra']!r} extra installs {info['installs']})")
    register = _registrar(name)
    register()
    with _dispatch.use_backend(name):
        yield
