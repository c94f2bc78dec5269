r"""Generalized kernel attention (Chowdhury et al. Eq. (1)): the quadratic reference for every estimator.

Axes: ``...`` batch and heads, ``Lq``/``Lk`` positions, ``d`` width, ``d_v`` value width.
"""

from __future__ import annotations

from typing import Any, Callable

from .._docs import fill_doc
from .._xp import check_choice, check_finite, check_shape, device_of, namespace

__all__ = ["kernel_attention", "exp_dot_kernel"]

Array = Any


_QK = """
q : (..., Lq, d) array
    Queries. Real floating, finite; given to the kernel exactly as they are (no scaling here).
k : (..., Lk, d) array
    Keys, same batch axes, dtype and namespace as `q`; finite.
"""


@fill_doc(qk=_QK)
def exp_dot_kernel(q, k, *, scale=None):
    r"""The softmax kernel matrix ``exp(scale q k^T)``, ``scale = 1/sqrt(d)`` by default.

    With it :func:`kernel_attention` is softmax attention (Chowdhury Eq. (1), Horn Eq. (1)); unstabilised:
    the exact oracle is :func:`refattn.softmax_attention`. Bad `q`, `k` raise as in :func:`kernel_attention`.

    Parameters
    ----------
    {qk}
    scale : float, optional
        Multiplies the inner products; default ``1/sqrt(d)``.

    Returns
    -------
    K : (..., Lq, Lk) array
        ``K[..., i, j] = exp(scale q_i . k_j)``; same namespace and dtype as `q` (may overflow to ``inf``).
    """
    xp = namespace(q, k, names=("q", "k"))
    sizes = check_shape("q", q, "..., Lq, d")
    check_shape("k", k, "..., Lk, d", sizes)
    check_finite("q", q, xp=xp)
    check_finite("k", k, xp=xp)
    if scale is None and q.shape[-1] == 0:
        raise ValueError(f"q: expected d >= 1 (the default scale is d^(-1/2)); got shape {tuple(q.shape)}")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return xp.exp(scale * (q @ xp.matrix_transpose(k)))


@fill_doc(qk=_QK)
def kernel_attention(q, k, v, kernel: Callable[[Array, Array], Array], *, causal=False,
                     on_nonpositive="raise"):
    r"""Attention with an arbitrary kernel, materialising the (Lq, Lk) kernel matrix (Chowdhury Eq. (1)).

    ``y_i = sum_{j in J(i)} kappa(q_i, k_j) v_j / sum_{j' in J(i)} kappa(q_i, k_j')``, J(i) all keys, or
    j <= i when causal: the quadratic reference the linear estimators approximate. Scalings such as
    ``d^{-1/4}`` belong to the caller or the kernel.

    Parameters
    ----------
    {qk}
    v : (..., Lk, d_v) array
        Values, same batch axes, dtype and namespace as `q`.
    kernel : callable
        ``kernel(q, k) -> (..., Lq, Lk)``, same namespace and dtype (e.g. :func:`exp_dot_kernel`).
    causal : bool, default False
        Keep j <= i only (needs Lq == Lk).
    on_nonpositive : {"raise", "ignore"}
        A non-positive row sum raises (with the count and the minimum) or is returned as computed.

    Returns
    -------
    y : (..., Lq, d_v) array
        Same namespace and dtype as `q`.

    Raises
    ------
    ValueError
        Mismatched shapes (of the inputs, or of what `kernel` returns), ``causal=True`` with ``Lq != Lk``,
        non-finite input or kernel row sums, or (with ``on_nonpositive="raise"``) a non-positive row sum.
    TypeError
        Mixed namespaces or dtypes, also between `kernel`'s result and `q`.

    See Also
    --------
    refattn.attention.softmax_attention : the blocked, stabilised oracle for the softmax kernel.
    refattn.attention.linear_attention : the same sums in O(L) through feature maps.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.attention import exp_dot_kernel, kernel_attention, softmax_attention
    >>> q, v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([[1.0], [2.0], [3.0]])
    >>> bool(np.allclose(kernel_attention(q, q, v, exp_dot_kernel), softmax_attention(q, q, v)))
    True
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
