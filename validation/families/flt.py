r"""FLT features (Choromanski et al., FourierLearner-Transformers, Theorem 4.1, real form): the candidate's contract.

``fn(pos (..., L, D), xi (r, D), w (r,)) -> (N1 (..., L, m'), N2 (..., L, m'))``

with ``N1(pos) N2(pos')^T`` an unbiased estimate of the RPE mask ``f(r_i - r_j)``. The candidate receives the
frequencies ``xi`` -- *frequencies* in cycles per unit of position, the phase is ``a = 2 pi pos . xi`` (not
angular frequencies ``pos . xi``) -- and the importance weights ``w = g(xi) / p(xi)`` (g the Fourier transform of
f with ``f(Delta) = int g(xi) exp(2 pi i Delta . xi) dxi``, p the proposal density), and averages the r terms
with weight ``1/r`` each (not ``1/t`` for the t-th term, the printed Eqs. 14-15). For a real, even f (real g):
``N1 = [cos a, sin a] sqrt(|w| / r)``, ``N2 = sign(w) [cos a, sin a] sqrt(|w| / r)``; any other split with the
same product is accepted. Here f is the Gaussian kernel ``1.5 exp(-Delta^2 / (2 * 2^2))`` in D = 1, the proposal
a Gaussian 1.3 times wider than its spectral density, r = 32; positions are real numbers in [0, 6).
"""

from __future__ import annotations

import numpy as np

from ..crosscheck import Target, UsageError
from .base import FEATURE_CHECKS, FeatureContract, Family

__all__ = ["FAMILIES"]

R, D, C, LENGTH, WIDEN = 32, 1, 1.5, 2.0, 1.3


def _spectrum(dtype):
    from refattn.rpe import GaussianKernel, Proposal
    spec = GaussianKernel(C=np.asarray(C, dtype=dtype), length=np.asarray(LENGTH, dtype=dtype))
    sd = 1.0 / (2 * np.pi * LENGTH)                                             # std of the spectral density
    prop = Proposal("gaussian", np.zeros(D, dtype=dtype), np.asarray(WIDEN * sd, dtype=dtype))
    return spec, prop


def _from_eps(eps, dtype):
    from refattn.rpe import flt_frequencies, flt_importance_weights
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
    from refattn.rpe import flt_features
    spec, prop = _spectrum(np.float64)
    N1, N2 = flt_features(pos.astype(np.float64), args["eps"].astype(np.float64), spec, prop)
    return np.asarray(N1), np.asarray(N2)


def _kernel(X, Y, args):
    from refattn.rpe import rpe_mask
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
    if framework != "numpy":
        raise UsageError(f"target refattn --as flt: the built-in family targets take NumPy arrays; got --framework "
                         f"{framework}")

    def fn(pos, xi, w):
        """refattn's real FLT features for given frequencies and weights (the real, even-g split)."""
        r = xi.shape[0]
        a = 2 * np.pi * (pos @ xi.T)                                           # (..., L, r)
        s = np.sqrt(np.abs(w) / r)
        feats = np.concatenate([np.cos(a) * s, np.sin(a) * s], axis=-1)
        return feats, feats * np.concatenate([np.sign(w), np.sign(w)])
    return Target(fn, "numpy", "flt", "refattn.rpe.flt_features' real split on the given xi, w")


FAMILIES = {"flt": Family("flt", {"features": CONTRACT}, {"features": _target}, {"features": FEATURE_CHECKS})}
