r"""Horn et al. Strategy 1: rotation-constrained sinusoid features, concatenated to content queries and keys.

**Lemma 1** (Horn et al. Sec. 2.3, Eq. (3); proof in Appendix A.1). With the row vector
``phi(z) = [sin(omega z), cos(omega z)]`` and ``M = W_q W_k^T``,

    <phi(z) W_q, phi(z') W_k> = phi(z) M phi(z')^T
        = (a + d)/2 cos(omega (z - z')) + (b - c)/2 sin(omega (z - z'))
        + (d - a)/2 cos(omega (z + z')) + (b + c)/2 sin(omega (z + z')),       M = [[a, b], [c, d]],

so the inner product depends on z - z' only (for every real shift, omega != 0) iff d = a and c = -b, i.e.
``M = [[alpha, beta], [-beta, alpha]]``, and then it is ``alpha cos(omega Delta) + beta sin(omega Delta)``
with ``Delta = z - z'`` (query position minus key position). The condition is on ``W_q W_k^T`` in this
row-vector convention (the paper's text says ``W_q^T W_k``, which is the condition for column vectors
``W phi``; see ``paper_checks/horn/rpe.py``, claim ``horn.lemma1``).

**S1 as implemented** (the paper's "simplest scenario"): ``W_q* = blockdiag([[alpha_s, beta_s], [-beta_s,
alpha_s]])``, ``W_k* = I``, one block per (axis, lengthscale). For positions ``z`` with A axes (A = 1 for
sequences, 2 for images) and S lengthscales the positional parts have width ``P = 2 A S``:

    K_p(z) = [sin(omega_as z_a), cos(omega_as z_a)]_(a, s)
    Q_p(z) = [alpha sin - beta cos, beta sin + alpha cos]_(a, s)          (= K_p(z) W_q*, row vectors)

and ``Q = [Q_c, Q_p]``, ``K = [K_c, K_p]`` (width d + P) go into softmax attention (exact; the 1/sqrt(d + P)
temperature is the one of the concatenated width) or FAVOR (``d^{-1/4}`` with d the concatenated width). The
positional logit ``Q_p(z_i) . K_p(z_j)`` is Lemma 1's, summed over (a, s): :func:`s1_relative_term`.

**Shift invariance.** Exact softmax S1 attention is invariant to shifting every position (to float tolerance).
With random features it is invariant *in distribution* only: a shift multiplies both Q and K by the same
orthogonal ``R = blockdiag(I_d, rotations)``, and ``phi(x R; omega) = phi(x; omega R^T)``, so the shifted
output with draw omega equals the unshifted output with draw ``omega R^T``. Isotropic draws (Gaussian,
Haar-orthogonal blocks) have ``omega R^T ~ omega``: same distribution, but a *single* draw is not invariant.
Anisotropic (learned) spectra are not invariant even in distribution (``tests/rpe/test_s1_rotation.py``).

Axes: ``...`` batch and heads, ``L`` positions, ``A`` position axes, ``S`` lengthscales, ``P = 2 A S``,
``d`` content width, ``d_v`` value width, ``m`` random features. Parameters may carry leading axes ``*p``
(e.g. heads) that broadcast against the batch axes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, check_shape, namespace, sum_to_shape
from ..attention.favor import (check_favor_inputs, favor_attention_bwd, favor_attention_bwd_core,
                               favor_attention_fwd_core)
from ..attention.linear import DEFAULT_CHUNK_SIZE
from ..attention.softmax import DEFAULT_BLOCK_ELEMENTS, softmax_attention_bwd, softmax_attention_fwd
from ..attention.softmax import softmax_attention_bwd_core, softmax_attention_fwd_core

__all__ = ["S1Params", "s1_positional", "s1_positional_fwd", "s1_positional_bwd", "s1_augment",
           "s1_augment_fwd", "s1_augment_bwd", "s1_attention", "s1_attention_fwd",
           "s1_attention_bwd", "s1_relative_term", "s1_relative_matrix", "S1PositionalGrads",
           "S1AugmentGrads", "S1AttentionGrads"]

Array = Any


class S1Params(NamedTuple):
    r"""Learnable S1 parameters: one rotation block per (axis, lengthscale), all three ``(*p, A, S)``.

    ``freqs`` holds omega_as, ``alpha`` and ``beta`` the entries of ``W_q* = [[alpha, beta], [-beta, alpha]]``
    (Horn et al. Lemma 1). Draw initial values with :func:`refattn.random.init_s1_params`.
    """

    freqs: Array  # (*p, A, S) omega_as
    alpha: Array  # (*p, A, S)
    beta: Array   # (*p, A, S)


class S1PositionalGrads(NamedTuple):
    """Gradients from :func:`s1_positional_bwd`: ``params``, an :class:`S1Params` of gradients."""

    params: S1Params


class S1AugmentGrads(NamedTuple):
    """Gradients from :func:`s1_augment_bwd`: ``q``, ``k`` and ``params``."""

    q: Array           # (..., L, d)
    k: Array           # (..., L, d)
    params: S1Params


class S1AttentionGrads(NamedTuple):
    """Gradients from :func:`s1_attention_bwd`: ``q``, ``k``, ``v``, ``params``, ``omega`` (None: exact)."""

    q: Array           # (..., L, d)
    k: Array           # (..., L, d)
    v: Array           # (..., L, d_v)
    params: S1Params
    omega: Array       # (m, d + P), or None for exact softmax


class _PosCache(NamedTuple):
    pos: Array         # (L, A) positions as floats
    params: S1Params
    sin: Array         # (*p, L, A, S)
    cos: Array         # (*p, L, A, S)
    weight: Array = None   # (L,) per-token factor on Q_p and K_p, or None (all ones)


class _AugCache(NamedTuple):
    pos_cache: _PosCache
    d: int


class _AttnCache(NamedTuple):
    aug_cache: _AugCache
    attn_cache: Any
    exact: bool


# ----------------------------------------------------------------------------------------------------------
# checks shared with the model layer (refattn.nn.kinds.s1)


def check_s1_params(params, *, names=("params.freqs", "params.alpha", "params.beta")):
    """Structural checks of :class:`S1Params` (type, namespaces, dtypes, shapes; no data read); returns xp."""
    if not isinstance(params, S1Params):
        raise TypeError(f"params: expected an S1Params(freqs, alpha, beta) NamedTuple; got "
                        f"{type(params).__name__}")
    xp = namespace(*params, names=names)
    sizes = check_shape("params.freqs", params.freqs, "..., A, S")
    check_shape("params.alpha", params.alpha, "..., A, S", sizes)
    check_shape("params.beta", params.beta, "..., A, S", sizes)
    return xp


def check_s1_positions(positions, A, like, *, xp):
    """``(L,)`` (A = 1) or ``(L, A)`` integer or float positions -> ``(L, A)`` in `like`'s dtype (structural
    checks only; no finiteness pass)."""
    namespace(positions, like, names=("positions", "params.freqs"), allow_int=("positions",))
    if positions.ndim == 1 and A == 1:
        positions = xp.reshape(positions, (positions.shape[0], 1))
    if positions.ndim != 2 or positions.shape[1] != A:
        raise ValueError(f"positions: expected shape (L,) or (L, A) with A = {A} (from params.freqs); "
                         f"got {tuple(positions.shape)}")
    return xp.astype(positions, like.dtype)                                        # index -> value, explicit


def _validate_params(params, *, names=("params.freqs", "params.alpha", "params.beta")):
    xp = check_s1_params(params, names=names)
    for n, a in zip(names, params, strict=True):
        check_finite(n, a, xp=xp)
    return xp


def _positions(positions, A, like, *, xp):
    pos = check_s1_positions(positions, A, like, xp=xp)
    check_finite("positions", pos, xp=xp)
    return pos


# shared docstring blocks (numpydoc entries filled in by fill_doc)

_Y = """
y : (..., L, d_v) array
    Dtype and namespace of `q`.
"""
_POSITIONS = r"""
positions : (L,) or (L, A) array
    Positions (integers, indices by nature, or floats); (L,) when A = 1. Cast to the dtype of
    ``params.freqs``; must be finite.
params : S1Params
    ``freqs, alpha, beta: (*p, A, S)``, real floating (float64 reference, float32 supported), one dtype and
    namespace; ``*p`` broadcasts to the batch axes ``...`` (e.g. ``(H, A, S)`` per head).
"""
_QK = """
q : (..., L, d) array
    Content queries (``e W_q``), real floating (float64 reference, float32 supported); L >= 1 for attention.
k : (..., L, d) array
    Content keys (``e W_k``), same dtype and namespace as `q`.
"""
_QK_AUG = """
(q_aug, k_aug) : tuple of two (..., L, d + P) arrays
    ``P = 2 A S``; dtype and namespace of `q`.
"""
_V = """
v : (..., L, d_v) array
    Values.
"""
_FAVOR = """
omega : (m, d + P) array, optional
    Random projections over the concatenated width (``refattn.random.draw_*`` with width ``d + 2 A S``);
    None: exact softmax.
causal : bool
    Position i attends to j <= i only.
features : {"positive", "hyperbolic", "trig"}
    FAVOR feature map (ignored for exact softmax).
"""
_RAISES = """
ValueError
    Mismatched shapes (`positions` must have L rows, ``params``' leading axes must broadcast to the batch
    axes, `omega` must be ``(m, d + P)``), L = 0 in attention, or non-finite input.
TypeError
    `params` is not an :class:`S1Params`, or dtypes/namespaces are mixed.
"""


# ----------------------------------------------------------------------------------------------------------
# positional parts (Q_p, K_p)


@fill_doc(positions=_POSITIONS)
def s1_positional(positions, params: S1Params):
    r"""Positional parts ``(Q_p, K_p)`` of Horn et al. Strategy 1 (Lemma 1 rotation features).

    ``K_p(z) = [sin(omega_as z_a), cos(omega_as z_a)]_(a, s)`` and ``Q_p(z) = K_p(z) W_q*``, one block
    ``W_q* = [[alpha, beta], [-beta, alpha]]`` per (a, s) (module docstring), so ``Q_p(z_i) . K_p(z_j)``
    depends on ``z_i - z_j`` only. Positions get no gradient (indices or coordinates, not parameters).

    Parameters
    ----------
    {positions}

    Returns
    -------
    (Q_p, K_p) : tuple of two (\*p, L, P) arrays
        ``P = 2 A S``, blocks ordered (axis, lengthscale, [sin, cos]); the dtype and namespace of `params`.
    """
    return s1_positional_fwd(positions, params)[0]


@fill_doc(positions=_POSITIONS, raises=_RAISES)
def s1_positional_fwd(positions, params: S1Params):
    r"""Forward of :func:`s1_positional` with the cache for :func:`s1_positional_bwd`.

    See :func:`s1_positional` for the equations and shapes.

    Parameters
    ----------
    {positions}

    Returns
    -------
    (Q_p, K_p) : tuple of two (\*p, L, P) arrays
        ``P = 2 A S``; the dtype and namespace of `params`.
    cache : _PosCache
        What :func:`s1_positional_bwd` needs (positions, parameters, sines and cosines).

    Raises
    ------
    {raises}
    """
    xp = _validate_params(params)
    pos = _positions(positions, params.freqs.shape[-2], params.freqs, xp=xp)       # (L, A)
    return s1_positional_fwd_core(pos, params, xp=xp)


def s1_positional_bwd(dout, cache: _PosCache) -> S1PositionalGrads:
    r"""Backward of :func:`s1_positional_fwd`: gradients of ``params`` (freqs, alpha and beta).

    See :func:`s1_positional` for the equations and shapes.

    Parameters
    ----------
    dout : tuple of two arrays
        ``(dQ_p, dK_p)``, each ``(..., L, P)`` and broadcast-compatible with ``(*p, L, P)``; extra leading
        axes (e.g. the batch) are summed. Same dtype and namespace as the forward's parameters; finite.
    cache : _PosCache
        The cache returned by :func:`s1_positional_fwd`.

    Returns
    -------
    S1PositionalGrads
        ``params``: an :class:`S1Params` of gradients, each field of the shape of its parameter.

    Raises
    ------
    ValueError
        A cotangent whose last two axes are not ``(L, P)``, or a non-finite cotangent.
    """
    dQp, dKp = dout
    c = cache
    xp = namespace(dQp, dKp, c.sin, names=("dQ_p", "dK_p", "cache"))
    shp = tuple(c.sin.shape)                                                       # (*p, L, A, S)
    L, A, S = shp[-3], shp[-2], shp[-1]
    for name, a in (("dQ_p", dQp), ("dK_p", dKp)):
        if a.ndim < 2 or tuple(a.shape[-2:]) != (L, 2 * A * S):
            raise ValueError(f"{name}: expected shape (..., L, P) = (..., {L}, {2 * A * S}); "
                             f"got {tuple(a.shape)}")
        check_finite(name, a, xp=xp)
    return s1_positional_bwd_core(dout, cache, xp=xp)


# K_p = [sin t, cos t],  Q_p = [alpha sin t - beta cos t, beta sin t + alpha cos t],  t_las = omega_as z_la
# dalpha = sum_l g1 sin + g2 cos,  dbeta = sum_l g2 sin - g1 cos,  domega = sum_l (ds cos - dc sin) z_l
def s1_positional_fwd_core(pos, params, *, xp, weight=None):
    """Unchecked core of :func:`s1_positional_fwd` on ``(L, A)`` floats (see :func:`s1_positional`).
    ``weight: (L,)`` multiplies each token's ``Q_p`` and ``K_p`` rows (0: a class token without a position,
    Horn et al.'s zero encoding: the positional logit vanishes for every pair it is in)."""
    A = params.freqs.shape[-2]
    L = pos.shape[0]
    theta = xp.expand_dims(pos, axis=-1) * xp.expand_dims(params.freqs, axis=-3)   # (*p, L, A, S)
    s, c = xp.sin(theta), xp.cos(theta)
    al, be = xp.expand_dims(params.alpha, axis=-3), xp.expand_dims(params.beta, axis=-3)  # (*p, 1, A, S)
    Qp = xp.stack([al * s - be * c, be * s + al * c], axis=-1)                   # (*p, L, A, S, 2) [s c] W_q*
    Kp = xp.stack([s, c], axis=-1)                                                 # (..., L, A, S, 2) [s c] I
    P = 2 * A * params.freqs.shape[-1]
    Qp = xp.reshape(Qp, tuple(Qp.shape[:-4]) + (L, P))                             # (*p, L, P)
    Kp = xp.reshape(Kp, tuple(Kp.shape[:-4]) + (L, P))                             # (*p, L, P)
    if weight is not None:                                                         # (L, 1) row factors
        Qp, Kp = Qp * xp.reshape(weight, (L, 1)), Kp * xp.reshape(weight, (L, 1))  # (*p, L, P)
    return (Qp, Kp), _PosCache(pos, params, s, c, weight)


def s1_positional_bwd_core(dout, cache, *, xp):
    """Unchecked core of :func:`s1_positional_bwd` (see :func:`s1_positional`)."""
    dQp, dKp = dout
    c = cache
    shp = tuple(c.sin.shape)                                                       # (*p, L, A, S)
    L, A, S = shp[-3], shp[-2], shp[-1]
    if c.weight is not None:                                                       # Q_p, K_p times weight
        dQp, dKp = dQp * xp.reshape(c.weight, (L, 1)), dKp * xp.reshape(c.weight, (L, 1))   # (..., L, P)
    g = xp.reshape(dQp, tuple(dQp.shape[:-2]) + (L, A, S, 2))                     # (..., L, A, S, 2)
    gk = xp.reshape(dKp, tuple(dKp.shape[:-2]) + (L, A, S, 2))
    g1, g2 = g[..., 0], g[..., 1]                                                  # (..., L, A, S)
    s, co = c.sin, c.cos
    al, be = xp.expand_dims(c.params.alpha, axis=-3), xp.expand_dims(c.params.beta, axis=-3)
    dal = xp.sum(g1 * s + g2 * co, axis=-3)                                        # (..., A, S)
    dbe = xp.sum(g2 * s - g1 * co, axis=-3)                                        # (..., A, S)
    ds = g1 * al + g2 * be + gk[..., 0]                                            # (..., L, A, S)
    dc = g2 * al - g1 * be + gk[..., 1]                                            # (..., L, A, S)
    dtheta = ds * co - dc * s                                                      # (..., L, A, S)
    dfr = xp.sum(dtheta * xp.expand_dims(c.pos, axis=-1), axis=-3)                 # (..., A, S)
    p = c.params
    return S1PositionalGrads(params=S1Params(
        freqs=sum_to_shape(dfr, tuple(p.freqs.shape), xp=xp),
        alpha=sum_to_shape(dal, tuple(p.alpha.shape), xp=xp),
        beta=sum_to_shape(dbe, tuple(p.beta.shape), xp=xp)))


# ----------------------------------------------------------------------------------------------------------
# augmented queries and keys [q, Q_p], [k, K_p]


@fill_doc(qk=_QK, positions=_POSITIONS, qk_aug=_QK_AUG)
def s1_augment(q, k, positions, params: S1Params):
    r"""Augmented queries and keys ``([q, Q_p], [k, K_p])`` of Horn et al. Strategy 1.

    Horn et al. Strategy 1 ("concat(Q_c, Q_p)", Sec. 2.3): the augmented inner product is
    ``q_i . k_j + Q_p(z_i) . K_p(z_j)``, the second term a function of ``z_i - z_j`` only (Lemma 1). The
    backward splits the cotangents and runs :func:`s1_positional_bwd` on the positional columns.

    Parameters
    ----------
    {qk}
    {positions}

    Returns
    -------
    {qk_aug}
    """
    return s1_augment_fwd(q, k, positions, params)[0]


@fill_doc(qk=_QK, positions=_POSITIONS, qk_aug=_QK_AUG, raises=_RAISES)
def s1_augment_fwd(q, k, positions, params: S1Params):
    r"""Forward of :func:`s1_augment` with the cache for :func:`s1_augment_bwd`.

    See :func:`s1_augment` for the equations and shapes.

    Parameters
    ----------
    {qk}
    {positions}

    Returns
    -------
    {qk_aug}
    cache : _AugCache
        For :func:`s1_augment_bwd`.

    Raises
    ------
    {raises}
    """
    xp = namespace(q, k, *params, names=("q", "k", "params.freqs", "params.alpha", "params.beta"))
    sizes = check_shape("q", q, "..., L, d")
    check_shape("k", k, "..., L, d", sizes)
    check_finite("q", q, xp=xp)
    check_finite("k", k, xp=xp)
    _check_rows(positions, q)
    xp_p = _validate_params(params)
    pos = _positions(positions, params.freqs.shape[-2], params.freqs, xp=xp_p)     # (L, A)
    return s1_augment_fwd_core(q, k, pos, params, xp=xp)


def s1_augment_bwd(dout, cache: _AugCache) -> S1AugmentGrads:
    r"""Backward of :func:`s1_augment_fwd`: gradients of `q`, `k` and ``params``.

    See :func:`s1_augment` for the equations and shapes.

    Parameters
    ----------
    dout : tuple of two (..., L, d + P) arrays
        ``(dq_aug, dk_aug)``, cotangents of the augmented queries and keys.
    cache : _AugCache
        The cache returned by :func:`s1_augment_fwd`.

    Returns
    -------
    S1AugmentGrads
        ``q, k: (..., L, d)`` and ``params``: an :class:`S1Params` of gradients shaped like the parameters.
    """
    if not isinstance(dout, (tuple, list)) or len(dout) != 2:
        raise TypeError(f"dout: expected a pair (dq_aug, dk_aug); got {type(dout).__name__}")
    dq_aug, dk_aug = dout
    d = cache.d
    sin = cache.pos_cache.sin                                                      # (*p, L, A, S)
    xp = namespace(dq_aug, dk_aug, sin, names=("dout[0]", "dout[1]", "cache"))
    L, P = sin.shape[-3], 2 * sin.shape[-2] * sin.shape[-1]
    for name, a in (("dout[0]", dq_aug), ("dout[1]", dk_aug)):
        if a.ndim < 2 or tuple(a.shape[-2:]) != (L, d + P) or tuple(a.shape) != tuple(dq_aug.shape):
            raise ValueError(f"{name}: expected shape (..., L, d + P) = (..., {L}, {d + P}), the shape of "
                             f"the augmented q and k; got {tuple(a.shape)} (dout[0]: {tuple(dq_aug.shape)})")
        check_finite(name, a, xp=xp)
    return s1_augment_bwd_core(dout, cache, xp=xp)


def _check_rows(positions, q):
    if getattr(positions, "ndim", 0) < 1 or positions.shape[0] != q.shape[-2]:
        raise ValueError(f"positions: expected L = {q.shape[-2]} rows (from q); got shape "
                         f"{tuple(positions.shape)}")


# q_aug = [q, Q_p(z)],  k_aug = [k, K_p(z)]   (Q_p, K_p broadcast over the batch axes)
# dq = dq_aug[..., :d],  dk = dk_aug[..., :d],  dparams = s1_positional_bwd(dq_aug[..., d:], dk_aug[..., d:])
def s1_augment_fwd_core(q, k, pos, params, *, xp, weight=None):
    """Unchecked core of :func:`s1_augment_fwd` on ``(L, A)`` float positions (the broadcast checks of the
    parameters' leading axes stay: no data read); `weight` as in :func:`s1_positional_fwd_core`."""
    (Qp, Kp), pc = s1_positional_fwd_core(pos, params, xp=xp, weight=weight)       # (*p, L, P)
    P = Qp.shape[-1]
    batch = tuple(q.shape[:-2])
    bad = f"params: leading axes {tuple(Qp.shape[:-2])} do not broadcast to q's batch axes {batch}"
    if Qp.ndim - 2 > len(batch):
        raise ValueError(bad)
    target = batch + (q.shape[-2], P)                                              # (..., L, P)
    try:
        Qp, Kp = xp.broadcast_to(Qp, target), xp.broadcast_to(Kp, target)
    except ValueError:
        raise ValueError(bad) from None
    q_aug = xp.concat([q, Qp], axis=-1)                                            # (..., L, d + P)
    k_aug = xp.concat([k, Kp], axis=-1)                                            # (..., L, d + P)
    return (q_aug, k_aug), _AugCache(pc, q.shape[-1])


def s1_augment_bwd_core(dout, cache, *, xp):
    """Unchecked core of :func:`s1_augment_bwd` (see :func:`s1_augment`)."""
    dq_aug, dk_aug = dout
    d = cache.d
    gp = s1_positional_bwd_core((dq_aug[..., d:], dk_aug[..., d:]), cache.pos_cache, xp=xp)
    return S1AugmentGrads(q=dq_aug[..., :d], k=dk_aug[..., :d], params=gp.params)


# ----------------------------------------------------------------------------------------------------------
# attention


@fill_doc(y=_Y, qk=_QK, v=_V, positions=_POSITIONS, favor=_FAVOR, raises=_RAISES)
def s1_attention(q, k, v, positions, params: S1Params, *, omega=None, causal=False, features="positive"):
    r"""Horn et al. Strategy 1 attention (rotation-constrained sinusoid features), exact or with FAVOR.

    ``softmax([q, Q_p] [k, K_p]^T / sqrt(d + P)) v`` = ``softmax(q k^T / sqrt(d + P) + N) v`` with
    ``N_ij = s1_relative_term(z_i - z_j) / sqrt(d + P)`` (Horn et al. Strategy 1, Lemma 1 / Eq. (3)); with
    ``omega`` the FAVOR estimate of it (:func:`refattn.attention.favor.favor_attention`, features of
    ``(d + P)^{-1/4} [q, Q_p]``). The backward composes the softmax / FAVOR backward with
    :func:`s1_augment_bwd`.

    Parameters
    ----------
    {qk}
    {v}
    {positions}
    {favor}

    Returns
    -------
    {y}

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.random import draw_gaussian, init_s1_params
    >>> from refattn.rpe import s1_attention
    >>> q, k, v = np.random.default_rng(0).standard_normal((3, 2, 5, 4))   # (batch, L, d)
    >>> params = init_s1_params(np.random.default_rng(1), n_axes=1, n_lengthscales=2)
    >>> y = s1_attention(q, k, v, np.arange(5), params)                    # exact softmax
    >>> y.shape
    (2, 5, 4)
    >>> omega = draw_gaussian(np.random.default_rng(2), 64, 4 + 2 * 1 * 2)  # (m, d + P)
    >>> s1_attention(q, k, v, np.arange(5), params, omega=omega).shape      # FAVOR+ estimate
    (2, 5, 4)
    """
    return _s1_attention_checked(q, k, v, positions, params, omega, causal, features, keep=False)[0]


@fill_doc(y=_Y, qk=_QK, v=_V, positions=_POSITIONS, favor=_FAVOR, raises=_RAISES)
def s1_attention_fwd(q, k, v, positions, params: S1Params, *, omega=None, causal=False, features="positive"):
    r"""Forward of :func:`s1_attention` with the cache for :func:`s1_attention_bwd`.

    See :func:`s1_attention` for the equations and shapes.

    Parameters
    ----------
    {qk}
    {v}
    {positions}
    {favor}

    Returns
    -------
    {y}
    cache : _AttnCache
        For :func:`s1_attention_bwd`.

    Raises
    ------
    {raises}
    """
    return _s1_attention_checked(q, k, v, positions, params, omega, causal, features, keep=True)


def _s1_attention_checked(q, k, v, positions, params, omega, causal, features, *, keep):
    """:func:`s1_attention_fwd`; ``keep=False`` (:func:`s1_attention`): FAVOR keeps no causal states."""
    if q.ndim >= 2 and q.shape[-2] < 1:
        raise ValueError(f"q: expected shape (..., L, d) with L >= 1 positions; got {tuple(q.shape)}")
    (q_aug, k_aug), ac = s1_augment_fwd(q, k, positions, params)
    if omega is None:
        y, cache = softmax_attention_fwd(q_aug, k_aug, v, causal=causal)
        return y, _AttnCache(ac, cache, True)
    return _attention_tail(q, q_aug, k_aug, v, ac, omega, causal, features, keep=keep)


def s1_attention_bwd(dy, cache: _AttnCache, *, omega_grad=True) -> S1AttentionGrads:
    r"""Backward of :func:`s1_attention_fwd`: gradients of q, k, v, params (freqs, alpha, beta) and omega.

    See :func:`s1_attention` for the equations and shapes.

    Parameters
    ----------
    dy : (..., L, d_v) array
        Cotangent of the output, finite, dtype and namespace of the forward.
    cache : _AttnCache
        The cache returned by :func:`s1_attention_fwd`.
    omega_grad : bool
        ``False`` skips omega's gradient (``omega=None`` in the result): for callers whose omega is drawn, not
        learned (computed only on request).

    Returns
    -------
    S1AttentionGrads
        ``q, k: (..., L, d)``, ``v: (..., L, d_v)``, ``params`` (an :class:`S1Params` shaped like the
        parameters) and ``omega: (m, d + P)`` (None for exact softmax or with ``omega_grad=False``).

    Raises
    ------
    ValueError
        A non-finite `dy`.
    """
    check_finite("dy", dy, xp=namespace(dy, names=("dy",)))
    if cache.exact:
        ga = softmax_attention_bwd(dy, cache.attn_cache)
        domega = None
    else:
        ga = favor_attention_bwd(dy, cache.attn_cache, omega_grad=omega_grad)
        domega = ga.omega if omega_grad else None
    gs = s1_augment_bwd((ga.q, ga.k), cache.aug_cache)
    return S1AttentionGrads(q=gs.q, k=gs.k, v=ga.v, params=gs.params, omega=domega)


# y = softmax([q, Q_p] [k, K_p]^T / sqrt(d + P)) v   (exact), or FAVOR+ on the augmented q and k
# d[q, Q_p], d[k, K_p] from the attention backward, then the augmentation's backward
def s1_attention_fwd_core(q, k, v, pos, params, *, omega, causal, features, xp, keep=True, weight=None):
    """Unchecked core of :func:`s1_attention_fwd` on ``(L, A)`` float positions (the caller ran
    :func:`check_s1_params` and checked ``L >= 1``): the augmentation's and the softmax's unchecked cores, or
    FAVOR (which checks only its result; ``keep=False``: no causal states kept for a backward); `weight` as in
    :func:`s1_positional_fwd_core` (0: a class token, whose logits are ``[q, 0] . [k, K_p] = q . k``)."""
    (q_aug, k_aug), ac = s1_augment_fwd_core(q, k, pos, params, xp=xp, weight=weight)
    if omega is None:
        y, cache = softmax_attention_fwd_core(q_aug, k_aug, v, None, causal, float(q_aug.shape[-1] ** -0.5),
                                              False, DEFAULT_BLOCK_ELEMENTS, xp=xp)
        return y, _AttnCache(ac, cache, True)
    return _attention_tail(q, q_aug, k_aug, v, ac, omega, causal, features, keep=keep)


def s1_attention_bwd_core(dy, cache, *, omega_grad=True, xp):
    """Unchecked core of :func:`s1_attention_bwd` (see :func:`s1_attention`)."""
    if cache.exact:
        ga = softmax_attention_bwd_core(dy, cache.attn_cache, xp=xp)
        domega = None
    else:
        ga = favor_attention_bwd_core(dy, cache.attn_cache, omega_grad=omega_grad, xp=xp)
        domega = ga.omega if omega_grad else None
    gs = s1_augment_bwd_core((ga.q, ga.k), cache.aug_cache, xp=xp)
    return S1AttentionGrads(q=gs.q, k=gs.k, v=ga.v, params=gs.params, omega=domega)


def _attention_tail(q, q_aug, k_aug, v, ac, omega, causal, features, *, keep):
    """The FAVOR branch of :func:`s1_attention_fwd` (FAVOR checks only its result; `keep` as in
    :func:`~refattn.attention.favor.favor_attention_fwd_core`)."""
    if omega.ndim != 2 or omega.shape[-1] != q_aug.shape[-1]:
        raise ValueError(f"omega: expected shape (m, d + P) with d + P = {q_aug.shape[-1]} (content width "
                         f"{q.shape[-1]} + positional width {q_aug.shape[-1] - q.shape[-1]}); got "
                         f"{tuple(omega.shape)}")
    xp, chunk = check_favor_inputs(q_aug, k_aug, v, omega, causal, features, DEFAULT_CHUNK_SIZE, "raise")
    y, cache = favor_attention_fwd_core(q_aug, k_aug, v, omega, causal=causal, features=features,
                                        chunk_size=chunk, on_nonpositive="raise", xp=xp, keep=keep)
    return y, _AttnCache(ac, cache, False)


# ----------------------------------------------------------------------------------------------------------
# the positional logit itself (dense references)


def s1_relative_term(delta, params: S1Params):
    r"""The S1 positional logit as a function of the offset (Horn et al. Lemma 1, row-vector convention).

    ``sum_(a, s) alpha_as cos(omega_as Delta_a) + beta_as sin(omega_as Delta_a)`` with
    ``Delta = z_query - z_key``.

    Parameters
    ----------
    delta : (..., A) array
        Offsets (or (...,) when A = 1), real floating, finite, dtype and namespace of the parameters.
    params : S1Params
        Fields ``(A, S)`` (leading axes broadcast against `delta`'s).

    Returns
    -------
    (...) array
        The positional logit for each offset.

    Raises
    ------
    ValueError
        The last axis of `delta` is not A, or non-finite input.
    """
    xp = _validate_params(params)
    namespace(delta, params.freqs, names=("delta", "params.freqs"))
    check_finite("delta", delta, xp=xp)
    A = params.freqs.shape[-2]
    if A == 1 and (delta.ndim == 0 or delta.shape[-1] != 1):
        delta = xp.expand_dims(delta, axis=-1)
    if delta.shape[-1] != A:
        raise ValueError(f"delta: expected shape (..., A) with A = {A} (from params.freqs); got "
                         f"{tuple(delta.shape)}")
    theta = xp.expand_dims(delta, axis=-1) * params.freqs                          # (..., A, S)
    return xp.sum(params.alpha * xp.cos(theta) + params.beta * xp.sin(theta), axis=(-2, -1))  # (...)


def s1_relative_matrix(positions, params: S1Params):
    r"""The dense S1 positional logits ``N0_ij = s1_relative_term(z_i - z_j)``.

    Equals ``Q_p K_p^T`` (Lemma 1); the softmax oracle's mask for S1 is ``N0 / sqrt(d + P)``. O(L^2)
    memory: for tests and small L.

    Parameters
    ----------
    positions : (L,) or (L, A) array
        Positions (integers or floats).
    params : S1Params
        Fields ``(*p, A, S)``, real floating.

    Returns
    -------
    N0 : (\*p, L, L) array
        Dtype and namespace of `params`.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.random import init_s1_params
    >>> from refattn.rpe import s1_positional, s1_relative_matrix
    >>> params = init_s1_params(np.random.default_rng(1), n_axes=1, n_lengthscales=2)
    >>> N0 = s1_relative_matrix(np.arange(4), params)
    >>> Q_p, K_p = s1_positional(np.arange(4), params)
    >>> bool(np.allclose(N0, Q_p @ K_p.T)), bool(np.allclose(np.diag(N0), N0[0, 0]))
    (True, True)
    """
    xp = _validate_params(params)
    A = params.freqs.shape[-2]
    pos = _positions(positions, A, params.freqs, xp=xp)                            # (L, A)
    delta = xp.expand_dims(pos, axis=1) - xp.expand_dims(pos, axis=0)              # (L, L, A) z_i - z_j
    # (*p, 1, 1, A, S)
    p = [xp.reshape(a, tuple(a.shape[:-2]) + (1, 1) + tuple(a.shape[-2:])) for a in params]
    theta = xp.expand_dims(delta, axis=-1) * p[0]                                  # (*p, L, L, A, S)
    return xp.sum(p[1] * xp.cos(theta) + p[2] * xp.sin(theta), axis=(-2, -1))      # (*p, L, L)

