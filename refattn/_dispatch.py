"""The one dispatch point through which ``accel`` swaps in kernels for named hot primitives, and the registry
of those primitives with their reference implementations.

**Registry.** :data:`PRIMITIVES` names every hot primitive; the module that owns a primitive's reference
attaches it with :func:`define` when it is imported (``import refattn`` imports them all). :func:`reference`
returns a reference by name (benchmarks and the accel tests use it instead of private imports),
:func:`primitives` the whole ``{name: reference}`` table, and every function here raises ``ValueError`` on a
name that is not in the registry: a misspelled primitive never silently means "run the reference".

**Dispatch.** A backend registers implementations with :func:`register`; the core asks :func:`implementation`
(the active backend's kernel, else the reference) or :func:`kernel_for` (the kernel, or ``None``) at each hot
primitive. The active backend is switched in for the current context with :func:`use_backend`
(``accel.use(...)`` wraps it): a ``contextvars.ContextVar``, per thread and per asyncio task, nestable,
restored on exit and on error. The core never imports ``accel``.

====================================== =======================================================================
primitive                              reference (signature of every kernel registered for it)
====================================== =======================================================================
``linear_attention.causal_fwd``        ``refattn.attention._causal._causal_fwd_reference`` (row log-scales)
``linear_attention.causal_bwd``        ``refattn.attention._causal._causal_bwd_reference``
``linear_attention.causal_frames_fwd`` ``refattn.attention._causal._causal_frames_fwd_reference`` (per-feature
                                       key frames): ``(numer_aug, kept)``, the states kept for `stride` (a
                                       ``KeptStates`` of the one layout every backend reads, or None)
``linear_attention.causal_frames_bwd`` ``refattn.attention._causal._causal_frames_bwd_reference``: from `kept`
                                       (one sweep) or None (two); ``log_features=True`` gives ``dphi * phi``
``positive_features_stable``           ``refattn.features.positive._positive_features_stable_reference``
``positive_key_features_stable``       ``refattn.features.key_frames._key_features_reference``
``fwht``                               ``refattn.features.fwht._fwht_reference``
``s2_window_sums``                     ``refattn.rpe.s2_clipped.s2_window_sums_reference``
``contract_rows``                      ``refattn._xp._contract_rows_reference``: ``a^T b`` over long rows
====================================== =======================================================================
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator

__all__ = ["PRIMITIVES", "define", "reference", "primitives", "register", "kernel_for", "implementation",
           "active_backend", "use_backend", "registered"]

#: Every hot primitive: name -> where its reference lives (documentation; :func:`define` attaches it).
PRIMITIVES: dict[str, str] = {
    "linear_attention.causal_fwd": "refattn.attention._causal._causal_fwd_reference",
    "linear_attention.causal_bwd": "refattn.attention._causal._causal_bwd_reference",
    "linear_attention.causal_frames_fwd": "refattn.attention._causal._causal_frames_fwd_reference",
    "linear_attention.causal_frames_bwd": "refattn.attention._causal._causal_frames_bwd_reference",
    "positive_features_stable": "refattn.features.positive._positive_features_stable_reference",
    "positive_key_features_stable": "refattn.features.key_frames._key_features_reference",
    "fwht": "refattn.features.fwht._fwht_reference",
    "s2_window_sums": "refattn.rpe.s2_clipped.s2_window_sums_reference",
    "contract_rows": "refattn._xp._contract_rows_reference",
}

_active: contextvars.ContextVar[str | None] = contextvars.ContextVar("refattn_backend", default=None)
_references: dict[str, Callable[..., Any]] = {}
_registry: dict[tuple[str, str], Callable[..., Any]] = {}
_known_backends: set[str] = set()


def _check_name(primitive: str) -> None:
    if primitive not in PRIMITIVES:
        raise ValueError(f"primitive: unknown hot primitive {primitive!r}; "
                         f"expected one of {sorted(PRIMITIVES)}")


def define(primitive: str, fn: Callable[..., Any] | None = None):
    """Attach `fn` as the reference of `primitive` (also usable as a decorator: ``@define("fwht")``)."""
    _check_name(primitive)

    def attach(f: Callable[..., Any]) -> Callable[..., Any]:
        _references[primitive] = f
        return f

    return attach if fn is None else attach(fn)


def reference(primitive: str) -> Callable[..., Any]:
    """The reference implementation of `primitive` (``ValueError`` for an unknown name)."""
    _check_name(primitive)
    try:
        return _references[primitive]
    except KeyError:
        raise ValueError(f"primitive {primitive!r}: its reference ({PRIMITIVES[primitive]}) is attached when "
                         "its module is imported; import refattn first") from None


def primitives() -> dict[str, Callable[..., Any]]:
    """``{name: reference}`` for every hot primitive (the table the accel tests iterate over)."""
    return {name: reference(name) for name in PRIMITIVES}


def register(backend: str, primitive: str, fn: Callable[..., Any]) -> None:
    """Register `fn` as `backend`'s implementation of the hot primitive `primitive` (a known name)."""
    _check_name(primitive)
    _known_backends.add(backend)
    _registry[(backend, primitive)] = fn


def registered(backend: str | None = None) -> dict[tuple[str, str], Callable[..., Any]]:
    """The registered implementations (optionally of one backend)."""
    return {k: v for k, v in _registry.items() if backend is None or k[0] == backend}


def active_backend() -> str | None:
    """The backend switched in for the current context, or ``None`` (the reference)."""
    return _active.get()


def kernel_for(primitive: str) -> Callable[..., Any] | None:
    """The active backend's kernel for `primitive`, or ``None`` when the reference must run (``ValueError``
    for a name that is not a hot primitive)."""
    _check_name(primitive)
    backend = _active.get()
    if backend is None:
        return None
    return _registry.get((backend, primitive))


def implementation(primitive: str) -> Callable[..., Any]:
    """What runs for `primitive` here: the active backend's kernel, else the reference."""
    return kernel_for(primitive) or reference(primitive)


@contextlib.contextmanager
def use_backend(backend: str | None) -> Iterator[None]:
    """Switch `backend` in for the enclosed block (``None`` switches back to the reference)."""
    if backend is not None and backend not in _known_backends:
        raise ValueError(f"backend: no kernels are registered for {backend!r}; "
                         f"registered: {sorted(_known_backends)}")
    token = _active.set(backend)
    try:
        yield
    finally:
        _active.reset(token)
