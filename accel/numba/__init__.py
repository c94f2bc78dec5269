"""Numba (CPU) kernels for refattn's hot primitives; one module per primitive, each with a ``SUPPORTED``
table.

* ``causal``: ``linear_attention.causal_fwd``, ``linear_attention.causal_bwd`` (row log-scales; references
  ``refattn.attention._causal._causal_{fwd,bwd}_reference``) and ``linear_attention.causal_frames_fwd``,
  ``linear_attention.causal_frames_bwd`` (per-feature frames, FAVOR+;
  ``_causal_frames_{fwd,bwd}_reference``): the time-blocked scan;
* ``positive``: ``positive_features_stable``, ``positive_key_features_stable``
  (``refattn.features.positive._positive_features_stable_reference``, ``_key_features_reference``);
* ``fwht``: ``fwht`` (``refattn.features.fastfood._fwht_reference``);
* ``s2``: ``s2_window_sums`` (``refattn.rpe.s2_clipped._class_sums_reference``).

:func:`register` is called by ``accel.use("numba")`` (never at import): it registers every kernel with
``refattn._dispatch``. Importing this package imports numba (the ``accel`` extra).

Thread safety: numba's ``workqueue`` threading layer (the fallback when neither OpenMP nor TBB is available)
aborts the process when two threads run parallel kernels at once. Every registered kernel is therefore
wrapped:
calls are serialised through one lock unless numba reports a thread-safe layer (``omp`` or ``tbb``); until the
first parallel kernel has run, the layer is unknown and calls are serialised.
"""

from __future__ import annotations

import functools
import threading

from .._checks import register_backend

__all__ = ["register", "BACKEND", "PRIMITIVES"]

BACKEND = "numba"


def _primitives():
    from . import causal, fwht, positive, s2

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
        import numba

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
