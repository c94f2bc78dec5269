"""Argument checks shared by every backend's kernels: the array type, the dtype, shapes, batch flattening.

A kernel is called from the core's dispatch point with the arrays the user gave. It takes arrays of its
backend's type (``numpy.ndarray`` for numba, ``cupy.ndarray`` for CuPy) of a dtype listed in its module's
``SUPPORTED`` table, and raises ``TypeError`` for anything else: converting here would be a silent device
transfer or cast (style.md 2.5, SciPy's rule), so it is refused. Nothing here imports numba or CuPy.
:func:`register_backend` hands a backend's kernel table to ``refattn._dispatch``, the core's only entry point
for accel.
"""

from __future__ import annotations

from typing import Any

from refattn import _dispatch

__all__ = ["type_name", "check_array", "check_same", "flatten_leading", "scan_operands",
           "positive_projection", "register_backend"]


def type_name(x: Any) -> str:
    t = type(x)
    return f"{t.__module__.split('.')[0]}.{t.__name__}"


def check_array(name: str, x: Any, dtypes: tuple[str, ...], *, kernel: str, array_type: type, backend: str,
                arrays: str, hint: str, like: Any = None) -> Any:
    """Raise ``TypeError`` unless `x` is an `array_type` of one of `dtypes` (and of `like`'s dtype); return
    `x`.

    `backend` names the kernels in messages ("numba", "CuPy"), `arrays` the array kind they take ("NumPy
    arrays"), `hint` what to do instead.
    """
    if not isinstance(x, array_type):
        raise TypeError(f"{name}: {backend} kernels take {arrays}; got {type_name(x)} ({kernel}). {hint}")
    if x.dtype.name not in dtypes:
        raise TypeError(f"{name}: the {backend} kernel {kernel} supports dtypes {', '.join(dtypes)}; "
                        f"got dtype {x.dtype.name}")
    if like is not None and x.dtype != like.dtype:
        raise TypeError(f"{name}: dtype {x.dtype.name} differs from {like.dtype.name} ({kernel}); "
                        "convert one of them explicitly")
    return x


def check_same(name: str, x: Any, ref_name: str, expected: tuple) -> None:
    """Raise ``ValueError`` unless ``x.shape == expected`` (a shape derived from argument `ref_name`)."""
    if tuple(x.shape) != tuple(expected):
        raise ValueError(f"{name}: expected shape {tuple(expected)} (from {ref_name}); got {tuple(x.shape)}")


def flatten_leading(name: str, x: Any, core_ndim: int, *, kernel: str) -> tuple[Any, tuple]:
    """`x` with its leading (batch) axes reshaped into one: ``(x_flat, leading_shape)``; no leading axes give
    a leading axis of 1."""
    if x.ndim < core_ndim:
        raise ValueError(f"{name}: expected at least {core_ndim} axes; got shape {tuple(x.shape)} ({kernel})")
    lead = tuple(x.shape[:x.ndim - core_ndim])
    n = 1
    for size in lead:
        n *= size
    return x.reshape((n,) + tuple(x.shape[x.ndim - core_ndim:])), lead


def scan_operands(flatten, kern: str, dtypes, phi_q: Any, phi_k: Any, v_aug: Any, g: Any = None):
    """The causal-scan kernels' shared operand checks: ``phi_q, phi_k: (..., L, m)``, ``v_aug, g:
    (..., L, D)`` flattened to one batch axis by the backend's ``flatten(name, x, core_ndim, dtypes, kernel,
    like=...)`` (which checks the array type and dtype). Returns ``(pq, pk, ua, gf, lead)`` (``gf`` None
    without `g`)."""
    pq, lead = flatten("phi_q", phi_q, 2, dtypes, kern)
    pk, _ = flatten("phi_k", phi_k, 2, dtypes, kern, like=pq)
    ua, _ = flatten("v_aug", v_aug, 2, dtypes, kern, like=pq)
    check_same("phi_k", pk, "phi_q", pq.shape)
    check_same("v_aug", ua, "phi_q", pq.shape[:2] + ua.shape[2:])
    gf = None
    if g is not None:
        gf, _ = flatten("g", g, 2, dtypes, kern, like=pq)
        check_same("g", gf, "v_aug", ua.shape)
    return pq, pk, ua, gf, lead


def positive_projection(x: Any, omega: Any, k_log_scale: Any, *, as_array, dtypes: tuple[str, ...],
                        kernel: str):
    """The part every backend's fused positive-feature kernel shares: check the arrays (``as_array`` is the
    backend's :func:`check_array` wrapper), flatten ``x`` to ``(N, d)``, one GEMM ``u = x omega^T`` and the
    key frame folded in place. Returns ``(x, x2, u, m)`` with ``u: (N, m)`` fresh (the kernel may overwrite
    it)."""
    x = as_array("x", x, dtypes, kernel=kernel)
    omega = as_array("omega", omega, dtypes, kernel=kernel, like=x)
    if omega.ndim != 2 or x.ndim < 1 or omega.shape[1] != x.shape[-1]:
        raise ValueError(f"omega: expected shape (m, d) with d = {x.shape[-1]} (from x); got {omega.shape}")
    m, d = omega.shape
    x2 = x.reshape(-1, d)                                                # (N, d), N = prod(...) L
    u = x2 @ omega.T                                                     # (N, m) fresh array
    if k_log_scale is not None:
        k_log_scale = as_array("k_log_scale", k_log_scale, dtypes, kernel=kernel, like=x)
        u.reshape(tuple(x.shape[:-1]) + (m,))[...] += k_log_scale         # (..., L, m) fold the key frame
    return x, x2, u, m


def register_backend(backend: str, cache: dict, build) -> None:
    """Register a backend's kernels with ``refattn._dispatch`` (idempotent): ``cache`` (the backend's
    ``PRIMITIVES`` dict) is filled from ``build()`` -> ``{primitive: kernel}`` on first use."""
    if not cache:
        cache.update(build())
    for prim, fn in cache.items():
        _dispatch.register(backend, prim, fn)
