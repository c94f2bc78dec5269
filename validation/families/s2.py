r"""Horn et al. Strategy 2 (clipped relative-position keys), signed 1-D distances: the candidate's contract.

``fn(q (..., L, d), v (..., L, d_v), w (2k + 1, d), k: int) -> out (..., L, d_v)``

    out_i = sum_j exp(q_i . w[clip(j - i, k)] / sqrt(d)) v_j / sum_j exp(q_i . w[clip(j - i, k)] / sqrt(d)),
    clip(x, k) = max(-k, min(k, x)),   row r + k of w holds w_r (r = -k..k)

(exact softmax kernel; refattn.rpe.s2_attention with ``grid=None, omega=None``). Signed distances have *two*
far regions, j - i >= k and j - i <= -k (design.md trap 8): the paper's one-sided O(L k^2) formula is for
non-negative (Manhattan) distances. No causal mode. Checks: values (L = 20 > 2k, k = 3), gradients for q, v, w
(refattn's manual backward), dtype.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from refattn.rpe import s2_attention, s2_attention_bwd, s2_attention_fwd

from ..base import Target, UsageError
from ..checks.context import Ctx, convert, tol
from ..checks.gradients import compare, self_consistency
from ..checks.report import CheckResult
from .base import Family

__all__ = ["FAMILIES", "AttentionContract"]

K_CLIP, L = 3, 20


@dataclasses.dataclass
class AttentionContract:
    """An exact attention family: values and gradients against refattn on the same inputs, dtype."""

    family: str
    signature: str
    arg_names: tuple[str, ...]
    diff_names: tuple[str, ...]                   # the differentiable arguments (in arg order)
    draw: Callable[..., dict]                     # draw(rng, d, dtype) -> {name: value} for arg_names
    ref: Callable[[dict], np.ndarray]             # float64 NumPy
    ref_vjp: Callable[[dict, np.ndarray], dict]   # -> {name: grad}
    causal = False

    def _call(self, ctx: Ctx, args, raw=False):
        return ctx.call(*(args[n] for n in self.arg_names), raw=raw)

    def probe(self, ctx: Ctx, rng):
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        out = self._call(ctx, args)
        want = tuple(args["v"].shape)
        return tuple(out.shape) == want, out, want

    def dtype_call(self, ctx: Ctx, rng, dt):
        return self._call(ctx, self.draw(rng, ctx.s.d, dt), raw=True)

    def values(self, ctx: Ctx) -> CheckResult:
        t = tol(ctx.dtype)
        args = self.draw(ctx.rng("values", self.family), ctx.s.d, ctx.dtype)
        y = self._call(ctx, args).astype(np.float64)
        ref = self.ref(_f64(args))
        err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref))) if np.all(np.isfinite(y)) else math.inf
        return CheckResult("values", err <= t, err, t, "max |out - ref| / max |ref| against refattn "
                                                       f"{self.family} on the same inputs "
                                                       f"({', '.join(self.arg_names)})")

    def kernel(self, ctx: Ctx) -> CheckResult:                    # exact: nothing to estimate
        return CheckResult("kernel", None, None, None, f"skipped: {self.family} is exact (see values)")

    def gradients(self, ctx: Ctx) -> CheckResult:
        t, rng = tol(ctx.dtype), ctx.rng("gradients", self.family)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        names = list(self.diff_names)
        fixed = [n for n in self.arg_names if n not in names]

        def g(*a):
            vals = dict(zip(names, a[:len(names)], strict=True))
            vals.update(zip(fixed, a[len(names):], strict=True))
            return ctx.fn(*(vals[n] for n in self.arg_names))
        diff_args = [args[n] for n in names]
        extra = tuple(convert(ctx.fw, args[n]) for n in fixed)
        cot = rng.standard_normal(args["v"].shape)
        try:
            _, grads = ctx.fw.vjp(g, diff_args, cot.astype(ctx.dtype), *extra)
        except Exception as e:  # noqa: BLE001
            return CheckResult("gradients", False, math.inf, t, f"autograd raised {type(e).__name__}: {e}")
        r = self.ref_vjp(_f64(args), cot)
        worst, where, missing = compare(names, grads, [r[n] for n in names])
        if missing:
            return CheckResult("gradients", False, math.inf, t, missing)
        detail = (
            f"max |g - g_ref| / |g_ref| over {', '.join(names)} (worst: {where}) against refattn's backward"
        )
        if ctx.dtype == np.float64:
            detail += "; vs central differences of its own forward: " + self_consistency(
                ctx, g, names, diff_args, extra
            )
        return CheckResult("gradients", worst <= t, worst, t, detail)


def _f64(args):
    return {k: (v.astype(np.float64) if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _draw(rng, d, dtype):
    q = 0.7 * rng.standard_normal((2, L, d))
    v = rng.standard_normal((2, L, d))
    w = rng.standard_normal((2 * K_CLIP + 1, d))
    return {"q": q.astype(dtype), "v": v.astype(dtype), "w": w.astype(dtype), "k": K_CLIP}


def _ref(args):
    return np.asarray(s2_attention(args["q"], args["v"], args["w"], k=args["k"]))


def _ref_vjp(args, dy):
    _, cache = s2_attention_fwd(args["q"], args["v"], args["w"], k=args["k"])
    g = s2_attention_bwd(dy, cache)
    return {"q": g.q, "v": g.v, "w": g.w}


CONTRACT = AttentionContract(
    "s2", "fn(q, v, w, k) -> out (..., L, d_v)", ("q", "v", "w", "k"), ("q", "v", "w"), _draw, _ref, _ref_vjp
)


def _target(framework):
    if framework not in ("numpy", "torch"):
        raise UsageError(f"target refattn --as s2: the built-in family targets run refattn's array-API core "
                         f"on NumPy or torch arrays; got --framework "
                         f"{framework}")
    return Target(lambda q, v, w, k: s2_attention(q, v, w, k=k), framework, "s2", "refattn.rpe.s2_attention")


FAMILIES = {"s2": Family("s2", {"attention": CONTRACT}, {"attention": _target},
                         {"attention": ("values", "gradients", "dtype")})}
