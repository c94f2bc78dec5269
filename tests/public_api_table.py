"""The table of tests/test_public_api_fuzz.py: valid-call builders for every fuzzed public function (stems
share one), the exports without a builder yet (``PENDING``, with the reason) and the non-callable exports.

A builder ``(rng, sizes) -> Call`` returns a valid call; :class:`Call` names the array arguments to mutate and
which invalid classes are in fact valid for an argument (a free last axis, an elementwise input, ...).
"""

from __future__ import annotations

import numpy as np

import refattn
from refattn.nn import optim
from refattn.random import (draw_dropout_mask, draw_gaussian, init_batchnorm, init_dense, init_embedding,
                            init_layernorm)


# ---------------------------------------------------------------------------------------------------------
# A call: positional args (name -> value, in order), keyword args, the array paths to mutate, and the paths
# whose shape is free (elementwise inputs) or that may hold inf (masks).
class Call:
    def __init__(self, args, kw=None, arrays=None, free=(), inf_ok=(), empty_ok=True, batch=(), free_last=(),
                 int_ok=(), bwd_names=()):
        self.args, self.kw = dict(args), dict(kw or {})
        self.arrays = list(arrays) if arrays is not None else [n for n, v in self.args.items()
                                                                if isinstance(v, np.ndarray)]
        self.free, self.inf_ok, self.empty_ok = set(free), set(inf_ok), empty_ok
        self.batch = set(batch)  # arguments that share leading (batch) axes with another argument
        self.free_last = set(free_last)  # arguments whose last axis is a free size (v's d_v, a table's d)
        self.int_ok = set(int_ok)  # integer leaves allowed (index leaves of a parameter tree)
        self.bwd_names = tuple(bwd_names)  # how the backward names the parts of its cotangent (dQ_p, dN[0])
        self.dy_field = None  # the backward's cotangent: of this field of the output (omega, phi)
        self.values_unread = False  # reads only the shapes: dtype/NaN/inf classes may return a result
        self.accessor = False  # returns the caller's own arrays (computes nothing): only the type is checked
        self.accessor_paths = set()  # arguments passed through unchecked (transfers): any outcome but a crash
        self.nan_ok = set()  # arguments whose values are not read (a `like` array): NaN is not an error
        self.sizes = []  # integer size arguments: 'huge' (2**40) and 'non-int' (1.5) must raise naming them
        self.bad = []  # (path, bad value, label, names): a non-array argument's invalid value, must raise

    def get(self, path):
        top, *rest = path.split(".")
        obj = self.args[top] if top in self.args else self.kw[top]
        for p in rest:
            obj = obj[int(p)] if p.isdigit() else (obj[p] if isinstance(obj, dict) else getattr(obj, p))
        return obj

    def replaced(self, path, value):
        top, *rest = path.split(".")

        def put(obj, keys):
            if not keys:
                return value
            k, *more = keys
            if isinstance(obj, dict):
                return {**obj, k: put(obj[k], more)}
            if k.isdigit():
                items = list(obj)
                items[int(k)] = put(items[int(k)], more)
                return type(obj)(items) if not hasattr(obj, "_fields") else type(obj)(*items)
            return obj._replace(**{k: put(getattr(obj, k), more)})

        args, kw = dict(self.args), dict(self.kw)
        where = args if top in args else kw
        where[top] = put(where[top], rest)
        return args, kw


# ---------------------------------------------------------------------------------------------------------
# builders: (rng, sizes) -> Call for the forward; the backward reuses it
def _x(rng, s, *shape):
    return rng.standard_normal(shape) * 0.5


def b_elementwise(rng, s):
    return Call({"x": _x(rng, s, s["B"], s["L"], s["d"])}, free=("x",))


def b_dense(rng, s):
    return Call({"x": _x(rng, s, s["B"], s["L"], s["d"]), "params": init_dense(rng, s["d"], s["m"])},
                arrays=["x", "params.W", "params.b"])


def b_layernorm(rng, s):
    p = init_layernorm(s["d"])
    p = p._replace(gamma=p.gamma + rng.standard_normal(s["d"]) * 0.1)
    return Call({"x": _x(rng, s, s["B"], s["L"], s["d"]), "params": p},
                arrays=["x", "params.gamma", "params.beta"])


def b_batchnorm(rng, s):
    p, st_ = init_batchnorm(s["d"])
    return Call({"x": _x(rng, s, s["B"] + 1, s["L"], s["d"]), "params": p, "state": st_}, {"train": True},
                arrays=["x", "params.gamma", "params.beta", "state.mean", "state.var"])


def b_dropout(rng, s):
    x = _x(rng, s, s["B"], s["L"], s["d"])
    return Call({"x": x, "mask": draw_dropout_mask(rng, x.shape, 0.5)}, free=("x", "mask"))


def b_token(rng, s):
    return Call({"ids": rng.integers(0, s["m"], (s["B"], s["L"])),
                 "table": init_embedding(rng, s["m"], s["d"])},
                free=("ids",), free_last=("table",))


def b_patch_embedding(rng, s):
    return Call({"images": _x(rng, s, s["B"], 4, 4, 2), "params": init_dense(rng, 8, s["d"])}, {"patch": 2},
                arrays=["images", "params.W", "params.b"])


def b_patchify(rng, s):
    return Call({"images": _x(rng, s, s["B"], 4, 4, 2), "patch": 2}, free_last=("images",))


def b_unpatchify(rng, s):
    return Call({"patches": _x(rng, s, s["B"], 4, 8), "patch": 2, "image_shape": (4, 4, 2)})


def b_position(rng, s):
    return Call({"x": _x(rng, s, s["B"], s["L"], s["d"]), "table": _x(rng, s, s["L"] + 1, s["d"])})


def b_xent(rng, s):
    return Call({"logits": _x(rng, s, s["B"], s["L"], s["m"]),
                 "labels": rng.integers(0, s["m"], (s["B"], s["L"]))}, empty_ok=False,
                batch=("logits", "labels"),
                free_last=("logits",))


def b_mse(rng, s):
    return Call({"pred": _x(rng, s, s["B"], s["L"]), "target": _x(rng, s, s["B"], s["L"])}, empty_ok=False,
                batch=("pred", "target"))


def b_one_hot(rng, s):
    return Call({"labels": rng.integers(0, s["m"], (s["B"], s["L"])), "C": s["m"]},
                {"dtype": np.float64, "xp": np}, free=("labels",))


def b_xomega(rng, s):
    return Call({"x": _x(rng, s, s["B"], s["L"], s["d"]), "omega": draw_gaussian(rng, s["m"], s["d"])})


def b_qk(rng, s):
    return Call({"q": _x(rng, s, s["B"], s["L"], s["d"]), "k": _x(rng, s, s["B"], s["L"] + 1, s["d"])},
                batch=("q", "k"))


def b_feat_x(rng, s):
    return Call({"x": _x(rng, s, s["B"], s["L"], s["d"])}, free_last=("x",))


def b_fwht(rng, s):
    return Call({"x": _x(rng, s, s["B"], 4)})


def b_softmax_attention(rng, s):
    q, k, v = (_x(rng, s, s["B"], s["L"], s["d"]) for _ in range(3))
    return Call({"q": q, "k": k, "v": v}, batch=("q", "k", "v"), free_last=("v",))


def b_linear_attention(rng, s):
    pq, pk = (np.exp(_x(rng, s, s["B"], s["L"], s["m"])) for _ in range(2))
    return Call({"phi_q": pq, "phi_k": pk, "v": _x(rng, s, s["B"], s["L"], s["d"])},
                batch=("phi_q", "phi_k", "v"), free_last=("v",))


def b_favor(rng, s):
    q, k, v = (_x(rng, s, s["B"], s["L"], s["d"]) for _ in range(3))
    return Call({"q": q, "k": k, "v": v, "omega": draw_gaussian(rng, s["m"], s["d"])}, batch=("q", "k", "v"),
                free_last=("v",))


def b_kernel_attention(rng, s):
    q, k, v = (_x(rng, s, s["B"], s["L"], s["d"]) for _ in range(3))
    return Call({"q": q, "k": k, "v": v, "kernel": refattn.softmax_kernel}, batch=("q", "k", "v"),
                free_last=("v",))


def b_step(rng, s):
    return Call({"state": None, "phi_q_t": np.exp(_x(rng, s, s["B"], s["m"])),
                 "phi_k_t": np.exp(_x(rng, s, s["B"], s["m"])), "v_t": _x(rng, s, s["B"], s["d"])},
                batch=("phi_q_t", "phi_k_t", "v_t"), free_last=("v_t",))


def _tree(rng, s):
    return {"a": _x(rng, s, s["d"], s["m"]), "b": {"c": _x(rng, s, s["m"])}}


def b_sgd(rng, s):
    p = _tree(rng, s)
    return Call({"params": p, "grads": _tree(rng, s), "state": optim.sgd_init(p)}, {"lr": 0.1},
                arrays=["params.a", "params.b.c", "grads.a", "grads.b.c", "state.velocity.a"])


def b_adam(rng, s):
    p = _tree(rng, s)
    return Call({"params": p, "grads": _tree(rng, s), "state": optim.adam_init(p)},
                arrays=["params.a", "params.b.c", "grads.a", "grads.b.c", "state.m.a", "state.v.b.c"])


_LEAVES = ("a", "b.c")


def b_init_tree(rng, s):
    arrays = [f"params.{n}" for n in _LEAVES]  # integer leaves: index parameters without state
    return Call({"params": _tree(rng, s)}, arrays=arrays, free=arrays, int_ok=arrays)


def b_global_norm(rng, s):  # any leaf shapes; integer (index) leaves are skipped, as documented
    arrays = [f"grads.{n}" for n in _LEAVES]
    return Call({"grads": _tree(rng, s)}, arrays=arrays, free=arrays, int_ok=arrays)


def b_clip(rng, s):
    arrays = [f"grads.{n}" for n in _LEAVES]
    return Call({"grads": _tree(rng, s), "max_norm": 1.0}, arrays=arrays, free=arrays, int_ok=arrays)


def b_fastfood(rng, s):
    from refattn.random import draw_fastfood

    D = refattn.features.padded_dim(s["d"])
    return Call({"x": _x(rng, s, s["B"], s["L"], s["d"]), "params": draw_fastfood(rng, 2 * D, s["d"])},
                arrays=["x", "params.S", "params.G", "params.B", "params.perm"], free_last=("x",))  # d <= D


def b_fastfood_matrix(rng, s):
    from refattn.random import draw_fastfood

    D = refattn.features.padded_dim(s["d"])
    return Call({"params": draw_fastfood(rng, 2 * D, s["d"]), "d": s["d"]},
                arrays=["params.S", "params.G", "params.B", "params.perm"])


def b_padded_dim(rng, s):
    return Call({"d": s["d"]}, arrays=[])


def _gmm(rng, s):
    from refattn.random import init_gmm

    p = init_gmm(rng, 2, s["d"], mu_scale=0.3)
    return p._replace(S=p.S * 0.5)


def b_gmm_features(rng, s):
    from refattn.random import draw_gmm_noise

    return Call({"x": _x(rng, s, s["B"], s["L"], s["d"]), "noise": draw_gmm_noise(rng, 2, 2 * s["m"], s["d"]),
                 "params": _gmm(rng, s)}, arrays=["x", "noise", "params.logits", "params.mu", "params.S"])


def b_gmm_frequencies(rng, s):
    from refattn.random import draw_gmm_noise

    return Call({"noise": draw_gmm_noise(rng, 2, 2 * s["m"], s["d"]), "params": _gmm(rng, s)},
                arrays=["noise", "params.logits", "params.mu", "params.S"])


def b_gmm_kernel(rng, s):
    return Call({"q": _x(rng, s, s["B"], s["L"], s["d"]), "k": _x(rng, s, s["B"], s["L"] + 1, s["d"]),
                 "params": _gmm(rng, s)}, arrays=["q", "k", "params.logits", "params.mu", "params.S"],
                batch=("q", "k"))


def b_qk_m(rng, s):
    c = b_qk(rng, s)
    c.args["m"] = 4
    return c


def b_gmm_mse(rng, s):
    c = b_gmm_kernel(rng, s)
    c.args["M"] = 4
    return c


def b_gmm_antithetic_mse(rng, s):
    return Call({"q": _x(rng, s, s["B"], s["L"], s["d"]), "k": _x(rng, s, s["B"], s["L"] + 1, s["d"]),
                 "mu": _x(rng, s, s["d"]), "S": _x(rng, s, s["d"], s["d"]), "M": 4}, batch=("q", "k"))


def b_gmm_antithetic_params(rng, s):
    return Call({"mu": _x(rng, s, s["d"]), "S": _x(rng, s, s["d"], s["d"])})


def b_gmm_weights(rng, s):
    return Call({"logits": _x(rng, s, 3)}, empty_ok=False, free_last=("logits",))


# size-argument builders for the NumPy edge: 'huge' passes an oversized int for each size argument
def b_sizes(*names, extra=None, pos_rng=True):
    def build(rng, s):
        args = {"rng": rng} if pos_rng else {}
        for n in names:
            args[n] = {"m": s["m"], "d": s["d"], "d_in": s["d"], "d_out": s["m"], "n": s["m"],
                       "M": 2 * s["m"],
                       "C": 2, "d_noise": s["d"]}.get(n, s["d"])
        args.update(extra or {})
        return _sized(args, names)
    return build


def b_init_gmm_authors(rng, s):
    return _sized({"rng": rng, "C": 2, "d": s["d"]}, ["C", "d"], kw={"features": "rks", "heads": 2})


def _sized(args, names, kw=None):
    c = Call(args, kw, arrays=[])
    c.sizes = list(names)
    return c


# refattn.rpe (the boundary contract of its package docstring; tests/rpe/test_boundary.py checks the
# messages and the empty results in detail)
def _s1(rng, s):
    from refattn.random import init_s1_params

    return init_s1_params(rng, 1, 2)


_S1 = ["params.freqs", "params.alpha", "params.beta"]


def b_s1_positional(rng, s):  # positions: indices by nature (integers allowed), any L
    return Call({"positions": np.arange(s["L"]) * 1.0, "params": _s1(rng, s)}, arrays=["positions", *_S1],
                free_last=("positions",), int_ok=("positions",), bwd_names=("dQ_p", "dK_p"))


def b_s1_relative_matrix(rng, s):
    c = b_s1_positional(rng, s)
    c.bwd_names = ()
    return c


def b_s1_relative_term(rng, s):
    return Call({"delta": _x(rng, s, s["L"]), "params": _s1(rng, s)}, arrays=["delta", *_S1],
                free=("delta",))  # (...,) offsets when A = 1: any shape


def b_s1_augment(rng, s):
    return Call({"q": _x(rng, s, s["B"], s["L"], s["d"]), "k": _x(rng, s, s["B"], s["L"], s["d"]),
                 "positions": np.arange(s["L"]) * 1.0, "params": _s1(rng, s)},
                arrays=["q", "k", "positions", *_S1], batch=("q", "k"), int_ok=("positions",),
                bwd_names=("dQ", "dK", "dq_aug", "dk_aug"))


def b_s1_attention(rng, s):
    q, k, v = (_x(rng, s, s["B"], s["L"], s["d"]) for _ in range(3))
    return Call({"q": q, "k": k, "v": v, "positions": np.arange(s["L"]) * 1.0, "params": _s1(rng, s)},
                {"omega": draw_gaussian(rng, s["m"], s["d"] + 4)},
                arrays=["q", "k", "v", "positions", *_S1, "omega"], batch=("q", "k", "v"), free_last=("v",),
                int_ok=("positions",))


def b_s2_attention(rng, s):  # 1-D signed distances clipped at k = 2: w holds 2k + 1 rows
    return Call({"q": _x(rng, s, s["B"], s["L"], s["d"]), "v": _x(rng, s, s["B"], s["L"], s["d"]),
                 "w": _x(rng, s, 5, s["d"])}, {"k": 2}, batch=("q", "v"), free_last=("v",))


def b_s2_logits(rng, s):
    return Call({"q": _x(rng, s, s["B"], s["L"], s["d"]), "w": _x(rng, s, 5, s["d"])}, {"k": 2})


def b_s2_class_index(rng, s):
    return _sized({"L": s["L"], "k": 2}, ["L"], kw={"xp": np})


def b_toeplitz(rng, s):
    pq, pk = (np.exp(_x(rng, s, s["B"], s["L"], s["m"])) for _ in range(2))
    return Call({"phi_q": pq, "phi_k": pk, "v": _x(rng, s, s["B"], s["L"], s["d"]),
                 "coeffs": np.exp(_x(rng, s, 2 * s["L"] - 1))},
                batch=("phi_q", "phi_k", "v"), free_last=("v",))


def b_toeplitz_matrix(rng, s):
    c = _sized({"coeffs": np.exp(_x(rng, s, 2 * s["L"] - 1)), "L": s["L"]}, ["L"])
    c.arrays = ["coeffs"]
    return c


def _gm(rng, s):
    from refattn.rpe import GaussianMixture

    return GaussianMixture(np.abs(_x(rng, s, 2)) + 0.1, _x(rng, s, 2, 2), np.array([0.5, 0.8]))


def _prop():
    from refattn.rpe import Proposal

    return Proposal("gaussian", np.zeros(2), np.asarray(3.0))


_GM = ["spectrum.w", "spectrum.mu", "spectrum.sigma"]
_PROP = ["proposal.loc", "proposal.scale"]


def b_spectrum_g(rng, s):  # xi: (r, D), any r
    return Call({"spectrum": _gm(rng, s), "xi": _x(rng, s, s["m"], 2)}, arrays=[*_GM, "xi"],
                bwd_names=("dg[0]",))


def b_spectrum_f(rng, s):  # delta: (..., D)
    return Call({"spectrum": _gm(rng, s), "delta": _x(rng, s, s["L"], 2)}, arrays=[*_GM, "delta"])


def b_rpe_mask(rng, s):
    return Call({"pos": _x(rng, s, s["L"], 2), "spectrum": _gm(rng, s)}, arrays=["pos", *_GM],
                int_ok=("pos",))


def b_spectrum(rng, s):  # a spectrum alone: its D (mu's last axis) is free
    return Call({"spectrum": _gm(rng, s)}, arrays=_GM, free_last=("spectrum.mu",))


def b_spectrum_arrays(rng, s):  # a structural accessor: returns the caller's own arrays, checks the type only
    c = b_spectrum(rng, s)
    c.accessor = True
    return c


def b_kernel_proposal(rng, s):
    from refattn.rpe import GaussianKernel

    c = _sized({"spectrum": GaussianKernel(np.asarray(1.5), np.asarray(0.7)), "D": 2}, ["D"])
    c.arrays = ["spectrum.C", "spectrum.length"]
    return c


def b_check_proposal(rng, s):
    return Call({"spectrum": _gm(rng, s), "proposal": _prop()}, arrays=[*_GM, *_PROP])


def b_check_proposal_shape(rng, s):
    return Call({"proposal": _prop(), "sizes": {"D": (2, "spectrum.mu")}}, arrays=_PROP)


def b_proposal_log_density(rng, s):  # eps: (r, D), any r and D
    return Call({"kind": "gaussian", "eps": _x(rng, s, s["m"], 2)}, free_last=("eps",))


def b_flt_frequencies(rng, s):
    return Call({"eps": _x(rng, s, s["m"], 2), "proposal": _prop()}, arrays=["eps", *_PROP])


def b_flt_importance_weights(rng, s):
    return Call({"eps": _x(rng, s, s["m"], 2), "spectrum": _gm(rng, s), "proposal": _prop()},
                arrays=["eps", *_GM, *_PROP])


def b_flt_features(rng, s):
    return Call({"pos": _x(rng, s, s["L"], 2), "eps": _x(rng, s, s["m"], 2), "spectrum": _gm(rng, s),
                 "proposal": _prop()}, arrays=["pos", "eps", *_GM, *_PROP], int_ok=("pos",),
                bwd_names=("dN[0]", "dN[1]"))


def b_flt_attention(rng, s):
    q, k, v = (_x(rng, s, s["B"], s["L"], s["d"]) for _ in range(3))
    c = b_flt_features(rng, s)
    return Call({"q": q, "k": k, "v": v, **c.args, "omega": draw_gaussian(rng, 3, 2 * s["m"] + s["d"])},
                arrays=["q", "k", "v", *c.arrays, "omega"], batch=("q", "k", "v"), free_last=("v",),
                int_ok=("pos",))


# Generative-RKS/PRF (KL paper Sec. 3.3): a one-hidden-layer generator keeps the calls small
_GEN = ["params.hidden.0.W", "params.hidden.0.b", "params.norms.0.gamma", "params.norms.0.beta",
        "params.out.W", "params.out.b", "state.norms.0.mean", "state.norms.0.var"]


def _generator(rng, s):
    from refattn.random import draw_generator_noise, init_generator

    params, state = init_generator(rng, s["d"], d_noise=2, width=3, n_hidden=1)
    return draw_generator_noise(rng, s["m"] + 1, 2), params, state  # M >= 3: batch statistics need M >= 2


def b_generator(rng, s):  # noise: (M, d_noise), any M
    noise, params, state = _generator(rng, s)
    c = Call({"noise": noise, "params": params, "state": state}, {"train": True}, arrays=["noise", *_GEN])
    c.dy_field = "omega"
    return c


def b_generator_param_count(rng, s):  # counts the scalars from the shapes: the values are not read
    c = b_generator(rng, s)
    c = Call({"params": c.args["params"]}, arrays=_GEN[:6])
    c.values_unread = True
    return c


def b_generative(rng, s):
    noise, params, state = _generator(rng, s)
    c = Call({"x": _x(rng, s, s["B"], s["L"], s["d"]), "noise": noise, "params": params, "state": state},
             {"train": True}, arrays=["x", "noise", *_GEN])
    c.dy_field = "phi"
    return c


def b_generative_stable(rng, s):
    c = b_generative(rng, s)
    c.dy_field = None
    return c


# refattn.nn: a one-layer causal LM (D = 4, H = 2, FAVOR+ with m = 4, so that drawn features travel too); a
# representative subset of the parameter tree's leaves is mutated (one of each kind of layer). Non-array
# arguments (configs, sizes, seeds) get `bad` values: each must raise naming the entry.
_D, _H, _V = 4, 2, 5


def _nn_config(**over):
    from refattn.nn import check_config

    return check_config(dict(task="lm", vocab_size=_V, d_model=_D, n_heads=_H, n_layers=1, max_len=8,
                             attention={"kind": "favor", "m": 4}, **over))


def _nn_model(rng, s):
    from refattn.nn import draw_attention_features, init_transformer

    cfg = _nn_config()
    return cfg, init_transformer(rng, cfg), draw_attention_features(rng, cfg)


_BLOCK = ["ln1.0", "attn.q.0", "attn.o.1", "ln2.1", "ff1.0", "ff2.1"]
_MODEL = ["params.embed", *(f"params.blocks.0.{n}" for n in _BLOCK), "params.ln_f.0", "params.head.0",
          "params.head.1", "features.0.omega"]
_BAD_CONFIG = [("n_heads", 3), ("vocab_size", 1.5), ("attention", "bogus"), ("max_len", 0), ("d_model", -4),
               ("n_layers", 2 ** 40)]


def _bad_config(cfg, model=False):
    """Invalid configurations; with `model`, also a valid one that disagrees with the parameters (d_model)."""
    bad = [("config", {**cfg, k: v}, f"config[{k}]", (k,)) for k, v in _BAD_CONFIG]
    mismatch = [("config", {**cfg, "d_model": 6}, "config[d_model] vs params", ("d_model",))]
    return bad + (mismatch if model else [])


def b_transformer(rng, s):  # token ids: any B and L <= max_len
    cfg, params, feats = _nn_model(rng, s)
    c = Call({"params": params, "inputs": rng.integers(0, _V, (s["B"], s["L"])), "features": feats},
             {"config": cfg}, arrays=[*_MODEL, "inputs"], free=("inputs",))
    c.bad = _bad_config(cfg, model=True)
    return c


def b_transformer_loss(rng, s):
    c = b_transformer(rng, s)
    ids = c.args.pop("inputs")
    c.args = {"params": c.args["params"], "inputs": ids, "labels": rng.integers(0, _V, ids.shape),
              "features": c.args["features"]}
    c.arrays, c.free, c.batch = [*_MODEL, "inputs", "labels"], set(), {"inputs", "labels"}
    c.empty_ok = False  # the mean loss of no tokens does not exist
    return c


def b_block(rng, s):
    cfg, params, feats = _nn_model(rng, s)
    return Call({"x": _x(rng, s, s["B"], s["L"], _D), "params": params["blocks"][0], "features": feats[0]},
                {"cfg": cfg}, arrays=["x", *(f"params.{n}" for n in _BLOCK), "features.omega"])


def b_mha(rng, s):
    cfg, params, feats = _nn_model(rng, s)
    return Call({"x": _x(rng, s, s["B"], s["L"], _D), "params": params["blocks"][0]["attn"],
                 "features": feats[0]}, {"n_heads": _H, "attention": cfg["attention"], "causal": True},
                arrays=["x", "params.q.0", "params.k.1", "params.v.0", "params.o.1", "features.omega"])


def b_split_heads(rng, s):  # a reshape: moves values, computes nothing
    c = Call({"x": _x(rng, s, s["B"], s["L"], _D), "n_heads": _H}, {"xp": np})
    c.values_unread = True
    c.bad = [("n_heads", 3, "n_heads", ("n_heads",)), ("n_heads", 0, "n_heads", ("n_heads",))]
    return c


def b_merge_heads(rng, s):  # (..., H, L, d): any d
    c = Call({"x": _x(rng, s, s["B"], _H, s["L"], 2)}, {"xp": np}, free_last=("x",))
    c.values_unread = True
    return c


def b_init_mha(rng, s):
    c = _sized({"rng": rng, "d_model": _D, "n_heads": _H, "attention": {"kind": "favor", "m": 4}},
               ["d_model", "n_heads"])
    c.bad = [("n_heads", 3, "n_heads", ("n_heads",)), ("attention", {"kind": "favor", "m": 0}, "attention.m",
                                                      ("attention",))]
    return c


def b_check_config(rng, s):
    cfg = _nn_config()
    c = Call({"config": cfg}, arrays=[])
    c.bad = _bad_config(cfg)[:-1] + [("config", {**cfg, "heads": 2}, "config[heads]", ("heads",))]
    return c


def b_check_attention_config(rng, s):
    c = Call({"attention": {"kind": "favor", "m": 4}}, {"d_head": 2, "n_heads": _H}, arrays=[])
    c.bad = [("attention", {"kind": "bogus"}, "kind", ("bogus",)),
             ("attention", {"kind": "favor", "m": 0}, "m", ("attention.m",)),
             ("attention", {"kind": "favor", "m": 1.5}, "m", ("attention.m",)),
             ("attention", {"kind": "favor", "mm": 4}, "option", ("mm",))]
    return c


def b_init_transformer(rng, s):
    cfg = _nn_config()
    c = Call({"rng": rng, "config": cfg}, arrays=[])
    c.bad = _bad_config(cfg) + [("config", {**cfg, "vocab_size": 2 ** 40}, "config[vocab_size] huge",
                                 ("vocab_size",)), ("rng", None, "rng", ("rng",))]
    return c


def b_draw_attention_features(rng, s):
    cfg = _nn_config()
    c = Call({"rng": rng, "config": cfg}, arrays=[])
    c.bad = _bad_config(cfg) + [("config", {**cfg, "attention": {"kind": "favor", "m": 2 ** 40}},
                                 "attention.m huge", ("m",)), ("rng", 7, "rng", ("rng",))]
    return c


def b_features_for_step(rng, s):
    cfg = _nn_config()
    c = Call({"seed": 3, "step": 2, "config": cfg}, arrays=[])
    c.bad = _bad_config(cfg)[:4] + [("seed", -1, "seed", ("seed",)), ("step", 1.5, "step", ("step",)),
                                    ("step", -1, "step", ("step",))]
    return c


# the NumPy edge: argument checks (rng, dtype, seeds) and transfers into a namespace. The transfers
# (as_xp, tree_as_xp, tree_to_numpy, gmm_as_xp, fastfood_as_xp) move values without computing on them
# (``accessor``): the consuming function checks them at its boundary; `like` must still be real floating.
def b_check_rng(rng, s):
    c = Call({"rng": rng}, arrays=[])
    c.bad = [("rng", None, "rng None", ("rng",)), ("rng", 7, "rng int", ("rng",)),
             ("rng", np.random.RandomState(0), "rng RandomState", ("rng",))]
    return c


def b_check_dtype_arg(rng, s):
    c = Call({"dtype": np.float32}, arrays=[])
    c.bad = [("dtype", v, f"dtype {v!r}", ("dtype",))
             for v in (np.int64, np.float16, "complex128", bool, "x")]
    return c


def b_rng_for_step(rng, s):
    c = Call({"seed": 3, "step": 5, "every": 2}, arrays=[])
    c.bad = [(n, v, f"{n} <- {v!r}", (n,)) for n, v in (("seed", -1), ("seed", 1.5), ("step", -1),
                                                         ("step", 1.5), ("every", 0), ("every", 1.5),
                                                         ("seed", "0"))]
    return c


def b_draw_dropout_mask(rng, s):
    c = Call({"rng": rng, "shape": (s["B"], s["L"]), "rate": 0.5}, arrays=[])
    c.bad = [("shape", (2 ** 40, 2 ** 20), "shape huge", ("shape",)),
             ("shape", (2, -1), "shape < 0", ("shape",)),
             ("shape", (2, 1.5), "shape non-int", ("shape",)), ("rate", 1.0, "rate 1", ("rate",)),
             ("rate", -0.1, "rate < 0", ("rate",)), ("rate", float("nan"), "rate nan", ("rate",)),
             ("rng", None, "rng None", ("rng",))]
    return c


def b_sinusoid_position_table(rng, s):  # like: its namespace and dtype only (any shape, values unread)
    c = _sized({"L": s["L"], "d": s["d"]}, ["L", "d"], kw={"like": np.zeros(2)})
    c.arrays, c.free, c.inf_ok, c.nan_ok = ["like"], {"like"}, {"like"}, {"like"}
    return c


def _like_call(args, arrays):
    c = Call({**args}, {"like": np.zeros(2)}, arrays=[*arrays, "like"], free=["like"], inf_ok=["like"])
    c.accessor_paths, c.nan_ok = set(arrays), {"like"}  # transferred values: not checked here
    return c


def b_as_xp(rng, s):
    return _like_call({"arr": _x(rng, s, s["L"], s["d"])}, ["arr"])


def b_tree_as_xp(rng, s):
    return _like_call({"tree": _tree(rng, s)}, ["tree.a", "tree.b.c"])


def b_tree_to_numpy(rng, s):
    c = Call({"tree": _tree(rng, s)}, arrays=["tree.a", "tree.b.c"])
    c.accessor = True
    return c


def b_gmm_as_xp(rng, s):
    return _like_call({"params": _gmm(rng, s)}, ["params.logits", "params.mu", "params.S"])


def b_fastfood_as_xp(rng, s):
    from refattn.random import draw_fastfood

    D = refattn.features.padded_dim(s["d"])
    return _like_call({"params": draw_fastfood(rng, 2 * D, s["d"])},
                      ["params.S", "params.G", "params.B", "params.perm"])


# (builder, fwd-name pattern) for every stem; bwd uses the stem's fwd
STEMS = {
    "relu": b_elementwise, "leaky_relu": b_elementwise, "tanh": b_elementwise, "gelu": b_elementwise,
    "dense": b_dense, "layernorm": b_layernorm, "batchnorm": b_batchnorm, "dropout": b_dropout,
    "token_embedding": b_token, "patch_embedding": b_patch_embedding, "position_embedding": b_position,
    "softmax_cross_entropy": b_xent, "mse": b_mse,
    "trig_features": b_xomega, "softmax_trig_features": b_xomega,
    "softmax_trig_features_stable": b_xomega,
    "positive_features": b_xomega, "positive_features_stable": b_xomega,
    "positive_key_features_stable": b_xomega,
    "hyperbolic_features": b_xomega, "hyperbolic_features_stable": b_xomega,
    "hyperbolic_key_features_stable": b_xomega, "gaussian_positive_features": b_xomega,
    "elu_features": b_feat_x, "relu_features": b_feat_x, "fwht": b_fwht,
    "fastfood_projection": b_fastfood, "fastfood_rks_features": b_fastfood,
    "fastfood_prf_features": b_fastfood,
    "fastfood_prf_features_stable": b_fastfood, "gmm_rks_features": b_gmm_features,
    "gmm_prf_features": b_gmm_features, "gmm_prf_features_stable": b_gmm_features,
    "gmm_frequencies": b_gmm_frequencies,
    "softmax_attention": b_softmax_attention, "linear_attention": b_linear_attention,
    "favor_attention": b_favor,
    "s1_positional": b_s1_positional, "s1_augment": b_s1_augment, "s1_attention": b_s1_attention,
    "s2_attention": b_s2_attention, "toeplitz_attention": b_toeplitz, "spectrum_g": b_spectrum_g,
    "flt_features": b_flt_features, "flt_attention": b_flt_attention,
    "generator": b_generator, "generative_rks_features": b_generative,
    "generative_prf_features": b_generative, "generative_prf_features_stable": b_generative_stable,
    "transformer": b_transformer, "mha": b_mha,
}
# stems exported as ``f_fwd`` and ``f_bwd`` only
FWD_BWD = {"transformer_loss": b_transformer_loss, "block": b_block}
PLAIN = {
    "patchify": b_patchify, "unpatchify": b_unpatchify, "one_hot": b_one_hot,
    "fastfood_matrix": b_fastfood_matrix, "padded_dim": b_padded_dim, "gmm_rks_kernel": b_gmm_kernel,
    "gmm_prf_kernel": b_gmm_kernel, "gmm_rks_mse": b_gmm_mse, "gmm_prf_mse": b_gmm_mse,
    "gmm_rks_antithetic_mse": b_gmm_antithetic_mse, "gmm_antithetic_params": b_gmm_antithetic_params,
    "gmm_weights": b_gmm_weights,
    "trig_mse": b_qk_m, "softmax_trig_mse": b_qk_m, "positive_mse": b_qk_m, "hyperbolic_mse": b_qk_m,
    "gaussian_positive_mse": b_qk_m,
    "softmax_kernel": b_qk, "gaussian_kernel": b_qk, "elu_kernel": b_qk, "relu_kernel": b_qk,
    "exp_dot_kernel": b_qk, "fastfood_rks_kernel": b_qk, "fastfood_prf_kernel": b_qk,
    "kernel_attention": b_kernel_attention, "linear_attention_step": b_step,
    "sgd_update": b_sgd, "adam_update": b_adam, "adamw_update": b_adam, "sgd_init": b_init_tree,
    "adam_init": b_init_tree, "global_norm": b_global_norm, "clip_by_global_norm": b_clip,
    "init_dense": b_sizes("d_in", "d_out"), "init_embedding": b_sizes("n", "d"),
    "init_layernorm": b_sizes("d", pos_rng=False), "init_batchnorm": b_sizes("d", pos_rng=False),
    "draw_gaussian": b_sizes("m", "d"), "draw_orthogonal": b_sizes("m", "d"),
    "draw_gmm_noise": b_sizes("C", "M", "d"), "draw_gmm_antithetic_noise": b_sizes("M", "d"),
    "draw_generator_noise": b_sizes("M", "d_noise"), "draw_fastfood": b_sizes("M", "d"),
    "init_gmm": b_sizes("C", "d"), "init_gmm_authors": b_init_gmm_authors, "init_generator": b_sizes("d"),
    "s1_relative_matrix": b_s1_relative_matrix, "s1_relative_term": b_s1_relative_term,
    "s2_attention_naive": b_s2_attention, "s2_logits": b_s2_logits, "s2_class_index": b_s2_class_index,
    "toeplitz_attention_dense": b_toeplitz, "toeplitz_matrix": b_toeplitz_matrix,
    "spectrum_f": b_spectrum_f, "rpe_mask": b_rpe_mask, "check_spectrum": b_spectrum,
    "spectrum_dim": b_spectrum, "spectrum_arrays": b_spectrum_arrays, "kernel_proposal": b_kernel_proposal,
    "check_proposal": b_check_proposal, "check_proposal_shape": b_check_proposal_shape,
    "proposal_log_density": b_proposal_log_density, "flt_frequencies": b_flt_frequencies,
    "flt_importance_weights": b_flt_importance_weights, "flt_mask_estimate": b_flt_features,
    "init_s1_params": b_sizes("n_axes", "n_lengthscales", extra={"n_axes": 1, "n_lengthscales": 2}),
    "draw_flt_noise": b_sizes("r", "D", extra={"r": 3, "D": 2}),
    "generator_param_count": b_generator_param_count,
    "loss_and_grads": b_transformer_loss, "split_heads": b_split_heads, "merge_heads": b_merge_heads,
    "init_mha": b_init_mha, "check_config": b_check_config,
    "check_attention_config": b_check_attention_config,
    "init_transformer": b_init_transformer, "draw_attention_features": b_draw_attention_features,
    "features_for_step": b_features_for_step,
    "check_rng": b_check_rng, "check_dtype_arg": b_check_dtype_arg, "rng_for_step": b_rng_for_step,
    "draw_dropout_mask": b_draw_dropout_mask, "sinusoid_position_table": b_sinusoid_position_table,
    "as_xp": b_as_xp, "tree_as_xp": b_tree_as_xp, "tree_to_numpy": b_tree_to_numpy, "gmm_as_xp": b_gmm_as_xp,
    "fastfood_as_xp": b_fastfood_as_xp,
}

# Exports without a builder yet, each with the reason (an explicit xfail, reported; never silently
# skipped).
PENDING = {
}

# classes (NamedTuples, spectrum containers) and constants: not called, listed so that a new export has to
# be placed here or in the table (submodules are left out of the exports)
NON_CALLABLES = {
    'ATTENTION_KINDS', 'ActivationGrads', 'AdamState', 'AttentionKind', 'BSpline', 'BatchNormCache',
    'BatchNormGrads', 'BatchNormOutput', 'BatchNormParams', 'BatchNormState', 'Box', 'CauchyKernel',
    'CrossEntropyCache', 'CrossEntropyGrads', 'DEFAULT_CLIP', 'DenseCache', 'DenseGrads', 'DenseParams',
    'Draw', 'DropoutCache', 'DropoutGrads', 'EluFeaturesGrads', 'FASTFOOD_VARIANTS', 'FLTAttentionCache',
    'FLTAttentionGrads', 'FLTFeaturesCache', 'FLTFeaturesGrads', 'FLT_NOISE_KINDS', 'FastFoodGrads',
    'FastFoodParams', 'FavorAttentionCache', 'FavorAttentionGrads', 'FwhtGrads', 'GMMFeaturesGrads',
    'GMMFrequenciesGrads', 'GMMParams', 'GaussianBasis', 'GaussianKernel', 'GaussianMixture',
    'GenerativeGrads', 'GenerativeOutput', 'GeneratorGrads', 'GeneratorOutput', 'GeneratorParams',
    'GeneratorState', 'HyperbolicFeaturesCache', 'KeyFeaturesCache', 'LaplaceKernel', 'LayerNormCache',
    'LayerNormGrads', 'LayerNormParams', 'LeakyReluCache', 'LinearAttentionCache', 'LinearAttentionGrads',
    'LinearAttentionState', 'MHACache', 'MHAGrads', 'MseGrads', 'PROPOSAL_KINDS', 'PatchEmbeddingGrads',
    'PositionEmbeddingGrads', 'PositiveFeaturesCache', 'PositiveFeaturesGrads', 'Proposal',
    'ReluFeaturesGrads', 'S1AttentionGrads', 'S1AugmentGrads', 'S1Params', 'S1PositionalGrads',
    'S2AttentionCache', 'S2AttentionGrads', 'SGDState', 'Shifted', 'SinPower', 'SoftmaxAttentionCache',
    'SoftmaxAttentionGrads', 'SoftmaxTrigFeaturesCache', 'SpectrumGCache', 'SpectrumGGrads',
    'ToeplitzAttentionCache', 'ToeplitzAttentionGrads', 'TokenEmbeddingGrads', 'TransformerGrads',
    'TrigFeaturesCache', 'TrigFeaturesGrads',
}


# backwards whose cache holds no shape: any dy of a valid forward input shape is a valid cotangent
BWD_FREE = {"fwht_bwd"}


