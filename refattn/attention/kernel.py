r"""Generalized kernel attention (Chowdhury et al. Eq. (1)): the quadratic reference for every estimator.

    y_i = sum_{j in J(i)} K(q_i, k_j) v_j / sum_{j in J(i)} K(q_i, k_j)

with J(i) all positions, or j <= i when causal. ``kernel(q, k) -> (..., Lq, Lk)`` is any callable; with
``K(q, k) = exp(q . k / sqrt(d))`` this is softmax attention (the claim ``kl.eq1-softmax``). The kernel is
applied to `q` and `k` exactly as given: scalings such as d^{-1/4} belong to the caller or the kernel.

Axes: ``...`` batch and heads, ``Lq``/``Lk`` positions, ``d`` width, ``d_v`` value width.
"""

from __future__ import annotations

from typing import Any, Callable

from .._xp import check_choice, check_finite, check_shape, device_of, namespace

__all__ = ["kernel_attention", "exp_dot_kernel"]

Array = Any


def exp_dot_kernel(q, k, *, scale=None):
    r"""The softmax kernel ``exp(scale q . k)``, ``scale = 1/sqrt(d)`` by default.

    Shapes: ``q: (..., Lq, d)``, ``k: (..., Lk, d)`` -> ``(..., Lq, Lk)``. Row-unstabilised: for the exact
    oracle use :func:`refattn.softmax_attention`.
    """
    xp = namespace(q, k, names=("q", "k"))
    sizes = check_shape("q", q, "..., Lq, d")
    check_shape("k", k, "..., Lk, d", sizes)
    check_finite("q", q, xp=xp)
    check_finite("k", k, xp=xp)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return xp.exp(scale * (q @ xp.matrix_transpose(k)))


def kernel_attention(q, k, v, kernel: Callable[[Array, Array], Array], *, causal=False,
                     on_nonpositive="raise"):
    r"""Attention with an arbitrary kernel, materialising the (Lq, Lk) kernel matrix (Chowdhury et al. Eq.
    (1)).

    Parameters
    ----------
    q : (..., Lq, d) array
    k : (..., Lk, d) array
    v : (..., Lk, d_v) array
    kernel : callable
        ``kernel(q, k) -> (..., Lq, Lk)``, same namespace and dtype.
    causal : bool
        Keep j <= i only (needs Lq == Lk).
    on_nonpositive : {"raise", "ignore"}
        A non-positive row sum raises (with the count and the minimum) or is returned as computed.

    Returns
    -------
    y : (..., Lq, d_v) array
    """
    xp = namespace(q, k, v, names=("q", "k", "v"))
    sizes = check_shape("q", q, "..., Lq, d")
    check_shape("k", k, "..., Lk, d", sizes)
    check_shape("v", v, "..., Lk, d_v", sizes)
    check_choice(on_nonpositive, "on_nonpositive", ("raise", "ignore"))
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_finite(name, a, xp=xp)
    Lq, Lk = q.shape[-2], k.shape[-2]
    if causal and Lq != Lk:
        raise ValueError(f"causal=True needs as many queries as keys; got Lq = {Lq} (q) and Lk = {Lk} (k)")
    K = kernel(q, k)                                                              # (..., Lq, Lk)
    namespace(K, q, names=("kernel(q, k)", "q"))
    expected = tuple(q.shape[:-1]) + (Lk,)
    if tuple(K.shape) != expected:
        raise ValueError(f"kernel(q, k): expected shape {expected}; got {tuple(K.shape)}")
    if causal:
        dev = device_of(q)
        r = xp.arange(Lq, device=dev)
        keep = xp.expand_dims(r, axis=1) >= xp.expand_dims(r, axis=0)             # (L, L) j <= i
        K = xp.where(keep, K, xp.zeros_like(K))
    denom = xp.sum(K, axis=-1, keepdims=True)                                     # (..., Lq, 1)
    if not bool(xp.all(xp.isfinite(denom))):
        raise ValueError("kernel_attention: the kernel matrix has non-finite row sums "
                         "(overflow in kernel(q, k))")
    if on_nonpositive == "raise" and bool(xp.any(denom <= 0)):
        count = int(xp.sum(xp.astype(denom <= 0, xp.int64)))
        raise ValueError(
            f"kernel_attention: {count} non-positive row sum(s) (minimum {float(xp.min(denom)):.3e}); "
            "pass on_nonpositive='ignore' to get the output as computed"
        )
    return (K @ v) / denom                                                        # (..., Lq, d_v)
