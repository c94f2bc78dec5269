r"""Horn et al. Strategy 2: attention on clipped relative-distance encodings (Shaw-style), O(L k) / O(L k^2).

The positional heads of Horn et al. (Sec. 2.3, Eq. (4) term (b)) use learned relative vectors as keys:

    y_i = sum_j K(q_i, a_ij) v_j / sum_j K(q_i, a_ij),      a_ij = w[clip(dist(i, j), k)],

with ``K(q, a) = exp(q . a / sqrt(d))`` (exact softmax) or its FAVOR+ estimate ``phi(q) . phi(a)`` (positive
random features of ``q d^{-1/4}`` and ``a d^{-1/4}`` with one shared draw omega). Two distances:

* **signed 1-D** (``grid=None``): ``dist(i, j) = j - i``, ``clip(x, k) = max(-k, min(k, x))``; table
  ``w_{-k..k}``: shape ``(2k + 1, d)``, row ``r + k`` holds ``w_r``;
* **2-D Manhattan** (``grid=(H, W)``, row-major positions, L = H W): ``dist = |dy| + |dx|`` clipped to k;
  table ``w_{0..k}``: shape ``(k + 1, d)``. (The paper says "w_1, ..., w_k"; distance 0 needs ``w_0`` too.)

**Why it is fast.** The kernel entry depends on i and on the distance *class* r = clip(dist(i, j), k) only, so
with the scores ``S_ir = K(q_i, w_r)`` (O(L R d) or O(L R m), R classes) and the class sums
``V_r(i) = sum_{j : class(i, j) = r} [v_j, 1]``,

    numer_i = sum_r S_ir V_r(i)         (the last column is the normaliser).

The class sums are the window trick of the paper: for 1-D, the 2k - 1 near classes are single shifted rows and
the two far classes (j - i >= k and j - i <= -k) are prefix sums (O(L k) in all; the paper's one-sided formula
covers only non-negative distances: erratum ``horn.s2-signed-clip``); for 2-D, the near classes are the
Manhattan rings of radius r < k (1 + 2k(k - 1) cells in all) and the far class is ``total - window`` (O(L
k^2)), which is Horn's ``<q'_i, w'_k> sum_j v_j + sum_{m in window} <q'_i, a'_im - w'_k> v_m`` regrouped. When
k exceeds the largest distance on the grid (H + W - 2) the far class is empty and set to exact zeros.

**A class token** (the cores' ``class_token=True``: token 0, the model's ``readout="class-token"``) is
placed as Horn et al.'s code places theirs (``clipped_relative_attention.py`` l. 150-175, where it is the
last token): as a query at the raster position after the last token (``(H, 0)``; ``L - 1`` in 1-D), as a key
in the far class ``R - 1`` for every query. The class sums are those of the grid extended by one raster row
(one position in 1-D) holding zeros, plus the class token's value in the far class.

**Memory.** The class sums are materialised as ``(..., L, R, d_v + 1)`` (R = 2k + 1 or k + 1): for H = 8,
L = 4096, k = 6, d_v = 64 in float32 that is 110 MB (1-D) or 60 MB (2-D).

**Dispatch.** The class sums go through ``refattn._dispatch.kernel_for("s2_window_sums")``; a registered
kernel has the signature of :func:`s2_window_sums_reference`: ``fn(u, k, grid, *, adjoint)`` with
``adjoint=False``: ``u: (..., L, e) -> (..., L, R, e)`` the class sums, ``adjoint=True``:
``u: (..., L, R, e) -> (..., L, e)`` its transpose ``out_j = sum_i sum_r [class(i, j) = r] u_ir``; ``grid`` is
``None`` or ``(H, W)``.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` query width, ``d_v`` value width, ``R`` distance
classes, ``m`` random features.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import _dispatch, limits
from .._docs import fill_doc
from .._xp import (check_finite, check_nonneg_int, check_positive_int, check_shape, device_of, namespace,
                   sum_to_shape)
from ..features.positive import (positive_features_stable_bwd_core, positive_features_stable_fwd,
                                 positive_features_stable_fwd_core)

__all__ = [
    "s2_attention",
    "s2_attention_fwd",
    "s2_attention_bwd",
    "s2_attention_naive",
    "s2_logits",
    "s2_class_index",
    "S2AttentionCache",
    "S2AttentionGrads",
    "DEFAULT_CLIP",
]

Array = Any

#: The paper's clipping distance (Horn et al. Sec. 3 / A.2: "clipping distance = 6").
DEFAULT_CLIP = 6


class S2AttentionCache(NamedTuple):
    r"""Cache of :func:`s2_attention_fwd` for :func:`s2_attention_bwd` (fields commented in the source)."""

    q: Array          # (..., L, d)
    w: Array          # (*w, R, d)
    omega: Array      # (m, d) or None (exact softmax)
    v_aug: Array      # (..., L, d_v + 1)
    S: Array          # (..., L, R) scores (relative to a per-row / per-head constant that cancels)
    z: Array          # (..., L, 1)
    y: Array          # (..., L, d_v)
    k: int
    grid: Any         # None or (H, W)
    feat: Any         # FAVOR: (cache_q, cache_w, pw_scaled, e_w) ; exact: None
    class_token: bool = False   # token 0 is a class token (_token_class_sums)


class S2AttentionGrads(NamedTuple):
    r"""Gradients from :func:`s2_attention_bwd`: ``q``, ``v``, ``w``, ``omega`` (None: exact softmax)."""

    q: Array          # (..., L, d)
    v: Array          # (..., L, d_v)
    w: Array          # (*w, R, d)
    omega: Array      # (m, d), or None for exact softmax


# shared docstring blocks (numpydoc entries filled in by fill_doc)

_Y = """
y : (..., L, d_v) array
    Dtype and namespace of `q`.
"""
_Q = r"""
q : (..., L, d) array
    Queries of the positional heads, real floating (float64 reference, float32 supported); d >= 1.
"""
_V = """
v : (..., L, d_v) array
    Values, same dtype and namespace as `q`.
"""
_W = r"""
w : (\*w, R, d) array
    Relative-position table, ``R = 2k + 1`` (row r + k is w_r, r = -k..k) when ``grid`` is None, ``R = k + 1``
    (w_0..w_k) for a grid; leading axes (e.g. heads) broadcast to q's.
"""
_GEOMETRY = """
k : int
    Clipping distance (default 6, the paper's), k >= 1.
grid : None or (H, W)
    None: signed 1-D distances ``j - i``; ``(H, W)``: Manhattan distances with L = H W row-major positions.
"""
_OMEGA = """
omega : (m, d) array, optional
    Random projections for FAVOR+ positive features (``refattn.random.draw_*``); None: exact softmax kernel.
"""
_RAISES = """
ValueError
    Shapes that disagree (`w` not ``(..., R, d)``, ``H W != L``, `omega` not ``(m, d)``), d = 0, a bad `k` or
    non-finite input.
TypeError
    Mixed dtypes or namespaces.
"""


# ----------------------------------------------------------------------------------------------------------
# geometry


def _check_geometry(L, k, grid):
    k = check_positive_int(k, "k")
    if grid is None:
        return k, None, 2 * k + 1
    if not isinstance(grid, (tuple, list)) or len(grid) != 2:
        raise ValueError(f"grid: expected None (1-D signed distances) or a pair (H, W); got {grid!r}")
    H, W = check_positive_int(grid[0], "grid[0]"), check_positive_int(grid[1], "grid[1]")
    if H * W != L:
        raise ValueError(f"grid: expected H * W == L = {L} (positions in row-major order); got grid "
                         f"({H}, {W}) with H * W = {H * W}")
    return k, (H, W), k + 1


@fill_doc(geometry=_GEOMETRY)
def s2_class_index(L, k=DEFAULT_CLIP, grid=None, *, xp):
    r"""The (L, L) integer matrix of distance classes, the index into the relative-position table ``w``.

    Row ``clip(j - i, k) + k`` for signed 1-D distances (``grid=None``) or ``min(|dy| + |dx|, k)`` for
    Manhattan distances on ``grid=(H, W)`` (Horn et al. Strategy 2, Eq. (4) term (b):
    ``a_ij = w[clip(dist(i, j), k)]``).

    Parameters
    ----------
    L : int
        Number of positions (``H W`` for a grid).
    {geometry}
    xp : namespace
        Array namespace of the result (e.g. ``numpy``).

    Returns
    -------
    cls : (L, L) integer array
        Values in ``0..2k`` (1-D) or ``0..k`` (grid).

    Raises
    ------
    ValueError
        `k` not a positive integer, or ``H W != L``.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe import s2_class_index
    >>> s2_class_index(4, 2, xp=np)
    array([[2, 3, 4, 4],
           [1, 2, 3, 4],
           [0, 1, 2, 3],
           [0, 0, 1, 2]])
    """
    L = check_nonneg_int(L, "L")
    limits.check_nbytes(3 * L * L * 8, f"L (s2_class_index: the ({L}, {L}) class matrix)")
    k, grid, _ = _check_geometry(L, k, grid)
    pos = xp.arange(L)
    if grid is None:
        diff = xp.expand_dims(pos, axis=0) - xp.expand_dims(pos, axis=1)         # (L, L) j - i
        return xp.clip(diff, -k, k) + k
    H, W = grid
    y, x = pos // W, pos % W
    dist = (xp.abs(xp.expand_dims(y, axis=0) - xp.expand_dims(y, axis=1))
            + xp.abs(xp.expand_dims(x, axis=0) - xp.expand_dims(x, axis=1)))      # (L, L) Manhattan
    return xp.minimum(dist, xp.asarray(k))


# ----------------------------------------------------------------------------------------------------------
# class sums (the window trick): the hot primitive "s2_window_sums"


def _zeros(shape, like, *, xp):
    return xp.zeros(tuple(shape), dtype=like.dtype, device=device_of(like))


def _shift_1d(x, r, *, xp):
    """``out_i = x_{i + r}`` along axis -2 (zero outside 0..L-1)."""
    L = x.shape[-2]
    if r == 0:
        return x
    if abs(r) >= L:
        return xp.zeros_like(x)
    pad = _zeros(tuple(x.shape[:-2]) + (abs(r), x.shape[-1]), x, xp=xp)
    if r > 0:
        return xp.concat([x[..., r:, :], pad], axis=-2)                            # (..., L, e)
    return xp.concat([pad, x[..., :L + r, :]], axis=-2)                            # (..., L, e)


def _class_sum_1d(x, r, k, *, xp):
    """``out_i = sum_{j : clip(j - i, k) = r} x_j`` along axis -2, for one class r in -k..k."""
    L = x.shape[-2]
    if -k < r < k:
        return _shift_1d(x, r, xp=xp)
    P = xp.cumulative_sum(x, axis=-2, include_initial=True)                  # (..., L + 1, e) P_t = sum_{j<t}
    i = xp.arange(L, device=device_of(x))
    if r == k:                                                                     # far right: j >= i + k
        hi = xp.minimum(i + k, xp.asarray(L, device=device_of(x)))
        return P[..., L:, :] - xp.take(P, hi, axis=-2)                             # (..., L, e)
    lo = xp.maximum(i - k + 1, xp.asarray(0, device=device_of(x)))                 # far left: j <= i - k
    return xp.take(P, lo, axis=-2)                                                 # (..., L, e)


def _pad_2d(x, py, px, *, xp):
    """``(..., H, W, e) -> (..., H + 2 py, W + 2 px, e)`` with zeros around."""
    if py:
        z = _zeros(tuple(x.shape[:-3]) + (py,) + tuple(x.shape[-2:]), x, xp=xp)
        x = xp.concat([z, x, z], axis=-3)
    if px:
        z = _zeros(tuple(x.shape[:-2]) + (px, x.shape[-1]), x, xp=xp)
        x = xp.concat([z, x, z], axis=-2)
    return x


def _ring_2d(xpad, r, H, W, py, px, *, xp):
    """``out_(y, x) = sum_{|dy| + |dx| = r} x_(y + dy, x + dx)`` from the padded grid; ``(..., H, W, e)``."""
    acc = None
    for dy in range(-min(r, py), min(r, py) + 1):
        rem = r - abs(dy)
        for dx in sorted({-rem, rem}):
            if abs(dx) > px:
                continue
            sl = xpad[..., py + dy:py + dy + H, px + dx:px + dx + W, :]            # (..., H, W, e)
            acc = sl if acc is None else acc + sl
    return acc


def _grid_rings(x, k, H, W, *, xp):
    """``(ring, far)`` for ``x: (..., L, e)`` on the (H, W) grid: ``ring(r)`` the near class r < k (the
    Manhattan ring of radius r, O(L r e)), ``far()`` the far class (``total - window``, O(L k^2 e))."""
    batch, e = tuple(x.shape[:-2]), x.shape[-1]
    py, px = min(k - 1, H - 1), min(k - 1, W - 1)
    xpad = _pad_2d(xp.reshape(x, batch + (H, W, e)), py, px, xp=xp)               # (..., H + 2py, W + 2px, e)

    def ring(r):
        out = _ring_2d(xpad, r, H, W, py, px, xp=xp)
        out = xp.zeros(batch + (H, W, e), dtype=x.dtype, device=device_of(x)) if out is None else out
        return xp.reshape(out, batch + (H * W, e))                                 # (..., L, e)

    def far(rings=None):
        if k > H + W - 2:                                                          # no pair is k apart: empty
            return xp.zeros_like(x)
        window = None
        for r in range(k):                                                         # dist < k, rings in order
            rr = ring(r) if rings is None else rings[r]
            window = rr if window is None else window + rr                         # (..., L, e)
        return xp.sum(x, axis=-2, keepdims=True) - window                          # (..., L, e) far class

    return ring, far


def _class_sums_2d(x, k, H, W, *, xp):
    """All k + 1 Manhattan class sums of ``x: (..., L, e)`` as a list of (..., L, e) arrays (O(L k^2 e))."""
    ring, far = _grid_rings(x, k, H, W, xp=xp)
    out = [ring(r) for r in range(k)]
    return out + [far(out)]


def _class_sum_2d(x, r, k, H, W, *, xp):
    """Manhattan class r's sum of ``x: (..., L, e)`` alone: O(L r e) for r < k, O(L k^2 e) for r = k."""
    ring, far = _grid_rings(x, k, H, W, xp=xp)
    return ring(r) if r < k else far()


@_dispatch.define("s2_window_sums")
def s2_window_sums_reference(u, k, grid, *, adjoint=False):
    r"""Class sums of the S2 window trick (reference for the ``"s2_window_sums"`` dispatch point).

    ``adjoint=False``: ``u: (..., L, e) -> V: (..., L, R, e)``, ``V_ir = sum_{j : class(i, j) = r} u_j``.
    ``adjoint=True``: ``u: (..., L, R, e) -> (..., L, e)``, ``out_j = sum_i sum_r [class(i, j) = r] u_ir``.
    ``grid=None``: signed 1-D classes r = -k..k (R = 2k + 1, index r + k); ``grid=(H, W)``: Manhattan classes
    0..k (R = k + 1). Cost O(L R e) (1-D) and O(L k^2 e) (2-D).
    """
    xp = namespace(u)
    if grid is None:
        if not adjoint:
            # (..., L, R, e)
            return xp.stack([_class_sum_1d(u, r, k, xp=xp) for r in range(-k, k + 1)], axis=-2)
        # class(i, j) = r  <=>  class(j, i) = -r: the transpose uses the mirrored class
        out = None
        for r in range(-k, k + 1):
            part = _class_sum_1d(u[..., r + k, :], -r, k, xp=xp)                  # (..., L, e)
            out = part if out is None else out + part
        return out
    H, W = grid
    if not adjoint:
        return xp.stack(_class_sums_2d(u, k, H, W, xp=xp), axis=-2)                # (..., L, k + 1, e)
    # Manhattan classes are symmetric, so the transpose applies class r's sum to the r-th slice: each class
    # sum built once, O(L k^2 e) over all r.
    out = None
    for r in range(k + 1):
        part = _class_sum_2d(u[..., r, :], r, k, H, W, xp=xp)                      # (..., L, e)
        out = part if out is None else out + part
    return out


def _class_sums(u, k, grid, *, adjoint=False):
    impl = _dispatch.kernel_for("s2_window_sums") or s2_window_sums_reference
    return impl(u, k, grid, adjoint=adjoint)


# ----------------------------------------------------------------------------------------------------------
# a class token: Horn et al.'s geometry for it (their clipped_relative_attention.py l. 150-175, train.py
# l. 350-363: the class token is appended after the image's tokens and its output read there)


def _extended(n, grid):
    """``(n_ext, grid_ext)``: the positions after the last of `n` tokens, one more raster row for a grid
    (``(H + 1, W)``: the class token's query sits at its first cell, ``(H, 0)``), one more position in 1-D."""
    if grid is None:
        return n + 1, None
    H, W = grid
    return (H + 1) * W, (H + 1, W)


def _token_class_sums(v, k, grid, class_token, *, xp):
    r"""The class sums ``V: (..., L, R, e)`` of ``v: (..., L, e)``; with ``class_token`` token 0 is a class
    token placed as Horn et al.'s code places it: as a **query** at the raster position after the last
    positioned token (``(H, 0)`` on an ``(H, W)`` grid, ``L - 1`` in 1-D), seeing the other tokens through
    their clipped distances from there; as a **key** in the far class ``R - 1`` for every query, itself
    included (their window keeps only keys inside the image). Its sequence index (0 here, last in their code)
    does not matter: every other part of the model treats the tokens alike."""
    if not class_token:
        return _class_sums(v, k, grid)
    n, e = v.shape[-2] - 1, v.shape[-1]
    n_ext, grid_ext = _extended(n, grid)
    batch = tuple(v.shape[:-2])
    v_pos = xp.concat([v[..., 1:, :], _zeros(batch + (n_ext - n, e), v, xp=xp)], axis=-2)   # (..., n_ext, e)
    V = _class_sums(v_pos, k, grid_ext)[..., :n + 1, :, :]                         # (..., n + 1, R, e)
    V = xp.concat([V[..., n:, :, :], V[..., :n, :, :]], axis=-3)                   # class query first
    R = V.shape[-2]
    far = xp.concat([_zeros(batch + (1, R - 1, e), v, xp=xp), xp.expand_dims(v[..., :1, :], axis=-2)],
                    axis=-2)                                                       # (..., 1, R, e) the key
    return V + far                                                                 # (..., L, R, e)


def _token_class_sums_adjoint(u, k, grid, class_token, *, xp):
    """The transpose of :func:`_token_class_sums`: ``u: (..., L, R, e) -> (..., L, e)``."""
    if not class_token:
        return _class_sums(u, k, grid, adjoint=True)
    n = u.shape[-3] - 1
    n_ext, grid_ext = _extended(n, grid)
    batch, R, e = tuple(u.shape[:-3]), u.shape[-2], u.shape[-1]
    u_ext = xp.concat([u[..., 1:, :, :], u[..., :1, :, :], _zeros(batch + (n_ext - n - 1, R, e), u, xp=xp)],
                      axis=-3)                                                     # (..., n_ext, R, e)
    d_pos = _class_sums(u_ext, k, grid_ext, adjoint=True)[..., :n, :]             # (..., n, e)
    d_cls = xp.sum(u[..., R - 1, :], axis=-2, keepdims=True)                       # (..., 1, e) far class
    return xp.concat([d_cls, d_pos], axis=-2)                                      # (..., L, e)


# ----------------------------------------------------------------------------------------------------------
# scores S_ir = K(q_i, w_r)


def _scores_fwd(q, w, omega, *, xp):
    d = q.shape[-1]
    if omega is None:                                                              # exact softmax kernel
        logits = (q @ xp.matrix_transpose(w)) * (d ** -0.5)                        # (..., L, R)
        S = xp.exp(logits - xp.max(logits, axis=-1, keepdims=True))              # (..., L, R) row max cancels
        return S, None
    c = d ** -0.25                                                 # FAVOR+: phi(q d^-1/4) . phi(w d^-1/4)
    # the maps' unchecked cores: q, w and omega were validated once by the caller
    (pq, _), cache_q = positive_features_stable_fwd_core(q * c, omega, None, xp=xp)   # (..., L, m); cancels
    (pw, lw), cache_w = positive_features_stable_fwd_core(w * c, omega, None, xp=xp)    # (*w, R, m), (*w, R)
    e_w = xp.exp(lw - xp.max(lw, axis=-1, keepdims=True))                       # (*w, R) per-head max cancels
    pws = pw * xp.expand_dims(e_w, axis=-1)                                        # (*w, R, m)
    S = pq @ xp.matrix_transpose(pws)                                              # (..., L, R)
    return S, (cache_q, cache_w, pws, e_w)


def _scores_bwd(dS, c: S2AttentionCache, *, xp, omega_grad=True):
    d = c.q.shape[-1]
    if c.omega is None:
        dlogits = dS * c.S * (d ** -0.5)                                           # (..., L, R)
        dq = dlogits @ c.w                                                         # (..., L, d)
        dw = sum_to_shape(xp.matrix_transpose(dlogits) @ c.q, tuple(c.w.shape), xp=xp)  # (*w, R, d)
        return dq, dw, None
    cache_q, cache_w, pws, e_w = c.feat
    scale = d ** -0.25
    pq = cache_q.phi
    dpq = dS @ pws                                                                 # (..., L, m)
    dpws = sum_to_shape(xp.matrix_transpose(dS) @ pq, tuple(pws.shape), xp=xp)     # (*w, R, m)
    dpw = dpws * xp.expand_dims(e_w, axis=-1)                                      # (*w, R, m)
    dlw = xp.sum(dpws * cache_w.phi, axis=-1) * e_w                                # (*w, R)
    gq = positive_features_stable_bwd_core(dpq, None, cache_q, omega_grad=omega_grad, xp=xp)
    gw = positive_features_stable_bwd_core(dpw, dlw, cache_w, omega_grad=omega_grad, xp=xp)
    return gq.x * scale, gw.x * scale, (gq.omega + gw.omega) if omega_grad else None


# ----------------------------------------------------------------------------------------------------------
# public


def _validate(q, v, w, omega, k, grid):
    xp, k, grid = check_s2_inputs(q, v, w, omega, k, grid)
    for name, a in (("q", q), ("v", v), ("w", w), ("omega", omega)):
        if a is not None:
            check_finite(name, a, xp=xp)
    return xp, k, grid


def check_s2_inputs(q, v, w, omega, k, grid, class_token=False):
    """Structural checks of :func:`s2_attention_fwd` (namespaces, dtypes, shapes, geometry; no data read);
    with `class_token` the geometry is that of the ``L - 1`` tokens after the class token.

    Returns ``(xp, k, grid)``.
    """
    xp = namespace(q, v, w, omega, names=("q", "v", "w", "omega"))
    sizes = check_shape("q", q, "..., L, d")
    check_shape("v", v, "..., L, d_v", sizes)
    if q.shape[-1] < 1:                                                            # the scale is d^(-1/2)
        raise ValueError(f"q: expected shape (..., L, d) with d >= 1; got {tuple(q.shape)}")
    L = q.shape[-2]
    if class_token and L < 2:
        raise ValueError(f"q: a class token needs at least one other token, shape (..., L, d) with L >= 2; "
                         f"got {tuple(q.shape)}")
    k, grid, R = _check_geometry(L - 1 if class_token else L, k, grid)
    what = (f"(..., 2k + 1, d) = (..., {R}, {q.shape[-1]}) for signed 1-D distances" if grid is None
            else f"(..., k + 1, d) = (..., {R}, {q.shape[-1]}) for Manhattan distances on a grid")
    batch = tuple(q.shape[:-2])
    wb = tuple(w.shape[:-2])
    if (w.ndim < 2 or w.shape[-2] != R or w.shape[-1] != q.shape[-1] or len(wb) > len(batch)
            or any(a not in (1, b) for a, b in zip(wb[::-1], batch[::-1], strict=False))):
        raise ValueError(f"w: expected shape {what} with k = {k} and leading axes broadcasting to q's "
                         f"{batch}; got {tuple(w.shape)}")
    if omega is not None:
        check_shape("omega", omega, "m, d", sizes)
        if omega.shape[0] < 1:                                  # as the feature maps' check_x_omega says it
            raise ValueError(f"omega: expected at least one projection row, shape (m, d) with m >= 1; "
                             f"got {tuple(omega.shape)}")
    return xp, k, grid


@fill_doc(y=_Y, q=_Q, v=_V, w=_W, geometry=_GEOMETRY, omega=_OMEGA, raises=_RAISES)
def s2_attention(q, v, w, *, k=DEFAULT_CLIP, grid=None, omega=None):
    r"""Horn et al. Strategy 2 attention with clipped relative encodings (fast path).

    ``y_i = sum_j K(q_i, a_ij) v_j / sum_j K(q_i, a_ij)`` with ``a_ij = w[class(i, j)]`` (Horn Eq. (4) term
    (b), normalised by the same kernel's row sums), computed through class sums (module docstring) in
    O(L k (d + d_v)) for 1-D and O(L k^2 d_v) for 2-D. ``K(q, a) = exp(q . a / sqrt(d))`` (exact) or its
    FAVOR+ estimate ``phi(q d^{-1/4}) . phi(a d^{-1/4})`` with one shared draw `omega`.

    Backward (:func:`s2_attention_bwd`): with ``g = [dy / z, -sum(dy * y) / z]``, ``dS_ir = g_i . V_r(i)``
    (class sums recomputed), ``dv_aug = ClassSums^T(S_ir g_i)`` (the adjoint window sums), then the score
    map's backward (softmax: ``dlogits = S * dS``; FAVOR+: through both positive-feature maps, summing
    omega's two contributions).

    Parameters
    ----------
    {q}
    {v}
    {w}
    {geometry}
    {omega}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.rpe import s2_attention, s2_attention_naive
    >>> rng = np.random.default_rng(0)
    >>> q, v = rng.standard_normal((2, 2, 5, 4))                 # (batch, L, d)
    >>> w = 0.1 * rng.standard_normal((2 * 2 + 1, 4))           # (2k + 1, d) for k = 2
    >>> y = s2_attention(q, v, w, k=2)
    >>> y.shape
    (2, 5, 4)
    >>> bool(np.allclose(y, s2_attention_naive(q, v, w, k=2)))  # the quadratic reference
    True
    """
    return s2_attention_fwd(q, v, w, k=k, grid=grid, omega=omega)[0]


@fill_doc(y=_Y, q=_Q, v=_V, w=_W, geometry=_GEOMETRY, omega=_OMEGA, raises=_RAISES)
def s2_attention_fwd(q, v, w, *, k=DEFAULT_CLIP, grid=None, omega=None):
    r"""Forward of :func:`s2_attention` with the cache for :func:`s2_attention_bwd`.

    See :func:`s2_attention` for the equations and shapes.

    Parameters
    ----------
    {q}
    {v}
    {w}
    {geometry}
    {omega}

    Returns
    -------
    {y}
    cache : S2AttentionCache
        For :func:`s2_attention_bwd`.

    Raises
    ------
    {raises}
    """
    xp, k, grid = _validate(q, v, w, omega, k, grid)
    return s2_attention_fwd_core(q, v, w, omega, k=k, grid=grid, xp=xp)


def s2_attention_bwd(dy, cache: S2AttentionCache, *, omega_grad=True) -> S2AttentionGrads:
    r"""Backward of :func:`s2_attention_fwd`: gradients of `q`, `v`, `w` (and `omega` with FAVOR+).

    See :func:`s2_attention` for the equations and shapes.

    Parameters
    ----------
    dy : (..., L, d_v) array
        Cotangent of the output, finite, dtype and namespace of the forward.
    cache : S2AttentionCache
        The cache returned by :func:`s2_attention_fwd`.
    omega_grad : bool
        ``False`` skips omega's gradient (``omega=None`` in the result), for a drawn (not learned) omega.

    Returns
    -------
    S2AttentionGrads
        ``q: (..., L, d)``, ``v: (..., L, d_v)``, ``w`` shaped like the table, ``omega: (m, d)`` (None for the
        exact kernel or with ``omega_grad=False``).

    Raises
    ------
    ValueError
        `dy` not of the output's shape, or not finite.
    """
    xp = namespace(dy, cache.q, names=("dy", "cache.q"))
    check_shape("dy", dy, "..., L, d_v", check_shape("y", cache.y, "..., L, d_v", source="the output y"))
    check_finite("dy", dy, xp=xp)
    return s2_attention_bwd_core(dy, cache, omega_grad=omega_grad, xp=xp)


# y_i = sum_r S_ir V_r(i)[:d_v] / z_i,  S_ir = K(q_i, w_r),  V_r(i) = sum_{class(i, j) = r} [v_j, 1]
# dS_ir = g_i . V_r(i),  dv_aug = ClassSums^T(S g),  g = [dy, -sum(dy * y)] / z
def s2_attention_fwd_core(q, v, w, omega, *, k, grid, xp, class_token=False):
    """Unchecked core of :func:`s2_attention_fwd` (`k`, `grid` as :func:`check_s2_inputs` returns them).

    ``class_token=True``: token 0 is a class token, placed as Horn et al.'s code places it (as a query after
    the last position, as a key in the far class: :func:`_token_class_sums`); `grid` describes the other
    ``L - 1`` tokens."""
    d_v = v.shape[-1]
    S, feat = _scores_fwd(q, w, omega, xp=xp)                                      # (..., L, R)
    v_aug = xp.concat([v, xp.ones(tuple(v.shape[:-1]) + (1,), dtype=v.dtype, device=device_of(v))], axis=-1)
    V = _token_class_sums(v_aug, k, grid, class_token, xp=xp)                      # (..., L, R, e) class sums
    numer = xp.sum(xp.expand_dims(S, axis=-1) * V, axis=-2)                    # (..., L, e) sum_r S_ir V_r(i)
    z = numer[..., d_v:]                                                           # (..., L, 1)
    y = numer[..., :d_v] / z                                                       # (..., L, d_v)
    return y, S2AttentionCache(q, w, omega, v_aug, S, z, y, k, grid, feat, bool(class_token))


def s2_attention_bwd_core(dy, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`s2_attention_bwd` (see :func:`s2_attention`)."""
    c = cache
    d_v = dy.shape[-1]
    dnumer = dy / c.z                                                              # (..., L, d_v)
    dz = -xp.sum(dnumer * c.y, axis=-1, keepdims=True)                             # (..., L, 1)
    g = xp.concat([dnumer, dz], axis=-1)                                           # (..., L, e)
    V = _token_class_sums(c.v_aug, c.k, c.grid, c.class_token, xp=xp)             # (..., L, R, e) recomputed
    dS = xp.sum(V * xp.expand_dims(g, axis=-2), axis=-1)                           # (..., L, R)
    dv_aug = _token_class_sums_adjoint(xp.expand_dims(c.S, axis=-1) * xp.expand_dims(g, axis=-2), c.k,
                                       c.grid, c.class_token, xp=xp)               # (..., L, e)
    dq, dw, domega = _scores_bwd(dS, c, xp=xp, omega_grad=omega_grad)
    return S2AttentionGrads(q=dq, v=dv_aug[..., :d_v], w=dw, omega=domega)


def _dense_from_classes(S, cls, *, xp):
    """``K_ij = S[..., i, cls_ij]`` by a one-hot sum over classes: ``(..., L, R) -> (..., L, L)``."""
    K = None
    for r in range(S.shape[-1]):
        part = S[..., r:r + 1] * xp.astype(cls == r, S.dtype)                      # (..., L, L)
        K = part if K is None else K + part
    return K


@fill_doc(q=_Q, w=_W, geometry=_GEOMETRY)
def s2_logits(q, w, *, k=DEFAULT_CLIP, grid=None):
    r"""The dense S2 logits, ``(..., L, L)``: each query against its clipped relative key, O(L^2) memory.

    ``N_ij = q_i . w[class(i, j)] / sqrt(d)``.
    ``softmax_attention(q, zeros_like(q), v, mask_add=s2_logits(q, w, ...))`` is exact S2 attention (the
    oracle for :func:`s2_attention` with ``omega=None``; Horn et al. Eq. (4) term (b)).

    Parameters
    ----------
    {q}
    {w}
    {geometry}

    Returns
    -------
    N : (..., L, L) array
        Dtype and namespace of `q`.

    Raises
    ------
    ValueError
        Shapes that disagree, a bad `k`/`grid`, or non-finite input.
    """
    if getattr(q, "ndim", 0) < 2:                                                  # before slicing q
        check_shape("q", q, "..., L, d")
    v = q[..., :1]
    xp, k, grid = _validate(q, v, w, None, k, grid)
    logits = (q @ xp.matrix_transpose(w)) * (q.shape[-1] ** -0.5)                  # (..., L, R)
    cls = s2_class_index(q.shape[-2], k, grid, xp=xp)
    return _dense_from_classes(logits, xp.asarray(cls, device=device_of(q)), xp=xp)


@fill_doc(q=_Q, v=_V, w=_W, geometry=_GEOMETRY, omega=_OMEGA)
def s2_attention_naive(q, v, w, *, k=DEFAULT_CLIP, grid=None, omega=None):
    r"""Quadratic reference for :func:`s2_attention`: materialises ``K_ij = K(q_i, a_ij)`` (O(L^2) memory).

    Parameters
    ----------
    {q}
    {v}
    {w}
    {geometry}
    {omega}

    Returns
    -------
    y : (..., L, d_v) array
        Same value as :func:`s2_attention` to rounding.
    """
    xp, k, grid = _validate(q, v, w, omega, k, grid)
    d = q.shape[-1]
    if omega is None:
        logits = (q @ xp.matrix_transpose(w)) * (d ** -0.5)                        # (..., L, R)
        S = xp.exp(logits - xp.max(logits, axis=-1, keepdims=True))
    else:
        c = d ** -0.25
        (pq, _), _ = positive_features_stable_fwd(q * c, omega)
        (pw, lw), _ = positive_features_stable_fwd(w * c, omega)
        pws = pw * xp.expand_dims(xp.exp(lw - xp.max(lw, axis=-1, keepdims=True)), axis=-1)
        S = pq @ xp.matrix_transpose(pws)                                          # (..., L, R)
    cls = s2_class_index(q.shape[-2], k, grid, xp=xp)
    K = _dense_from_classes(S, xp.asarray(cls, device=device_of(q)), xp=xp)        # (..., L, L)
    return (K @ v) / xp.sum(K, axis=-1, keepdims=True)                             # (..., L, d_v)
