"""NumPy-only edge: initial parameters of the ``refattn.nn`` layers, dropout masks, and moving trees to a namespace.

Every function returns NumPy arrays inside the layers' NamedTuples (``DenseParams``, ``LayerNormParams``, ...);
move a whole tree with :func:`tree_as_xp` (``tree_as_xp(params, like=x)``). Functions that draw take the
required ``rng`` (a ``numpy.random.Generator``) first; the deterministic ones (layer/batch norm: ones and zeros)
take none.

Conventions (stated, so that a torch model can be built with the same parameters):

* ``init_dense``: Glorot/Xavier uniform ``W ~ U(-a, a)``, ``a = sqrt(6 / (d_in + d_out))``; ``b = 0``.
* ``init_embedding``: ``N(0, scale^2)`` entries (default ``scale = 0.02``, GPT-2's).
* ``init_layernorm`` / ``init_batchnorm``: ``gamma = 1``, ``beta = 0``; batch-norm running mean 0, variance 1.
* ``draw_dropout_mask``: inverted dropout, entries ``0`` w.p. ``rate`` and ``1/(1 - rate)`` otherwise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import as_xp, check_dtype_arg, check_rng

__all__ = ["init_dense", "init_layernorm", "init_batchnorm", "init_embedding", "draw_dropout_mask",
           "tree_as_xp", "tree_to_numpy", "ATTENTION_DRAWS", "init_mha", "draw_attention_features",
           "features_for_step", "init_transformer"]


def _pos(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name}: expected a positive integer; got {value!r}")
    return int(value)


def init_dense(rng, d_in, d_out, *, dtype=np.float64):
    """``DenseParams(W: (d_in, d_out) Glorot-uniform, b: (d_out,) zeros)`` as NumPy arrays."""
    from ..nn.dense import DenseParams

    check_rng(rng)
    dt = check_dtype_arg(dtype)
    d_in, d_out = _pos("d_in", d_in), _pos("d_out", d_out)
    a = math.sqrt(6.0 / (d_in + d_out))
    W = rng.uniform(-a, a, size=(d_in, d_out)).astype(dt)
    return DenseParams(W=W, b=np.zeros(d_out, dtype=dt))


def init_layernorm(d, *, dtype=np.float64):
    """``LayerNormParams(gamma = ones(d), beta = zeros(d))`` (deterministic)."""
    from ..nn.layernorm import LayerNormParams

    dt = check_dtype_arg(dtype)
    d = _pos("d", d)
    return LayerNormParams(gamma=np.ones(d, dtype=dt), beta=np.zeros(d, dtype=dt))


def init_batchnorm(d, *, dtype=np.float64):
    """``(BatchNormParams(ones, zeros), BatchNormState(mean = zeros, var = ones))`` (deterministic)."""
    from ..nn.batchnorm import BatchNormParams, BatchNormState

    dt = check_dtype_arg(dtype)
    d = _pos("d", d)
    return (BatchNormParams(gamma=np.ones(d, dtype=dt), beta=np.zeros(d, dtype=dt)),
            BatchNormState(mean=np.zeros(d, dtype=dt), var=np.ones(d, dtype=dt)))


def init_embedding(rng, n, d, *, scale=0.02, dtype=np.float64):
    """An ``(n, d)`` table with ``N(0, scale^2)`` entries (token or learned position embedding)."""
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    n, d = _pos("n", n), _pos("d", d)
    if not (isinstance(scale, (int, float)) and scale > 0):
        raise ValueError(f"scale: expected a positive number; got {scale!r}")
    return (scale * rng.standard_normal((n, d))).astype(dt)


def draw_dropout_mask(rng, shape, rate, *, dtype=np.float64):
    """Inverted-dropout mask of `shape`: ``0`` with probability `rate`, ``1/(1 - rate)`` otherwise."""
    check_rng(rng)
    dt = check_dtype_arg(dtype)
    if not (isinstance(rate, (int, float)) and 0 <= rate < 1):
        raise ValueError(f"rate: expected a dropout probability in [0, 1); got {rate!r}")
    keep = rng.random(tuple(shape)) >= rate
    return (keep / (1.0 - rate)).astype(dt)


def _map(f, tree):
    if tree is None:
        return None
    if isinstance(tree, dict):
        return {k: _map(f, v) for k, v in tree.items()}
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_map(f, v) for v in tree))
    if isinstance(tree, (tuple, list)):
        out = [_map(f, v) for v in tree]
        return type(tree)(out) if isinstance(tree, tuple) else out
    if isinstance(tree, (np.ndarray, np.generic)) or hasattr(tree, "__array_namespace__"):
        return f(tree)
    return tree


def tree_as_xp(tree: Any, *, like: Any) -> Any:
    """Every floating NumPy leaf of `tree` as an array of `like`'s namespace, dtype and device (integer leaves keep
    their integer dtype)."""
    import array_api_compat

    xp = array_api_compat.array_namespace(like)

    def conv(a):
        a = np.asarray(a)
        if np.issubdtype(a.dtype, np.floating):
            return as_xp(a, like=like)
        return xp.asarray(a, device=array_api_compat.device(like))

    return _map(conv, tree)


def tree_to_numpy(tree: Any) -> Any:
    """Every array leaf of `tree` as a NumPy array (the inverse of :func:`tree_as_xp`, for saving)."""
    import array_api_compat

    def conv(a):
        if isinstance(a, (np.ndarray, np.generic)):
            return np.array(a)
        if array_api_compat.is_cupy_array(a):
            return a.get()
        try:
            return np.array(np.asarray(a))
        except Exception:  # array_api_strict exposes its buffer through DLPack
            return np.array(np.from_dlpack(a))

    return _map(conv, tree)


# ---- attention kinds: learnable parameters and drawn features (the edge half of refattn.nn.mha's table) --------
def _no_params(rng, att, *, d_head, n_heads, dtype):
    return {}


def _no_features(rng, att, *, d_head, n_heads, dtype):
    return None


def _favor_features(rng, att, *, d_head, n_heads, dtype):
    from .performer import draw_gaussian, draw_orthogonal

    draw = draw_orthogonal if att["draw"] == "orthogonal" else draw_gaussian
    return {"omega": draw(rng, att["m"], d_head, dtype=dtype)}                     # (m, d) shared by the heads


def _draw_omega(rng, att, m_cols, dtype):
    from .performer import draw_gaussian, draw_orthogonal

    draw = draw_orthogonal if att["draw"] == "orthogonal" else draw_gaussian
    return {"omega": draw(rng, att["m"], m_cols, dtype=dtype)}


def _gmm_params(rng, att, *, d_head, n_heads, dtype):
    from .spectra import init_gmm

    return {"gmm": init_gmm(rng, att["components"], d_head, covariance=att["covariance"], dtype=dtype)}


def _gmm_features(rng, att, *, d_head, n_heads, dtype):
    from .spectra import draw_gmm_noise

    return {"noise": draw_gmm_noise(rng, att["components"], att["m"], d_head, dtype=dtype)}   # (C, M/C, d)


def _fastfood_params(rng, att, *, d_head, n_heads, dtype):
    from .spectra import draw_fastfood

    # S, G, B are learnable (drawn once at initialisation); perm is a fixed integer array stored with them
    return {"fastfood": draw_fastfood(rng, att["m"], d_head, s_law=att["s_law"], dtype=dtype)}


def _generator_params(rng, att, *, d_head, n_heads, dtype):
    from .spectra import init_generator

    return {"generator": init_generator(rng, d_head, dtype=dtype)[0]}


def _generator_features(rng, att, *, d_head, n_heads, dtype):
    from ..features.generative import GeneratorState
    from .spectra import draw_generator_noise

    # the generator runs with batch statistics of the M noise rows (train mode) at training and evaluation;
    # the running statistics are not tracked by the transformer, so the state is the initial one
    state = GeneratorState(norms=tuple(init_batchnorm(d_head, dtype=dtype)[1] for _ in range(4)))
    return {"noise": draw_generator_noise(rng, att["m"], d_head, dtype=dtype), "state": state}


def _s1_params(rng, att, *, d_head, n_heads, dtype):
    from .positional import init_s1_params

    return {"s1": init_s1_params(rng, 1, att["lengthscales"], dtype=dtype)}        # (A = 1, S), shared by heads


def _s1_features(rng, att, *, d_head, n_heads, dtype):
    if att["features"] is None:
        return None
    return _draw_omega(rng, att, d_head + 2 * att["lengthscales"], dtype)          # (m, d + P)


def _s2_params(rng, att, *, d_head, n_heads, dtype):
    # one table per positional head; the first content_heads heads (default H // 2) are content heads without one
    n_content = n_heads // 2 if att.get("content_heads") is None else att["content_heads"]
    R = att["clip"] + 1 if att["grid"] is not None else 2 * att["clip"] + 1
    w = rng.standard_normal((n_heads - n_content, R, d_head)) / math.sqrt(d_head)    # (H - C, R, d)
    return {"w": w.astype(dtype)}


def _s2_features(rng, att, *, d_head, n_heads, dtype):
    return None if att["features"] is None else _draw_omega(rng, att, d_head, dtype)


def _toeplitz_params(rng, att, *, d_head, n_heads, dtype):
    if att["max_len"] is None:
        raise ValueError("attention.max_len: required for kind 'toeplitz' (the coefficient table covers offsets "
                         "-(max_len-1)..(max_len-1)); the transformer fills it from config['max_len']")
    # log-coefficients b(t) for offsets t = -(max_len-1)..(max_len-1), per head; exp(0) = 1: no RPE at start
    return {"log_coeffs": np.zeros((n_heads, 2 * att["max_len"] - 1), dtype=dtype)}


def _toeplitz_features(rng, att, *, d_head, n_heads, dtype):
    return None if att["feature_map"] == "elu" else _draw_omega(rng, att, d_head, dtype)


def _flt_dim(att):
    return 1 if att["grid"] is None else 2


def _flt_params(rng, att, *, d_head, n_heads, dtype):
    from ..rpe.spectra import GaussianKernel, GaussianMixture, Proposal

    D = _flt_dim(att)
    if att["spectrum"] == "gaussian_mixture":
        T = att["components"]
        spectrum = GaussianMixture(w=np.full(T, 1.0 / T, dtype=dtype),
                                   mu=(0.1 * rng.standard_normal((T, D))).astype(dtype),
                                   sigma=np.full(T, 0.1, dtype=dtype))
        scale = 0.2                          # twice the components' width: int |g|^2 / p stays finite
    else:
        spectrum = GaussianKernel(C=np.asarray(1.0, dtype=dtype), length=np.asarray(2.0, dtype=dtype))
        scale = 1.0 / (2 * math.pi * 2.0)    # the kernel's own spectral density (optimal proposal, App. A.4)
    proposal = Proposal("gaussian", np.zeros(D, dtype=dtype), np.full(D, scale, dtype=dtype))
    return {"spectrum": spectrum, "proposal": proposal}


def _flt_features(rng, att, *, d_head, n_heads, dtype):
    from .positional import draw_flt_noise

    r_eps, r_omega = rng.spawn(2)
    out = {"eps": draw_flt_noise(r_eps, att["r"], _flt_dim(att), "gaussian", dtype=dtype)}   # (r, D)
    out.update(_draw_omega(r_omega, att, 2 * att["r"] + d_head, dtype))                    # (m, 2r + d)
    return out


#: kind -> (init_params(rng, att, *, d_head, n_heads, dtype) -> dict,
#:          draw_features(rng, att, *, d_head, n_heads, dtype) -> dict | None).
#: Same keys as ``refattn.nn.mha.ATTENTION_KINDS``.
ATTENTION_DRAWS = {
    "softmax": (_no_params, _no_features),
    "elu": (_no_params, _no_features),
    "relu": (_no_params, _no_features),
    "favor": (_no_params, _favor_features),
    "gmm": (_gmm_params, _gmm_features),
    "fastfood": (_fastfood_params, _no_features),
    "generative": (_generator_params, _generator_features),
    "s1": (_s1_params, _s1_features),
    "s2": (_s2_params, _s2_features),
    "toeplitz": (_toeplitz_params, _toeplitz_features),
    "flt": (_flt_params, _flt_features),
}


def init_mha(rng, d_model, n_heads, attention, *, dtype=np.float64):
    """MHA parameters ``{"q", "k", "v", "o": DenseParams (D, D), "attn": kind parameters}`` (NumPy)."""
    from ..nn.mha import check_attention_config

    check_rng(rng)
    dt = check_dtype_arg(dtype)
    att = check_attention_config(attention, d_head=d_model // n_heads, n_heads=n_heads)
    r = rng.spawn(5)
    init_params, _ = ATTENTION_DRAWS[att["kind"]]
    out = {name: init_dense(ri, d_model, d_model, dtype=dt) for name, ri in zip("qkvo", r[:4])}
    out["attn"] = init_params(r[4], att, d_head=d_model // n_heads, n_heads=n_heads, dtype=dt)
    return out


def draw_attention_features(rng, config):
    """One dict of drawn attention arrays per layer (``None`` entries for kinds that draw nothing), NumPy.

    `config` is a transformer configuration (``refattn.nn.transformer.check_config``); each layer gets its own
    independent child stream (``rng.spawn``).
    """
    from ..nn.transformer import check_config

    check_rng(rng)
    cfg = check_config(config)
    att = cfg["attention"]
    _, draw = ATTENTION_DRAWS[att["kind"]]
    d_head = cfg["d_model"] // cfg["n_heads"]
    return [draw(r, att, d_head=d_head, n_heads=cfg["n_heads"], dtype=np.dtype(cfg["dtype"]))
            for r in rng.spawn(cfg["n_layers"])]


def features_for_step(seed, step, config):
    """The attention features in use at training step `step`, a pure function of ``(seed, step, config)``.

    Policy ``config["attention"]["redraw_every"]``: ``None`` keeps one draw for the whole run, ``k`` redraws every
    k steps (``1``: every step); see :func:`refattn.random.rng_for_step`.
    """
    from . import rng_for_step
    from ..nn.transformer import check_config

    cfg = check_config(config)
    return draw_attention_features(rng_for_step(seed, step, cfg["attention"]["redraw_every"]), cfg)


def init_transformer(rng, config):
    """Initial parameters of the model described by `config` (``refattn.nn.transformer``), a nested dict of NumPy
    arrays in ``config["dtype"]``.

    Streams: one child of `rng` per component (embedding, positions, each block, head), so adding a layer does
    not change the others' draws. Dense layers Glorot-uniform with zero bias, embeddings ``N(0, 0.02^2)``, layer
    norms ones/zeros.
    """
    from ..nn.transformer import check_config

    check_rng(rng)
    cfg = check_config(config)
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
            "attn": init_mha(ra, D, cfg["n_heads"], cfg["attention"], dtype=dt),
            "ln2": init_layernorm(D, dtype=dt),
            "ff1": init_dense(r1, D, cfg["d_ff"], dtype=dt),
            "ff2": init_dense(r2, cfg["d_ff"], D, dtype=dt),
        })
    params["blocks"] = blocks
    params["ln_f"] = init_layernorm(D, dtype=dt)
    n_out = cfg["n_classes"] if cfg["task"] == "classify" else cfg["vocab_size"]
    params["head"] = init_dense(r_head, D, n_out, dtype=dt)
    return params
