"""The numba backend's kernel table and :func:`register` (called by ``accel.use("numba")``, never at import).

* ``causal``: ``linear_attention.causal_fwd``, ``linear_attention.causal_bwd`` (row log-scales) and
  ``linear_attention.causal_frames_fwd``, ``linear_attention.causal_frames_bwd`` (per-feature frames, FAVOR+):
  the time-blocked scan;
* ``positive``: ``positive_features_stable``, ``positive_key_features_stable``;
* ``fwht``: ``fwht``;
* ``s2``: ``s2_window_sums``.

Each kernel computes what the core's reference for its primitive computes (``refattn._dispatch.reference``;
the kernel module names it). Importing this module imports numba; each kernel is compiled on its first call
(and cached on disk).

Thread safety: numba's ``workqueue`` threading layer (the fallback when neither OpenMP nor TBB is available)
aborts the process when two threads run parallel kernels at once. Every registered kernel is therefore
wrapped: calls are serialised through one lock unless numba reports a thread-safe layer (``omp`` or
``tbb``); until the first parallel kernel has run, the layer is unknown and calls are serialised.
"""

from __future__ import annotations

import functools
import threading

import numba

from .._checks import register_backend
from . import causal, fwht, positive, s2

__all__ = ["register", "BACKEND", "PRIMITIVES"]

BACKEND = "numba"


def _primitives():
    table = {
        "linear_attention.causal_fwd": causal.causal_fwd,
        "linear_attention.causal_bwd": causal.causal_bwd,
        "linear_attention.causal_frames_fwd": causal.causal_frames_fwd,
        "linear_attention.causal_frames_bwd": causal.causal_frames_bwd,
        "positive_features_stable": positive.positive_features_stable,
        "positive_key_features_stable": positive.positive_key_features_stable,
        "fwht": fwht.fwht,
        "s2_window_sums": s2.s2_window_sums,
    }
    return table


_LOCK = threading.Lock()
_SAFE_LAYER: list[bool] = []          # [True/False] once numba has chosen its threading layer


def _layer_is_thread_safe() -> bool:
    if not _SAFE_LAYER:
        try:
            layer = numba.threading_layer()
        except ValueError:            # no parallel kernel has run yet: the layer is not chosen
            return False
        _SAFE_LAYER.append(layer in ("omp", "tbb"))
    return _SAFE_LAYER[0]


def _serialised_unless_safe(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if _layer_is_thread_safe():
            return fn(*args, **kwargs)
        with _LOCK:
            return fn(*args, **kwargs)

    return call


#: primitive name -> kernel (wrapped by the lock above), filled on first :func:`register`.
PRIMITIVES: dict = {}


def register() -> None:
    """Register the numba kernels with the core's dispatch point (idempotent)."""
    register_backend(BACKEND, PRIMITIVES,
                     lambda: {k: _serialised_unless_safe(f) for k, f in _primitives().items()})
