r"""Horn et al. Strategy 2 (clipped relative-position keys): the candidates' contracts, 1-D and on 2-D grids.

``fn(q (..., L, d), v (..., L, d_v), w (2k + 1, d), k: int) -> out (..., L, d_v)``

    out_i = sum_j exp(q_i . w[clip(j - i, k)] / sqrt(d)) v_j / sum_j exp(q_i . w[clip(j - i, k)] / sqrt(d)),
    clip(x, k) = max(-k, min(k, x)),   row r + k of w holds w_r (r = -k..k)

(exact softmax kernel; refattn.rpe.s2_attention with ``grid=None, omega=None``). Signed distances have *two*
far regions, j - i >= k and j - i <= -k (``refattn.rpe.s2_clipped``): the paper's one-sided O(L k^2) formula
is for non-negative (Manhattan) distances. No causal mode. Checks: values (L = 20 > 2k, k = 3), gradients for
q, v, w (refattn's manual backward), batch_independence (batch element 0's q and v changed, the others'
outputs kept), dtype.

On 2-D grids, as Horn et al. run it on images (``s2-grid``, ``s2-grid-cls``):

``fn(q (..., L, d), v (..., L, d_v), w (k + 1, d), k: int, grid: (H, W)) -> out (..., L, d_v)``

    out_i = sum_j exp(q_i . w[c_ij] / sqrt(d)) v_j / sum_j exp(q_i . w[c_ij] / sqrt(d)),
    c_ij = min(|y_i - y_j| + |x_i - x_j|, k)     (Manhattan distance, clipped to k; row r of w holds w_r)

with the positions in row-major order (position ``i`` at ``(y, x) = divmod(i, W)``). ``s2-grid``: ``L = H W``
(refattn.rpe.s2_attention with ``grid=(H, W)``), checked on a 4 x 5 grid. ``s2-grid-cls``: ``L = H W + 1``,
the class token last, with no position: it is at the clipped distance k from every token and from itself
(``c_ij = k`` whenever i or j is the class token), checked on a 5 x 5 grid with k = 3 (Horn et al.'s
``relative_attention`` appends the class token after the ``img_dim^2`` image tokens).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from refattn.attention import softmax_attention, softmax_attention_bwd, softmax_attention_fwd
from refattn.rpe import s2_attention, s2_attention_bwd, s2_attention_fwd, s2_logits

from ..base import Target, UsageError
from ..checks.context import Ctx, convert, nonfinite_text, rel_err, tol
from ..checks.causes import unmatched
from ..checks.gradients import compare, gradient_cause, self_consistency
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
    keyless = True                                # batch_independence perturbs q and v (no keys)

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
        bad = nonfinite_text(y)
        err = rel_err(y, ref)
        detail = (f"max |out - ref| / max |ref| against refattn {self.family} on the same inputs "
                  f"({', '.join(self.arg_names)}){': ' + bad if bad else ''}")
        if err <= t:
            return CheckResult("values", True, err, t, detail)
        return CheckResult("values", False, None if bad else err, t, detail, cause=unmatched(
            bad or f"relative error {err:.3g}; worst at query {self._worst(y, ref)}"))

    def _worst(self, y, ref):
        i = np.unravel_index(int(np.argmax(np.abs(y - ref))), y.shape)
        return f"position {i[-2]} of batch {i[0]}" if y.ndim >= 3 else str(i)

    def batch_pair(self, ctx: Ctx, causal: bool):
        """Outputs ``(out, out')`` with batch element 0's q and v changed in the second call."""
        rng = ctx.rng("batch", self.family)
        args = self.draw(rng, ctx.s.d, np.float64)
        args2 = dict(args, q=args["q"].copy(), v=args["v"].copy())
        args2["q"][0] = 4 * rng.standard_normal(args["q"].shape[1:])
        args2["v"][0] = rng.standard_normal(args["v"].shape[1:])
        cast = {n: (a.astype(ctx.dtype) if isinstance(a, np.ndarray) else a) for n, a in args.items()}
        cast2 = {n: (a.astype(ctx.dtype) if isinstance(a, np.ndarray) else a) for n, a in args2.items()}
        return self._call(ctx, cast).astype(np.float64), self._call(ctx, cast2).astype(np.float64)

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
        fd = [detail.rsplit(": ", 1)[-1]] if ctx.dtype == np.float64 else []
        return CheckResult("gradients", worst <= t, worst, t, detail,
                           cause=gradient_cause(worst, t, where, fd))


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


# ---- 2-D grids (Manhattan distance), with and without a class token

GRIDS = {"s2-grid": ((4, 5), False), "s2-grid-cls": ((5, 5), True)}


def s2_grid_cls_logits(q, w, k, grid):
    """The dense logits ``(..., L, L)`` of S2 on a grid with a class token last (L = H W + 1): refattn's
    ``s2_logits`` on the grid tokens, and ``q_i . w_k / sqrt(d)`` wherever i or j is the class token."""
    import array_api_compat
    xp = array_api_compat.array_namespace(q, w)
    n = grid[0] * grid[1]
    N = s2_logits(q[..., :n, :], w, k=k, grid=tuple(grid))                          # (..., n, n)
    far = (q @ w[k]) * (q.shape[-1] ** -0.5)                                       # (..., L)
    top = xp.concat([N, far[..., :n, None]], axis=-1)                               # (..., n, n + 1)
    bottom = xp.broadcast_to(far[..., n:, None], far.shape[:-1] + (1, n + 1))     # (..., 1, n + 1)
    return xp.concat([top, bottom], axis=-2)


def s2_grid_cls_attention(q, v, w, k, grid):
    """S2 attention on a grid with a class token last: ``softmax_attention`` with the logits of
    :func:`s2_grid_cls_logits` (refattn's exact softmax, O(L^2))."""
    import array_api_compat
    xp = array_api_compat.array_namespace(q)
    return softmax_attention(q, xp.zeros_like(q), v, mask_add=s2_grid_cls_logits(q, w, k, grid))


def _grid_contract(family, grid, cls):
    H, W = grid
    L_ = H * W + (1 if cls else 0)

    def draw(rng, d, dtype):
        q = 0.7 * rng.standard_normal((2, L_, d))
        v = rng.standard_normal((2, L_, d))
        w = rng.standard_normal((K_CLIP + 1, d))
        return {"q": q.astype(dtype), "v": v.astype(dtype), "w": w.astype(dtype), "k": K_CLIP, "grid": grid}

    def ref(args):
        if cls:
            return np.asarray(s2_grid_cls_attention(args["q"], args["v"], args["w"], args["k"], grid))
        return np.asarray(s2_attention(args["q"], args["v"], args["w"], k=args["k"], grid=grid))

    def ref_vjp(args, dy):
        if not cls:
            _, cache = s2_attention_fwd(args["q"], args["v"], args["w"], k=args["k"], grid=grid)
            g = s2_attention_bwd(dy, cache)
            return {"q": g.q, "v": g.v, "w": g.w}
        # refattn's softmax backward for the logits, then the logits' own chain rule by hand:
        # N_ij = q_i . w_{c_ij} / sqrt(d):
        # dq_i = sum_j dN_ij w_{c_ij} / sqrt(d),  dw_r = sum_{c_ij = r} dN_ij q_i / sqrt(d)
        q, v, w = args["q"], args["v"], args["w"]
        N = s2_grid_cls_logits(q, w, K_CLIP, grid)
        _, cache = softmax_attention_fwd(q, np.zeros_like(q), v, mask_add=N, grad_mask_add=True)
        g = softmax_attention_bwd(dy, cache)
        dN = np.broadcast_to(g.mask_add, N.shape)
        C = _cls_index(grid, K_CLIP)                                               # (L, L)
        onehot = (C[..., None] == np.arange(K_CLIP + 1)).astype(np.float64)      # (L, L, R)
        dS = np.einsum("...ij,ijr->...ir", dN, onehot)                          # (..., L, R)
        s = q.shape[-1] ** -0.5
        dw = np.einsum("bir,bid->rd", dS.reshape(-1, *dS.shape[-2:]), q.reshape(-1, *q.shape[-2:]))
        return {"q": g.q + s * dS @ w, "v": g.v, "w": s * dw}

    c = AttentionContract(family, "fn(q, v, w, k, grid) -> out (..., L, d_v)", ("q", "v", "w", "k", "grid"),
                          ("q", "v", "w"), draw, ref, ref_vjp)
    return c


def _cls_index(grid, k):
    """(L, L) class index of the grid with a class token last: Manhattan distance clipped to k, and k for the
    class token."""
    H, W = grid
    y, x = np.divmod(np.arange(H * W), W)
    C = np.minimum(np.abs(y[:, None] - y[None, :]) + np.abs(x[:, None] - x[None, :]), k)
    out = np.full((H * W + 1, H * W + 1), k)
    out[:H * W, :H * W] = C
    return out


def _grid_target(family, cls):
    def t(framework):
        if framework not in ("numpy", "torch"):
            raise UsageError(f"target refattn --as {family}: NumPy or torch; got --framework {framework}")
        if cls:
            return Target(s2_grid_cls_attention, framework, family,
                          "refattn softmax_attention with refattn.rpe.s2_logits on the grid, the class token "
                          "at distance k")
        return Target(lambda q, v, w, k, grid: s2_attention(q, v, w, k=k, grid=tuple(grid)), framework,
                      family,
                      "refattn.rpe.s2_attention(grid=(H, W))")
    return t


CHECKS = ("values", "gradients", "batch_independence", "dtype")
FAMILIES = {"s2": Family("s2", {"attention": CONTRACT}, {"attention": _target}, {"attention": CHECKS})}
FAMILIES.update({
    name: Family(name, {"attention": _grid_contract(name, grid, cls)}, {"attention": _grid_target(name, cls)},
                 {"attention": CHECKS})
    for name, (grid, cls) in GRIDS.items()
})
