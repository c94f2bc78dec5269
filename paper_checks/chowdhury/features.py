"""Chowdhury et al. Sec. 2.1: the RKS map (Eq. 3) and the positive-feature map (Eq. 9), checked by Monte Carlo
against the kernel each one estimates with omega ~ N(0, I) (refattn.features.trig / .positive)."""

from __future__ import annotations

import numpy as np

from refattn import gaussian_kernel, gaussian_positive_features, positive_features, softmax_kernel, trig_features
from validation import mean_test

from .._claims import CHOWDHURY, Context, Result, claim, must_fail


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
    return q, k, rng.standard_normal((n, m, d)), {"d": d, "m": m, "n": n, "seed": ctx.seed}


def _verdict(res, ev, name):
    ev.update({"max_z": res.z, "n_se": res.n_se, "detectable": res.detectable,
               "estimate": np.round(res.mean, 5).tolist(), "expected": np.round(res.expected, 5).tolist()})
    return Result("holds" if res.passed else "fails", ev,
                  summary=f"{name}: max |mean - kernel| = {res.z:.2f} se over 9 pairs (tolerance {res.n_se:g} se)")


@claim("kl.eq3-rks", paper=CHOWDHURY, section="Sec. 2.1, Eqs. (2)-(3)",
       statement="kappa(q, k) ~ phi(q)^T phi(k) with phi(x) = RKS(x, Omega) = M^{-1/2} [cos(w_1^T x), ..., "
                 "cos(w_M^T x), sin(w_1^T x), ..., sin(w_M^T x)], w_i ~ rho(w) the spectral density of kappa.",
       expected="holds",
       derivation="phi(q).phi(k) = (1/M) sum_i cos(w_i.(q - k)), whose mean is the characteristic function of rho at "
                  "q - k (Bochner, Eq. 2). For rho = N(0, I) that is the Gaussian kernel exp(-|q - k|^2/2); the "
                  "estimator is bounded, its MSE is (1 - exp(-|q-k|^2))^2 / (2M) (tests/features/test_trig.py).")
def eq3_rks(ctx: Context) -> Result:
    q, k, W, ev = _setup(ctx, 1.5)
    est = _estimates(trig_features, q, k, W, 2)
    ev["kernel"] = "gaussian_kernel exp(-|q-k|^2/2) (rho = N(0, I))"
    return _verdict(mean_test(est, gaussian_kernel(q, k)), ev, "RKS vs Gaussian kernel")


@must_fail("kl.eq3-rks")
def eq3_rks_wrong(ctx: Context) -> Result:
    """The same estimates against the softmax kernel exp(q.k) must fail."""
    q, k, W, ev = _setup(ctx, 1.5)
    est = _estimates(trig_features, q, k, W, 2)
    return _verdict(mean_test(est, softmax_kernel(q, k)), ev, "RKS vs softmax kernel")


@claim("kl.eq9-prf", paper=CHOWDHURY, section="Sec. 2.1, the identity before Eq. (9) and Eq. (9)",
       statement="kappa(q, k) := E_{w~psi}[exp(w^T q - |q|^2) exp(w^T k - |k|^2)], PRF(x, Omega) := "
                 "exp(-|x|^2)/sqrt(M) [exp(w_1^T x), ..., exp(w_M^T x)] (after: exp(q^T k) = "
                 "E_{w~N(0,I)}[exp(w^T q - |q|^2/2) exp(w^T k - |k|^2/2)]).",
       expected="holds",
       derivation="With psi = N(0, I), E exp(w.(q + k)) = exp(|q + k|^2/2), so the printed Eq. (9) map gives "
                  "exp(|q+k|^2/2 - |q|^2 - |k|^2) = exp(-|q - k|^2/2): it estimates the GAUSSIAN kernel (constant "
                  "1, unit bandwidth), not the softmax kernel exp(q.k) of the identity printed just before it, "
                  "which needs the offset |x|^2/2 (refattn.positive_features). The two differ by "
                  "exp(-|q|^2/2 - |k|^2/2); in attention the key factor does not cancel. Eq. (9) holds as the "
                  "definition of kappa; the check names kappa and verifies both identities.")
def eq9_prf(ctx: Context) -> Result:
    q, k, W, ev = _setup(ctx, 1.2)
    res = mean_test(_estimates(gaussian_positive_features, q, k, W, 1), gaussian_kernel(q, k))
    pre = mean_test(_estimates(positive_features, q, k, W, 1), softmax_kernel(q, k))
    not_softmax = mean_test(_estimates(gaussian_positive_features, q, k, W, 1), softmax_kernel(q, k))
    ev.update({"kernel": "gaussian_kernel exp(-|q-k|^2/2) (psi = N(0, I))",
               "identity_before_eq9_max_z": pre.z, "identity_before_eq9_holds": pre.passed,
               "eq9_vs_softmax_kernel_max_z": not_softmax.z})
    out = _verdict(res, ev, "Eq. 9 vs Gaussian kernel")
    if not pre.passed:
        out.verdict = "fails"
    out.summary += (f"; estimates the Gaussian kernel exp(-|q-k|^2/2), not exp(q.k) (z = {not_softmax.z:.0f}); "
                    f"the |x|^2/2 identity before it holds (z = {pre.z:.2f})")
    return out


@must_fail("kl.eq9-prf")
def eq9_prf_wrong(ctx: Context) -> Result:
    """Eq. (9)'s map checked against the softmax kernel exp(q.k) must fail."""
    q, k, W, ev = _setup(ctx, 1.2)
    return _verdict(mean_test(_estimates(gaussian_positive_features, q, k, W, 1), softmax_kernel(q, k)), ev,
                    "Eq. 9 vs softmax kernel")
