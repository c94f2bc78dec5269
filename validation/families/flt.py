r"""FLT features (Choromanski et al., FourierLearner-Transformers, Theorem 4.1, real form): the candidate's
contract.

``fn(pos (..., L, D), xi (r, D), w (r,)) -> (N1 (..., L, m'), N2 (..., L, m'))``

with ``N1(pos) N2(pos')^T`` an unbiased estimate of the RPE mask ``f(r_i - r_j)``. The candidate receives the
frequencies ``xi`` -- *frequencies* in cycles per unit of position, the phase is ``a = 2 pi pos . xi`` (not
angular frequencies ``pos . xi``) -- and the importance weights ``w = g(xi) / p(xi)`` (g the Fourier
transform of f with ``f(Delta) = int g(xi) exp(2 pi i Delta . xi) dxi``, p the proposal density), and
averages the r terms
with weight ``1/r`` each (not ``1/t`` for the t-th term, the printed Eqs. 14-15). For a real, even f (real g):
``N1 = [cos a, sin a] sqrt(|w| / r)``, ``N2 = sign(w) [cos a, sin a] sqrt(|w| / r)``; any other split with the
same product is accepted. Here f is the Gaussian kernel ``1.5 exp(-Delta^2 / (2 * 2^2))`` in D = 1, the
proposal a Gaussian 1.3 times wider than its spectral density, r = 32; positions are real numbers in [0, 6).
"""

from __future__ import annotations

import array_api_compat
import numpy as np

from refattn.attention import linear_attention, softmax_attention
from refattn.features import positive_features_stable
from refattn.random import draw_gaussian
from refattn.rpe import (
    GaussianKernel,
    Proposal,
    flt_attention,
    flt_attention_bwd,
    flt_attention_fwd,
    flt_features,
    flt_frequencies,
    flt_importance_weights,
    rpe_mask,
)

from ..base import Target, UsageError
from .attention import ATTENTION_CHECKS, RandomAttention
from .base import FEATURE_CHECKS, Family, FeatureContract

__all__ = ["FAMILIES"]

R, D, C, LENGTH, WIDEN = 32, 1, 1.5, 2.0, 1.3


def _spectrum(dtype):
    spec = GaussianKernel(C=np.asarray(C, dtype=dtype), length=np.asarray(LENGTH, dtype=dtype))
    sd = 1.0 / (2 * np.pi * LENGTH)                                             # std of the spectral density
    prop = Proposal("gaussian", np.zeros(D, dtype=dtype), np.asarray(WIDEN * sd, dtype=dtype))
    return spec, prop


def _from_eps(eps, dtype):
    spec, prop = _spectrum(np.float64)
    e64 = eps.astype(np.float64)
    xi, _ = flt_frequencies(e64, prop)
    w, _ = flt_importance_weights(e64, spec, prop)
    return {"eps": eps, "xi": np.asarray(xi).astype(dtype), "w": np.asarray(w).astype(dtype)}


def _draw(rng, d, dtype):
    return _from_eps(rng.standard_normal((R, D)).astype(dtype), dtype)


def _redraw(rng, args, dtype):
    return _from_eps(rng.standard_normal(args["eps"].shape).astype(dtype), dtype)


def _ref(pos, args):
    spec, prop = _spectrum(np.float64)
    N1, N2 = flt_features(pos.astype(np.float64), args["eps"].astype(np.float64), spec, prop)
    return np.asarray(N1), np.asarray(N2)


def _kernel(X, Y, args):
    spec, _ = _spectrum(np.float64)
    return np.asarray(rpe_mask(X, spec))


def _inputs(rng, shape, d):
    return rng.uniform(0.0, 6.0, shape + (D,))


CONTRACT = FeatureContract(
    family="flt", signature="fn(pos, xi, w) -> (N1, N2) each (..., L, m')", arg_names=("pos", "xi", "w"),
    convention=__doc__, draw=_draw, redraw=_redraw, ref=_ref, ref_vjp=None, kernel_fn=_kernel,
    learnable=("xi", "w"), inputs=_inputs, bilinear=True, differentiable_input=False,
    kernel_name="f(r_i - r_j) = 1.5 exp(-(r_i - r_j)^2 / 8)", d_input=lambda d: D)


def _target(framework):
    if framework not in ("numpy", "torch"):
        raise UsageError(f"target refattn --as flt: the built-in family targets run refattn's array-API core "
                         f"on NumPy or torch arrays; got --framework "
                         f"{framework}")

    def fn(pos, xi, w):
        """refattn's real FLT features for given frequencies and weights (the real, even-g split)."""
        xp = array_api_compat.array_namespace(pos, xi, w)
        r = xi.shape[0]
        a = 2 * np.pi * (pos @ xp.matrix_transpose(xi))                        # (..., L, r)
        s = xp.sqrt(xp.abs(w) / r)
        feats = xp.concat([xp.cos(a) * s, xp.sin(a) * s], axis=-1)
        return feats, feats * xp.concat([xp.sign(w), xp.sign(w)])
    return Target(fn, framework, "flt", "refattn.rpe.flt_features' real split on the given xi, w")


# ----------------------------------------------------------------------------------------------------------
# attention: Algorithm 1

ATTENTION_DOC = r"""FLT attention (Algorithm 1), ``fn(q, k, v (..., L, d), pos (L, 1), xi (r, 1), w (r,),
omega (m, 2r + d), causal) -> out``: ``Q_hat = [N1, q d^{-1/4}]``, ``K_hat = [N2, k d^{-1/4}]`` with the real
features of the ``features`` contract in the column order ``N1 = [cos a, sin a] sqrt(|w| / r)``, ``N2 =
sign(w) [cos a, sin a] sqrt(|w| / r)`` (a = 2 pi pos xi^T: omega's columns depend on this order), FAVOR+
positive features ``exp(omega x - |x|^2 / 2) / sqrt(m)`` of both with the same omega, then linear attention
(causal: prefix sums). Estimates ``softmax(q k^T / sqrt(d) + N) v`` with the RPE mask N; positions are
``arange(L)``."""

M_ATT = 64


def _att_draw(rng, d, dtype):
    args = _draw(rng, d, dtype)
    args["omega"] = draw_gaussian(rng, M_ATT, 2 * R + d, dtype=dtype)
    return args


def _att_redraw(rng, args, dtype):
    out = _redraw(rng, args, dtype)
    out["omega"] = draw_gaussian(rng, 4 * M_ATT, args["omega"].shape[1], dtype=dtype)
    return out


def _att_ref(q, k, v, args, causal):
    spec, prop = _spectrum(np.float64)
    return flt_attention(q, k, v, args["pos"], args["eps"].astype(np.float64), spec, prop, args["omega"],
                         causal=causal)


def _att_vjp(q, k, v, args, causal, dy):
    spec, prop = _spectrum(np.float64)
    _, cache = flt_attention_fwd(
        q, k, v, args["pos"], args["eps"].astype(np.float64), spec, prop, args["omega"], causal=causal
    )
    g = flt_attention_bwd(dy, cache)
    return {"q": g.q, "k": g.k, "v": g.v}                      # xi, w: by central differences (see gradients)


def _att_limit(q, k, v, args):
    spec, _ = _spectrum(np.float64)
    return softmax_attention(q, k, v, mask_add=np.asarray(rpe_mask(args["pos"], spec)))


ATTENTION = RandomAttention(
    family="flt",
    signature="fn(q, k, v, pos, xi, w, omega, causal) -> out (..., L, d_v)",
    draw_names=("pos", "xi", "w", "omega"),
    draw=_att_draw,
    redraw=_att_redraw,
    ref=_att_ref,
    ref_vjp=_att_vjp,
    learnable=("xi", "w"),
    limit=_att_limit,
    leak_keys=None,
    scale=2.0,
    positions="pos",
    pos_shape=lambda L: (L, 1),
    prefix_text="random keys",
)


def _att_target(framework):
    if framework != "numpy":
        raise UsageError(f"target refattn --as flt --kind attention: NumPy only (refattn's FLT backward is "
                         f"taken with respect to the spectrum and proposal, not the contract's xi and w, and "
                         f"torch autograd cannot differentiate the causal path, which writes in place); "
                         f"got --framework {framework}")
    feats = _target(framework).fn

    def fn(q, k, v, pos, xi, w, omega, causal):
        xp = array_api_compat.array_namespace(q, k, v)
        N1, N2 = feats(pos, xi, w)
        s = q.shape[-1] ** -0.25
        Qh = xp.concat([xp.broadcast_to(N1, tuple(q.shape[:-1]) + (N1.shape[-1],)), q * s], axis=-1)
        Kh = xp.concat([xp.broadcast_to(N2, tuple(k.shape[:-1]) + (N2.shape[-1],)), k * s], axis=-1)
        pq, _ = positive_features_stable(Qh, omega)
        pk, lk = positive_features_stable(Kh, omega)
        return linear_attention(pq, pk, v, causal=causal, k_log_scale=lk)
    return Target(fn, framework, "flt", "Algorithm 1 on refattn's FLT features, positive_features_stable and "
                  "linear_attention")


FAMILIES = {"flt": Family("flt", {"features": CONTRACT, "attention": ATTENTION},
                          {"features": _target, "attention": _att_target},
                          {"features": FEATURE_CHECKS, "attention": ATTENTION_CHECKS})}
