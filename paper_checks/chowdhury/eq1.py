"""kl.eq1-softmax: generalized kernel attention (Eq. 1) with the exponential kernel is softmax attention."""

from __future__ import annotations

import numpy as np

from refattn import exp_dot_kernel, kernel_attention, softmax_attention

from .._claims import CHOWDHURY, Context, Result, claim, must_fail, stat_evidence


def _max_rel_err(ctx: Context, kernel) -> tuple[float, dict]:
    rng = ctx.rng()
    B, L, d = 3, ctx.pick(16, 64), 16
    q, k, v = (rng.standard_normal((B, L, d)) for _ in range(3))
    errs = []
    for causal in (False, True):
        exact = softmax_attention(q, k, v, causal=causal)
        gen = kernel_attention(q, k, v, kernel, causal=causal)
        errs.append(float(np.max(np.abs(gen - exact)) / np.max(np.abs(exact))))
    return max(errs), {**stat_evidence(n=B * L, seed=ctx.seed, detectable=1e-12), "B": B, "L": L, "d": d,
                       "bidirectional_max_rel_err": errs[0], "causal_max_rel_err": errs[1], "tolerance": 1e-12}


@claim("kl.eq1-softmax", paper=CHOWDHURY, section="Sec. 2.1, Eq. (1)",
       statement="Generalized attention y_i = sum_j K(q_i, k_j) v_j / sum_j K(q_i, k_j) with "
                 "K(q, k) = exp(q . k / sqrt(d)) is softmax attention.",
       expected="holds",
       derivation="exp(q_i.k_j/sqrt d) / sum_j exp(q_i.k_j/sqrt d) is exactly the softmax of the row of logits, "
                  "so the two agree to rounding (float64: ~1e-15 relative), in both modes.")
def eq1_softmax(ctx: Context) -> Result:
    err, ev = _max_rel_err(ctx, exp_dot_kernel)
    ok = err <= 1e-12
    return Result("holds" if ok else "fails", ev, summary=f"max relative difference {err:.1e} (tolerance 1e-12)")


@must_fail("kl.eq1-softmax")
def eq1_softmax_wrong(ctx: Context) -> Result:
    """The same check with the scale 1/d instead of 1/sqrt(d) must fail."""
    err, ev = _max_rel_err(ctx, lambda q, k: exp_dot_kernel(q, k, scale=1.0 / q.shape[-1]))
    return Result("holds" if err <= 1e-12 else "fails", ev, summary=f"max relative difference {err:.1e}")
