"""Numba (CPU) kernels for refattn's hot primitives; one module per primitive, each with a ``SUPPORTED`` table.

=================  ================================  =========================================================
module             registered primitive(s)           reference
=================  ================================  =========================================================
``causal``         ``linear_attention.causal_fwd``,  ``refattn.attention.linear._causal_{fwd,bwd}_reference``
                   ``linear_attention.causal_bwd``
``positive``       ``positive_features_stable``      ``refattn.features.positive._positive_features_stable_reference``
``fwht``           ``fwht``                          ``refattn.features.fastfood._fwht_reference``
``s2``             ``s2_window_sums``                ``refattn.rpe.s2_clipped._class_sums_reference``
=================  ================================  =========================================================

:func:`register` is called by ``accel.use("numba")`` (never at import): it registers every kernel with
``refattn._dispatch``. Importing this package imports numba (the ``accel`` extra).
"""

from __future__ import annotations

from refattn import _dispatch

__all__ = ["register", "BACKEND", "PRIMITIVES"]

BACKEND = "numba"


def _primitives():
    from . import causal, fwht, positive, s2

    table = {
        "linear_attention.causal_fwd": causal.causal_fwd,
        "linear_attention.causal_bwd": causal.causal_bwd,
        "positive_features_stable": positive.positive_features_stable,
        "fwht": fwht.fwht,
        "s2_window_sums": s2.s2_window_sums,
    }
    return table


#: primitive name -> kernel, filled on first :func:`register`.
PRIMITIVES: dict = {}


def register() -> None:
    """Register the numba kernels with the core's dispatch point (idempotent)."""
    if not PRIMITIVES:
        PRIMITIVES.update(_primitives())
    for prim, fn in PRIMITIVES.items():
        _dispatch.register(BACKEND, prim, fn)
