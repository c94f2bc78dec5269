r"""Horn et al. Strategy 1 (rotation-constrained sinusoids concatenated to q and k), FAVOR+: the candidate's
contract.

``fn(q, k, v (..., L, d), positions (L,), freqs (1, S), alpha (1, S), beta (1, S), omega (m, d + 2S), causal)
-> out (..., L, d_v)``

Convention (refattn.rpe.s1_rotation, one position axis): with ``theta_s = positions * freqs_s``,

    K_p = [sin theta_s, cos theta_s]_s,   Q_p = [alpha_s sin - beta_s cos, beta_s sin + alpha_s cos]_s

(blocks ordered by lengthscale, [sin, cos] within a block: ``Q_p = K_p W_q*`` in the row-vector convention,
so that ``Q_p(z) . K_p(z') = sum_s alpha_s cos(freqs_s (z - z')) + beta_s sin(freqs_s (z - z'))``); ``Q = [q,
Q_p]``, ``K = [k, K_p]`` (width d + 2S) go into FAVOR+: positive features ``exp(omega x - |x|^2 / 2) /
sqrt(m)`` of ``(d + 2S)^{-1/4} Q`` and of ``(d + 2S)^{-1/4} K`` with the same omega (stabilise as you like:
the checks compare outputs), then linear attention, causal by prefix sums. It estimates softmax attention of
``Q K^T / sqrt(d + 2S)`` (exact S1). positions are ``arange(L)`` in every call.
"""

from __future__ import annotations

import numpy as np

from refattn.random import draw_gaussian
from refattn.rpe import S1Params, s1_attention, s1_attention_bwd, s1_attention_fwd

from ..base import Target, UsageError
from .attention import ATTENTION_CHECKS, RandomAttention, torch_target
from .base import Family

__all__ = ["FAMILIES"]

S, M = 3, 64


def _params(args):
    return S1Params(args["freqs"], args["alpha"], args["beta"])


def _draw(rng, d, dtype):
    args = {"freqs": np.exp(-rng.uniform(0.0, 2.5, (1, S))), "alpha": 1.0 + 0.3 * rng.standard_normal((1, S)),
            "beta": 0.5 * rng.standard_normal((1, S))}
    args = {n: a.astype(dtype) for n, a in args.items()}
    args["omega"] = draw_gaussian(rng, M, d + 2 * S, dtype=dtype)
    return args


def _redraw(rng, args, dtype):
    return dict(args, omega=draw_gaussian(rng, 4 * M, args["omega"].shape[1], dtype=dtype))


def _ref(q, k, v, args, causal):
    return s1_attention(q, k, v, args["positions"], _params(args), omega=args["omega"], causal=causal)


def _ref_vjp(q, k, v, args, causal, dy):
    _, cache = s1_attention_fwd(q, k, v, args["positions"], _params(args), omega=args["omega"], causal=causal)
    g = s1_attention_bwd(dy, cache)
    return {
        "q": g.q,
        "k": g.k,
        "v": g.v,
        "freqs": g.params.freqs,
        "alpha": g.params.alpha,
        "beta": g.params.beta,
    }


def _limit(q, k, v, args):
    return s1_attention(q, k, v, args["positions"], _params(args), omega=None)


def _leak_keys(rng, args, n, d):
    om = np.asarray(args["omega"])
    rows = np.argsort(-np.linalg.norm(om[:, :d], axis=-1))[:n]
    return om[rows, :d] * (om.shape[1] ** 0.25)                         # (d + 2S)^{-1/4} k = omega_r[:d]


CONTRACT = RandomAttention(
    family="s1",
    signature="fn(q, k, v, positions, freqs, alpha, beta, omega, causal) -> out (..., L, d_v)",
    draw_names=("positions", "freqs", "alpha", "beta", "omega"),
    draw=_draw,
    redraw=_redraw,
    ref=_ref,
    ref_vjp=_ref_vjp,
    learnable=("freqs", "alpha", "beta"),
    limit=_limit,
    leak_keys=_leak_keys,
    scale=0.7 * 4.0,
    positions="positions",
    prefix_text="appended keys aligned with the largest rows of omega",
)


def _target(framework):
    if framework not in ("numpy", "torch"):
        raise UsageError(f"target refattn --as s1: NumPy or torch; got --framework {framework}")

    def fn(q, k, v, positions, freqs, alpha, beta, omega, causal):
        return s1_attention(q, k, v, positions, S1Params(freqs, alpha, beta), omega=omega, causal=causal)
    if framework == "torch":
        return Target(torch_target(CONTRACT, fn), "torch", "s1",
                      "refattn.rpe.s1_attention on tensors, manual backward")
    return Target(fn, "numpy", "s1", "refattn.rpe.s1_attention (FAVOR+, positive features)")


FAMILIES = {
    "s1": Family("s1", {"attention": CONTRACT}, {"attention": _target}, {"attention": ATTENTION_CHECKS})
}
