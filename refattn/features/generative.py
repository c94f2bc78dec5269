r"""Generative spectra: features on the frequencies of a generator network (Chowdhury et al. Eqs. 8, 11).

The generator ``omega = g(noise)`` (Eq. 7; :mod:`refattn.features.generator_network`, which also says how its
training and evaluation modes sample) feeds the RKS map (Generative-RKS, Eq. 8: ``trig_features(x, omega)``)
or the PRF map of Eq. 9 (Generative-PRF, Eq. 11: ``gaussian_positive_features(x, omega)``). In evaluation
mode each map is unbiased for its generator's kernel (stated at the map), which has no closed form: the tests
compare with a large-sample Monte Carlo of the same generator.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` head width, ``M`` frequencies, ``d_noise`` noise width.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_shape, namespace
from .generator_network import (GEN_EXAMPLE_DOC, GEN_PARAMS_DOC, GeneratorParams, GeneratorState,
                                check_generator_struct, generator_bwd, generator_bwd_core, generator_fwd,
                                generator_fwd_core)
from .positive import (gaussian_positive_features_bwd, gaussian_positive_features_fwd,
                       positive_features_stable_bwd, positive_features_stable_bwd_core,
                       positive_features_stable_fwd, positive_features_stable_fwd_core)
from .projection import BWD_RAISES
from .trig import trig_features_bwd, trig_features_bwd_core, trig_features_fwd, trig_features_fwd_core

__all__ = [
    "GenerativeOutput", "GenerativeGrads", "generative_rks_features", "generative_rks_features_fwd",
    "generative_rks_features_bwd", "generative_prf_features", "generative_prf_features_fwd",
    "generative_prf_features_bwd", "generative_prf_features_stable", "generative_prf_features_stable_fwd",
    "generative_prf_features_stable_bwd",
]

Array = Any

_X_DOC = """
Parameters
----------
x : (..., L, d) array
    Queries or keys. Real floating (float32 or float64), finite; same namespace and dtype as `noise`.
"""
_RAISES_DOC = """
Raises
------
ValueError
    If `x` is not (..., L, d) with the generator's output width d, or as :func:`generator`.
TypeError
    As :func:`generator`.
"""
_GRADS_DOC = """
Returns
-------
GenerativeGrads
    ``x : (..., L, d)``, ``noise : (M, d_noise)`` and ``params``: a :class:`GeneratorParams` of gradients (the
    running statistics are not learnable).
"""
_RKS_OUT_DOC = """
GenerativeOutput
    ``phi : (..., L, 2M)`` (cosines then sines; same namespace, dtype and device as `x`) and the generator's
    ``state``.
"""
_PRF_OUT_DOC = """
GenerativeOutput
    ``phi : (..., L, M)`` (positive; same namespace, dtype and device as `x`) and the generator's ``state``.
"""
_EXAMPLE_DOC = GEN_EXAMPLE_DOC + """>>> x = np.random.default_rng(2).standard_normal((3, 4))   # (L, d)
"""


class GenerativeOutput(NamedTuple):
    """What the generative feature maps return: the features and the (updated) batch-norm state."""

    phi: Array               # (..., L, 2M) RKS or (..., L, M) PRF
    state: GeneratorState


class GenerativeGrads(NamedTuple):
    """Gradients of the generative feature maps: ``x``, ``noise`` and ``params``."""

    x: Array                 # (..., L, d)
    noise: Array             # (M, d_noise)
    params: GeneratorParams


# ------------------------------------------------------------------------------------------------------------
# Generative-RKS and Generative-PRF
# ------------------------------------------------------------------------------------------------------------

class _FeatCache(NamedTuple):
    gen: Any        # the generator's cache (generator_fwd)
    inner: Any
    x: Array


def _compose_bwd(g_inner: Any, cache: _FeatCache, dx_extra: Array | None = None) -> GenerativeGrads:
    gg = generator_bwd(g_inner.omega, cache.gen)
    dx = g_inner.x if dx_extra is None else g_inner.x + dx_extra
    return GenerativeGrads(x=dx, noise=gg.noise, params=gg.params)


@fill_doc(gen_params=GEN_PARAMS_DOC, x_doc=_X_DOC, rks_out=_RKS_OUT_DOC)
def generative_rks_features_fwd(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                                train: bool) -> tuple[GenerativeOutput, _FeatCache]:
    """:func:`generative_rks_features` and the cache for its backward (equations, shapes and errors there).

    {x_doc}
    {gen_params}

    Returns
    -------
    {rks_out}
    cache : NamedTuple
        Opaque, for :func:`generative_rks_features_bwd`.
    """
    out, gc = generator_fwd(noise, params, state, train=train)
    phi, tc = trig_features_fwd(x, out.omega)                                        # (..., L, 2M)
    return GenerativeOutput(phi, out.state), _FeatCache(gc, tc, x)


def check_generative_features_struct(x, noise, params, state, *, train):
    """Structural checks of the generative feature maps (the generator's, :func:`check_generator_struct`,
    and `x` against its output width d): no data read; returns the namespace. The model runs them before
    the cores."""
    xp = check_generator_struct(noise, params, state, train=train)
    namespace(x, noise, names=("x", "noise"))
    d = params.out.W.shape[1]
    check_shape("x", x, "..., L, d", {"d": (d, "params.out.W")})
    return xp


def generative_rks_features_fwd_core(x, noise, params, state, *, train, xp):
    """Unchecked core of :func:`generative_rks_features_fwd` (its structure: the caller's
    :func:`check_generative_features_struct`)."""
    out, gc = generator_fwd_core(noise, params, state, train=train, xp=xp)
    phi, tc = trig_features_fwd_core(x, out.omega, xp=xp)                           # (..., L, 2M)
    return GenerativeOutput(phi, out.state), _FeatCache(gc, tc, x)


def generative_rks_features_bwd_core(dphi, cache, *, xp):
    """Unchecked core of :func:`generative_rks_features_bwd`."""
    g = trig_features_bwd_core(dphi, cache.inner, xp=xp)
    gg = generator_bwd_core(g.omega, cache.gen, xp=xp)
    return GenerativeGrads(x=g.x, noise=gg.noise, params=gg.params)


@fill_doc(grads=_GRADS_DOC, bwd_raises=BWD_RAISES)
def generative_rks_features_bwd(dphi: Array, cache: _FeatCache) -> GenerativeGrads:
    """Gradients of :func:`generative_rks_features` (equations there): its map's, then the generator's.

    Parameters
    ----------
    dphi : (..., L, 2M) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`generative_rks_features_fwd`.

    {grads}

    {bwd_raises}
    """
    return _compose_bwd(trig_features_bwd(dphi, cache.inner), cache)


@fill_doc(gen_params=GEN_PARAMS_DOC, x_doc=_X_DOC, raises=_RAISES_DOC, example=_EXAMPLE_DOC,
          rks_out=_RKS_OUT_DOC)
def generative_rks_features(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                            train: bool) -> GenerativeOutput:
    """Generative-RKS features: RKS on the generator's frequencies omega = g(noise) (Chowdhury et al. Eq. 8).

    ``phi(x) = [cos(x omega^T), sin(x omega^T)] / sqrt(M)``: the RKS map (Eq. (3)) on the generator's
    frequencies (Eq. (7)). In evaluation mode the frequencies are iid and the estimator is unbiased for
    ``E_n[cos(g(n)^T (q - k))]``.

    {x_doc}
    {gen_params}

    Returns
    -------
    {rks_out}

    {raises}

    See Also
    --------
    generative_rks_features_fwd, generative_rks_features_bwd : the differentiable pair.

    Examples
    --------
    {example}
    >>> from refattn.features import generator, generative_rks_features, trig_features
    >>> out = generative_rks_features(x, noise, params, state, train=False)
    >>> out.phi.shape                                                   # (L, 2M)
    (3, 32)
    >>> omega = generator(noise, params, state, train=False).omega
    >>> bool(np.allclose(out.phi, trig_features(x, omega)))
    True
    """
    return generative_rks_features_fwd(x, noise, params, state, train=train)[0]


@fill_doc(gen_params=GEN_PARAMS_DOC, x_doc=_X_DOC, prf_out=_PRF_OUT_DOC)
def generative_prf_features_fwd(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                                train: bool) -> tuple[GenerativeOutput, _FeatCache]:
    """:func:`generative_prf_features` and the cache for its backward (equations, shapes and errors there).

    {x_doc}
    {gen_params}

    Returns
    -------
    {prf_out}
    cache : NamedTuple
        Opaque, for :func:`generative_prf_features_bwd`.
    """
    out, gc = generator_fwd(noise, params, state, train=train)
    phi, pc = gaussian_positive_features_fwd(x, out.omega)                           # (..., L, M)
    return GenerativeOutput(phi, out.state), _FeatCache(gc, pc, x)


@fill_doc(grads=_GRADS_DOC, bwd_raises=BWD_RAISES)
def generative_prf_features_bwd(dphi: Array, cache: _FeatCache) -> GenerativeGrads:
    """Gradients of :func:`generative_prf_features` (equations there): its map's, then the generator's.

    Parameters
    ----------
    dphi : (..., L, M) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`generative_prf_features_fwd`.

    {grads}

    {bwd_raises}
    """
    return _compose_bwd(gaussian_positive_features_bwd(dphi, cache.inner), cache)


@fill_doc(gen_params=GEN_PARAMS_DOC, x_doc=_X_DOC, raises=_RAISES_DOC, example=_EXAMPLE_DOC,
          prf_out=_PRF_OUT_DOC)
def generative_prf_features(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                            train: bool) -> GenerativeOutput:
    """Generative-PRF features: PRF on the generator's frequencies omega = g(noise) (Chowdhury et al. Eq. 11).

    ``phi(x) = exp(x omega^T - |x|^2) / sqrt(M)``: the PRF map of Eq. (9) (offset ``|x|^2``) on the
    generator's frequencies (Eq. (7)). In evaluation mode the estimator is unbiased for
    ``E_n[exp(g(n)^T (q + k))] exp(-|q|^2 - |k|^2)``. Unstabilised: attention should use
    :func:`generative_prf_features_stable`.

    {x_doc}
    {gen_params}

    Returns
    -------
    {prf_out}

    {raises}

    See Also
    --------
    generative_prf_features_fwd, generative_prf_features_bwd : the differentiable pair.

    Examples
    --------
    {example}
    >>> from refattn.features import gaussian_positive_features, generative_prf_features, generator
    >>> out = generative_prf_features(x, noise, params, state, train=False)
    >>> out.phi.shape                                                   # (L, M)
    (3, 16)
    >>> omega = generator(noise, params, state, train=False).omega
    >>> bool(np.allclose(out.phi, gaussian_positive_features(x, omega)))
    True
    """
    return generative_prf_features_fwd(x, noise, params, state, train=train)[0]


@fill_doc(gen_params=GEN_PARAMS_DOC, x_doc=_X_DOC)
def generative_prf_features_stable_fwd(x: Array, noise: Array, params: GeneratorParams,
                                       state: GeneratorState, *,
                                       train: bool) -> tuple[tuple[Array, Array, GeneratorState], _FeatCache]:
    """:func:`generative_prf_features_stable` and the cache for its backward (maths and errors there).

    {x_doc}
    {gen_params}

    Returns
    -------
    (phi, log_scale, state) : ((..., L, M) array, (..., L) array, GeneratorState)
        ``phi`` in (0, 1]; ``log_scale``: pass as ``k_log_scale`` for keys, drop for queries; the
        generator's ``state``.
    cache : NamedTuple
        Opaque, for :func:`generative_prf_features_stable_bwd`.
    """
    out, gc = generator_fwd(noise, params, state, train=train)
    xp = namespace(x)
    (phi, ls0), pc = positive_features_stable_fwd(x, out.omega)                     # offset |x|^2 / 2
    log_scale = ls0 - 0.5 * xp.sum(x * x, axis=-1)                                    # (..., L)  Eq. 9: |x|^2
    return (phi, log_scale, out.state), _FeatCache(gc, pc, x)


def generative_prf_features_stable_fwd_core(x, noise, params, state, *, train, xp):
    """Unchecked core of :func:`generative_prf_features_stable_fwd` (its structure: the caller's
    :func:`check_generative_features_struct`)."""
    out, gc = generator_fwd_core(noise, params, state, train=train, xp=xp)
    (phi, ls0), pc = positive_features_stable_fwd_core(x, out.omega, None, xp=xp)  # offset |x|^2 / 2
    log_scale = ls0 - 0.5 * xp.sum(x * x, axis=-1)                                    # (..., L)  Eq. 9: |x|^2
    return (phi, log_scale, out.state), _FeatCache(gc, pc, x)


def generative_prf_features_stable_bwd_core(dout, cache, *, xp):
    """Unchecked core of :func:`generative_prf_features_stable_bwd`."""
    dphi, dls = dout[0], dout[1]
    g = positive_features_stable_bwd_core(dphi, dls, cache.inner, xp=xp)
    extra = None if dls is None else -xp.expand_dims(dls, axis=-1) * cache.x
    gg = generator_bwd_core(g.omega, cache.gen, xp=xp)
    dx = g.x if extra is None else g.x + extra
    return GenerativeGrads(x=dx, noise=gg.noise, params=gg.params)


@fill_doc(grads=_GRADS_DOC, bwd_raises=BWD_RAISES)
def generative_prf_features_stable_bwd(dout: tuple, cache: _FeatCache) -> GenerativeGrads:
    """Gradients of :func:`generative_prf_features_stable` (equations there) from ``(dphi, dlog_scale)``.

    Parameters
    ----------
    dout : tuple of ((..., L, M) array, (..., L) array or None[, ignored])
        ``(dphi, dlog_scale)``; ``dlog_scale`` may be ``None`` (queries); a third entry, the state's
        cotangent, is ignored. Same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`generative_prf_features_stable_fwd`.

    {grads}

    {bwd_raises}
    """
    dphi, dls = dout[0], dout[1]
    xp = namespace(dphi, names=("dout[0]",))
    g = positive_features_stable_bwd((dphi, dls), cache.inner)
    extra = None if dls is None else -xp.expand_dims(dls, axis=-1) * cache.x
    return _compose_bwd(g, cache, extra)


@fill_doc(gen_params=GEN_PARAMS_DOC, x_doc=_X_DOC, raises=_RAISES_DOC, example=_EXAMPLE_DOC)
def generative_prf_features_stable(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                                   train: bool) -> tuple[Array, Array, GeneratorState]:
    """Row-stabilised Generative-PRF features: :func:`generative_prf_features` as ``phi * exp(log_scale)``.

    Chowdhury et al. Eq. (11) with the row maximum of the exponent, the ``|x|^2`` offset of Eq. (9) and
    ``1/sqrt(M)`` factored into ``log_scale``; never overflows.

    {x_doc}
    {gen_params}

    Returns
    -------
    phi : (..., L, M) array
        Entries in (0, 1]; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        Keys: pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it (it cancels per row).
    state : GeneratorState
        Updated in training mode, the input state otherwise.

    {raises}

    See Also
    --------
    generative_prf_features_stable_fwd, generative_prf_features_stable_bwd : the differentiable pair.

    Examples
    --------
    {example}
    >>> from refattn.features import generative_prf_features, generative_prf_features_stable
    >>> phi, log_scale, _ = generative_prf_features_stable(x, noise, params, state, train=False)
    >>> raw = generative_prf_features(x, noise, params, state, train=False).phi
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], raw))
    True
    """
    return generative_prf_features_stable_fwd(x, noise, params, state, train=train)[0]

