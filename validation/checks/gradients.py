"""``gradients``: (autograd frameworks) the candidate's gradients equal refattn's manual backward.

figure = max over arguments of ``|g - g_ref| / |g_ref|`` (Frobenius), threshold ``4 sqrt(eps)``. In float64
the detail also says whether the candidate's gradient is the derivative of its own forward: the candidate's
VJP is handed to :func:`validation.gradcheck.check_vjp` (central differences, the project's one
implementation).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..gradcheck import check_vjp
from .causes import cause, unmatched
from .context import Ctx, gradfn, tol
from .favor import FEATURE_FAMILIES, favor_ref
from .report import CheckResult, skip

__all__ = ["run", "self_consistency", "compare", "gradient_cause"]


def self_consistency(
    ctx: Ctx, fn: Callable, names: list[str], args: list[np.ndarray], extra: tuple = ()
) -> str:
    """The candidate's VJP (autograd) against central differences of its own forward, by ``check_vjp``: the
    worst relative error, or the disagreement it found (float64 only)."""
    def fwd(**a):
        return ctx.fw.to_numpy(fn(*(ctx.fw.asarray(a[n]) for n in names), *extra)).astype(np.float64), None

    def bwd(c, _cache):
        _, g = ctx.fw.vjp(fn, [np.asarray(a, dtype=np.float64) for a in args], c, *extra)
        return dict(zip(names, g, strict=True))
    try:
        worst = check_vjp(
            fwd,
            bwd,
            {n: np.asarray(a, dtype=np.float64) for n, a in zip(names, args, strict=True)},
            seed=ctx.seed,
            n_directions=1,
        )
    except AssertionError as e:
        return f"DISAGREES ({e})"
    return f"{max(worst.values()):.1e}"


def compare(names, g, r, label="") -> tuple[float, str, str | None]:
    """``(worst relative error, where, message if a gradient is missing)``: candidate `g` vs refs `r`."""
    worst, where = 0.0, ""
    for n, gi, ri in zip(names, g, r, strict=True):
        if ri is None:
            continue
        ri = np.asarray(ri, dtype=np.float64)
        if gi is None:
            return (
                math.inf,
                f"{n}{label}",
                f"no gradient for {n}{label} (the candidate does not differentiate it)",
            )
        e = float(np.linalg.norm(np.asarray(gi, dtype=np.float64) - ri) / max(np.linalg.norm(ri), 1e-300))
        if not math.isfinite(e) or e > worst:
            worst, where = (math.inf if not math.isfinite(e) else e), f"{n}{label}"
    return worst, where, None


def run(ctx: Ctx) -> CheckResult:
    if not ctx.fw.autograd:
        return skip("gradients", f"framework {ctx.fw.name} has no automatic differentiation")
    if ctx.spec is not None:
        return ctx.spec.gradients(ctx)
    t, d, rng = tol(ctx.dtype), ctx.s.d, ctx.rng("gradients")
    gfn = gradfn(ctx.fn, ctx.kind)
    if ctx.kind == "features":
        if ctx.family is None:
            return skip("gradients", "name the refattn family to compare with (--as)")
        names = ["x", "omega"]
        args = [ctx.normal(rng, 2, 2, 8, d, scale=0.5), ctx.omega(rng, 32)]
        cases: list[tuple[tuple, Any]] = [
            ((), lambda c: FEATURE_FAMILIES[ctx.family][1](*(a.astype(np.float64) for a in args), c))]
        phi_ref = np.asarray(FEATURE_FAMILIES[ctx.family][0](*(a.astype(np.float64) for a in args)))
    else:
        names = ["q", "k", "v", "omega"]
        args = [ctx.normal(rng, 2, 2, 12, d, scale=0.7) for _ in range(3)] + [ctx.omega(rng, 32)]
        gref = favor_ref(ctx.family or "positive")[1]
        cases = [
            ((c,), (lambda cot, c=c: gref(*(a.astype(np.float64) for a in args), c, cot)))
            for c in (False, True)
        ]
    worst, where, fd_notes, through = 0.0, "", [], ""
    for extra, ref in cases:
        y = ctx.call(*args, *extra).astype(np.float64)
        cot = cot_ref = rng.standard_normal(y.shape)
        if ctx.kind == "features" and y.shape[-1] != phi_ref.shape[-1]:
            # another width than refattn's map (see values): the gradient of the kernel-estimate functional
            # <R, phi phi^T> is the features' vjp with the cotangent (R + R^T) phi, for either map
            R = rng.standard_normal(y.shape[:-1] + y.shape[-2:-1])
            S = R + np.swapaxes(R, -1, -2)
            cot, cot_ref = S @ y, S @ phi_ref
            through = (f" through the kernel estimates phi(X) phi(X)^T (width {y.shape[-1]}; refattn's "
                       f"{phi_ref.shape[-1]})")
        try:
            _, g = ctx.fw.vjp(gfn, args, cot.astype(ctx.dtype), *extra)
        except Exception as e:  # noqa: BLE001
            return CheckResult("gradients", False, math.inf, t, f"autograd raised {type(e).__name__}: {e}")
        label = "" if not extra else (" causal" if extra[0] else " bidirectional")
        w, at, missing = compare(names, g, ref(cot_ref), label)
        if missing:
            return CheckResult("gradients", False, math.inf, t, missing)
        if w > worst or not math.isfinite(w):
            worst, where = w, at
        if ctx.dtype == np.float64:
            fd_notes.append(self_consistency(ctx, gfn, names, args, extra) + label)
    detail = (f"max |g - g_ref| / |g_ref| over {', '.join(names)} (worst: {where}) against refattn's manual "
              f"backward{' (' + ctx.family + ')' if ctx.family else ''}{through}")
    if fd_notes:
        detail += (
            f"; the candidate's gradient vs central differences of its own forward: {', '.join(fd_notes)}"
        )
    return CheckResult("gradients", worst <= t, worst, t, detail,
                       cause=gradient_cause(worst, t, where, fd_notes))


def gradient_cause(worst: float, t: float, where: str, fd_notes: list[str]) -> str | None:
    """The likely cause of a gradient mismatch: the candidate's gradient is not the derivative of its own
    forward (a detached stabiliser, a wrong custom backward), or its forward differs (see values)."""
    if worst <= t:
        return None
    off = [n for n in fd_notes if n.startswith("DISAGREES")]
    if off:
        return cause("detached-max", f"worst {where} {worst:.3g}; central differences of its own forward: "
                                     + off[0][:200])
    return unmatched(f"worst {where} {worst:.3g}; the gradient is the derivative of the candidate's own "
                     "forward (or float32: not checked), so its forward differs from refattn's (see values)")
