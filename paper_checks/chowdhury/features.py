"""Chowdhury et al. Sec. 2.1: the RKS map (Eq. 3) and the positive-feature map (Eq. 9), checked by Monte Carlo
against the kernel each one estimates with omega ~ N(0, I) (refattn.features.trig / .positive)."""

from __future__ import annotations

import math
import sys

import numpy as np

from refattn import (gaussian_kernel, gaussian_positive_features, positive_features, softmax_kernel,
                     trig_features)

from ..mutations import mutation, patched, scaled, wrapped
from ..registry import CHOWDHURY, Context, Result, claim, must_fail, stat_evidence
from ..rules import holds_iff_accepted, value, with_rule
from ._common import N_SE, max_abs_z


def _estimates(fmap, q, k, W, groups):
    """Per-draw phi(q) . phi(k) for n draws W: (n, m, d), one call of the map on the stacked (n m, d) rows."""
    n, m, d = W.shape
    pq = np.asarray(fmap(q, W.reshape(n * m, d))).reshape(q.shape[0], groups, n, m)
    pk = np.asarray(fmap(k, W.reshape(n * m, d))).reshape(k.shape[0], groups, n, m)
    return n * np.einsum("pgnm,rgnm->npr", pq, pk)                                    # (n, Pq, Pk)


def _setup(ctx: Context, r: float):
    rng = ctx.rng()
    d, m, n = 4, 8, ctx.pick(4000, 20000, 100000)
    q = r * rng.standard_normal((3, d)) / np.sqrt(d)
    k = r * rng.standard_normal((3, d)) / np.sqrt(d)
    return q, k, rng.standard_normal((n, m, d)), {"d": d, "m": m, "n_se": N_SE}


def _test(est, target, ev: dict, ctx: Context, key: str = "max_z") -> dict:
    z, det = max_abs_z(est, target)
    det = max(det, ev.get("detectable", 0.0))
    ev.update({key: z, **stat_evidence(n=est.shape[0], seed=ctx.seed, detectable=det),
               f"{key}_estimate": np.round(est.mean(0), 5).tolist(),
               f"{key}_expected": np.round(target, 5).tolist()})
    return ev


_EQ3_RULE = holds_iff_accepted("max_z", n_se=N_SE)


def _eq3(ctx: Context, target) -> Result:
    q, k, W, ev = _setup(ctx, 1.5)
    ev = _test(_estimates(trig_features, q, k, W, 2), target(q, k), ev, ctx)
    return Result(ctx.decide(ev), ev,
                  summary=f"RKS vs {target.__name__}: max |mean - kernel| = {ev['max_z']:.2f} se over 9 "
                          f"pairs (tolerance {N_SE:g} se)")


@claim("kl.eq3-rks", paper=CHOWDHURY, section="Sec. 2.1, Eqs. (2)-(3)",
       statement="kappa(q, k) ~ phi(q)^T phi(k) with phi(x) = RKS(x, Omega) = M^{-1/2} [cos(w_1^T x), ..., "
                 "cos(w_M^T x), sin(w_1^T x), ..., sin(w_M^T x)], w_i ~ rho(w) the spectral density of "
                 "kappa.",
       expected="holds", rule=_EQ3_RULE.rule + " (max over 9 (q, k) pairs, rho = N(0, I), Gaussian kernel)",
       decide=_EQ3_RULE,
       derivation="phi(q).phi(k) = (1/M) sum_i cos(w_i.(q - k)), whose mean is the characteristic function "
                  "of rho at q - k (Bochner, Eq. 2). For rho = N(0, I) that is the Gaussian kernel "
                  "exp(-|q - k|^2/2); the estimator is bounded, its MSE is (1 - exp(-|q-k|^2))^2 / (2M) "
                  "(tests/features/test_trig.py).")
def eq3_rks(ctx: Context) -> Result:
    return _eq3(ctx, gaussian_kernel)


@must_fail("kl.eq3-rks")
def eq3_rks_wrong(ctx: Context) -> Result:
    """The same estimates against the softmax kernel exp(q.k) must fail."""
    return _eq3(ctx, softmax_kernel)


def _decide_eq9(ev: dict) -> str:
    ok = value(ev, "max_z") < N_SE and value(ev, "identity_before_eq9_max_z") < N_SE
    return "holds" if ok else "fails"


_EQ9_RULE = with_rule(_decide_eq9, (
    f"holds iff the Eq. 9 map is accepted as an estimator of the Gaussian kernel (max_z < {N_SE:g}) and the "
    f"identity printed before it (offset |x|^2/2) as one of exp(q.k) (identity_before_eq9_max_z < {N_SE:g}), "
    "both over 9 (q, k) pairs; fails otherwise."))


def _eq9(ctx: Context, eq9_target) -> Result:
    q, k, W, ev = _setup(ctx, 1.2)
    ev["kernel"] = "gaussian_kernel exp(-|q-k|^2/2) (psi = N(0, I))"
    ev = _test(_estimates(gaussian_positive_features, q, k, W, 1), eq9_target(q, k), ev, ctx)
    ev = _test(_estimates(positive_features, q, k, W, 1), softmax_kernel(q, k), ev, ctx,
               key="identity_before_eq9_max_z")
    ev = _test(_estimates(gaussian_positive_features, q, k, W, 1), softmax_kernel(q, k), ev, ctx,
               key="eq9_vs_softmax_kernel_max_z")
    return Result(ctx.decide(ev), ev,
                  summary=f"Eq. 9 vs {eq9_target.__name__}: max z = {ev['max_z']:.2f} over 9 pairs; it "
                          f"estimates the Gaussian kernel exp(-|q-k|^2/2), not exp(q.k) "
                          f"(z = {ev['eq9_vs_softmax_kernel_max_z']:.0f}); the |x|^2/2 identity before it: "
                          f"z = {ev['identity_before_eq9_max_z']:.2f}")


@claim("kl.eq9-prf", paper=CHOWDHURY, section="Sec. 2.1, the identity before Eq. (9) and Eq. (9)",
       statement="kappa(q, k) := E_{w~psi}[exp(w^T q - |q|^2) exp(w^T k - |k|^2)], PRF(x, Omega) := "
                 "exp(-|x|^2)/sqrt(M) [exp(w_1^T x), ..., exp(w_M^T x)] (after: exp(q^T k) = "
                 "E_{w~N(0,I)}[exp(w^T q - |q|^2/2) exp(w^T k - |k|^2/2)]).",
       expected="holds", decide=_EQ9_RULE,
       derivation="With psi = N(0, I), E exp(w.(q + k)) = exp(|q + k|^2/2), so the printed Eq. (9) map gives "
                  "exp(|q+k|^2/2 - |q|^2 - |k|^2) = exp(-|q - k|^2/2): it estimates the GAUSSIAN kernel "
                  "(constant 1, unit bandwidth), not the softmax kernel exp(q.k) of the identity printed "
                  "just before it, which needs the offset |x|^2/2 (refattn.positive_features). The two "
                  "differ by exp(-|q|^2/2 - |k|^2/2); in attention the key factor does not cancel. Eq. (9) "
                  "holds as the definition of kappa; the check names kappa and verifies both identities.")
def eq9_prf(ctx: Context) -> Result:
    return _eq9(ctx, gaussian_kernel)


@must_fail("kl.eq9-prf")
def eq9_prf_wrong(ctx: Context) -> Result:
    """Eq. (9)'s map checked against the softmax kernel exp(q.k) must fail."""
    return _eq9(ctx, softmax_kernel)


# Power: planted errors in what the checks consume (paper_checks/power.py).
_mod = sys.modules[__name__]


@mutation("kl.eq3-rks", "trig_features x sqrt2 (kernel estimate x 2)", kind="refattn")
def _eq3_x2():
    return scaled(_mod, "trig_features", math.sqrt(2.0))


@mutation("kl.eq3-rks", "frequency unit slip: omega x 2 pi", kind="refattn", bug="normalisation")
def _eq3_2pi():
    return wrapped(_mod, "trig_features", lambda f: (lambda x, omega: f(x, 2.0 * math.pi * omega)))


@mutation("kl.eq9-prf", "gaussian_positive_features x sqrt(1/2) (kernel estimate x 0.5)", kind="refattn")
def _eq9_half():
    return scaled(_mod, "gaussian_positive_features", math.sqrt(0.5))


@mutation("kl.eq9-prf", "offset slip: |x|^2/2 for |x|^2 in the Eq. 9 map",
          kind="refattn", bug="normalisation")
def _eq9_offset():
    return patched(_mod, "gaussian_positive_features", positive_features)


@mutation("kl.eq9-prf", "sign slip in the identity: exp(-w.x - |x|^2/2) paired with exp(w.x - |x|^2/2)",
          kind="refattn", bug="sign")
def _eq9_identity_sign():
    calls = {"n": 0}

    def wrap(f):
        def g(x, omega):
            calls["n"] += 1                     # the query map (first call) uses -omega, the key map +omega
            return f(x, -omega if calls["n"] % 2 else omega)
        return g
    return wrapped(_mod, "positive_features", wrap)
