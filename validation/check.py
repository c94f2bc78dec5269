r"""NumPy-only edge: cross-check any implementation against refattn -- values, gradients, bias, known defects.

``check(fn, kind=..., framework=...)`` runs the named checks on a candidate and returns a :class:`Report`; the CLI
``python -m validation check TARGET --kind KIND`` does the same from the command line. A candidate is a callable
in one of three contracts (arrays of its framework; layout ``(B, H, L, d)``; ``omega: (m, d)``):

* ``draw``:      ``fn(seed: int, m: int, d: int) -> omega (m, d)``, its sampler of projection matrices;
* ``features``:  ``fn(x (..., L, d), omega (m, d)) -> phi (..., L, m')``, a random feature map (a pair
  ``(phi, log_scale)`` is read as ``phi * exp(log_scale)[..., None]``, refattn's stabilised convention);
* ``attention``: ``fn(q, k, v, omega, causal) -> out (..., L, d_v)``, a FAVOR-style estimator given omega.

The checks (stable names; each gives passed / figure / threshold / detail):

``values``
    The candidate equals refattn's computation for the family it claims (``family=``/``--as``) on the same inputs
    and omega: figure = largest error relative to ``|ref| + sqrt(eps) max|ref|`` (features) or to ``max|ref|``
    (attention), threshold ``4 sqrt(eps(dtype))``. The reference is computed in float64 on the same inputs.
``gradients``
    (autograd frameworks) The candidate's gradients for every input and omega equal refattn's manual backward:
    figure = max over arguments of ``|g - g_ref| / |g_ref|`` (Frobenius), threshold ``4 sqrt(eps)``. The detail
    also says whether the candidate's gradient is the derivative of its own forward (central differences, float64).
``kernel``
    features: which kernel ``E[phi(q) . phi(k)]`` is -- ``exp(q.k)``, ``exp(q.k/sqrt d)``, ``exp(-|q-k|^2/2)``,
    ``exp(-|q-k|^2/(2 sqrt d))`` -- and that the estimate is unbiased for it (design.md trap 1): a mean over iid
    Gaussian omegas on 10 pairs of points, each kernel rejected when some pair is ``z*`` standard errors away.
    attention: which attention the candidate's output converges to (softmax with the ``d^{-1/2}`` scale, without
    it, Gaussian-kernel attention, or uniform averaging), and that its error is at most twice refattn's on the
    same omegas.
``unbiased``
    draw: over many of the candidate's own draws, refattn's positive-feature estimate of ``exp(q.k)`` is unbiased
    along a coordinate axis, the all-ones direction and two random directions (design.md trap 2); features: the
    candidate's estimate of its kernel is unbiased along those directions under Haar-orthogonal draws.
    A z-score from the replicates' standard error.
``haar``
    draw: the row directions of the draws are sign-symmetric in every coordinate, as Haar-orthogonal (and iid
    Gaussian) rows are: ``z_ij = sqrt(n) mean(sqrt(d) u_ij)`` has variance exactly 1. QR without the
    ``sign(diag R)`` correction fixes the sign of ``u_00`` and fails. Block orthogonality and the row-norm law
    (chi(d) by a KS test, or constant) are reported.
``prefix_invariance``
    attention, causal: outputs for a prefix do not change when tokens are appended -- keys aligned with rows of
    omega (exponent above every earlier key: a global key maximum leaks through an additive epsilon), and, after
    large-norm prefix keys, an exponent gap beyond the dtype's underflow range (the leak without epsilon).
``same_features``
    attention: queries and keys go through the same random features. Averaged over omegas, shared features give
    an output that follows softmax attention across queries (slope beta ~ 1); features drawn separately for
    keys estimate the constant kernel (``E phi_1(q) . E phi_2(k) = 1``), slope ~ 0.
``dtype``
    float32 in, float32 out, float64 in, float64 out: no silent cast.

Statistical checks use ``ALPHA = 1e-3`` as their false-alarm probability (Bonferroni over the z-scores they
take, normal approximation), so a correct candidate passes each at well over 19 of 20 seeds.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import math
import os
import sys
import time
import zlib
from typing import Any, Callable

import numpy as np
import scipy.stats

from .crosscheck import BUILTIN_TARGETS, Framework, UsageError, builtin_target, dtype_name, get_framework

__all__ = ["check", "Report", "CheckResult", "UsageError", "CHECKS", "KINDS", "FEATURE_FAMILIES",
           "ATTENTION_FAMILIES", "resolve_target", "ALPHA"]

KINDS = ("draw", "features", "attention")
CHECKS = ("values", "gradients", "kernel", "unbiased", "haar", "prefix_invariance", "same_features", "dtype")
#: which checks apply to which kind
KIND_CHECKS = {
    "draw": ("haar", "unbiased"),
    "features": ("values", "gradients", "kernel", "unbiased", "dtype"),
    "attention": ("values", "gradients", "kernel", "same_features", "prefix_invariance", "dtype"),
}
#: false-alarm probability of each statistical check (haar, unbiased, kernel)
ALPHA = 1e-3


# ----------------------------------------------------------------------------------------------------------
# report


@dataclasses.dataclass
class CheckResult:
    name: str
    passed: bool | None        # None: skipped (detail says why)
    figure: float | None
    threshold: float | None
    detail: str

    def to_dict(self) -> dict:
        def num(v):
            return None if v is None or not math.isfinite(v) else float(v)
        return {"name": self.name, "passed": self.passed, "figure": num(self.figure),
                "threshold": num(self.threshold), "detail": self.detail}


@dataclasses.dataclass
class Report:
    target: str
    kind: str
    framework: str
    dtype: str
    seed: int
    family: str | None
    checks: list[CheckResult]
    note: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """True when no check failed (skipped checks do not count)."""
        return all(c.passed is not False for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def __getitem__(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check named {name!r} in this report (checks: {[c.name for c in self.checks]})")

    def to_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind, "framework": self.framework,
                "checks": [c.to_dict() for c in self.checks], "dtype": self.dtype, "seed": self.seed,
                "family": self.family, "passed": self.passed, "note": self.note,
                "seconds": round(self.seconds, 2)}

    def __str__(self) -> str:
        head = (f"{self.target} [{self.kind}, {self.framework}, {self.dtype}, seed {self.seed}"
                f"{', as ' + self.family if self.family else ''}]: "
                f"{'PASS' if self.passed else 'FAIL'} ({self.seconds:.1f} s)")
        lines = [head] + ([f"  ({self.note})"] if self.note else [])
        for c in self.checks:
            verdict = "skip" if c.passed is None else ("pass" if c.passed else "FAIL")
            fig = "" if c.figure is None else f" {c.figure:.3g}"
            thr = "" if c.threshold is None else f" (threshold {c.threshold:.3g})"
            lines.append(f"  {verdict:4s} {c.name:18s}{fig}{thr}: {c.detail}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------
# refattn references


def _fam(fn_name: str, module: str, scaled: bool = False):
    def ref(x, omega):
        mod = importlib.import_module(module)
        s = float(x.shape[-1]) ** -0.25 if scaled else 1.0
        return getattr(mod, fn_name)(x * s, omega)

    def grads(x, omega, c):
        mod = importlib.import_module(module)
        s = float(x.shape[-1]) ** -0.25 if scaled else 1.0
        y, cache = getattr(mod, fn_name + "_fwd")(x * s, omega)
        g = getattr(mod, fn_name + "_bwd")(c, cache)
        return [g.x * s, g.omega]
    return ref, grads


#: family name -> (reference map, reference gradients, the kernel it estimates)
FEATURE_FAMILIES: dict[str, tuple[Callable, Callable, str]] = {
    "positive": (*_fam("positive_features", "refattn.features.positive"), "softmax"),
    "positive-scaled": (*_fam("positive_features", "refattn.features.positive", True), "softmax-scaled"),
    "hyperbolic": (*_fam("hyperbolic_features", "refattn.features.positive"), "softmax"),
    "gaussian-positive": (*_fam("gaussian_positive_features", "refattn.features.positive"), "gaussian"),
    "trig": (*_fam("trig_features", "refattn.features.trig"), "gaussian"),
    "softmax-trig": (*_fam("softmax_trig_features", "refattn.features.trig"), "softmax"),
}
#: attention family -> favor_attention(features=...)
ATTENTION_FAMILIES = ("positive", "hyperbolic", "trig")

#: kernel name -> (description, K(X, Y) for X: (P, d), Y: (Q, d))
KERNELS: dict[str, tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "softmax": ("exp(q.k)", lambda X, Y: np.exp(X @ Y.T)),
    "softmax-scaled": ("exp(q.k/sqrt(d)) (d^-1/4 applied inside)",
                       lambda X, Y: np.exp(X @ Y.T / math.sqrt(X.shape[-1]))),
    "gaussian": ("exp(-|q-k|^2/2)", lambda X, Y: np.exp(-0.5 * _sqdist(X, Y))),
    "gaussian-scaled": ("exp(-|q-k|^2/(2 sqrt(d))) (d^-1/4 applied inside)",
                        lambda X, Y: np.exp(-0.5 * _sqdist(X, Y) / math.sqrt(X.shape[-1]))),
}


def _sqdist(X, Y):
    return np.sum(X * X, -1)[:, None] + np.sum(Y * Y, -1)[None, :] - 2 * X @ Y.T       # (P, Q)


def _favor_ref(family):
    from refattn.attention import favor_attention, favor_attention_bwd, favor_attention_fwd

    def ref(q, k, v, omega, causal):
        return favor_attention(q, k, v, omega, causal=causal, features=family, on_nonpositive="ignore")

    def grads(q, k, v, omega, causal, c):
        y, cache = favor_attention_fwd(q, k, v, omega, causal=causal, features=family, on_nonpositive="ignore")
        g = favor_attention_bwd(c, cache)
        return [g.q, g.k, g.v, g.omega]
    return ref, grads


def _tol(dtype) -> float:
    return 4.0 * math.sqrt(float(np.finfo(dtype).eps))


def _zcrit(n_tests: int, alpha: float = ALPHA) -> float:
    return float(scipy.stats.norm.isf(alpha / (2 * n_tests)))


# ----------------------------------------------------------------------------------------------------------
# sizes, context, candidate calls


@dataclasses.dataclass(frozen=True)
class Sizes:
    d: int = 16
    n_draws: int = 2000     # draw kind: candidate draws (haar, unbiased)
    n_kernel: int = 1000    # features kind: omega draws for kernel / unbiased
    m_kernel: int = 64
    n_attn: int = 8         # attention kind: omega draws for kernel / same_features
    m_attn: int = 1024
    L_attn: int = 32


SIZES = Sizes()
QUICK = Sizes(n_draws=400, n_kernel=300, n_attn=4)


class _Ctx:
    def __init__(self, fn, fw: Framework, kind, family, dtype, seed, sizes, name):
        self.fn, self.fw, self.kind, self.family = fn, fw, kind, family
        self.dtype, self.seed, self.s, self.name = np.dtype(dtype), seed, sizes, name
        self.cache: dict[str, Any] = {}

    def rng(self, *key: str) -> np.random.Generator:
        return np.random.default_rng([self.seed] + [zlib.crc32(k.encode()) for k in key])

    def normal(self, rng, *shape, scale=1.0, dtype=None):
        return (scale * rng.standard_normal(shape)).astype(dtype or self.dtype)

    def omega(self, rng, m, dtype=None):
        from refattn.random import draw_gaussian
        return draw_gaussian(rng, m, self.s.d, dtype=dtype or self.dtype)

    # a call of the candidate, NumPy in, NumPy out; `raw` keeps the framework array (for dtype checks)
    def call(self, *args, raw=False):
        fw = self.fw
        conv = [fw.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        out = _combine(self.fn(*conv), self.kind)
        if not fw.is_array(out):
            raise UsageError(f"{self.name}: returned {type(out).__name__}; expected a {fw.name} array")
        return out if raw else fw.to_numpy(out)


def _combine(out, kind):
    """``(phi, log_scale)`` -> ``phi * exp(log_scale)[..., None]`` in the candidate's own framework."""
    if kind == "features" and isinstance(out, tuple) and len(out) == 2:
        import array_api_compat
        phi, ls = out
        xp = array_api_compat.array_namespace(phi)
        return phi * xp.exp(ls)[..., None]
    return out


def _gradfn(fn, kind):
    if kind == "features":
        return lambda x, omega: _combine(fn(x, omega), kind)
    return fn


CONTRACT = {"draw": "fn(seed, m, d) -> omega (m, d)", "features": "fn(x, omega) -> phi (..., L, m')",
            "attention": "fn(q, k, v, omega, causal) -> out (..., L, d_v)"}
N_ARGS = {"draw": 3, "features": 2, "attention": 5}


def _check_signature(fn, kind, name):
    if not callable(fn):
        raise UsageError(f"{name}: {type(fn).__name__} object is not callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return                                                       # builtins without a signature: try calling
    try:
        sig.bind(*range(N_ARGS[kind]))
    except TypeError as e:
        raise UsageError(f"{name}: signature {sig} does not fit the {kind} contract {CONTRACT[kind]} ({e})") from None


def _probe(ctx: _Ctx):
    """One call with small inputs: the candidate must run and return the contract's shape (else UsageError)."""
    d, rng = ctx.s.d, ctx.rng("probe")
    try:
        if ctx.kind == "draw":
            m = 2 * d
            out = np.asarray(ctx.call(ctx.seed, m, d))
            want = (m, d)
            ok = out.shape == want
        elif ctx.kind == "features":
            x, om = ctx.normal(rng, 2, 3, 5, d, scale=0.5), ctx.omega(rng, 8)
            out = ctx.call(x, om)
            want = "(2, 3, 5, m')"
            ok = out.ndim == 4 and out.shape[:3] == (2, 3, 5) and out.shape[3] >= 1
        else:
            q, k, v = (ctx.normal(rng, 2, 3, 5, d, scale=0.5) for _ in range(3))
            out = ctx.call(q, k, v, ctx.omega(rng, 8), False)
            want = (2, 3, 5, d)
            ok = out.shape == want
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - the candidate's failure, reported as a usage problem
        raise UsageError(f"{ctx.name}: raised {type(e).__name__} on a probe call of the {ctx.kind} contract "
                         f"{CONTRACT[ctx.kind]}: {e}") from None
    if not ok:
        raise UsageError(f"{ctx.name}: returned shape {tuple(out.shape)} on the probe call; the {ctx.kind} contract "
                         f"{CONTRACT[ctx.kind]} expects {want}")


# ----------------------------------------------------------------------------------------------------------
# checks


def _skip(name, why):
    return CheckResult(name, None, None, None, f"skipped: {why}")


def _check_values(ctx: _Ctx) -> CheckResult:
    tol, d = _tol(ctx.dtype), ctx.s.d
    rng = ctx.rng("values")
    if ctx.kind == "features":
        if ctx.family is None:
            return _skip("values", f"name the refattn family to compare with (--as, one of {sorted(FEATURE_FAMILIES)})")
        ref_fn = FEATURE_FAMILIES[ctx.family][0]
        x, om = ctx.normal(rng, 2, 2, 8, d, scale=0.5), ctx.omega(rng, 32)
        phi = ctx.call(x, om).astype(np.float64)
        ref = np.asarray(ref_fn(x.astype(np.float64), om.astype(np.float64)))
        if phi.shape != ref.shape:
            return CheckResult("values", False, None, tol, f"feature width {phi.shape[-1]}; refattn's {ctx.family} map "
                               f"has {ref.shape[-1]} for m = {om.shape[0]}")
        floor = math.sqrt(np.finfo(ctx.dtype).eps) * np.max(np.abs(ref))
        err = float(np.max(np.abs(phi - ref) / (np.abs(ref) + floor))) if np.all(np.isfinite(phi)) else math.inf
        return CheckResult("values", err <= tol, err, tol,
                           f"max |phi - ref| / (|ref| + sqrt(eps) max|ref|) against refattn {ctx.family} features, "
                           f"x (2, 2, 8, {d}), m = 32")
    fam = ctx.family or "positive"
    if fam not in ATTENTION_FAMILIES:
        raise UsageError(f"--as {fam!r}: attention families are {ATTENTION_FAMILIES} (favor_attention features)")
    ref_fn = _favor_ref(fam)[0]
    q, k, v = (ctx.normal(rng, 2, 2, 16, d, scale=0.7) for _ in range(3))
    om = ctx.omega(rng, 32)
    errs = {}
    for causal in (False, True):
        y = ctx.call(q, k, v, om, causal).astype(np.float64)
        ref = np.asarray(ref_fn(*(a.astype(np.float64) for a in (q, k, v, om)), causal))
        errs[causal] = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref))) if np.all(np.isfinite(y)) else math.inf
    err = max(errs.values())
    return CheckResult("values", err <= tol, err, tol,
                       f"max |out - ref| / max |ref| against favor_attention(features={fam!r}): bidirectional "
                       f"{errs[False]:.2e}, causal {errs[True]:.2e} (L = 16, d = {d}, m = 32)")


def _fd_self(ctx, args, grads, cot, extra=()):
    """Central-difference directional derivative of the candidate's own forward vs its gradient (float64)."""
    rng = ctx.rng("fd")
    t = [rng.standard_normal(a.shape) for a in args]
    h = 1e-6
    def f(sign):
        return ctx.call(*[a + sign * h * ti for a, ti in zip(args, t)], *extra).astype(np.float64)
    fd = float(np.sum(cot * (f(1) - f(-1))) / (2 * h))
    an = float(sum(np.sum(ti * g) for ti, g in zip(t, grads) if g is not None))
    return abs(fd - an) / max(abs(fd), abs(an), 1e-300)


def _check_gradients(ctx: _Ctx) -> CheckResult:
    if not ctx.fw.autograd:
        return _skip("gradients", f"framework {ctx.fw.name} has no automatic differentiation")
    tol, d, rng = _tol(ctx.dtype), ctx.s.d, ctx.rng("gradients")
    gfn = _gradfn(ctx.fn, ctx.kind)
    if ctx.kind == "features":
        if ctx.family is None:
            return _skip("gradients", "name the refattn family to compare with (--as)")
        names = ["x", "omega"]
        args = [ctx.normal(rng, 2, 2, 8, d, scale=0.5), ctx.omega(rng, 32)]
        cases = [((), lambda c: FEATURE_FAMILIES[ctx.family][1](*(a.astype(np.float64) for a in args), c))]
    else:
        fam = ctx.family or "positive"
        names = ["q", "k", "v", "omega"]
        args = [ctx.normal(rng, 2, 2, 12, d, scale=0.7) for _ in range(3)] + [ctx.omega(rng, 32)]
        gref = _favor_ref(fam)[1]
        cases = [((c,), (lambda cot, c=c: gref(*(a.astype(np.float64) for a in args), c, cot))) for c in (False, True)]
    worst, where, fd_notes = 0.0, "", []
    for extra, ref in cases:
        y = ctx.call(*args, *extra).astype(np.float64)
        cot = rng.standard_normal(y.shape)
        try:
            _, g = ctx.fw.vjp(gfn, args, cot.astype(ctx.dtype), *extra)
        except Exception as e:  # noqa: BLE001
            return CheckResult("gradients", False, math.inf, tol, f"autograd raised {type(e).__name__}: {e}")
        r = ref(cot)
        label = "" if not extra else (" causal" if extra[0] else " bidirectional")
        for n, gi, ri in zip(names, g, r):
            ri = np.asarray(ri)
            if gi is None:
                return CheckResult("gradients", False, math.inf, tol, f"no gradient for {n}{label} (the candidate "
                                   f"does not differentiate it)")
            e = float(np.linalg.norm(gi.astype(np.float64) - ri) / max(np.linalg.norm(ri), 1e-300))
            if not math.isfinite(e) or e > worst:
                worst, where = (math.inf if not math.isfinite(e) else e), f"{n}{label}"
        if ctx.dtype == np.float64:
            fd_notes.append(f"{_fd_self(ctx, args, g, cot, extra):.1e}{label}")
    detail = (f"max |g - g_ref| / |g_ref| over {', '.join(names)} (worst: {where}) against refattn's manual backward"
              f"{' (' + ctx.family + ')' if ctx.family else ''}")
    if fd_notes:
        detail += f"; the candidate's gradient vs central differences of its own forward: {', '.join(fd_notes)}"
    return CheckResult("gradients", worst <= tol, worst, tol, detail)


def _kernel_points(d, rng, r):
    e1 = np.eye(d)[0]
    ones = np.ones(d) / math.sqrt(d)
    rnd = rng.standard_normal((2, d))
    rnd /= np.linalg.norm(rnd, axis=-1, keepdims=True)
    return {"e1": r * e1, "all-ones": r * ones, "random-1": r * rnd[0], "random-2": r * rnd[1]}


def _feature_estimates(ctx, X, draw, n, m):
    """(n, P, P) kernel estimates phi(X) phi(X)^T from n calls of the candidate, omegas from `draw(rng, m)`."""
    rng = ctx.rng("features-draws", str(X.shape), str(n))
    Xc = X.astype(ctx.dtype)[None, None]                                                   # (1, 1, P, d)
    est = np.empty((n, X.shape[0], X.shape[0]))
    for t in range(n):
        phi = ctx.call(Xc, draw(rng, m))[0, 0].astype(np.float64)                          # (P, m')
        est[t] = phi @ phi.T
    return est


def _kernel_fit(est, X, pairs):
    """z of every candidate kernel: max over `pairs` of |mean - K| / se."""
    n = est.shape[0]
    mean, se = est.mean(0), est.std(0, ddof=1) / math.sqrt(n)
    out = {}
    for name, (_, K) in KERNELS.items():
        k = K(X, X)
        zs = [abs(mean[i, j] - k[i, j]) / se[i, j] if se[i, j] > 0 else
              (0.0 if abs(mean[i, j] - k[i, j]) <= 1e-9 * max(1.0, abs(k[i, j])) else math.inf) for i, j in pairs]
        out[name] = float(max(zs))
    return out


def _check_kernel_features(ctx: _Ctx) -> CheckResult:
    d = ctx.s.d
    pts = _kernel_points(d, ctx.rng("kernel-points"), 0.8)
    X = np.stack(list(pts.values()))                                                        # (P, d)
    X = X.astype(ctx.dtype).astype(np.float64)
    P = X.shape[0]
    pairs = [(i, j) for i in range(P) for j in range(i, P)]
    est = _feature_estimates(ctx, X, lambda r, m: ctx.omega(r, m), ctx.s.n_kernel, ctx.s.m_kernel)
    zs = _kernel_fit(est, X, pairs)
    zc = _zcrit(len(pairs))
    consistent = [k for k, z in zs.items() if z <= zc]
    want = FEATURE_FAMILIES[ctx.family][2] if ctx.family else None
    ctx.cache["kernel"] = want if want else (min(zs, key=zs.get) if consistent else None)
    listing = ", ".join(f"{k} z={z:.1f}" for k, z in sorted(zs.items(), key=lambda kv: kv[1]))
    if consistent:
        found = " and ".join(f"{k} [{KERNELS[k][0]}]" for k in consistent)
        head = f"unbiased for {found}"
    else:
        head = "unbiased for none of the candidate kernels (biased, or another kernel)"
    if want:
        passed, fig = want in consistent, zs[want]
        head += f"; the family {ctx.family!r} claims {want}"
    else:
        passed, fig = bool(consistent), min(zs.values())
    return CheckResult("kernel", passed, fig, zc,
                       f"{head} ({listing}; {ctx.s.n_kernel} iid Gaussian omegas, m = {ctx.s.m_kernel}, {len(pairs)} "
                       f"pairs of points with |x| = 0.8, d = {d}; false alarm {ALPHA:g})")


def _attention_inputs(ctx):
    rng = ctx.rng("attention-limit")
    d, L = ctx.s.d, ctx.s.L_attn
    q, k = (ctx.normal(rng, 1, 2, L, d, scale=0.5) for _ in range(2))              # |q|^2 ~ 4: FAVOR+ is accurate
    v = ctx.normal(rng, 1, 2, L, d)
    return rng, q, k, v


def _attention_limit(ctx: _Ctx):
    """Candidate and refattn outputs on the same n omegas (bidirectional), and the candidate targets."""
    if "limit" in ctx.cache:
        return ctx.cache["limit"]
    from refattn.attention import softmax_attention
    rng, q, k, v = _attention_inputs(ctx)
    d = ctx.s.d
    fam = ctx.family or "positive"
    ref_fn = _favor_ref(fam)[0]
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    Y, R = [], []
    for _ in range(ctx.s.n_attn):
        om = ctx.omega(rng, ctx.s.m_attn)
        Y.append(ctx.call(q, k, v, om, False).astype(np.float64))
        R.append(np.asarray(ref_fn(q64, k64, v64, om.astype(np.float64), False)))
    ksq = np.sum(k64 * k64, -1)[..., None, :]                                                # (..., 1, L)
    targets = {
        "softmax-scaled": softmax_attention(q64, k64, v64),
        "softmax-unscaled": softmax_attention(q64, k64, v64, scale=1.0),
        "gaussian-scaled": softmax_attention(q64, k64, v64, mask_add=-0.5 * ksq / math.sqrt(d)),
        "uniform": np.broadcast_to(v64.mean(-2, keepdims=True), v64.shape),
    }
    ctx.cache["limit"] = (np.stack(Y), np.stack(R), targets)
    return ctx.cache["limit"]


def _rel_rms(a, t, spread):
    return float(np.sqrt(np.mean((a - t) ** 2)) / spread) if np.all(np.isfinite(a)) else math.inf


def _check_kernel_attention(ctx: _Ctx) -> CheckResult:
    Y, R, targets = _attention_limit(ctx)
    S = targets["softmax-scaled"]
    spread = float(np.sqrt(np.mean((S - S.mean(-2, keepdims=True)) ** 2)))
    Ybar, Rbar = Y.mean(0), R.mean(0)
    errs = {name: _rel_rms(Ybar, T, spread) for name, T in targets.items()}
    e_ref = _rel_rms(Rbar, S, spread)
    best = min(errs, key=errs.get)
    thr = 2 * e_ref + 10 * _tol(ctx.dtype)
    passed = best == "softmax-scaled" and errs["softmax-scaled"] <= thr
    listing = ", ".join(f"{k} {e:.3f}" for k, e in sorted(errs.items(), key=lambda kv: kv[1]))
    return CheckResult("kernel", passed, errs["softmax-scaled"], thr,
                       f"the output averaged over {ctx.s.n_attn} omegas (m = {ctx.s.m_attn}, L = {ctx.s.L_attn}) is "
                       f"closest to {best} attention; RMS error / RMS spread of softmax: {listing}; refattn "
                       f"favor_attention on the same omegas: {e_ref:.3f} (threshold 2x that)")


def _check_same_features(ctx: _Ctx) -> CheckResult:
    Y, R, targets = _attention_limit(ctx)
    S = targets["softmax-scaled"]
    Sc = S - S.mean(-2, keepdims=True)

    def slope(A):
        Ac = A - A.mean(-2, keepdims=True)
        return float(np.sum(Ac * Sc) / np.sum(Sc * Sc))
    if not np.all(np.isfinite(Y)):
        return CheckResult("same_features", False, math.inf, 0.5, "non-finite outputs")
    b = np.array([slope(y) for y in Y])
    b_ref = float(np.mean([slope(r) for r in R]))
    beta = float(b.mean())
    se = float(b.std(ddof=1) / math.sqrt(len(b))) if len(b) > 1 else math.nan
    return CheckResult("same_features", beta > 0.5, beta, 0.5,
                       f"slope of the candidate's output on softmax attention across queries (centred), mean of "
                       f"{len(b)} omegas: {beta:.3f} +- {se:.3f} (refattn: {b_ref:.3f}); shared features give ~1, "
                       f"keys featurised with a separate draw give ~0 (E phi_1(q).E phi_2(k) = 1: uniform attention)")


def _prefix_probe(ctx, rng, om, underflow: bool):
    d, L0, L1 = ctx.s.d, 24, 8
    s4 = d ** 0.25
    q = ctx.normal(rng, 1, 1, L0 + L1, d, scale=0.7, dtype=np.float64)
    v = ctx.normal(rng, 1, 1, L0 + L1, d, dtype=np.float64)
    k = rng.standard_normal((1, 1, L0 + L1, d)) * 0.7
    om64 = om.astype(np.float64)
    norms = np.linalg.norm(om64, axis=-1)
    rows = np.argsort(-norms)[:L1]
    k[0, 0, L0:] = s4 * om64[rows]                                   # k' = d^-1/4 k = omega_r: exponent |omega_r|^2/2
    top = float(np.max(0.5 * norms[rows] ** 2))
    gap = None
    if underflow:
        target = -(-math.log(float(np.finfo(ctx.dtype).smallest_subnormal)) + 20.0)   # exponents this far below
        u = rng.standard_normal((L0, d))
        u /= np.linalg.norm(u, axis=-1, keepdims=True)
        a = np.max(u @ om64.T, axis=-1)                                                  # (L0,) max_r omega_r.u
        # exponent of a prefix key k' = R u: R a - R^2/2 <= target - ... solve R^2/2 - R a + (target) = 0 (larger root)
        c = top - (-target)                                                              # wanted max exponent
        R = a + np.sqrt(np.maximum(a * a - 2 * c, 0.0))
        k[0, 0, :L0] = s4 * R[:, None] * u
        e_pre = float(np.max(R * a - R * R / 2))
        gap = top - e_pre
    dt = ctx.dtype
    full = ctx.call(q.astype(dt), k.astype(dt), v.astype(dt), om, True).astype(np.float64)[0, 0, :L0]
    pre = ctx.call(q[..., :L0, :].astype(dt), k[..., :L0, :].astype(dt), v[..., :L0, :].astype(dt), om,
                   True).astype(np.float64)[0, 0]
    return full, pre, top, gap


def _check_prefix(ctx: _Ctx) -> CheckResult:
    tol = _tol(ctx.dtype)
    rng = ctx.rng("prefix")
    om = ctx.omega(rng, 64)
    res, notes = [], []
    for label, uf in (("aligned later keys", False), ("underflow gap", True)):
        try:
            full, pre, top, gap = _prefix_probe(ctx, rng, om, uf)
        except Exception as e:  # noqa: BLE001
            return CheckResult("prefix_invariance", False, math.inf, tol,
                               f"{label}: the candidate raised {type(e).__name__} in causal mode: {e}")
        if not np.all(np.isfinite(pre)):
            res.append(math.inf)
            notes.append(f"{label}: non-finite output for the prefix alone (instability, not a leak)")
            continue
        err = float(np.max(np.abs(full - pre)) / np.max(np.abs(pre))) if np.all(np.isfinite(full)) else math.inf
        res.append(err)
        notes.append(f"{label} (exponent {top:.1f}" + (f", {gap:.0f} above the prefix keys'" if gap else "") +
                     f"): {err:.2e}")
    fig = max(res)
    return CheckResult("prefix_invariance", fig <= tol, fig, tol,
                       "max |out_prefix(full) - out(prefix alone)| / max |out| for 24 prefix tokens + 8 appended keys "
                       "aligned with the largest rows of omega; " + "; ".join(notes))


def _check_dtype(ctx: _Ctx) -> CheckResult:
    rng, d = ctx.rng("dtype"), ctx.s.d
    bad, seen = [], []
    for dt in (np.float32, np.float64):
        if ctx.kind == "features":
            out = ctx.call(ctx.normal(rng, 1, 2, 4, d, scale=0.5, dtype=dt), ctx.omega(rng, 8, dtype=dt), raw=True)
        else:
            q, k, v = (ctx.normal(rng, 1, 2, 4, d, scale=0.5, dtype=dt) for _ in range(3))
            out = ctx.call(q, k, v, ctx.omega(rng, 8, dtype=dt), True, raw=True)
        got = dtype_name(out.dtype)
        seen.append(f"{np.dtype(dt).name} -> {got}")
        if got != np.dtype(dt).name:
            bad.append(f"{np.dtype(dt).name} in, {got} out")
    return CheckResult("dtype", not bad, float(len(bad)), 0.0,
                       ("silent cast: " + "; ".join(bad)) if bad else ", ".join(seen))


def _draws(ctx: _Ctx):
    if "draws" not in ctx.cache:
        d, n = ctx.s.d, ctx.s.n_draws
        W = np.empty((n, d, d))
        for i in range(n):
            W[i] = np.asarray(ctx.call(ctx.seed * 1_000_003 + i, d, d), dtype=np.float64)
        ctx.cache["draws"] = W
    return ctx.cache["draws"]


def _check_haar(ctx: _Ctx) -> CheckResult:
    W = _draws(ctx)                                                                       # (n, d, d)
    n, m, d = W.shape
    norms = np.linalg.norm(W, axis=-1)                                                    # (n, m)
    U = W / norms[..., None]
    z = math.sqrt(n) * np.mean(math.sqrt(d) * U, axis=0)                                  # (m, d) ~ N(0, 1)
    zc = _zcrit(m * d)
    zmax = float(np.max(np.abs(z)))
    i, j = np.unravel_index(int(np.argmax(np.abs(z))), z.shape)
    gram = np.abs(U @ np.swapaxes(U, -1, -2) - np.eye(m))                                 # (n, m, m)
    orth = float(np.max(gram))
    kind = "orthogonal blocks" if orth < 1e-4 else f"rows not orthogonal (max |u_i.u_j| {orth:.2f}; iid?)"
    cv = float(np.std(norms) / np.mean(norms))
    if cv < 1e-6:
        law = f"constant row norm {float(np.mean(norms)):.4g} (sqrt(d) = {math.sqrt(d):.4g})"
    else:
        p = float(scipy.stats.kstest(norms.ravel(), scipy.stats.chi(d).cdf).pvalue)
        law = f"row norms {'consistent with' if p > ALPHA else 'NOT'} chi({d}) (KS p = {p:.2g})"
    return CheckResult("haar", zmax <= zc, zmax, zc,
                       f"max |z| of sqrt(n) mean(sqrt(d) u_ij) over {m}x{d} coordinates (worst ({i}, {j}), mean "
                       f"u_ij {float(np.mean(U[:, i, j])):+.3f}); {n} draws of ({m}, {d}); {kind}; {law}; false alarm "
                       f"{ALPHA:g}")


def _check_unbiased_draw(ctx: _Ctx) -> CheckResult:
    from refattn.features import positive_features
    W = _draws(ctx)
    n, m, d = W.shape
    r = 0.6
    pts = _kernel_points(d, ctx.rng("unbiased-points"), r)
    zc = _zcrit(len(pts))
    zs, biases = {}, {}
    for name, x in pts.items():
        phi = positive_features(x[None, :], W.reshape(n * m, d)).reshape(n, m) * math.sqrt(n)   # (n, m) per draw
        est = np.sum(phi * phi, axis=-1)                                                       # (n,) of exp(|x|^2)
        target = math.exp(r * r)
        se = float(est.std(ddof=1) / math.sqrt(n))
        zs[name] = abs(float(est.mean()) - target) / se
        biases[name] = float(est.mean()) / target - 1
    worst = max(zs, key=zs.get)
    listing = ", ".join(f"{k} z={zs[k]:.1f} (rel. bias {biases[k]:+.2%})" for k in pts)
    return CheckResult("unbiased", zs[worst] <= zc, zs[worst], zc,
                       f"refattn positive_features on the candidate's draws, estimate of exp(|x|^2) at |x| = {r}: "
                       f"{listing}; {n} draws of ({m}, {d}); false alarm {ALPHA:g}")


def _check_unbiased_features(ctx: _Ctx) -> CheckResult:
    from refattn.random import draw_orthogonal
    kern = ctx.cache.get("kernel") or (FEATURE_FAMILIES[ctx.family][2] if ctx.family else None)
    if kern is None:
        return CheckResult("unbiased", False, math.inf, None, "no kernel identified by the kernel check")
    d, r = ctx.s.d, 1.0
    pts = _kernel_points(d, ctx.rng("unbiased-points"), r)
    X = np.concatenate([np.stack(list(pts.values())), -0.5 * np.stack(list(pts.values()))])   # (8, d)
    X = X.astype(ctx.dtype).astype(np.float64)
    P = len(pts)
    pairs = [(i, i) for i in range(P)] + [(i, P + i) for i in range(P)]
    dt = ctx.dtype
    est = _feature_estimates(ctx, X, lambda rg, m: draw_orthogonal(rg, m, d, dtype=dt), ctx.s.n_kernel, ctx.s.m_kernel)
    mean, se = est.mean(0), est.std(0, ddof=1) / math.sqrt(est.shape[0])
    K = KERNELS[kern][1](X, X)
    atol = 100 * float(np.finfo(dt).eps) * np.abs(K)
    zs = []
    for i, j in pairs:
        dev = abs(mean[i, j] - K[i, j])
        zs.append(dev / se[i, j] if se[i, j] > 0 else (0.0 if dev <= atol[i, j] else math.inf))
    zc = _zcrit(len(pairs))
    names = list(pts)
    worst = int(np.argmax(zs))
    wname = f"{names[worst % P]} ({'q = k' if worst < P else 'k = -q/2'})"
    return CheckResult("unbiased", bool(max(zs) <= zc), float(max(zs)), zc,
                       f"estimate of {kern} [{KERNELS[kern][0]}] under Haar-orthogonal draws (refattn draw_orthogonal,"
                       f" m = {ctx.s.m_kernel}), |q| = {r} along e1, all-ones, 2 random directions, k = q and k = -q/2;"
                       f" worst {wname}; {ctx.s.n_kernel} draws; false alarm {ALPHA:g}")


RUNNERS = {
    ("draw", "haar"): _check_haar, ("draw", "unbiased"): _check_unbiased_draw,
    ("features", "values"): _check_values, ("features", "gradients"): _check_gradients,
    ("features", "kernel"): _check_kernel_features, ("features", "unbiased"): _check_unbiased_features,
    ("features", "dtype"): _check_dtype,
    ("attention", "values"): _check_values, ("attention", "gradients"): _check_gradients,
    ("attention", "kernel"): _check_kernel_attention, ("attention", "same_features"): _check_same_features,
    ("attention", "prefix_invariance"): _check_prefix, ("attention", "dtype"): _check_dtype,
}


# ----------------------------------------------------------------------------------------------------------
# targets


def resolve_target(spec: str, kind: str, framework: str | None = None) -> tuple[Callable, str, str | None, str]:
    """``(fn, framework, family, note)`` for a TARGET: a built-in name, ``module:callable`` or ``file.py:callable``."""
    if spec in BUILTIN_TARGETS:
        t = builtin_target(spec, kind, framework)
        if framework is not None and framework != t.framework:
            raise UsageError(f"target {spec}: its {kind} callable takes {t.framework} arrays; got --framework {framework}")
        return t.fn, t.framework, t.family, t.note
    if ":" not in spec:
        raise UsageError(f"TARGET {spec!r}: expected module:callable, path/to/file.py:callable or a built-in target "
                         f"({', '.join(BUILTIN_TARGETS)})")
    mod_name, _, attr = spec.rpartition(":")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            if not os.path.isfile(mod_name):
                raise UsageError(f"TARGET {spec!r}: file {mod_name!r} does not exist")
            name = "_validation_target_" + str(abs(hash(os.path.abspath(mod_name))))
            specobj = importlib.util.spec_from_file_location(name, mod_name)
            mod = importlib.util.module_from_spec(specobj)
            sys.modules[name] = mod
            specobj.loader.exec_module(mod)
        else:
            mod = importlib.import_module(mod_name)
    except UsageError:
        raise
    except BaseException as e:  # noqa: BLE001 - anything the import raises (incl. SystemExit) is a usage error
        raise UsageError(f"TARGET {spec!r}: importing {mod_name!r} failed: {type(e).__name__}: {e}") from None
    fn = mod
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise UsageError(f"TARGET {spec!r}: {mod_name!r} has no attribute {attr!r}")
        fn = getattr(fn, part)
    return fn, framework or "numpy", None, ""


# ----------------------------------------------------------------------------------------------------------
# entry point


def check(fn: Callable[..., Any] | str, *, kind: str, framework: str | None = None, family: str | None = None,
          dtype: str = "float64", seed: int = 0, quick: bool = False, checks: tuple[str, ...] | None = None,
          name: str | None = None) -> Report:
    """Cross-check a candidate against refattn; see the module docstring for the contracts and the checks.

    Parameters
    ----------
    fn : callable or str
        The candidate, or a TARGET string (built-in name, ``module:callable``, ``path.py:callable``).
    kind : {"draw", "features", "attention"}
    framework : {"numpy", "torch", "jax"}, optional
        The candidate's array framework (default: numpy, or the built-in target's own).
    family : str, optional
        The refattn map the candidate claims: features ``positive``, ``positive-scaled`` (d^{-1/4} applied
        inside, as performer-pytorch does), ``hyperbolic``, ``gaussian-positive``, ``trig``, ``softmax-trig``;
        attention ``positive``, ``hyperbolic``, ``trig`` (default positive).
    dtype : {"float32", "float64"}
        Input dtype of the checks (``dtype`` always tries both).
    seed : int
        Every random input and draw derives from it.
    quick : bool
        Smaller Monte Carlo sizes (<= 15 s per target).
    checks : tuple of str, optional
        Run only these (of the kind's checks).
    name : str, optional
        The target's name in the report.

    Returns
    -------
    Report

    Raises
    ------
    UsageError
        (a ``ValueError``) unknown kind/framework/family/dtype/check, a target that does not import, a candidate
        with the wrong signature, one that raises on the probe call or returns the wrong shape.
    """
    t0 = time.perf_counter()
    if kind not in KINDS:
        raise UsageError(f"kind: unknown kind {kind!r}; expected one of {KINDS}")
    if dtype not in ("float32", "float64"):
        raise UsageError(f"dtype: expected 'float32' or 'float64'; got {dtype!r}")
    note = ""
    if isinstance(fn, str):
        name = name or fn
        fn, framework, fam0, note = resolve_target(fn, kind, framework)
        family = family or fam0
    name = name or getattr(fn, "__qualname__", None) or repr(fn)
    fw = get_framework(framework or "numpy")
    if family is not None:
        known = FEATURE_FAMILIES if kind == "features" else ATTENTION_FAMILIES if kind == "attention" else ()
        if family not in known:
            raise UsageError(f"--as {family!r}: unknown family for kind {kind}; expected one of {sorted(known)}")
    todo = KIND_CHECKS[kind]
    if checks is not None:
        unknown = [c for c in checks if c not in CHECKS]
        if unknown:
            raise UsageError(f"checks: unknown check(s) {unknown}; expected names from {CHECKS}")
        todo = tuple(c for c in todo if c in checks)
    _check_signature(fn, kind, name)
    ctx = _Ctx(fn, fw, kind, family, dtype, seed, QUICK if quick else SIZES, name)
    results = []
    with fw.session():
        _probe(ctx)
        for c in todo:
            try:
                results.append(RUNNERS[(kind, c)](ctx))
            except UsageError:
                raise
            except Exception as e:  # noqa: BLE001 - a candidate failing inside a check fails that check
                results.append(CheckResult(c, False, math.inf, None, f"raised {type(e).__name__}: {e}"))
    return Report(name, kind, fw.name, dtype, seed, family, results, note, time.perf_counter() - t0)
