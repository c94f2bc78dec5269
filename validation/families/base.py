"""The contract of a family: what the candidate receives, refattn's computation on the same draws, and the
checks.

A *feature* family hands the candidate ``fn(x, *draws)`` and reads its output as a kernel estimate:
``phi(X) . phi(Y)`` (or ``A(X) . B(Y)`` for a bilinear pair ``(A, B)`` such as FLT's ``(N1, N2)``). The checks
compare these estimates, never the raw feature columns, so the candidate may order or pair its features as it
likes (cosines then sines, or interleaved): only the kernel estimate and its gradients are part of the
contract.

* ``values``: ``est(X, Y)`` equals refattn's on the same inputs and draws: max |est - ref| / max |ref| <=
  ``4 sqrt(eps(dtype))``.
* ``gradients``: the gradient of ``<C, est(X, Y)>`` for the inputs and every learnable draw equals refattn's
  manual backward; or, for a family whose refattn backward is taken with respect to other parameters (FLT),
  the candidate's gradient equals central differences of its own forward (``validation.gradcheck.check_vjp``)
  -- with ``values`` that makes it the derivative of refattn's map.
* ``kernel``: the mean of ``est(x_i, x_j)`` over fresh draws (parameters fixed) equals the family's closed
  form (``validation.montecarlo.mean_test``, Bonferroni critical z at ``ALPHA``), or, where there is no
  closed form (generative spectra), refattn's estimate on independent draws (two-sample, paired by replicate).
* ``dtype``: float32 in, float32 out; float64 in, float64 out.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from refattn.tree import tree_get, tree_map, tree_paths, tree_replace

from ..base import UsageError
from ..checks.context import ALPHA, Ctx, combine, convert, mc_z, tol, zcrit
from ..checks.gradients import compare, self_consistency
from ..checks.report import CheckResult
from ..montecarlo import mean_test

__all__ = ["FeatureContract", "Family", "gram", "symmetric_vjp", "FEATURE_CHECKS"]


def symmetric_vjp(fwd: Callable, bwd: Callable, learnable: tuple[str, ...]) -> Callable:
    """``ref_vjp`` of a symmetric map from refattn's pair: ``fwd(x, args) -> (phi, cache)``, ``bwd(dphi,
    cache) -> {"x": ..., name: ...}``; the gradient of ``<C, phi(X) phi(Y)^T>``."""
    def vjp(X, Y, args, C):
        pX, cX = fwd(X, args)
        pY, cY = fwd(Y, args)
        gX = bwd(C @ pY, cX)                                                # dphi(X) = C phi(Y)
        gY = bwd(np.swapaxes(C, -1, -2) @ pX, cY)                           # dphi(Y) = C^T phi(X)
        out = {"x_q": gX["x"], "x_k": gY["x"]}
        out.update({n: tree_map(lambda a, b: a + b, gX[n], gY[n]) for n in learnable})
        return out
    return vjp


def gram(A, B):
    """``A B^T`` over the last two axes, in the arrays' own namespace (NumPy or the candidate's)."""
    import array_api_compat
    xp = array_api_compat.array_namespace(A, B)
    return A @ xp.matrix_transpose(B)


@dataclasses.dataclass
class FeatureContract:
    """A feature family: see the module docstring. Arrays in the hooks are NumPy."""

    family: str
    signature: str                      # the candidate's call, as documented in the CLI help
    arg_names: tuple[str, ...]          # its positional arguments, input first
    convention: str                     # the conventions the candidate must follow
    draw: Callable[..., dict]           # draw(rng, d, dtype) -> {name: array} for arg_names[1:]
    redraw: Callable[..., dict]         # redraw(rng, args, dtype) -> args with fresh Monte Carlo draws
    ref: Callable[..., tuple]           # ref(x, args) -> (A, B) float64 (B is A for a symmetric map)
    ref_vjp: Callable[..., dict] | None  # ref_vjp(X, Y, args, dG) -> {"x_q", "x_k", learnable...: grad}
    kernel_fn: Callable[..., np.ndarray] | None   # kernel(X, Y, args) -> (P, Q) closed form
    learnable: tuple[str, ...]          # draws whose gradients are compared
    inputs: Callable[..., np.ndarray]   # inputs(rng, shape, d) -> x (points where the estimator is accurate)
    bilinear: bool = False              # the candidate returns a pair (A, B)
    differentiable_input: bool = True   # False: x is a position (no gradient)
    kernel_name: str = ""
    d_input: Callable[[int], int] = lambda d: d
    causal = False

    # ---- calls
    def _pair(self, ctx: Ctx, x, args, raw=False):
        vals = [args[n] for n in self.arg_names[1:]]
        if self.bilinear:
            out = ctx.fn(*(convert(ctx.fw, a) for a in (x, *vals)))
            if not (isinstance(out, tuple) and len(out) == 2 and all(ctx.fw.is_array(o) for o in out)):
                raise UsageError(f"{ctx.name}: returned {type(out).__name__}; the {self.family} contract "
                                 f"{self.signature} returns a pair of {ctx.fw.name} arrays")
            return out if raw else tuple(ctx.fw.to_numpy(o) for o in out)
        phi = ctx.call(x, *vals, raw=raw)
        return phi, phi

    def estimate(self, ctx: Ctx, X, Y, args):
        """``A(X) B(Y)^T`` of the candidate, float64 NumPy."""
        A, B = self._pair(ctx, X, args)
        if Y is not X:
            B = self._pair(ctx, Y, args)[1]
        return gram(A.astype(np.float64), B.astype(np.float64))

    def ref_estimate(self, X, Y, args):
        A, _ = self.ref(X.astype(np.float64), _f64(args))
        _, B = self.ref(Y.astype(np.float64), _f64(args))
        return gram(A, B)

    # ---- hooks the checks call
    def probe(self, ctx: Ctx, rng):
        d = self.d_input(ctx.s.d)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        x = self.inputs(rng, (2, 3, 5), d).astype(ctx.dtype)
        A, B = self._pair(ctx, x, args)
        ok = all(a.ndim == 4 and a.shape[:3] == (2, 3, 5) for a in (A, B)) and A.shape == B.shape
        return ok, A, "(2, 3, 5, m') (for x of shape (2, 3, 5, d))"

    def dtype_call(self, ctx: Ctx, rng, dt):
        args = self.draw(rng, ctx.s.d, dt)
        x = self.inputs(rng, (1, 2, 4), self.d_input(ctx.s.d)).astype(dt)
        return self._pair(ctx, x, args, raw=True)[0]

    def values(self, ctx: Ctx) -> CheckResult:
        t, rng = tol(ctx.dtype), ctx.rng("values", self.family)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        d = self.d_input(ctx.s.d)
        X, Y = (self.inputs(rng, s, d).astype(ctx.dtype) for s in ((2, 2, 6), (2, 2, 5)))
        est = self.estimate(ctx, X, Y, args)
        ref = self.ref_estimate(X, Y, args)
        scale = float(np.max(np.abs(ref)))
        err = float(np.max(np.abs(est - ref)) / scale) if np.all(np.isfinite(est)) else math.inf
        return CheckResult("values", err <= t, err, t,
                           f"max |est - ref| / max |ref| of the kernel estimate {self._est_text()} against "
                           f"refattn {self.family} on the same draws ({', '.join(self.arg_names[1:])}), x "
                           f"(2, 2, 6|5, {d})")

    def _est_text(self):
        return "A(X) B(Y)^T" if self.bilinear else "phi(X) phi(Y)^T"

    def gradients(self, ctx: Ctx) -> CheckResult:
        t, rng = tol(ctx.dtype), ctx.rng("gradients", self.family)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        d = self.d_input(ctx.s.d)
        X, Y = (self.inputs(rng, s, d).astype(ctx.dtype) for s in ((1, 2, 6), (1, 2, 5)))
        fixed = [n for n in self.arg_names[1:] if n not in self.learnable]
        diff_in = ["x_q", "x_k"] if self.differentiable_input else []
        # learnable draws may be trees (a generator's weights): one differentiated argument per array leaf
        leaves = [(n, p) for n in self.learnable for p, _ in tree_paths(args[n])]
        names = diff_in + [f"{n}/{p}" if p else n for n, p in leaves]
        order = self.arg_names[1:]
        X_, Y_ = ctx.fw.asarray(X), ctx.fw.asarray(Y)

        def g(*a):
            xs = a[:2] if self.differentiable_input else (X_, Y_)
            rest = {n: args[n] for n in self.learnable}
            for (n, p), leaf in zip(leaves, a[len(diff_in):len(names)], strict=True):
                rest[n] = tree_replace(rest[n], p, leaf)
            rest.update(zip(fixed, a[len(names):], strict=True))
            vals = [rest[n] for n in order]
            if self.bilinear:
                A, _ = ctx.fn(xs[0], *vals)
                _, B = ctx.fn(xs[1], *vals)
            else:
                A, B = (combine(ctx.fn(x, *vals), "features") for x in xs)
            return gram(A, B)
        diff_args = ([X, Y] if self.differentiable_input else []) + [tree_get(args[n], p) for n, p in leaves]
        extra = tuple(convert(ctx.fw, args[n]) for n in fixed)
        est = self.estimate(ctx, X, Y, args)
        cot = rng.standard_normal(est.shape)
        try:
            _, grads = ctx.fw.vjp(g, diff_args, cot.astype(ctx.dtype), *extra)
        except Exception as e:  # noqa: BLE001
            return CheckResult("gradients", False, math.inf, t, f"autograd raised {type(e).__name__}: {e}")
        if self.ref_vjp is not None:
            r = self.ref_vjp(X.astype(np.float64), Y.astype(np.float64), _f64(args), cot)
            refs = [r.get(n) for n in diff_in] + [_leaf(r.get(n), p) for n, p in leaves]
            worst, where, missing = compare(names, grads, refs)
            if missing:
                return CheckResult("gradients", False, math.inf, t, missing)
            detail = (f"max |g - g_ref| / |g_ref| of <C, {self._est_text()}> over {_names_text(names)} "
                      f"(worst: {where}) against refattn's manual backward ({self.family})")
            if ctx.dtype == np.float64:
                detail += ("; the candidate's gradient vs central differences of its own forward: "
                           + self_consistency(ctx, g, names, diff_args, extra))
            return CheckResult("gradients", worst <= t, worst, t, detail)
        if ctx.dtype != np.float64:
            return CheckResult("gradients", None, None, None, "skipped: the central-difference comparison "
                                                              "runs in float64 (--dtype float64)")
        note = self_consistency(ctx, g, names, diff_args, extra)
        ok = not note.startswith("DISAGREES")
        return CheckResult("gradients", ok, 0.0 if ok else math.inf, 1e-6,
                           f"the candidate's gradient of <C, {self._est_text()}> for {_names_text(names)} vs "
                           "central differences of its own forward (validation.gradcheck.check_vjp, rtol "
                           f"1e-6): {note}; with values passing this is the derivative of refattn's "
                           f"{self.family} map")

    def kernel(self, ctx: Ctx) -> CheckResult:
        rng = ctx.rng("kernel", self.family)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        d = self.d_input(ctx.s.d)
        X = self.inputs(rng, (8,), d).astype(ctx.dtype).astype(np.float64)          # (P, d)
        P = X.shape[0]
        iu = np.triu_indices(P)
        n = ctx.s.n_kernel
        est = np.empty((n, len(iu[0])))
        ref = np.empty_like(est) if self.kernel_fn is None else None
        Xc = X.astype(ctx.dtype)[None, None]
        for i in range(n):
            a = self.redraw(rng, args, ctx.dtype)
            est[i] = self.estimate(ctx, Xc, Xc, a)[0, 0][iu]
            if ref is not None:
                ref[i] = self.ref_estimate(X, X, self.redraw(rng, args, ctx.dtype))[iu]
        zc = zcrit(len(iu[0]))
        eps = float(np.finfo(ctx.dtype).eps)
        if self.kernel_fn is not None:
            K = self.kernel_fn(X, X, _f64(args))[iu]
            scale = max(1.0, float(np.max(np.abs(K))))
            mt = mean_test(est, K, n_se=zc, atol=100 * eps * scale, se_floor=10 * eps * scale)
            what = f"the closed form {self.kernel_name}"
        else:
            scale = max(1.0, float(np.max(np.abs(ref))))
            mt = mean_test(est - ref, 0.0, n_se=zc, atol=100 * eps * scale, se_floor=10 * eps * scale)
            what = "refattn's estimate on independent draws (no closed form: two-sample z)"
        fig = mc_z(mt)
        return CheckResult(
            "kernel",
            fig <= zc,
            fig,
            zc,
            f"mean of the candidate's kernel estimate over {n} fresh draws against {what}, "
            f"{len(iu[0])} pairs of 8 points ({mt.zero_se_count} exact); false alarm {ALPHA:g}",
        )


def _leaf(tree, path):
    if tree is None:
        return None
    return tree_get(tree, path) if path else tree


def _names_text(names):
    return ", ".join(names) if len(names) <= 8 else ", ".join(names[:6]) + f", ... ({len(names)} arrays)"


def _f64(args: dict) -> dict:
    return tree_map(
        lambda v: v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v, args
    )


@dataclasses.dataclass
class Family:
    """A family name, its contracts by kind, and refattn's own implementation of each as a built-in target."""

    name: str
    contracts: dict[str, Any]            # kind -> FeatureContract / attention contract
    targets: dict[str, Callable[[str], Any]]   # kind -> target(framework) -> validation.base.Target
    checks: dict[str, tuple[str, ...]]   # kind -> the named checks that apply

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.contracts)

    def contract(self, kind: str):
        if kind not in self.contracts:
            raise UsageError(f"--as {self.name}: no {kind} contract (kinds: {', '.join(self.contracts)})")
        return self.contracts[kind]

    def refattn_target(self, kind: str, framework: str):
        if kind not in self.targets:
            raise UsageError(
                f"target refattn --as {self.name}: no {kind} contract (kinds: {', '.join(self.targets)})"
            )
        return self.targets[kind](framework)


FEATURE_CHECKS = ("values", "gradients", "kernel", "dtype")
