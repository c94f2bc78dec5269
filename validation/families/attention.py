"""Attention contracts of the randomised families: ``fn(q, k, v, *draws, causal) -> out (..., L, d_v)``.

The candidate receives the same draws as refattn (its feature family's, or S1's / FLT's) and a ``causal``
flag. Checks: ``values`` (bidirectional and causal, max |out - ref| / max |ref| <= 4 sqrt(eps)),
``gradients`` (q, k, v and every learnable draw against refattn's manual backward; draws without a refattn
gradient by central differences of the candidate's own forward), ``kernel`` (the output averaged over fresh
draws approaches the exact attention of the family's closed-form kernel at least half as well as refattn's
does on the same draws), ``prefix_invariance`` and ``stability`` (causal: 24 prefix tokens + 8 appended
whose keys have the largest exponents the family allows), ``dtype``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from refattn.attention import linear_attention
from refattn.attention.linear import linear_attention_bwd, linear_attention_fwd
from refattn.tree import tree_get, tree_map, tree_paths, tree_replace

from ..base import UsageError
from ..checks.causes import cause, unmatched
from ..checks.context import Ctx, convert, nonfinite_text, rel_err, tol
from ..checks.gradients import compare, gradient_cause, self_consistency
from ..checks.report import CheckResult, skip

__all__ = ["RandomAttention", "ATTENTION_CHECKS", "feature_attention"]

ATTENTION_CHECKS = ("values", "gradients", "kernel", "prefix_invariance", "stability", "batch_independence",
                    "dtype")
L0, L1 = 24, 8


def _f64(args):
    return tree_map(
        lambda v: v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v, args
    )


@dataclasses.dataclass
class RandomAttention:
    family: str
    signature: str
    draw_names: tuple[str, ...]                      # the draws, in the candidate's argument order
    draw: Callable[..., dict]                        # draw(rng, d, dtype) -> {name: draw}
    redraw: Callable[..., dict]                      # fresh Monte Carlo draws, parameters kept
    ref: Callable[..., np.ndarray]                   # ref(q, k, v, args, causal) -> out (float64)
    ref_vjp: Callable[..., dict]                   # ref_vjp(q, k, v, args, causal, dy) -> {name: grad | None}
    learnable: tuple[str, ...]
    limit: Callable[..., np.ndarray] | None          # limit(q, k, v, args) -> exact bidirectional attention
    # leak_keys(rng, args, n, d) -> keys with the largest exponents
    leak_keys: Callable[..., np.ndarray] | None
    scale: float = 0.5                               # input scale (|x| ~ scale)
    d_input: Callable[[int], int] = lambda d: d
    prefix_text: str = "appended keys with the family's largest exponents"
    positions: str | None = None                     # an argument filled with the positions arange(L)
    pos_shape: Callable[[int], tuple] = lambda L: (L,)
    causal = True

    def _fill(self, args, L, dtype):
        """`args` with the positional argument (if any) set to ``arange(L)`` for a sequence of length L."""
        if self.positions is None:
            return args
        return dict(args, **{self.positions: np.arange(L, dtype=dtype).reshape(self.pos_shape(L))})

    @property
    def arg_names(self):
        return ("q", "k", "v", *self.draw_names, "causal")

    def inputs(self, rng, shape, d, dtype):
        return (self.scale * rng.standard_normal(shape + (d,)) / math.sqrt(d)).astype(dtype)

    def _call(self, ctx: Ctx, q, k, v, args, causal, raw=False):
        args = self._fill(args, q.shape[-2], q.dtype)
        return ctx.call(q, k, v, *(args[n] for n in self.draw_names), causal, raw=raw)

    def _ref(self, q, k, v, args, causal):
        args = self._fill(_f64(args), q.shape[-2], np.float64)
        return np.asarray(self.ref(*(a.astype(np.float64) for a in (q, k, v)), args, causal))

    def probe(self, ctx: Ctx, rng):
        d = self.d_input(ctx.s.d)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        q, k, v = (self.inputs(rng, (2, 3, 5), d, ctx.dtype) for _ in range(3))
        out = self._call(ctx, q, k, v, args, False)
        return tuple(out.shape) == (2, 3, 5, d), out, (2, 3, 5, d)

    def dtype_call(self, ctx: Ctx, rng, dt):
        d = self.d_input(ctx.s.d)
        args = self.draw(rng, ctx.s.d, dt)
        q, k, v = (self.inputs(rng, (1, 2, 4), d, dt) for _ in range(3))
        return self._call(ctx, q, k, v, args, True, raw=True)

    def values(self, ctx: Ctx) -> CheckResult:
        t, rng, d = tol(ctx.dtype), ctx.rng("values", self.family), self.d_input(ctx.s.d)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        q, k, v = (self.inputs(rng, (2, 2, 16), d, ctx.dtype) for _ in range(3))
        errs, texts = {}, []
        for causal in (False, True):
            tag = "causal" if causal else "bidirectional"
            try:
                y = self._call(ctx, q, k, v, args, causal).astype(np.float64)
            except UsageError:
                raise
            except Exception as e:  # noqa: BLE001 - a candidate failing in one mode: report the other
                texts.append(f"{tag}: raised {type(e).__name__}: {e}")
                continue
            errs[causal] = rel_err(y, self._ref(q, k, v, args, causal))
            bad = nonfinite_text(y)
            texts.append(f"{tag} " + (bad if bad else f"{errs[causal]:.2e}"))
        finite = [e for e in errs.values() if math.isfinite(e)]
        fig = max(finite) if finite else None
        passed = len(errs) == 2 and all(e <= t for e in errs.values())
        detail = (f"max |out - ref| / max |ref| against refattn {self.family} attention on the same draws "
                  f"({', '.join(self.draw_names)}): {', '.join(texts)}")
        if passed:
            return CheckResult("values", True, fig, t, detail)
        if len(errs) < 2 and all(e <= t for e in errs.values()):
            why = cause("causal-raises", "; ".join(x for x in texts if "raised" in x))
        elif any(not math.isfinite(e) for e in errs.values()):
            why = cause("not-finite", "; ".join(x for x in texts if "not finite" in x))
        elif errs.get(False, math.inf) <= t:
            why = unmatched(f"bidirectional correct ({errs[False]:.1e}), causal off by {errs[True]:.2g}: the "
                            "causal path (prefix sums or its stabiliser)")
        elif fig is not None and fig < 1e-2:
            why = cause("additive-eps", f"a small relative deviation ({fig:.2g}) from refattn on the "
                                        "same draws, as an additive eps in the features gives")
        else:
            why = unmatched(f"relative error {fig:.3g} against refattn {self.family} on the same draws")
        return CheckResult("values", False, fig, t, detail, cause=why)

    def batch_pair(self, ctx: Ctx, causal: bool):
        """Outputs ``(out, out')`` for inputs (3, 2, 12, d) and the same with batch element 0's keys set "
          "to the
        family's largest exponents (random large keys when the family has none)."""
        rng, d = ctx.rng("batch", self.family), self.d_input(ctx.s.d)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        q, k, v = (self.inputs(rng, (3, 2, 12), d, np.float64) for _ in range(3))
        k2 = k.copy()
        if self.leak_keys is not None:
            k2[0] = self.leak_keys(rng, self._fill(_f64(args), 12, np.float64), 12, d)
        else:
            k2[0] = 4 * rng.standard_normal((2, 12, d))
        dt = ctx.dtype
        with np.errstate(all="ignore"):
            out = self._call(ctx, q.astype(dt), k.astype(dt), v.astype(dt), args, causal)
            out2 = self._call(ctx, q.astype(dt), k2.astype(dt), v.astype(dt), args, causal)
        return out.astype(np.float64), out2.astype(np.float64)

    def gradients(self, ctx: Ctx) -> CheckResult:
        t, rng, d = tol(ctx.dtype), ctx.rng("gradients", self.family), self.d_input(ctx.s.d)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        q, k, v = (self.inputs(rng, (1, 2, 10), d, ctx.dtype) for _ in range(3))
        args = self._fill(args, 10, ctx.dtype)
        leaves = [(n, p) for n in self.learnable for p, _ in tree_paths(args[n])]
        names = ["q", "k", "v"] + [f"{n}/{p}" if p else n for n, p in leaves]
        fixed = [n for n in self.draw_names if n not in self.learnable]
        worst, where, notes = 0.0, "", []
        for causal in (False, True):
            def g(*a, causal=causal):
                rest = {n: args[n] for n in self.learnable}
                for (n, p), leaf in zip(leaves, a[3:len(names)], strict=True):
                    rest[n] = tree_replace(rest[n], p, leaf)
                rest.update(zip(fixed, a[len(names):], strict=True))
                return ctx.fn(*a[:3], *(rest[n] for n in self.draw_names), causal)
            diff_args = [q, k, v] + [tree_get(args[n], p) for n, p in leaves]
            extra = tuple(convert(ctx.fw, args[n]) for n in fixed)
            cot = rng.standard_normal(v.shape)
            try:
                _, grads = ctx.fw.vjp(g, diff_args, cot.astype(ctx.dtype), *extra)
            except Exception as e:  # noqa: BLE001
                return CheckResult(
                    "gradients", False, math.inf, t, f"autograd raised {type(e).__name__}: {e}"
                )
            r = self.ref_vjp(*(a.astype(np.float64) for a in (q, k, v)), _f64(args), causal, cot)
            refs = [r.get(n) for n in ("q", "k", "v")] + [_leaf(r.get(n), p) for n, p in leaves]
            label = " causal" if causal else " bidirectional"
            w, at, missing = compare(names, grads, refs, label)
            if missing:
                return CheckResult("gradients", False, math.inf, t, missing)
            if w > worst or not math.isfinite(w):
                worst, where = w, at
            if ctx.dtype == np.float64:
                fd = self_consistency(ctx, g, names, diff_args, extra)
                notes.append(fd + label)
                if fd.startswith("DISAGREES") and any(x is None for x in refs):
                    worst, where = math.inf, f"central differences{label}"
        unref = [n for n, x in zip(names, refs, strict=True) if x is None]
        detail = (f"max |g - g_ref| / |g_ref| over {_short(names)} (worst: {where}) against refattn's manual "
                  f"backward"
                  + (f"; {', '.join(unref)} by central differences only" if unref else ""))
        if notes:
            detail += "; the candidate's gradient vs central differences of its own forward: " + ", ".join(
                notes
            )
        return CheckResult("gradients", worst <= t, worst, t, detail,
                           cause=gradient_cause(worst, t, where, notes))

    def kernel(self, ctx: Ctx) -> CheckResult:
        if self.limit is None:
            return skip("kernel", f"{self.family} has no closed-form kernel (values compares with refattn)")
        rng, d = ctx.rng("kernel", self.family), self.d_input(ctx.s.d)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        q, k, v = (self.inputs(rng, (1, 2, ctx.s.L_attn), d, ctx.dtype) for _ in range(3))
        Y, R = [], []
        for _ in range(ctx.s.n_attn * 4):
            a = self.redraw(rng, args, ctx.dtype)
            Y.append(self._call(ctx, q, k, v, a, False).astype(np.float64))
            R.append(self._ref(q, k, v, a, False))
        T = np.asarray(self.limit(*(x.astype(np.float64) for x in (q, k, v)),
                                  self._fill(_f64(args), q.shape[-2], np.float64)))
        spread = float(np.sqrt(np.mean((T - T.mean(-2, keepdims=True)) ** 2)))

        def rel(A):
            return float(np.sqrt(np.mean((A - T) ** 2)) / spread) if np.all(np.isfinite(A)) else math.inf
        e, e_ref = rel(np.mean(Y, 0)), rel(np.mean(R, 0))
        thr = 2 * e_ref + 10 * tol(ctx.dtype)
        return CheckResult("kernel", e <= thr, e, thr,
                           f"the output averaged over {len(Y)} draws against exact attention with the "
                           f"closed-form kernel (RMS error / RMS spread): {e:.3f}; refattn on the same draws "
                           f"{e_ref:.3f} (threshold 2x that)")

    def prefix_probes(self, ctx: Ctx) -> list:
        rng, d = ctx.rng("prefix", self.family), self.d_input(ctx.s.d)
        args = self.draw(rng, ctx.s.d, ctx.dtype)
        out = []
        for label, big in (("appended keys of the largest exponent", True), ("random appended keys", False)):
            try:
                q, k, v = (self.inputs(rng, (1, 1, L0 + L1), d, np.float64) for _ in range(3))
                if big and self.leak_keys is not None:
                    k[0, 0, L0:] = self.leak_keys(rng, self._fill(_f64(args), L0 + L1, np.float64), L1, d)
                dt = ctx.dtype
                with np.errstate(all="ignore"):
                    full = self._call(ctx, q.astype(dt), k.astype(dt), v.astype(dt), args, True)
                    pre = self._call(ctx, *(x[..., :L0, :].astype(dt) for x in (q, k, v)), args, True)
                out.append(
                    (
                        label,
                        (full.astype(np.float64)[0, 0, :L0], pre.astype(np.float64)[0, 0], None, None),
                        None,
                    )
                )
            except Exception as e:  # noqa: BLE001
                out.append((label, None, e))
        return out


def _leaf(tree, path):
    if tree is None:
        return None
    return tree_get(tree, path) if path else tree


def _short(names):
    return ", ".join(names) if len(names) <= 8 else ", ".join(names[:6]) + f", ... ({len(names)} arrays)"


def feature_attention(fc: Any, pair: tuple[Callable, Callable], *, limit_kernel: Callable | None,
                      leak_keys: Callable | None, signature: str) -> RandomAttention:
    """The attention contract of a feature family: ``out = phi(q) (phi(k)^T v) / phi(q) (phi(k)^T 1)``
    (causal: prefix sums) with the family's map ``phi`` on q and k *as given* (no d^{-1/4} scaling: the
    attention of the family's own kernel), refattn's linear attention as the reference."""
    fwd, bwd = pair
    draw_names = fc.arg_names[1:]

    def ref(q, k, v, args, causal):
        pq, _ = fwd(q, args)
        pk, _ = fwd(k, args)
        return linear_attention_fwd(pq, pk, v, causal=causal, on_nonpositive="ignore")[0]

    def ref_vjp(q, k, v, args, causal, dy):
        pq, cq = fwd(q, args)
        pk, ck = fwd(k, args)
        _, lc = linear_attention_fwd(pq, pk, v, causal=causal, on_nonpositive="ignore")
        gl = linear_attention_bwd(dy, lc)
        gq, gk = bwd(gl.phi_q, cq), bwd(gl.phi_k, ck)
        out = {"q": gq["x"], "k": gk["x"], "v": gl.v}
        out.update({n: tree_map(lambda a, b: a + b, gq[n], gk[n]) for n in fc.learnable})
        return out

    def limit(q, k, v, args):
        K = np.asarray(limit_kernel(q[0, 0] if q.ndim > 2 else q, k[0, 0] if k.ndim > 2 else k, args))
        Ks = np.stack([np.asarray(limit_kernel(q[i, j], k[i, j], args)) for i in range(q.shape[0])
                       for j in range(q.shape[1])]).reshape(q.shape[:-2] + K.shape)
        return (Ks @ v) / np.sum(Ks, -1, keepdims=True)

    def draw(rng, d, dtype):
        return fc.draw(rng, d, dtype)

    return RandomAttention(
        family=fc.family,
        signature=signature,
        draw_names=draw_names,
        draw=draw,
        redraw=fc.redraw,
        ref=ref,
        ref_vjp=ref_vjp,
        learnable=fc.learnable,
        limit=None if limit_kernel is None else limit,
        leak_keys=leak_keys,
        d_input=fc.d_input,
        scale=0.5,
        prefix_text="appended keys at the largest exponents of the draws" if leak_keys else "random keys",
    )


def attend(fq, fk, v, causal):
    """refattn's linear attention on a map's outputs (a stabilised pair ``(phi, log_scale)`` or ``phi``)."""
    if isinstance(fq, tuple):
        (pq, _), (pk, ls) = fq, fk
        return linear_attention(pq, pk, v, causal=causal, k_log_scale=ls, on_nonpositive="ignore")
    return linear_attention(fq, fk, v, causal=causal, on_nonpositive="ignore")


def half_rows(omega_fn: Callable) -> Callable:
    """``leak_keys`` for a PRF map: ``omega_r / 2`` for the rows of largest norm, where ``x . omega_r -
    |x|^2`` peaks (exponent ``|omega_r|^2 / 4``, above every other key's)."""
    def keys(rng, args, n, d):
        om = np.asarray(omega_fn(args))[:, :d]                                  # (M, d)
        rows = np.argsort(-np.linalg.norm(om, axis=-1))[:n]
        return om[rows] / 2
    return keys


def torch_target(contract: RandomAttention, forward: Callable) -> Callable:
    """A built-in attention target on torch tensors: `forward` (refattn's array-API core, run on the tensors
    themselves) with refattn's manual backward (``contract.ref_vjp``, on tensors too) as its torch gradient --
    torch autograd cannot differentiate the causal path, which writes chunks into preallocated outputs."""
    import torch

    def fn(q, k, v, *rest):
        *draws, causal = rest
        args = dict(zip(contract.draw_names, draws, strict=True))
        leaves = [(n, p) for n in contract.learnable for p, _ in tree_paths(args[n])]

        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, *leaf_values):
                ctx.save_for_backward(q, k, v)
                with torch.no_grad():
                    return forward(q, k, v, *draws, causal)

            @staticmethod
            def backward(ctx, dy):
                q, k, v = ctx.saved_tensors
                plain = tree_map(lambda a: a.detach() if isinstance(a, torch.Tensor) else a, args)
                r = contract.ref_vjp(q, k, v, plain, causal, dy.contiguous())
                return (r["q"], r["k"], r["v"], *(_leaf(r.get(n), p) for n, p in leaves))
        return _Fn.apply(q, k, v, *(tree_get(args[n], p) for n, p in leaves))
    return fn
