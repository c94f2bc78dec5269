r"""Generative spectra: a generator network maps noise to frequencies (Chowdhury et al. Eqs. 7-8, 11).

The generator is the paper's ``4 x (FC + BatchNorm + LeakyReLU)`` followed by ``FC + tanh``::

    h_0 = n                         n ~ N(0, I)   (M, d_noise)      refattn.random.draw_generator_noise
    h_l = leaky_relu(bn_l(h_{l-1} W_l + b_l))     l = 1..4        (M, width)
    omega = tanh(h_4 W_out + b_out)                                 (M, d)   so omega lies in [-1, 1]^d

and one generator is shared by all heads of a layer (the same (M, d) frequencies for every head). Its
frequencies feed the RKS map (Generative-RKS, Eq. 8: ``trig_features(x, omega)``) or the PRF map of Eq. 9
(Generative-PRF, Eq. 11: ``gaussian_positive_features(x, omega)``). Parameters: 5 dense layers
(``5 d^2 + 5 d`` at constant width d, as the paper counts) plus 4 batch norms (``8 d`` more, which the paper's
count leaves out), and 4 running-statistics pairs (state, not learned).

**Training vs evaluation sampling.** In training mode batch norm normalises with the statistics of the M
noise rows, so the M frequencies are *coupled* (not iid: each depends on the whole batch), and the running
statistics are updated (returned as a new :class:`GeneratorState`; nothing is mutated). In evaluation mode
(``train=False``) batch norm uses the running statistics, the generator is a fixed function applied row by
row, and the frequencies are iid draws from the pushforward law ``g(rho_0)``: the estimator is then
unbiased for ``kappa(q, k) = E_n[cos(g(n)^T (q - k))]`` (RKS) or
``E_n[exp(g(n)^T (q + k))] exp(-|q|^2 - |k|^2)`` (PRF). These kernels have no closed form: the tests
compare with a large-sample Monte Carlo of the same generator.

Axes: ``...`` batch and heads, ``L`` positions, ``d`` head width, ``M`` frequencies, ``d_noise`` noise width,
``width`` hidden width.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._xp import check_finite, check_shape, namespace
from ..layers.activations import leaky_relu_bwd, leaky_relu_fwd, tanh_bwd, tanh_fwd
from ..layers.batchnorm import batchnorm_bwd, batchnorm_fwd
from ..layers.dense import DenseParams, dense_bwd, dense_fwd
from .positive import (gaussian_positive_features_bwd, gaussian_positive_features_fwd,
                       positive_features_stable_bwd, positive_features_stable_fwd)
from .trig import trig_features_bwd, trig_features_fwd

__all__ = [
    "GeneratorParams", "GeneratorState", "GeneratorOutput", "GeneratorGrads", "GenerativeOutput",
    "GenerativeGrads", "generator", "generator_fwd", "generator_bwd", "generator_param_count",
    "generative_rks_features", "generative_rks_features_fwd", "generative_rks_features_bwd",
    "generative_prf_features", "generative_prf_features_fwd", "generative_prf_features_bwd",
    "generative_prf_features_stable", "generative_prf_features_stable_fwd",
    "generative_prf_features_stable_bwd",
]

Array = Any

#: LeakyReLU slope of the generator (the paper does not state it; torch's default).
NEGATIVE_SLOPE = 0.01


class GeneratorParams(NamedTuple):
    """Learnable generator weights (``refattn.random.init_generator``)."""

    hidden: tuple   # n_hidden x DenseParams: W (d_in, width), b (width,)
    norms: tuple    # n_hidden x BatchNormParams: gamma (width,), beta (width,)
    out: DenseParams  # W (width, d), b (d,)


class GeneratorState(NamedTuple):
    norms: tuple    # n_hidden x BatchNormState: running mean (width,), running var (width,)


class GeneratorOutput(NamedTuple):
    omega: Array            # (M, d)
    state: GeneratorState   # updated running statistics (train) or the input state (eval)


class GeneratorGrads(NamedTuple):
    noise: Array             # (M, d_noise)
    params: GeneratorParams


class GenerativeOutput(NamedTuple):
    phi: Array               # (..., L, 2M) RKS or (..., L, M) PRF
    state: GeneratorState


class GenerativeGrads(NamedTuple):
    x: Array                 # (..., L, d)
    noise: Array             # (M, d_noise)
    params: GeneratorParams


class _GenCache(NamedTuple):
    layers: tuple   # per hidden layer: (dense cache, bn cache, leaky cache)
    out: Any        # dense cache
    tanh: Any       # tanh cache


def _check_generator(noise: Array, params: Any, state: Any) -> Any:
    if not isinstance(params, GeneratorParams):
        raise TypeError(f"params: expected GeneratorParams(hidden, norms, out); got {type(params).__name__}")
    if not isinstance(state, GeneratorState):
        raise TypeError(f"state: expected GeneratorState(norms); got {type(state).__name__}")
    if len(params.hidden) != len(params.norms) or len(params.norms) != len(state.norms):
        raise ValueError(f"params/state: expected as many dense layers as batch norms and running states; "
                         f"got {len(params.hidden)} dense, {len(params.norms)} batch norms, "
                         f"{len(state.norms)} states")
    xp = namespace(noise, names=("noise",))
    check_shape("noise", noise, "M, d_noise")
    check_finite("noise", noise, xp=xp)
    return xp


def generator_fwd(noise: Array, params: GeneratorParams, state: GeneratorState, *, train: bool,
                  negative_slope: float = NEGATIVE_SLOPE, momentum: float = 0.1,
                  eps: float = 1e-5) -> tuple[GeneratorOutput, _GenCache]:
    r"""Frequencies ``omega = g(noise)`` (Eq. 7) and the new batch-norm state.

    Parameters
    ----------
    noise : (M, d_noise) array
        Generator input (``refattn.random.draw_generator_noise``); M >= 2 in training mode.
    params : GeneratorParams
    state : GeneratorState
        Running statistics of the batch norms; returned updated (train) or unchanged (eval), never mutated.
    train : bool
        Batch statistics (frequencies coupled through them) or running statistics (iid frequencies).

    Returns
    -------
    GeneratorOutput(omega (M, d) in [-1, 1], state), cache
    """
    _check_generator(noise, params, state)
    first = params.hidden[0].W if params.hidden else params.out.W
    first_name = "params.hidden[0].W" if params.hidden else "params.out.W"
    if getattr(first, "ndim", 0) == 2 and noise.shape[1] != first.shape[0]:
        raise ValueError(f"noise: expected shape (M, d_noise) with d_noise = {first.shape[0]} (from "
                         f"{first_name}); got {tuple(noise.shape)}")
    if train and params.hidden and noise.shape[0] < 2:
        raise ValueError(f"noise: training-mode batch norm needs at least 2 rows (M >= 2); got "
                         f"{tuple(noise.shape)}")
    h = noise                                                                        # (M, d_noise)
    layers, new_states = [], []
    for dp, bp, bs in zip(params.hidden, params.norms, state.norms, strict=True):
        z, dc = dense_fwd(h, dp)                                                     # (M, width)  FC
        bn, bc = batchnorm_fwd(z, bp, bs, train=train, momentum=momentum, eps=eps)   # (M, width)  BatchNorm
        h, lc = leaky_relu_fwd(bn.y, negative_slope=negative_slope)                  # (M, width)  LeakyReLU
        layers.append((dc, bc, lc))
        new_states.append(bn.state)
    z, oc = dense_fwd(h, params.out)                                                 # (M, d)
    omega, tc = tanh_fwd(z)                                                          # (M, d) in [-1, 1]
    new_state = GeneratorState(tuple(new_states)) if train else state   # eval: the input state itself
    return GeneratorOutput(omega, new_state), _GenCache(tuple(layers), oc, tc)


def generator_bwd(domega: Array, cache: _GenCache) -> GeneratorGrads:
    """Backward of :func:`generator` (cotangent of omega only; the running statistics are not learnable)."""
    dz = tanh_bwd(domega, cache.tanh).x                                              # (M, d)
    go = dense_bwd(dz, cache.out)
    dh = go.x                                                                        # (M, width)
    dense_grads, norm_grads = [], []
    for dc, bc, lc in reversed(cache.layers):
        dbn = leaky_relu_bwd(dh, lc).x                                               # (M, width)
        gb = batchnorm_bwd(dbn, bc)                                     # through batch statistics (train)
        gd = dense_bwd(gb.x, dc)
        dh = gd.x                                                                    # (M, d_in)
        dense_grads.append(gd.params)
        norm_grads.append(gb.params)
    params = GeneratorParams(hidden=tuple(reversed(dense_grads)), norms=tuple(reversed(norm_grads)),
                             out=go.params)
    return GeneratorGrads(noise=dh, params=params)


def generator(noise: Array, params: GeneratorParams, state: GeneratorState, *, train: bool,
              negative_slope: float = NEGATIVE_SLOPE) -> GeneratorOutput:
    """``GeneratorOutput(omega, state)`` of the generator; see :func:`generator_fwd`."""
    return generator_fwd(noise, params, state, train=train, negative_slope=negative_slope)[0]


def generator_param_count(params: GeneratorParams) -> dict:
    """Learnable scalars: ``{"dense": ..., "batchnorm": ...}`` (the paper's ``5 d^2 + 5 d`` counts the
    dense ones)."""
    if not isinstance(params, GeneratorParams):
        raise TypeError(f"params: expected GeneratorParams(hidden, norms, out); got {type(params).__name__}")
    layers = [(f"params.hidden[{i}]", p) for i, p in enumerate(params.hidden)] + [("params.out", params.out)]
    for name, p in layers:                                                   # counts from shapes: check them
        sizes = check_shape(f"{name}.W", p.W, "d_in, d_out")
        check_shape(f"{name}.b", p.b, "d_out", sizes)
    for i, p in enumerate(params.norms):
        sizes = check_shape(f"params.norms[{i}].gamma", p.gamma, "width")
        check_shape(f"params.norms[{i}].beta", p.beta, "width", sizes)
    dense = sum(int(p.W.shape[0] * p.W.shape[1] + p.b.shape[0]) for p in (*params.hidden, params.out))
    norm = sum(int(p.gamma.shape[0] + p.beta.shape[0]) for p in params.norms)
    return {"dense": dense, "batchnorm": norm}


# ------------------------------------------------------------------------------------------------------------
# Generative-RKS and Generative-PRF
# ------------------------------------------------------------------------------------------------------------

class _FeatCache(NamedTuple):
    gen: _GenCache
    inner: Any
    x: Array


def _compose_bwd(g_inner: Any, cache: _FeatCache, dx_extra: Array | None = None) -> GenerativeGrads:
    gg = generator_bwd(g_inner.omega, cache.gen)
    dx = g_inner.x if dx_extra is None else g_inner.x + dx_extra
    return GenerativeGrads(x=dx, noise=gg.noise, params=gg.params)


def generative_rks_features_fwd(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                                train: bool) -> tuple[GenerativeOutput, _FeatCache]:
    r"""Generative-RKS (Eq. 8): ``phi(x) = [cos(x omega^T), sin(x omega^T)] / sqrt(M)``, ``omega = g(noise)``.

    Parameters
    ----------
    x : (..., L, d) array
    noise : (M, d_noise) array
    params, state
        Generator weights and running statistics.
    train : bool
        See :func:`generator_fwd` (evaluation mode: iid frequencies, unbiased for the generator's kernel).

    Returns
    -------
    GenerativeOutput(phi (..., L, 2M), state), cache
    """
    out, gc = generator_fwd(noise, params, state, train=train)
    phi, tc = trig_features_fwd(x, out.omega)                                        # (..., L, 2M)
    return GenerativeOutput(phi, out.state), _FeatCache(gc, tc, x)


def generative_rks_features_bwd(dphi: Array, cache: _FeatCache) -> GenerativeGrads:
    """Backward of :func:`generative_rks_features`: ``GenerativeGrads(x, noise, params)``."""
    return _compose_bwd(trig_features_bwd(dphi, cache.inner), cache)


def generative_rks_features(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                            train: bool) -> GenerativeOutput:
    """``GenerativeOutput(phi (..., L, 2M), state)`` of Generative-RKS (Eq. 8)."""
    return generative_rks_features_fwd(x, noise, params, state, train=train)[0]


def generative_prf_features_fwd(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                                train: bool) -> tuple[GenerativeOutput, _FeatCache]:
    r"""Generative-PRF (Eq. 11 with Eq. 9): ``phi(x) = exp(x omega^T - |x|^2) / sqrt(M)``, unstabilised.

    Returns ``GenerativeOutput(phi (..., L, M), state)`` and the cache.
    """
    out, gc = generator_fwd(noise, params, state, train=train)
    phi, pc = gaussian_positive_features_fwd(x, out.omega)                           # (..., L, M)
    return GenerativeOutput(phi, out.state), _FeatCache(gc, pc, x)


def generative_prf_features_bwd(dphi: Array, cache: _FeatCache) -> GenerativeGrads:
    """Backward of :func:`generative_prf_features`."""
    return _compose_bwd(gaussian_positive_features_bwd(dphi, cache.inner), cache)


def generative_prf_features(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                            train: bool) -> GenerativeOutput:
    """``GenerativeOutput(phi (..., L, M), state)`` of Generative-PRF (Eq. 11), unstabilised."""
    return generative_prf_features_fwd(x, noise, params, state, train=train)[0]


def generative_prf_features_stable_fwd(x: Array, noise: Array, params: GeneratorParams,
                                       state: GeneratorState, *,
                                       train: bool) -> tuple[tuple[Array, Array, GeneratorState], _FeatCache]:
    r"""Row-stabilised Generative-PRF: ``((phi, log_scale, state), cache)``, raw map ``phi * exp(log_scale)``.

    ``phi: (..., L, M)`` in (0, 1]; ``log_scale: (..., L)`` (pass as ``k_log_scale`` for keys).
    """
    out, gc = generator_fwd(noise, params, state, train=train)
    xp = namespace(x)
    (phi, ls0), pc = positive_features_stable_fwd(x, out.omega)                     # offset |x|^2 / 2
    log_scale = ls0 - 0.5 * xp.sum(x * x, axis=-1)                                    # (..., L)  Eq. 9: |x|^2
    return (phi, log_scale, out.state), _FeatCache(gc, pc, x)


def generative_prf_features_stable_bwd(dout: tuple, cache: _FeatCache) -> GenerativeGrads:
    """Backward of :func:`generative_prf_features_stable`; ``dout = (dphi, dlog_scale)`` (dlog_scale may be
    None; a third entry, the state's cotangent, is ignored)."""
    dphi, dls = dout[0], dout[1]
    xp = namespace(dphi, names=("dout[0]",))
    g = positive_features_stable_bwd((dphi, dls), cache.inner)
    extra = None if dls is None else -xp.expand_dims(dls, axis=-1) * cache.x
    return _compose_bwd(g, cache, extra)


def generative_prf_features_stable(x: Array, noise: Array, params: GeneratorParams, state: GeneratorState, *,
                                   train: bool) -> tuple[Array, Array, GeneratorState]:
    """``(phi, log_scale, state)`` of the row-stabilised Generative-PRF map."""
    return generative_prf_features_stable_fwd(x, noise, params, state, train=train)[0]

