"""The one dispatch point through which ``accel`` swaps in kernels for named hot primitives.

The core never imports ``accel``. A backend registers implementations with :func:`register`; the core asks
:func:`kernel_for` at each hot primitive and gets ``None`` (run the reference) unless a backend has been switched
in for the current context with :func:`use_backend` (``accel.use(...)`` wraps it). The active backend is a
``contextvars.ContextVar``: per thread and per asyncio task, nestable, restored on exit and on error.

Named hot primitives (their signatures are those of the reference functions named):

=================================  ===========================================================================
``"linear_attention.causal_fwd"``  :func:`refattn.attention.linear._causal_fwd_reference`
``"linear_attention.causal_bwd"``  :func:`refattn.attention.linear._causal_bwd_reference`
``"positive_features_stable"``     the fused positive-feature map with its row stabiliser (features issue)
``"fwht"``                         the fast Walsh-Hadamard transform (KL spectra issue)
``"s2_window_sums"``               S2's window sums (Horn RPE issue)
``"contract_rows"``                :func:`refattn._xp._contract_rows_reference`: ``a^T b`` over a long row
                                   axis (linear attention's ``phi_k^T [v, 1]``, a projection's ``du^T x``)
=================================  ===========================================================================
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator

__all__ = ["register", "kernel_for", "active_backend", "use_backend", "registered"]

_active: contextvars.ContextVar[str | None] = contextvars.ContextVar("refattn_backend", default=None)
_registry: dict[tuple[str, str], Callable[..., Any]] = {}
_known_backends: set[str] = set()


def register(backend: str, primitive: str, fn: Callable[..., Any]) -> None:
    """Register `fn` as `backend`'s implementation of the hot primitive `primitive`."""
    _known_backends.add(backend)
    _registry[(backend, primitive)] = fn


def registered(backend: str | None = None) -> dict[tuple[str, str], Callable[..., Any]]:
    """The registered implementations (optionally of one backend)."""
    return {k: v for k, v in _registry.items() if backend is None or k[0] == backend}


def active_backend() -> str | None:
    """The backend switched in for the current context, or ``None`` (the reference)."""
    return _active.get()


def kernel_for(primitive: str) -> Callable[..., Any] | None:
    """The active backend's kernel for `primitive`, or ``None`` when the reference must run."""
    backend = _active.get()
    if backend is None:
        return None
    return _registry.get((backend, primitive))


@contextlib.contextmanager
def use_backend(backend: str | None) -> Iterator[None]:
    """Switch `backend` in for the enclosed block (``None`` switches back to the reference)."""
    if backend is not None and backend not in _known_backends:
        raise ValueError(f"backend: no kernels are registered for {backend!r}; registered: {sorted(_known_backends)}")
    token = _active.set(backend)
    try:
        yield
    finally:
        _active.reset(token)
