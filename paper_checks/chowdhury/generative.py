"""Chowdhury et al. Sec. 2.1, Eqs. (7)-(8), (11): generative spectra, omega = g(n), with the RKS and PRF maps
(``refattn.features.generator_network``, ``refattn.features.generative``)."""

from __future__ import annotations

import contextlib
import math
import sys

import numpy as np

from refattn.features.generative import generative_prf_features, generative_rks_features
from refattn.features.generator_network import generator, generator_param_count
from refattn.random import draw_generator_noise, init_generator

from ..mutations import mutation, wrapped
from ..registry import CHOWDHURY, Context, Result, claim, must_fail, stat_evidence
from ..rules import value, with_rule
from ._common import N_SE, replicates, zscore


def _generator_eval(noise, params, state, slope=0.01, eps=1e-5):
    """The generator in evaluation mode written out here, independently of refattn's: 4 x (dense, batch
    norm with the running statistics, LeakyReLU(slope)), then dense + tanh; (M, d_noise) -> (M, d)."""
    z = np.asarray(noise, dtype=np.float64)
    for dense, bn, st in zip(params.hidden, params.norms, state.norms, strict=True):
        z = z @ np.asarray(dense.W) + np.asarray(dense.b)
        z = (np.asarray(bn.gamma) * (z - np.asarray(st.mean)) / np.sqrt(np.asarray(st.var) + eps)
             + np.asarray(bn.beta))
        z = np.where(z > 0, z, slope * z)
    return np.tanh(z @ np.asarray(params.out.W) + np.asarray(params.out.b))


def _decide(ev: dict) -> str:
    ok = value(ev, "max_z") < N_SE and value(ev, "dense_count_mismatches") == 0
    return "holds" if ok else "fails"


_RULE = with_rule(_decide, (
    "holds iff both eval-mode estimates (RKS and PRF) match a large Monte Carlo of the generator written "
    "independently in the check (running batch-norm statistics) "
    f"(max_z < {N_SE:g}) and the dense parameter count equals 5d^2 + 5d at d = 16 and 64 "
    "(dense_count_mismatches = 0); fails otherwise."))


def _generative(ctx: Context, wrong: bool) -> Result:
    rng = ctx.rng()
    d, M, n, big = 3, 8, ctx.pick(1000, 3000, 20000), ctx.pick(100_000, 300_000, 2_000_000)
    params, state = init_generator(rng, d)
    for _ in range(20):                                                  # non-trivial running stats
        state = generator(draw_generator_noise(rng, 64, d), params, state, train=True).state
    q, k = 0.8 * rng.standard_normal((1, d)), 0.8 * rng.standard_normal((1, d))
    noise = draw_generator_noise(rng, n * M, d)
    omega_ref = _generator_eval(draw_generator_noise(rng, big, d), params, state)   # independent of refattn
    gauss = float(np.exp(-0.5 * np.sum((q - k) ** 2)))
    ev = {**stat_evidence(n=n, seed=ctx.seed, detectable=0.0), "d": d, "M": M, "reference_frequencies": big,
          "n_se": N_SE}
    for kind, fmap in (("rks", generative_rks_features), ("prf", generative_prf_features)):
        pq = fmap(q, noise, params, state, train=False).phi
        pk = fmap(k, noise, params, state, train=False).phi
        est = replicates(pq, pk, 2 if kind == "rks" else 1, 1, n)[:, 0, 0]
        if kind == "rks":
            ref = float(np.mean(np.cos(omega_ref @ (q - k)[0])))
        else:
            ref = float(np.mean(np.exp(omega_ref @ (q + k)[0] - np.sum(q ** 2) - np.sum(k ** 2))))
        m, se, z = zscore(est, gauss if wrong else ref)
        ev[kind] = {"mean": m, "se": se, "reference_mc": ref, "gaussian_kernel": gauss, "z": z}
        ev["detectable"] = max(ev["detectable"], N_SE * se)   # (the reference's MC error: ~ se/10)
    ev["max_z"] = max(ev["rks"]["z"], ev["prf"]["z"])
    counts = {dd: generator_param_count(init_generator(rng, dd)[0]) for dd in (16, 64)}
    ev["param_counts"] = {str(dd): c for dd, c in counts.items()}
    ev["dense_count_mismatches"] = sum(c["dense"] != 5 * dd * dd + 5 * dd for dd, c in counts.items())
    ok_widths = 2 - ev["dense_count_mismatches"]
    return Result(ctx.decide(ev), ev,
                  summary=(f"eval-mode estimates vs a {big}-frequency Monte Carlo of the generator "
                           "written in the check: "
                           f"z = {ev['rks']['z']:.1f} RKS, {ev['prf']['z']:.1f} PRF; dense parameters "
                           f"5d^2+5d in {ok_widths} of 2 widths (batch norm adds 8d the count omits)"))


@claim("kl.generative", paper=CHOWDHURY, section="Sec. 2.1, Eqs. (7)-(8), (11)",
       statement="omega_m = g(n_m), n_m ~ rho_0; phi_Generative-RKS(x) = RKS(x, Omega), "
                 "phi_Generative-PRF(x) = PRF(x, Omega); the generator (4 FC + BatchNorm + LeakyReLU, then "
                 "FC + tanh) of constant width 'would require 5d^2 + 5d parameters'.",
       expected="holds", decide=_RULE,
       derivation="In evaluation mode (batch norm with running statistics) the M frequencies are iid draws "
                  "of g(rho_0), so the estimate is unbiased for E_n[cos(g(n)^T(q-k))] (RKS) and "
                  "E_n[exp(g(n)^T(q+k))] exp(-|q|^2-|k|^2) (PRF); no closed form, so the check compares with "
                  "a large Monte Carlo of the generator written out in the check (eval-mode batch norm "
                  "with the running statistics), independently of refattn's. 5 dense layers of width d "
                  "have 5(d^2 + d) "
                  "weights; the 4 batch norms add 8d learnable scalars that the count leaves out.")
def generative(ctx: Context) -> Result:
    return _generative(ctx, False)


@must_fail("kl.generative")
def generative_wrong(ctx: Context) -> Result:
    """Against the Gaussian kernel (omega ~ N(0, I)) the tanh-bounded frequencies must be rejected."""
    return _generative(ctx, True)


# Power: planted errors in what the check consumes (paper_checks/power.py).
_mod = sys.modules[__name__]


@mutation("kl.generative", "generative_rks_features x sqrt2 (kernel estimate x 2)", kind="refattn")
def _rks_x2():
    def wrap(f):
        def g(*args, **kwargs):
            out = f(*args, **kwargs)
            return out._replace(phi=out.phi * math.sqrt(2.0))
        return g
    return wrapped(_mod, "generative_rks_features", wrap)


@mutation("kl.generative", "base noise slip: rho_0 = N(0, 4 I) in the PRF map (noise x 2)",
          kind="refattn", bug="normalisation")
def _prf_noise_x2():
    return wrapped(_mod, "generative_prf_features",
                   lambda f: (lambda x, noise, params, state, *, train: f(x, 2.0 * noise, params, state,
                                                                          train=train)))


@mutation("kl.generative", "parameter count includes the batch norms (dense + 8d)", kind="refattn")
def _count_plus_bn():
    def wrap(f):
        def count(params):
            c = f(params)
            return {**c, "dense": c["dense"] + c["batchnorm"]}
        return count
    return wrapped(_mod, "generator_param_count", wrap)


@mutation("kl.generative", "train/eval slip: features in training mode (batch statistics) at evaluation",
          kind="refattn", bug="train-eval")
def _train_mode():
    def wrap(f):
        return lambda x, noise, params, state, *, train: f(x, noise, params, state, train=True)
    return _both(wrap)


def _both(wrap):
    """`wrap` applied to both feature maps (RKS and PRF) for the duration of the block."""
    stack = contextlib.ExitStack()
    stack.enter_context(wrapped(_mod, "generative_rks_features", wrap))
    stack.enter_context(wrapped(_mod, "generative_prf_features", wrap))
    return stack
