"""kl.eq1-softmax: generalized kernel attention (Eq. 1) with the exponential kernel is softmax attention
(``refattn.kernel_attention`` with ``exp_dot_kernel`` against ``refattn.softmax_attention``)."""

from __future__ import annotations

import sys

import numpy as np

from refattn import exp_dot_kernel, kernel_attention, softmax_attention
from refattn.attention import softmax as softmax_module

from ..mutations import mutation, wrapped
from ..registry import CHOWDHURY, Context, Result, claim, must_fail, stat_evidence
from ..rules import holds_iff_at_most

TOLERANCE = 1e-12
BLOCK_ROWS = 8         # softmax_attention's query blocks of 8 rows: L = 28 (tiny) or 60 is 3 or more full
                       # blocks and a partial one, so the causal mask must follow each block's row offset


def _check(ctx: Context, kernel) -> Result:
    rng = ctx.rng()
    B, L, d = 3, ctx.pick(28, 60), 16
    q, k, v = (rng.standard_normal((B, L, d)) for _ in range(3))
    errs = []
    for causal in (False, True):
        exact = softmax_attention(q, k, v, causal=causal, block_elements=BLOCK_ROWS * B * L)
        gen = kernel_attention(q, k, v, kernel, causal=causal)
        errs.append(float(np.max(np.abs(gen - exact)) / np.max(np.abs(exact))))
    ev = {**stat_evidence(n=B * L, seed=ctx.seed, detectable=TOLERANCE), "B": B, "L": L, "d": d,
          "query_block_rows": BLOCK_ROWS,
          "bidirectional_max_rel_err": errs[0], "causal_max_rel_err": errs[1], "max_rel_err": max(errs),
          "tolerance": TOLERANCE}
    return Result(ctx.decide(ev), ev,
                  summary=f"max relative difference {max(errs):.1e} (tolerance {TOLERANCE:g}), both modes")


_RULE = holds_iff_at_most("max_rel_err", "tolerance")


@claim("kl.eq1-softmax", paper=CHOWDHURY, section="Sec. 2.1, Eq. (1)",
       statement="Generalized attention y_i = sum_j K(q_i, k_j) v_j / sum_j K(q_i, k_j) with "
                 "K(q, k) = exp(q . k / sqrt(d)) is softmax attention.",
       expected="holds", rule=_RULE.rule + " (over the bidirectional and causal modes)", decide=_RULE,
       derivation="exp(q_i.k_j/sqrt d) / sum_j exp(q_i.k_j/sqrt d) is exactly the softmax of the row of "
                  "logits, so the two agree to rounding (float64: ~1e-15 relative), in both modes.")
def eq1_softmax(ctx: Context) -> Result:
    return _check(ctx, exp_dot_kernel)


@must_fail("kl.eq1-softmax")
def eq1_softmax_wrong(ctx: Context) -> Result:
    """The same check with the scale 1/d instead of 1/sqrt(d) must fail."""
    return _check(ctx, lambda q, k: exp_dot_kernel(q, k, scale=1.0 / q.shape[-1]))


# Power: planted errors in what the check consumes (paper_checks/power.py).
_mod = sys.modules[__name__]


@mutation("kl.eq1-softmax", "kernel squared (logits x 2)", kind="refattn", bug="normalisation")
def _logits_x2():
    return wrapped(_mod, "exp_dot_kernel", lambda f: (lambda q, k, **kw: f(q, k, **kw) ** 2))


@mutation("kl.eq1-softmax", "attention matrix transposed: entry (i, j) = K(q_j, k_i)",
          kind="refattn", bug="transpose")
def _transposed():
    return wrapped(_mod, "exp_dot_kernel", lambda f: (lambda q, k, **kw: f(k, q, **kw)))


@mutation("kl.eq1-softmax", "causal mask of every query block from row 0 (block row offset dropped)",
          kind="refattn", bug="state-not-carried")
def _block_offset_dropped():
    return wrapped(softmax_module, "_block_logits",
                   lambda f: (lambda q_b, k, mask_b, scale, causal, row0, **kw:
                              f(q_b, k, mask_b, scale, causal, 0, **kw)))
