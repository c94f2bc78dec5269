"""NumPy-only edge: a model's initial parameters and attention features, drawn from the kinds' declarations.

Each attention kind (:mod:`refattn.nn.kinds`) declares the arrays it needs as ``{name: Draw(sampler, args)}``:
its learnable parameters (``kind.params``, drawn once by :func:`init_mha`) and its non-learnable features
(``kind.features``, drawn per layer and per the redraw policy by :func:`draw_attention_features`). This module
runs each declaration with the ``refattn.random`` primitive its sampler names (:data:`SAMPLERS`), so
randomness never enters the core and the kind's two tables are one.

Streams: a declaration with one random entry draws it from the generator it is given; with several, each entry
gets its own child (``rng.spawn``) in declaration order. :func:`init_transformer` gives one child per
component (embedding, positions, each block, head), so adding a layer does not change the others' draws.
"""

from __future__ import annotations

import math

import numpy as np

from ..features.generator_network import GeneratorState
from ..layers import DenseParams
from ..random import (check_dtype_arg, check_rng, draw_dropout_mask, draw_fastfood, draw_flt_noise,
                      draw_gaussian, draw_generator_noise, draw_gmm_noise, draw_orthogonal, init_batchnorm,
                      init_dense, init_embedding, init_generator, init_gmm, init_gmm_authors, init_layernorm,
                      init_s1_params, rng_for_step)
from ..rpe import S1Params
from ..rpe.spectra import (Box, BSpline, CauchyKernel, GaussianBasis, GaussianKernel, GaussianMixture,
                           LaplaceKernel, Proposal, SinPower)
from .._docs import fill_doc
from .._xp import check_choice, check_positive_int
from ..limits import check_nbytes
from .config import QK_INITS, check_attention_config, check_config, has_class_token, implied_param_count
from ..tree import tree_map
from .kinds import ATTENTION_KINDS

__all__ = ["SAMPLERS", "SAMPLER_NBYTES", "declared_nbytes", "model_nbytes", "draw_declared", "init_mha",
           "draw_attention_features", "features_for_step",
           "init_transformer", "draw_dropout_masks"]


# ---- samplers: Draw.sampler -> (function(rng, *, dtype, **args), whether it consumes randomness) -----------
def _projection(rng, *, rows, cols, law, dtype):
    draw = draw_orthogonal if law == "orthogonal" else draw_gaussian
    return draw(rng, rows, cols, dtype=dtype)                                     # (m, cols)


def _gmm(rng, *, components, d, covariance, s_scale=1.0, dtype, init="scaled-identity", features=None,
         heads=None):
    """The GMM kind's parameters. ``init="scaled-identity"``: :func:`refattn.random.init_gmm` (``S_c =
    s_scale I``). ``init="authors"``: :func:`refattn.random.init_gmm_authors` (the KL authors' random start
    of their `features` map, with `heads` in its fans)."""
    if init == "authors":
        return init_gmm_authors(rng, components, d, features=features, heads=heads, covariance=covariance,
                                dtype=dtype)
    return init_gmm(rng, components, d, covariance=covariance, s_scale=s_scale, dtype=dtype)


def _gmm_noise(rng, *, components, m, d, dtype):
    return draw_gmm_noise(rng, components, m, d, dtype=dtype)                     # (C, M/C, d)


def _fastfood(rng, *, m, d, s_law, dtype):
    return draw_fastfood(rng, m, d, s_law=s_law, dtype=dtype)


def _generator(rng, *, d, dtype):
    return init_generator(rng, d, dtype=dtype)[0]


def _generator_noise(rng, *, m, d, dtype):
    return draw_generator_noise(rng, m, d, dtype=dtype)                           # (M, d)


def _generator_state(rng, *, d, dtype, n_hidden=4):
    return GeneratorState(norms=tuple(init_batchnorm(d, dtype=dtype)[1] for _ in range(n_hidden)))


def _s1(rng, *, n_axes, n_lengthscales, dtype, init="sinusoid", base=None, heads=None):
    """S1's parameters. ``init="sinusoid"``: :func:`refattn.random.init_s1_params` (base 10^4, alpha 1,
    small betas; shared by the heads). ``init="authors"``: Horn et al.'s code -- frequencies
    ``base ** (-s / S)`` on every axis (``base`` = twice the grid's longest side: ``max_timescale_init =
    max_pos * 2``), alpha and beta ~ N(0, 1) iid per head, axis and lengthscale (``torch.nn.init.normal_``),
    shape ``(heads, A, S)``."""
    if init == "sinusoid":
        return init_s1_params(rng, n_axes, n_lengthscales, dtype=dtype)
    S = n_lengthscales
    freqs = np.broadcast_to(float(base) ** (-np.arange(S) / S), (heads, n_axes, S))      # (H, A, S)
    alpha = rng.standard_normal((heads, n_axes, S))
    beta = rng.standard_normal((heads, n_axes, S))
    return S1Params(np.array(freqs, dtype=dtype), alpha.astype(dtype), beta.astype(dtype))


def _normal(rng, *, shape, scale, dtype):
    return (rng.standard_normal(tuple(shape)) * scale).astype(dtype)


def _zeros(rng, *, shape, dtype):
    return np.zeros(tuple(shape), dtype=dtype)


def _flt_noise(rng, *, r, D, dtype, kind="gaussian"):
    return draw_flt_noise(rng, r, D, kind, dtype=dtype)                           # (r, D)


#: FLT initial spectra. Kernels: C = 1, length 2 (positions are integer steps); mixtures: T components of
#: width 0.1 around small random means (Gaussian mixture) or widths 1..T (Gaussian basis); compactly supported
#: families: radius 2.5 by default (not an integer, so integer offsets stay off the box's jumps).
_KERNEL_LENGTH = 2.0
_DEFAULT_RADIUS = 2.5
_DEFAULT_ORDER = {"bspline": 2, "sin_power": 3}


def _per_head(sampler):
    """A sampler drawing one value per head (``heads=H``: independent child streams, leaves stacked on a new
    leading axis; ``heads=None``: one value)."""

    def draw(rng, *, heads=None, dtype, **args):
        if heads is None:
            return sampler(rng, dtype=dtype, **args)
        streams = [None] * heads if rng is None else rng.spawn(heads)
        values = [sampler(r, dtype=dtype, **args) for r in streams]
        return tree_map(lambda a, *rest: np.stack([a, *rest]), values[0], *values[1:])

    return draw


def _flt_spectrum(rng, *, family, components, D, dtype, radius=None, order=None):
    T = components
    one = np.asarray(1.0, dtype=dtype)
    v = float(_DEFAULT_RADIUS if radius is None else radius)
    k = _DEFAULT_ORDER.get(family) if order is None else order
    if family == "gaussian_mixture":
        mu = (0.1 * rng.standard_normal((T, D))).astype(dtype)                      # (T, D)
        return GaussianMixture(w=np.full(T, 1.0 / T, dtype=dtype), mu=mu, sigma=np.full(T, 0.1, dtype=dtype))
    if family in ("gaussian_kernel", "laplace_kernel", "cauchy_kernel"):
        cls = {"gaussian_kernel": GaussianKernel, "laplace_kernel": LaplaceKernel,
               "cauchy_kernel": CauchyKernel}[family]
        return cls(C=one, length=np.asarray(_KERNEL_LENGTH, dtype=dtype))
    if family == "gaussian_basis":
        return GaussianBasis(w=np.full(T, 1.0 / T, dtype=dtype), sigma=np.arange(1, T + 1, dtype=dtype))
    if family == "box":                                   # T boxes of radii v (t + 1) / T, weights 1 / T
        radii = v * np.arange(1, T + 1, dtype=dtype)[:, None] / T * np.ones((1, D), dtype=dtype)
        return Box(w=np.full(T, 1.0 / T, dtype=dtype), v=radii.astype(dtype))      # (T,), (T, D)
    if family == "bspline":                               # support k v_j = radius
        return BSpline(C=one, v=np.full(D, v / k, dtype=dtype), k=int(k))
    return SinPower(C=one, v=np.full(D, v, dtype=dtype), k=int(k))


def _flt_proposal(rng, *, family, D, dtype, kind="gaussian", scale=None, truncation=None, radius=None):
    if truncation is not None:                            # the truncated proposal: uniform on [-B, B]^D
        return Proposal("uniform", np.zeros(D, dtype=dtype), np.full(D, float(truncation), dtype=dtype))
    if scale is None:
        if family == "gaussian_mixture":
            scale = 0.2                      # twice the components' width: int |g|^2 / p stays finite
        elif family in ("gaussian_kernel", "laplace_kernel", "cauchy_kernel"):
            scale = 1.0 / (2 * math.pi * _KERNEL_LENGTH)   # the kernel's own spectral density (App. A.4)
        elif family == "gaussian_basis":
            scale = 1.0 / (2 * math.pi)      # the widest component's spectral width (sigma_min = 1)
        else:                                # B-spline / sin^k: Cauchy at the main lobe's width
            scale = 1.0 / (2 * math.pi * float(_DEFAULT_RADIUS if radius is None else radius))
    return Proposal(kind, np.zeros(D, dtype=dtype), np.full(D, float(scale), dtype=dtype))


#: sampler name -> (function(rng, *, dtype, **args), consumes randomness). ``flt_spectrum`` draws only for
#: mixtures; it is marked random so that the stream layout does not depend on the family.
SAMPLERS = {
    "projection": (_projection, True), "gmm": (_gmm, True), "gmm_noise": (_gmm_noise, True),
    "fastfood": (_fastfood, True), "generator": (_generator, True),
    "generator_noise": (_generator_noise, True),
    "generator_state": (_generator_state, False), "s1": (_s1, True), "normal": (_normal, True),
    "zeros": (_zeros, False), "flt_noise": (_flt_noise, True),
    "flt_spectrum": (_per_head(_flt_spectrum), True), "flt_proposal": (_per_head(_flt_proposal), False),
}


def _spectrum_count(*, family, components, D, heads=None, **_):
    T = components
    per_head = {"gaussian_mixture": 2 * T + T * D, "gaussian_basis": 2 * T, "box": T + T * D,
                "bspline": 1 + D, "sin_power": 1 + D}.get(family, 2)              # kernels: C and length
    return per_head * (1 if heads is None else heads)


#: sampler name -> ``(itemsize, **args) -> bytes`` of what it returns (its array leaves), computed from the
#: declaration alone so that a configuration's cost is known before anything is drawn (:func:`model_nbytes`;
#: ``tests/nn/test_checkpoint.py`` compares each with a real draw of every kind).
SAMPLER_NBYTES = {
    "projection": lambda s, *, rows, cols, **_: rows * cols * s,
    "gmm": lambda s, *, components, d, covariance, **_: (components * (1 + d)
                                                          + components * d * (d if covariance == "full"
                                                                              else 1)) * s,
    "gmm_noise": lambda s, *, m, d, **_: m * d * s,                                  # (C, M/C, d)
    "fastfood": lambda s, *, m, **_: 3 * m * s + 8 * m,                              # S, G, B + int64 perm
    "generator": lambda s, *, d, n_hidden=4, **_: ((n_hidden + 1) * (d * d + d) + 2 * n_hidden * d) * s,
    "generator_noise": lambda s, *, m, d, **_: m * d * s,
    "generator_state": lambda s, *, d, n_hidden=4, **_: 2 * n_hidden * d * s,
    "s1": lambda s, *, n_axes, n_lengthscales, heads=None, **_: (3 * (heads or 1) * n_axes * n_lengthscales
                                                                  * s),
    "normal": lambda s, *, shape, **_: math.prod(shape) * s,
    "zeros": lambda s, *, shape, **_: math.prod(shape) * s,
    "flt_noise": lambda s, *, r, D, **_: r * D * s,
    "flt_spectrum": lambda s, **a: _spectrum_count(**a) * s,
    "flt_proposal": lambda s, *, D, heads=None, **_: 2 * D * (1 if heads is None else heads) * s,
}


def declared_nbytes(declaration: dict, *, dtype) -> int:
    r"""Bytes of the arrays a kind's declaration ``{name: Draw}`` gives, from the declaration alone.

    Parameters
    ----------
    declaration : dict
        ``{name: Draw(sampler, args)}`` from a kind's ``params``/``features``/``shared``.
    dtype : numpy dtype
        float32 or float64 (integer leaves count 8 bytes each).

    Returns
    -------
    int
        The total size of the array leaves :func:`draw_declared` would return.

    Raises
    ------
    ValueError
        A sampler not in :data:`SAMPLER_NBYTES`.
    """
    unknown = sorted({d.sampler for d in declaration.values()} - set(SAMPLER_NBYTES))
    if unknown:
        raise ValueError(f"declaration: no size known for sampler(s) {unknown}; known: "
                         f"{sorted(SAMPLER_NBYTES)}")
    s = np.dtype(dtype).itemsize
    return sum(SAMPLER_NBYTES[d.sampler](s, **d.args) for d in declaration.values())


def model_nbytes(config) -> tuple[int, int]:
    r"""The bytes of the parameters and of one draw of the attention features the configuration implies.

    Counted from the configuration alone (no array is drawn): embeddings, positions, every block's dense
    layers, norms and attention kind parameters (S2's clipped tables, Toeplitz's offset table, S1's and FLT's
    positional parameters, spectra), the shared parameters, the head, and every layer's drawn arrays
    (projections, noises). :func:`init_transformer`, :func:`draw_attention_features` and
    :func:`refattn.nn.checkpoint.load` bound their sum by :mod:`refattn.limits` before allocating.

    Parameters
    ----------
    config : dict
        A transformer configuration (:func:`refattn.nn.config.check_config`).

    Returns
    -------
    params : int
        Bytes of the parameter tree of :func:`init_transformer`.
    features : int
        Bytes of one draw of :func:`draw_attention_features` (all layers).

    Raises
    ------
    ValueError
        A bad configuration.
    """
    cfg = check_config(config)
    s = np.dtype(cfg["dtype"]).itemsize
    att, H = cfg["attention"], cfg["n_heads"]
    d_head = cfg["d_model"] // H
    kind = ATTENTION_KINDS[att["kind"]]
    per_layer = declared_nbytes(kind.params(att, d_head=d_head, n_heads=H), dtype=cfg["dtype"])
    shared = 0 if kind.shared is None else declared_nbytes(kind.shared(att, d_head=d_head, n_heads=H),
                                                           dtype=cfg["dtype"])
    params = implied_param_count(cfg) * s + cfg["n_layers"] * per_layer + shared
    features = cfg["n_layers"] * declared_nbytes(kind.features(att, d_head=d_head, n_heads=H),
                                                 dtype=cfg["dtype"])
    return params, features


def draw_declared(rng, declaration: dict, *, dtype) -> dict:
    r"""Run a kind's declaration ``{name: Draw}`` with the ``refattn.random`` primitives it names.

    One random entry draws from `rng` itself; several get one child each (``rng.spawn``), in declaration
    order.

    Parameters
    ----------
    rng : numpy.random.Generator
        The stream to draw from.
    declaration : dict
        ``{name: Draw(sampler, args)}`` from a kind's ``params``/``features``/``shared``.
    dtype : numpy dtype
        float32 or float64.

    Returns
    -------
    dict
        ``{name: NumPy array or NamedTuple of them}``.

    Raises
    ------
    ValueError
        A sampler not in :data:`SAMPLERS`.
    MemoryError
        The declared arrays (:func:`declared_nbytes`) over :mod:`refattn.limits`' bound, before any is drawn.
    """
    unknown = sorted({d.sampler for d in declaration.values()} - set(SAMPLERS))
    if unknown:
        raise ValueError(f"declaration: unknown sampler(s) {unknown}; known: {sorted(SAMPLERS)}")
    check_nbytes(declared_nbytes(declaration, dtype=dtype),
                 f"declaration {sorted(declaration)} (draw_declared: the arrays it declares)")
    random_names = [n for n, d in declaration.items() if SAMPLERS[d.sampler][1]]
    streams = [rng] if len(random_names) == 1 else rng.spawn(len(random_names))
    rngs = dict(zip(random_names, streams, strict=True))
    return {n: SAMPLERS[d.sampler][0](rngs.get(n), dtype=dtype, **d.args) for n, d in declaration.items()}


def _check_model_bytes(cfg):
    """Fail before allocating (or spawning a stream per layer) when the parameters and drawn arrays the
    configuration implies (:func:`model_nbytes`) exceed refattn's bound."""
    params, features = model_nbytes(cfg)
    att = {k: v for k, v in cfg["attention"].items() if v is not None}
    check_nbytes(params + features,
                 f"config (n_layers = {cfg['n_layers']}, d_model = {cfg['d_model']}, d_ff = {cfg['d_ff']}, "
                 f"vocab_size = {cfg['vocab_size']}, attention = {att}): the parameters ({params} bytes) and "
                 f"drawn attention arrays ({features} bytes) it implies")


def _torch_linear(rng, d_in, d_out, *, dtype):
    """torch.nn.Linear's default initialisation: ``W, b ~ U(-1/sqrt(d_in), 1/sqrt(d_in))`` (kaiming-uniform
    with a = sqrt(5)); output entries for unit-variance inputs have variance 1/3, against Glorot's
    ``2 d_in / (d_in + d_out)`` (1 for a square layer)."""
    a = 1.0 / math.sqrt(d_in)
    return DenseParams(W=rng.uniform(-a, a, size=(d_in, d_out)).astype(dtype),
                       b=rng.uniform(-a, a, size=d_out).astype(dtype))


def init_mha(rng, d_model, n_heads, attention, *, dtype=np.float64, include_shared=True, qk_init="glorot"):
    r"""Initial multi-head attention parameters (NumPy), for :func:`refattn.nn.mha.mha`.

    A kind's parameters shared across layers (``kind.shared``, e.g. FLT's per-head spectra) are included
    for a lone layer (``include_shared=True``); :func:`init_transformer` draws them once, in
    ``params["shared"]``. Dense layers are Glorot-uniform with zero bias (:func:`refattn.random.init_dense`).

    Parameters
    ----------
    rng : numpy.random.Generator
        Required (``None`` is rejected); split into one child per projection and one for the kind.
    d_model : int
        Model width D.
    n_heads : int
        Number of heads H (dividing D).
    attention : dict or str
        Attention configuration (:func:`refattn.nn.config.check_attention_config`).
    dtype : float32 or float64
        Dtype of the arrays.
    include_shared : bool
        Also draw the kind's shared parameters into ``"attn"``.
    qk_init : {"glorot", "torch"}
        The query and key projections: Glorot-uniform with zero bias, or torch.nn.Linear's default
        (``W, b ~ U(-1/sqrt(D), 1/sqrt(D))``, as in the Performer code Horn et al. build on: query/key
        entries of standard deviation ~0.58 for unit-variance inputs, against ~1.0 for Glorot).

    Returns
    -------
    dict
        ``{"q", "k", "v", "o": DenseParams(W: (D, D), b: (D,)), "attn": kind parameters}``, NumPy arrays.

    Raises
    ------
    TypeError
        `rng` not a ``numpy.random.Generator``, or a bad `dtype`.
    ValueError
        `d_model`/`n_heads` not positive integers, `n_heads` not dividing `d_model`, or a bad attention
        configuration.
    MemoryError
        The projections over :mod:`refattn.limits`' memory bound.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.nn import init_mha
    >>> params = init_mha(np.random.default_rng(0), 8, 2, "favor")
    >>> sorted(params), params["q"].W.shape
    (['attn', 'k', 'o', 'q', 'v'], (8, 8))
    """
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    d_model, n_heads = check_positive_int(d_model, "d_model"), check_positive_int(n_heads, "n_heads")
    if d_model % n_heads:
        raise ValueError(f"n_heads: the number of heads {n_heads} must divide d_model = {d_model}")
    check_nbytes(4 * (d_model * d_model + d_model) * dt.itemsize,
                 f"d_model (init_mha: four ({d_model}, {d_model}) projections)")
    d_head = d_model // n_heads
    att = check_attention_config(attention, d_head=d_head, n_heads=n_heads)
    kind = ATTENTION_KINDS[att["kind"]]
    own = declared_nbytes(kind.params(att, d_head=d_head, n_heads=n_heads), dtype=dt)
    if include_shared and kind.shared is not None:
        own += declared_nbytes(kind.shared(att, d_head=d_head, n_heads=n_heads), dtype=dt)
    check_nbytes(4 * (d_model * d_model + d_model) * dt.itemsize + own,
                 f"attention {att} (init_mha: the projections and the kind's parameters)")
    check_choice(qk_init, "qk_init", QK_INITS)
    r = rng.spawn(5)
    out = {name: init_dense(ri, d_model, d_model, dtype=dt) for name, ri in zip("qkvo", r[:4], strict=True)}
    if qk_init == "torch":                                  # the same child streams, torch's law
        out["q"], out["k"] = (_torch_linear(ri, d_model, d_model, dtype=dt) for ri in r[:2])
    declared = kind.params(att, d_head=d_head, n_heads=n_heads)
    out["attn"] = draw_declared(r[4], declared, dtype=dt)
    if include_shared and kind.shared is not None:
        out["attn"].update(draw_declared(rng.spawn(1)[0], kind.shared(att, d_head=d_head, n_heads=n_heads),
                                         dtype=dt))
    if kind.store is not None:                            # the kind's unconstrained stored form
        out["attn"] = kind.store(out["attn"])
    return out


_RNG_CONFIG = """
rng : numpy.random.Generator
    Required (``None`` is rejected).
config : dict
    A transformer configuration (:func:`refattn.nn.config.check_config`).
"""

_RAISES = """
TypeError
    `rng` not a ``numpy.random.Generator``.
ValueError
    A bad configuration.
MemoryError
    The parameters the configuration implies (and the masks, for :func:`draw_dropout_masks`) over
    :mod:`refattn.limits`' memory bound, checked before anything is drawn.
"""


@fill_doc(rng_config=_RNG_CONFIG, raises=_RAISES)
def draw_attention_features(rng, config):
    r"""One dict of drawn attention arrays per layer (``None`` for kinds that draw nothing), NumPy.

    Each layer gets its own independent child stream (``rng.spawn``).

    Parameters
    ----------
    {rng_config}

    Returns
    -------
    list
        ``config["n_layers"]`` entries: the kind's drawn arrays (e.g. ``{"omega": (m, d)}`` for FAVOR+) or
        None.

    Raises
    ------
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.nn import draw_attention_features
    >>> config = {"task": "lm", "vocab_size": 11, "d_model": 8, "n_heads": 2, "n_layers": 2, "max_len": 6,
    ...           "attention": {"kind": "favor", "m": 16}}
    >>> features = draw_attention_features(np.random.default_rng(0), config)
    >>> len(features), features[0]["omega"].shape                    # (m, d_head)
    (2, (16, 4))
    """
    check_rng(rng)
    cfg = check_config(config)
    _check_model_bytes(cfg)
    att = cfg["attention"]
    d_head, n_heads = cfg["d_model"] // cfg["n_heads"], cfg["n_heads"]
    declared = ATTENTION_KINDS[att["kind"]].features(att, d_head=d_head, n_heads=n_heads)
    dt = np.dtype(cfg["dtype"])
    return [draw_declared(r, declared, dtype=dt) if declared else None for r in rng.spawn(cfg["n_layers"])]


def features_for_step(seed, step, config):
    r"""The attention features in use at training step `step`, a pure function of ``(seed, step, config)``.

    Policy ``config["attention"]["redraw_every"]``: ``None`` keeps one draw for the whole run, ``k`` redraws
    every k steps (``1``: every step); see :func:`refattn.random.rng_for_step`.

    Parameters
    ----------
    seed : int
        The run's seed.
    step : int
        Training step.
    config : dict
        A transformer configuration.

    Returns
    -------
    list
        As :func:`draw_attention_features`.
    """
    cfg = check_config(config)
    return draw_attention_features(rng_for_step(seed, step, cfg["attention"]["redraw_every"]), cfg)


@fill_doc(rng_config=_RNG_CONFIG, raises=_RAISES)
def init_transformer(rng, config):
    r"""Initial parameters of the model described by `config` (:mod:`refattn.nn.transformer`), NumPy.

    Streams: one child of `rng` per component (embedding, positions, each block, head), so adding a layer does
    not change the others' draws. Dense layers Glorot-uniform with zero bias, embeddings ``N(0, 0.02^2)``,
    layer norms ones/zeros. The class token (``readout="class-token"``) ``N(0, 1)`` as Horn et al.'s code
    (``train.py`` l. 49, 59), from one more child stream spawned last, so the other parameters are those of
    the same configuration with another readout.

    Parameters
    ----------
    {rng_config}

    Returns
    -------
    dict
        The nested parameter tree of the module docstring of :mod:`refattn.nn.transformer`, NumPy arrays in
        ``config["dtype"]``; move it with :func:`refattn.random.tree_as_xp`.

    Raises
    ------
    {raises}
    """
    check_rng(rng)
    cfg = check_config(config)
    _check_model_bytes(cfg)
    dt = np.dtype(cfg["dtype"])
    D, n_layers = cfg["d_model"], cfg["n_layers"]
    r_embed, r_pos, r_head, *r_blocks = rng.spawn(3 + n_layers)
    params: dict = {}
    if cfg["input"] == "tokens":
        params["embed"] = init_embedding(r_embed, cfg["vocab_size"], D, dtype=dt)
    else:
        p = cfg["patch"]
        params["embed"] = init_dense(r_embed, p * p * cfg["image_shape"][2], D, dtype=dt)
    if cfg["position"] == "learned":
        params["pos"] = init_embedding(r_pos, cfg["max_len"], D, dtype=dt)
    blocks = []
    for rb in r_blocks:
        ra, r1, r2 = rb.spawn(3)
        blocks.append({
            "ln1": init_layernorm(D, dtype=dt),
            "attn": init_mha(ra, D, cfg["n_heads"], cfg["attention"], dtype=dt, include_shared=False,
                             qk_init=cfg["qk_init"]),
            "ln2": init_layernorm(D, dtype=dt),
            "ff1": init_dense(r1, D, cfg["d_ff"], dtype=dt),
            "ff2": init_dense(r2, cfg["d_ff"], D, dtype=dt),
        })
    params["blocks"] = blocks
    params["ln_f"] = init_layernorm(D, dtype=dt)
    n_out = cfg["n_classes"] if cfg["task"] == "classify" else cfg["vocab_size"]
    params["head"] = init_dense(r_head, D, n_out, dtype=dt)
    kind, att = ATTENTION_KINDS[cfg["attention"]["kind"]], cfg["attention"]
    H = cfg["n_heads"]
    shared = {} if kind.shared is None else kind.shared(att, d_head=D // H, n_heads=H)
    if shared:                      # one more child stream: the other components' draws do not change
        drawn = draw_declared(rng.spawn(1)[0], shared, dtype=dt)
        params["shared"] = {"attn": drawn if kind.store is None else kind.store(drawn)}
    if has_class_token(cfg):        # the last child stream: N(0, 1) as Horn et al.'s code (train.py l. 59)
        params["cls"] = rng.spawn(1)[0].standard_normal(D).astype(dt)               # (D,)
    return params


@fill_doc(rng_config=_RNG_CONFIG, raises=_RAISES)
def draw_dropout_masks(rng, config, batch_shape, L):
    r"""Inverted-dropout masks for one forward pass of the model of `config` (None when both rates are 0).

    One dict per layer (one child stream of `rng` each): ``"attn": (*batch_shape, H, L, d)`` with rate
    ``config["attn_dropout"]`` and ``"resid_attn"``, ``"resid_ff": (*batch_shape, L, D)`` with rate
    ``config["resid_dropout"]`` (entries are absent for a zero rate). Pass them as ``transformer_fwd(...,
    dropout=masks)``; evaluation passes none.

    Parameters
    ----------
    {rng_config}
    batch_shape : tuple of int
        The batch axes of the inputs.
    L : int
        Sequence length of the inputs (with a class token, ``readout="class-token"``, the masks cover the
        blocks' L + 1 positions).

    Returns
    -------
    list of dict or None
        One dict of NumPy masks per layer, or None.

    Raises
    ------
    {raises}
    """
    check_rng(rng)
    cfg = check_config(config)
    _check_model_bytes(cfg)
    pa, pr = cfg["attn_dropout"], cfg["resid_dropout"]
    if pa == 0 and pr == 0:
        return None
    dt = np.dtype(cfg["dtype"])
    batch = tuple(int(b) for b in batch_shape)
    H, D = cfg["n_heads"], cfg["d_model"]
    L = int(L) + (1 if has_class_token(cfg) else 0)          # the blocks' positions: the class token's too
    out = []
    for r in rng.spawn(cfg["n_layers"]):
        ra, r1, r2 = r.spawn(3)
        masks = {}
        if pa > 0:
            masks["attn"] = draw_dropout_mask(ra, batch + (H, L, D // H), pa, dtype=dt)      # (..., H, L, d)
        if pr > 0:
            masks["resid_attn"] = draw_dropout_mask(r1, batch + (L, D), pr, dtype=dt)        # (..., L, D)
            masks["resid_ff"] = draw_dropout_mask(r2, batch + (L, D), pr, dtype=dt)          # (..., L, D)
        out.append(masks)
    return out
