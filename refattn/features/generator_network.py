r"""The generator network of the generative spectra (Chowdhury et al. Eqs. 7-8): noise to frequencies.

The generator is the paper's ``4 x (FC + BatchNorm + LeakyReLU)`` followed by ``FC + tanh``::

    h_0 = n                         n ~ N(0, I)   (M, d_noise)      refattn.random.draw_generator_noise
    h_l = leaky_relu(bn_l(h_{l-1} W_l + b_l))     l = 1..4        (M, width)
    omega = tanh(h_4 W_out + b_out)                                 (M, d)   so omega lies in [-1, 1]^d

and one generator is shared by all heads of a layer (the same (M, d) frequencies for every head); the feature
maps on its frequencies are :mod:`refattn.features.generative`. Parameters: 5 dense layers (``5 d^2 + 5 d`` at
constant width d, as the paper counts) plus 4 batch norms (``8 d`` more, which the paper's count leaves out),
and 4 running-statistics pairs (state, not learned).

**Training vs evaluation sampling.** In training mode batch norm normalises with the statistics of the M
noise rows, so the M frequencies are *coupled* (not iid: each depends on the whole batch), and the running
statistics are updated (returned as a new :class:`GeneratorState`; nothing is mutated). In evaluation mode
(``train=False``) batch norm uses the running statistics, the generator is a fixed function applied row by
row, and the frequencies are iid draws from the pushforward law ``g(rho_0)``.

Axes: ``M`` frequencies, ``d_noise`` noise width, ``width`` hidden width, ``d`` output (head) width.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_choice, check_finite, check_shape, namespace
from ..layers.checks import check_dy, check_finite_all
from ..layers.activations import (check_slope, leaky_relu_bwd_core, leaky_relu_fwd_core, tanh_bwd_core,
                                  tanh_fwd_core)
from ..layers.batchnorm import (BatchNormParams, BatchNormState, batchnorm_bwd_core, batchnorm_fwd_core,
                                check_batchnorm_options, check_running_var)
from ..layers.dense import DenseParams, dense_bwd_core, dense_fwd_core

__all__ = [
    "GeneratorParams", "GeneratorState", "GeneratorOutput", "GeneratorGrads", "generator", "generator_fwd",
    "generator_bwd", "generator_param_count",
]

Array = Any

#: LeakyReLU slope of the generator (the paper does not state it; torch's default).
NEGATIVE_SLOPE = 0.01

GEN_PARAMS_DOC = """
noise : (M, d_noise) array
    Generator input (``refattn.random.draw_generator_noise``); M >= 2 in training mode. Real floating, finite;
    same namespace and dtype as the weights.
params : GeneratorParams
    Generator weights (``refattn.random.init_generator``).
state : GeneratorState
    Running statistics of the batch norms; returned updated (train) or unchanged (eval), never mutated.
train : bool
    Batch statistics (frequencies coupled through them; running statistics updated) or running statistics
    (iid frequencies, unbiased for the generator's kernel).
"""
_GEN_RAISES_DOC = """
Raises
------
ValueError
    If `noise` is not (M, d_noise) with the first layer's d_noise, M < 2 in training mode, the numbers of
    dense layers, batch norms and states differ, or `noise` is not finite.
TypeError
    If `params` / `state` are not :class:`GeneratorParams` / :class:`GeneratorState`, or the arrays differ in
    namespace or dtype.
"""
GEN_EXAMPLE_DOC = """
>>> import numpy as np
>>> from refattn.random import draw_generator_noise, init_generator
>>> params, state = init_generator(np.random.default_rng(0), 4)      # d = d_noise = width = 4
>>> noise = draw_generator_noise(np.random.default_rng(1), 16, 4)    # (M, d_noise)
"""


class GeneratorParams(NamedTuple):
    """Learnable generator weights (``refattn.random.init_generator``)."""

    hidden: tuple   # n_hidden x DenseParams: W (d_in, width), b (width,)
    norms: tuple    # n_hidden x BatchNormParams: gamma (width,), beta (width,)
    out: DenseParams  # W (width, d), b (d,)


class GeneratorState(NamedTuple):
    """Running statistics of the generator's batch norms (state, not learned)."""

    norms: tuple    # n_hidden x BatchNormState: running mean (width,), running var (width,)


class GeneratorOutput(NamedTuple):
    """What :func:`generator` returns: the frequencies and the (updated) batch-norm state."""

    omega: Array            # (M, d)
    state: GeneratorState   # updated running statistics (train) or the input state (eval)


class GeneratorGrads(NamedTuple):
    """Gradients of :func:`generator`: ``noise`` and ``params`` (a :class:`GeneratorParams`)."""

    noise: Array             # (M, d_noise)
    params: GeneratorParams


class _GenCache(NamedTuple):
    layers: tuple   # per hidden layer: (dense cache, bn cache, leaky cache)
    out: Any        # dense cache
    tanh: Any       # tanh cache


def check_generator_struct(noise: Array, params: Any, state: Any, *, train: bool,
                           negative_slope: float = NEGATIVE_SLOPE, momentum: float = 0.1,
                           eps: float = 1e-5) -> Any:
    """Structural checks of :func:`generator_fwd` (containers, namespaces, dtypes, every layer's shapes from
    the noise's width on, the options): no data read; returns the namespace. The model runs them before the
    cores."""
    if not isinstance(params, GeneratorParams):
        raise TypeError(f"params: expected GeneratorParams(hidden, norms, out); got {type(params).__name__}")
    if not isinstance(state, GeneratorState):
        raise TypeError(f"state: expected GeneratorState(norms); got {type(state).__name__}")
    if len(params.hidden) != len(params.norms) or len(params.norms) != len(state.norms):
        raise ValueError(f"params/state: expected as many dense layers as batch norms and running states; "
                         f"got {len(params.hidden)} dense, {len(params.norms)} batch norms, "
                         f"{len(state.norms)} states")
    parts = [("params.hidden", params.hidden, DenseParams), ("params.norms", params.norms, BatchNormParams),
             ("state.norms", state.norms, BatchNormState), ("params", (params.out,), DenseParams)]
    for name, leaf, kind in [(f"{n}[{i}]" if n != "params" else "params.out", x, k)
                             for n, xs, k in parts for i, x in enumerate(xs)]:
        if not isinstance(leaf, kind):
            raise TypeError(f"{name}: expected {kind.__name__}; got {type(leaf).__name__}")
    xp = namespace(noise, names=("noise",))
    check_shape("noise", noise, "M, d_noise")
    _check_noise_rows(noise, params, train)
    check_choice(train, "train", (True, False))
    check_slope(negative_slope)
    check_batchnorm_options(momentum, eps)
    sizes = {"width": (noise.shape[1], "noise")}
    for i, (dp, bp, bs) in enumerate(zip(params.hidden, params.norms, state.norms, strict=True)):
        _check_dense_struct(f"params.hidden[{i}]", dp, noise, sizes)
        leaves = {f"params.norms[{i}].gamma": bp.gamma, f"params.norms[{i}].beta": bp.beta,
                  f"state.norms[{i}].mean": bs.mean, f"state.norms[{i}].var": bs.var}
        namespace(noise, *leaves.values(), names=("noise", *leaves))
        for name, leaf in leaves.items():
            check_shape(name, leaf, "width", sizes)
    _check_dense_struct("params.out", params.out, noise, sizes)
    return xp


def _check_dense_struct(name, dp, noise, sizes):
    """Layer `name`'s ``W: (width, width')`` and ``b: (width',)`` against the width so far (`sizes`, updated
    to ``width'``): namespace, dtype, shapes."""
    namespace(noise, dp.W, dp.b, names=("noise", f"{name}.W", f"{name}.b"))
    check_shape(f"{name}.W", dp.W, "width, width_out", sizes)
    check_shape(f"{name}.b", dp.b, "width_out", sizes)
    sizes["width"] = (sizes.pop("width_out")[0], f"{name}.W")


@fill_doc(gen_params=GEN_PARAMS_DOC)
def generator_fwd(noise: Array, params: GeneratorParams, state: GeneratorState, *, train: bool,
                  negative_slope: float = NEGATIVE_SLOPE, momentum: float = 0.1,
                  eps: float = 1e-5) -> tuple[GeneratorOutput, _GenCache]:
    """:func:`generator` and the cache for its backward (equations, shapes and errors there).

    Parameters
    ----------
    {gen_params}
    negative_slope : float, default 0.01
        LeakyReLU slope (the paper does not state it; torch's default).
    momentum : float, default 0.1
        Batch-norm running-statistics momentum (training mode).
    eps : float, default 1e-5
        Batch-norm variance floor.

    Returns
    -------
    GeneratorOutput
        ``omega : (M, d)`` in [-1, 1] and ``state`` (updated in training mode, the input state otherwise).
    cache : NamedTuple
        Opaque, for :func:`generator_bwd`.
    """
    xp = check_generator_struct(noise, params, state, train=train, negative_slope=negative_slope,
                                momentum=momentum, eps=eps)
    check_finite("noise", noise, xp=xp)
    for i, (dp, bp, bs) in enumerate(zip(params.hidden, params.norms, state.norms, strict=True)):
        check_finite_all(xp, **{f"params.hidden[{i}].W": dp.W, f"params.hidden[{i}].b": dp.b,
                                f"params.norms[{i}].gamma": bp.gamma, f"params.norms[{i}].beta": bp.beta,
                                f"state.norms[{i}].mean": bs.mean, f"state.norms[{i}].var": bs.var})
        check_running_var(bs, xp=xp)
    check_finite_all(xp, **{"params.out.W": params.out.W, "params.out.b": params.out.b})
    return generator_fwd_core(noise, params, state, train=train, negative_slope=negative_slope,
                              momentum=momentum, eps=eps, xp=xp)


def generator_fwd_core(noise, params, state, *, train, negative_slope=NEGATIVE_SLOPE, momentum=0.1, eps=1e-5,
                       xp):
    """Unchecked core of :func:`generator_fwd` (its structure: the caller's :func:`check_generator_struct`;
    the running variances' sign: :func:`check_generator_state`)."""
    h = noise                                                                        # (M, d_noise)
    layers, new_states = [], []
    for dp, bp, bs in zip(params.hidden, params.norms, state.norms, strict=True):
        z, dc = dense_fwd_core(h, dp, xp=xp)                                         # (M, width)  FC
        bn, bc = batchnorm_fwd_core(z, bp, bs, train=train, momentum=momentum, eps=eps, xp=xp)   # BatchNorm
        h, lc = leaky_relu_fwd_core(bn.y, negative_slope, xp=xp)                     # (M, width)  LeakyReLU
        layers.append((dc, bc, lc))
        new_states.append(bn.state)
    z, oc = dense_fwd_core(h, params.out, xp=xp)                                     # (M, d)
    omega, tc = tanh_fwd_core(z, xp=xp)                                              # (M, d) in [-1, 1]
    new_state = GeneratorState(tuple(new_states)) if train else state   # eval: the input state itself
    return GeneratorOutput(omega, new_state), _GenCache(tuple(layers), oc, tc)


def check_generator_state(state, *, xp):
    """The running variances' sign (finiteness is the caller's tree check): one fused flag, one sync; the
    batch norms are checked one by one (for the message) only after a failure."""
    if not state.norms or bool(xp.all(xp.stack([xp.all(bs.var >= 0) for bs in state.norms]))):
        return
    for bs in state.norms:
        check_running_var(bs, xp=xp)


def _check_noise_rows(noise, params, train):
    """The noise's width against the first layer and, in training mode, its row count (no data read)."""
    first = params.hidden[0].W if params.hidden else params.out.W
    first_name = "params.hidden[0].W" if params.hidden else "params.out.W"
    if getattr(first, "ndim", 0) == 2 and noise.shape[1] != first.shape[0]:
        raise ValueError(f"noise: expected shape (M, d_noise) with d_noise = {first.shape[0]} (from "
                         f"{first_name}); got {tuple(noise.shape)}")
    if train and params.hidden and noise.shape[0] < 2:
        raise ValueError(f"noise: training-mode batch norm needs at least 2 rows (M >= 2); got "
                         f"{tuple(noise.shape)}")


def generator_bwd(domega: Array, cache: _GenCache) -> GeneratorGrads:
    """Gradients of :func:`generator` (equations there), through batch statistics in training mode.

    Parameters
    ----------
    domega : (M, d) array
        Cotangent of the frequencies; same namespace and dtype as the cache.
    cache : NamedTuple
        From :func:`generator_fwd`.

    Returns
    -------
    GeneratorGrads
        ``noise : (M, d_noise)`` and ``params``: a :class:`GeneratorParams` of gradients.

    Raises
    ------
    ValueError
        If `domega` does not have the frequencies' shape or is not finite.
    TypeError
        If `domega` and the cache differ in namespace or dtype.
    """
    xp = check_dy(domega, cache.tanh)                             # the check tanh_bwd made, named "dy"
    return generator_bwd_core(domega, cache, xp=xp)


def generator_bwd_core(domega, cache, *, xp):
    """Unchecked core of :func:`generator_bwd`."""
    dz = tanh_bwd_core(domega, cache.tanh, xp=xp).x                                  # (M, d)
    go = dense_bwd_core(dz, cache.out, xp=xp)
    dh = go.x                                                                        # (M, width)
    dense_grads, norm_grads = [], []
    for dc, bc, lc in reversed(cache.layers):
        dbn = leaky_relu_bwd_core(dh, lc, xp=xp).x                                       # (M, width)
        gb = batchnorm_bwd_core(dbn, bc, xp=xp)                             # through batch statistics (train)
        gd = dense_bwd_core(gb.x, dc, xp=xp)
        dh = gd.x                                                                    # (M, d_in)
        dense_grads.append(gd.params)
        norm_grads.append(gb.params)
    params = GeneratorParams(hidden=tuple(reversed(dense_grads)), norms=tuple(reversed(norm_grads)),
                             out=go.params)
    return GeneratorGrads(noise=dh, params=params)


@fill_doc(gen_params=GEN_PARAMS_DOC, gen_raises=_GEN_RAISES_DOC, example_gen=GEN_EXAMPLE_DOC)
def generator(noise: Array, params: GeneratorParams, state: GeneratorState, *, train: bool,
              negative_slope: float = NEGATIVE_SLOPE) -> GeneratorOutput:
    """Frequencies ``omega = g(noise)`` of the generator network (Chowdhury et al. Eq. (7)).

    ``4 x (FC + BatchNorm + LeakyReLU)`` then ``FC + tanh``, so omega lies in [-1, 1]^d; one generator is
    shared by all heads of a layer. Batch-norm momentum and eps take their defaults (see
    :func:`generator_fwd`).

    Parameters
    ----------
    {gen_params}
    negative_slope : float, default 0.01
        LeakyReLU slope.

    Returns
    -------
    GeneratorOutput
        ``omega : (M, d)`` in [-1, 1] and ``state`` (updated in training mode, the input state otherwise).

    {gen_raises}

    See Also
    --------
    generator_fwd, generator_bwd : the differentiable pair.

    Examples
    --------
    {example_gen}
    >>> from refattn.features import generator
    >>> out = generator(noise, params, state, train=False)
    >>> out.omega.shape, bool(np.all(np.abs(out.omega) <= 1)), out.state is state
    ((16, 4), True, True)
    """
    return generator_fwd(noise, params, state, train=train, negative_slope=negative_slope)[0]


def generator_param_count(params: GeneratorParams) -> dict:
    """Number of learnable scalars of a generator, split into dense layers and batch norms.

    The paper's ``5 d^2 + 5 d`` (Chowdhury et al., the generator of Eqs. (7)-(8) at constant width d) counts
    the dense ones; the batch norms add ``8 d``.

    Parameters
    ----------
    params : GeneratorParams
        Generator weights.

    Returns
    -------
    dict
        ``{"dense": int, "batchnorm": int}``.

    Raises
    ------
    TypeError
        If `params` is not a :class:`GeneratorParams`.
    ValueError
        If a weight does not have the shape it is counted by (W 2-D, b, gamma, beta 1-D and matching).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import generator_param_count
    >>> from refattn.random import init_generator
    >>> params, _ = init_generator(np.random.default_rng(0), 4)
    >>> generator_param_count(params)                                   # 5 d^2 + 5 d and 8 d at d = 4
    {'dense': 100, 'batchnorm': 32}
    """
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
