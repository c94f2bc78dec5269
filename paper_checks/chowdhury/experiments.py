"""Chowdhury et al.'s experiments at laptop scale (slow claims; ``paper_checks.experiments``).

kl.sec4.2-sparsity, kl.sec4.1-variance-metrics, kl.table4-eigenvalues and kl.lra-listops decide by their
experiment's pre-registered criterion (``harness.experiment_rule``; not-checkable at size tiny, a smoke run)
and each has a label-swap companion (:func:`paper_checks.companions.label_swap`); kl.table14-ratio-columns is
exact arithmetic on the printed Table 14.
"""

from __future__ import annotations

import math
import sys

from ..companions import label_swap
from ..experiments import eigenvalues, harness, listops, sparse_task, variance_metrics
from ..experiments.sparse_rules import ladder_rule
from ..mutations import mutation, patched
from ..registry import CHOWDHURY, Context, Result, claim, must_fail, stat_evidence
from ..rules import slip, with_rule

_HERE = sys.modules[__name__]
_TINY = {"tiny": "not-checkable"}   # the harness never applies a criterion to the smoke run (its design)


@claim("kl.sec4.2-sparsity", paper=CHOWDHURY, section="Sec. 4.2, Figure 6, Appendix E, Table 14",
       statement="'the convergence time of GMM-RKS remains more or less unchanged with increasing sparsity, "
                 "while for GMM-PRF the model converges slower as sparsity decreases ... not only is the "
                 "variance in the gradients higher for GMM-PRF, but also the mean is higher' (Table 14). "
                 "Pre-registered criterion: "
                 + sparse_task.CRITERION,
       expected={**_TINY, "full": "holds"},
       derivation="The PRF estimator's MSE grows like exp(2||S^T(q+k)||^2) (Theorem 3, re-derived), "
                   "unbounded in the query/key norms, while the RKS estimator's variance is bounded by a "
                   "constant; noisier attention outputs give noisier gradients at the classifier. Appendix "
                   "E.1's data (pairs, prefix bound 4, balanced classes) and E.2's model (3 layers, d_model "
                   "= d_ff = 64, 64 samples, AdamW beta2 0.98, eps 1e-9, wd 0.1) are reproduced at the "
                   "longest length the budget allows (sparse_task.SIZES; the paper: L = 200), float32, with "
                   "a linear warm-up and cosine decay; the paper's lr 5e-6 with 200K sequences is replaced "
                   "by a rate our step budget can use, so that the accuracy thresholds are reached. Every "
                   "(model, p, seed) run records its learning curve; a model that never reaches 40% is "
                   "reported with the steps it would need (learning guard). Side note: Table 14's last two "
                   "columns are labelled GMM-RKS/GMM-PRF but hold PRF/RKS (0.434024 / 0.069646 = 6.2318).",
       decide=ladder_rule(sparse_task.decide, sparse_task.CRITERION), slow=True)
def sec42_sparsity(ctx: Context) -> Result:
    sz = sparse_task.SIZES[ctx.size]
    note = (f"L={sz['L']} (paper 200), {sz['n']} sequences, p in {sz['ps']}, {sz['steps']} float32 steps, "
            f"{sz['seeds']} seed(s), {sz['repeats']} gradient repeats")
    return harness.claim_result(ctx, sparse_task.NAME, sparse_task.run, sparse_task.decide, scale_note=note)


@claim("kl.sec4.1-variance-metrics", paper=CHOWDHURY, section="Sec. 4.1, Figure 5, Figures 9-10",
       statement="RSD, PI and AGV computed from 100 runs per example 'are all highly correlated with each "
                 "other (R^2 values 0.95, 0.98 and 0.89 for RSD-AGV, RSD-PI and AGV-PI)' and 'our RKS based "
                 "models, in general, have lower variance as compared to our PRF models'. Pre-registered "
                 "criterion: "
                 + variance_metrics.CRITERION,
       expected={**_TINY, "full": "holds"},
       derivation="All three metrics are monotone functions of how often redrawn features flip the sign of "
                   "the output, so across models they should rank alike; RKS's bounded estimator variance "
                   "(Theorem 3) predicts fewer flips than PRF. The paper's tasks are binary; the metrics are "
                   "generalised to K classes through the modal class and its margin (exactly the paper's for "
                   "K = 2). Scale: the trained sparse-task (9 classes) and ListOps (10 classes) models of "
                   "the two other claims, each point a (model, cell, seed) above its learning guard, "
                   "instead of LRA Text/Retrieval at 4K tokens.",
       decide=ladder_rule(variance_metrics.decide, variance_metrics.CRITERION), slow=True)
def sec41_variance(ctx: Context) -> Result:
    sp, lo = sparse_task.SIZES[ctx.size], listops.SIZES[ctx.size]
    note = (f"trained sparse-task models (L={sp['L']}, {sp['steps']} steps) and ListOps models (length "
            f"{lo['min_len']}-{lo['max_len']}, {lo['steps']} steps), {sp['passes']} passes")
    return harness.claim_result(ctx, variance_metrics.NAME, variance_metrics.run, variance_metrics.decide,
                                scale_note=note)


@claim("kl.table4-eigenvalues", paper=CHOWDHURY, section="Sec. 4.1, Table 4 (Tables 9-12)",
       statement="'GMM-RKS and GMM-PRF models trained on the Text and Retrieval tasks indeed learn to have "
                 "eigenvalues significantly smaller than 1' (Table 4: max 0.096-0.499, mean 0.025-0.053). "
                 "Pre-registered criterion: " + eigenvalues.CRITERION,
       expected={**_TINY, "full": "holds"},
       derivation="Theorem 3's MSE decreases with the eigenvalues of Sigma, so a model that benefits from "
                   "less noise can learn to shrink them; independently, decoupled weight decay (0.1 in the "
                   "paper's Table 6) shrinks S geometrically whatever the gradient, so eigenvalues below 1 "
                   "are expected with decay -- the weight-decay-0 ablation tells the two apart. Stand-in "
                   "task (LRA Text/Retrieval are not available offline): the sparse sum task of Appendix E "
                   "(p = 0.1 cell, the sparse-task claim's own runs, wd 0.1) plus the same runs at wd 0; the "
                   "decay-only eigenvalue prod_t (1 - lr_t wd)^2 is computed from the schedule. ListOps' "
                   "GMM models are reported beside.",
       decide=ladder_rule(eigenvalues.decide, eigenvalues.CRITERION), slow=True)
def table4_eigenvalues(ctx: Context) -> Result:
    sz = sparse_task.SIZES[ctx.size]
    note = (f"stand-in: sparse task p={eigenvalues.P_EIG}, L={sz['L']}, {sz['steps']} steps, {sz['seeds']} "
            "seed(s), wd 0.1 and 0")
    return harness.claim_result(ctx, eigenvalues.NAME, eigenvalues.run, eigenvalues.decide, scale_note=note)


@claim("kl.lra-listops", paper=CHOWDHURY, section="Sec. 3.1, Table 2 (ListOps column)",
       statement="ListOps accuracy: GMM-RKS 18.55, FastFood-RKS 18.65, Generative-RKS 18.50 vs GMM-PRF "
                 "36.96, FastFood-PRF 37.05, Generative-PRF 37.42, softmax 36.38, Performer 36.00; 'for some "
                 "datasets such as ListOps, RKS based models tend to fall short of their PRF counterparts'. "
                 "Pre-registered criterion: " + listops.CRITERION,
       expected={**_TINY, "full": "holds"},
       derivation="RKS features give signed kernel estimates whose row sums (the attention normaliser) can "
                   "be near zero or negative, which destabilises the normalised attention that ListOps' "
                   "nested reductions need; PRF features are positive. Scale: expressions of tens to a few "
                   "hundred tokens (listops.SIZES), labels checked by an independent shift-reduce evaluator, "
                   "float32 with warm-up and cosine decay, instead of 2000 tokens and 10K steps; accuracies "
                   "are not the paper's.",
       decide=harness.experiment_rule(listops.decide, listops.CRITERION), slow=True)
def lra_listops(ctx: Context) -> Result:
    sz = listops.SIZES[ctx.size]
    note = (f"length {sz['min_len']}-{sz['max_len']} (paper up to 2000), depth<={sz['max_depth']}, "
            f"{sz['steps']} float32 steps, width {sz['d_model']}, {sz['seeds']} seed(s)")
    return harness.claim_result(ctx, listops.NAME, listops.run, listops.decide, scale_note=note)


# Table 14 as printed (Appendix E.3): sparsity -> rows (checkpoint %, RKS std, RKS |mean|, PRF std, PRF
# |mean|, ratio std, ratio |mean|), the last two columns headed "GMM-RKS/GMM-PRF".
_TABLE14 = {
    0.1: [(20, 0.083064, 0.144132, 0.079822, 0.139948, 0.960974, 0.97097),
          (40, 0.094528, 0.16609, 0.11077, 0.193444, 1.171828, 1.164689),
          (60, 0.099791, 0.176456, 0.116044, 0.201462, 1.162868, 1.141712),
          (80, 0.131252, 0.228456, 0.154802, 0.275594, 1.179433, 1.206332)],
    0.5: [(20, 0.069646, 0.121306, 0.434024, 0.53019, 6.231835, 4.370671),
          (40, 0.11552, 0.201468, 6.432806, 12.17245, 55.68558, 60.41891),
          (60, 0.142631, 0.249917, 3.752173, 5.886064, 26.30681, 23.55206),
          (80, 0.166899, 0.295308, 22.46943, 42.14157, 134.6289, 142.7036)],
    0.9: [(20, 0.059153, 0.102415, 0.065438, 0.115866, 1.106237, 1.131343),
          (40, 0.108255, 0.186704, 0.123171, 0.211465, 1.137784, 1.132622),
          (60, 0.119243, 0.206855, 0.126247, 0.217067, 1.058737, 1.049365),
          (80, 0.136816, 0.240525, 0.168633, 0.295976, 1.232546, 1.230542)],
}


def _half_unit(x: float) -> float:
    """Relative rounding bound of a printed entry: half a unit in its last printed decimal over |x| (the
    decimals as stored here; an entry printed with a trailing zero only makes the bound larger)."""
    text = repr(float(x))
    decimals = len(text.split(".")[1]) if "." in text and "e" not in text else 0
    return 0.5 * 10.0 ** -decimals / abs(x)


def _table14_worst(prf_over_rks: bool) -> float:
    """max over the 24 ratio cells of |num/den - printed ratio| / printed ratio, in units of that cell's
    rounding bound (half a unit of the last printed digit of num, den and the ratio, relative, summed: the
    first-order worst case of a ratio of two rounded entries against a rounded ratio). <= 1: the orientation
    reproduces every printed ratio; the wrong orientation is off by |1 - 1/q^2|, O(1) units of the ratio."""
    worst = 0.0
    for rows in _TABLE14.values():
        for _, rs, ra, ps, pa, q_std, q_abs in rows:
            pairs = ((ps, rs, q_std), (pa, ra, q_abs)) if prf_over_rks else ((rs, ps, q_std), (ra, pa, q_abs))
            for num, den, q in pairs:
                bound = _half_unit(num) + _half_unit(den) + _half_unit(q)
                worst = max(worst, abs(num / den - q) / q / bound)
    return worst


def _decide_table14(ev: dict) -> str:
    as_headed = float(ev.get("worst_rks_over_prf_in_rounding_bounds", ev.get("worst", math.inf)))
    swapped_dir = float(ev.get("worst_prf_over_rks_in_rounding_bounds", math.inf))
    return "holds" if min(as_headed, swapped_dir) <= 1.0 else "fails"


_TABLE14_RULE = with_rule(_decide_table14, (
    "holds iff the last two columns are the ratio of the table's own PRF and RKS columns in one orientation: "
    "every one of the 24 printed ratios reproduced within its rounding bound (half a unit of the last "
    "printed digit of numerator, denominator and ratio, relative, summed; worst cell <= 1 bound); the "
    "header's orientation (GMM-RKS/GMM-PRF) against the numbers' (PRF/RKS) is a label, recorded as a "
    "notation slip when they differ; fails iff neither orientation reproduces them (exact arithmetic on the "
    "printed table)."))


@claim("kl.table14-ratio-columns", paper=CHOWDHURY, section="Appendix E.3, Table 14",
       statement="Table 14's last two columns are headed 'GMM-RKS/GMM-PRF' (Std. Dev. and Abs. Mean ratios).",
       expected="holds",
       derivation="Exact arithmetic on the printed numbers (not statistical): dividing the PRF column by "
                  "the RKS column reproduces all 24 printed ratios to their printed digits (e.g. 0.434024 / "
                  "0.069646 = 6.2318), while RKS/PRF does not (0.1605 for that cell). The columns hold "
                  "GMM-PRF/GMM-RKS, as the text reads them ('the variance in the gradients [is] higher for "
                  "GMM-PRF': ratios above 1): the header is a swapped label, a notation slip, and the "
                  "table's numbers are consistent.",
       decide=_TABLE14_RULE)
def table14_ratio_columns(ctx: Context) -> Result:
    as_printed, swapped = _table14_worst(False), _table14_worst(True)
    ev = {"worst_rks_over_prf_in_rounding_bounds": as_printed,
          "worst_prf_over_rks_in_rounding_bounds": swapped,
          "max_rel_err_rks_over_prf": _table14_max_rel_err(False),
          "max_rel_err_prf_over_rks": _table14_max_rel_err(True), "cells": 24,
          **stat_evidence(n=24, seed=ctx.seed, detectable=1.0)}
    if as_printed > 1.0 and swapped <= 1.0:
        ev["slips"] = [slip("last two columns headed 'GMM-RKS/GMM-PRF'", "GMM-PRF/GMM-RKS",
                            "the table's own columns give PRF/RKS in every cell, and the text reads them so "
                            "(PRF's gradient variance higher: ratios above 1)",
                            {"worst cell as headed (rounding bounds)": as_printed,
                             "worst cell as PRF/RKS (rounding bounds)": swapped})]
    verdict = ctx.decide(ev)
    if verdict == "fails":
        return Result(verdict, ev, summary="neither ratio reproduces the printed columns")
    return Result(verdict, ev, summary=(
        f"the ratio columns are the table's PRF/RKS (worst cell {swapped:.2f} rounding bounds); "
        "notation slip: "
        f"headed RKS/PRF (worst cell {as_printed:.0f} bounds, max rel. err "
        f"{ev['max_rel_err_rks_over_prf']:.2f})") if ev.get("slips") else
        f"RKS/PRF reproduces the columns (worst cell {as_printed:.2f} rounding bounds)")


def _table14_max_rel_err(prf_over_rks: bool) -> float:
    errs = []
    for rows in _TABLE14.values():
        for _, rs, ra, ps, pa, q_std, q_abs in rows:
            num_s, den_s, num_a, den_a = (ps, rs, pa, ra) if prf_over_rks else (rs, ps, ra, pa)
            errs += [abs(num_s / den_s - q_std) / q_std, abs(num_a / den_a - q_abs) / q_abs]
    return max(errs)


@must_fail("kl.table14-ratio-columns")
def table14_ratio_columns_wrong(ctx: Context) -> Result:
    """The same check demanding that the header's direction reproduce the numbers must fail."""
    worst = _table14_worst(False)
    ev = {"worst": worst, **stat_evidence(n=24, seed=ctx.seed, detectable=1.0)}
    return Result(ctx.decide(ev), ev,
                  summary=f"header's orientation only: worst cell {worst:.0f} rounding bounds")


@mutation("kl.table14-ratio-columns", "PRF std column x 2 (a misread table)", kind="target")
def _prf_x2():
    t = {p: [(c, rs, ra, 2 * ps, pa, q1, q2) for c, rs, ra, ps, pa, q1, q2 in rows]
         for p, rows in _TABLE14.items()}
    return patched(_HERE, "_TABLE14", t)


@mutation("kl.table14-ratio-columns", "RKS std column x 0.5 (a misread table)", kind="target")
def _rks_half():
    t = {p: [(c, 0.5 * rs, ra, ps, pa, q1, q2) for c, rs, ra, ps, pa, q1, q2 in rows]
         for p, rows in _TABLE14.items()}
    return patched(_HERE, "_TABLE14", t)


def exchanged_columns():
    """Table 14 with the RKS and PRF columns exchanged (a context manager): the header then matches the
    numbers, the verdict stays holds and no slip is recorded (a label slip does not move a verdict)."""
    t = {p: [(c, ps, pa, rs, ra, q1, q2) for c, rs, ra, ps, pa, q1, q2 in rows]
         for p, rows in _TABLE14.items()}
    return patched(_HERE, "_TABLE14", t)


# ---- label-swap companions of the trained claims: each swap reads only the evidence keys the rule reads

def _cv(ev: dict, **changes) -> dict:
    return {**ev, "criterion_values": {**ev["criterion_values"], **changes}}


def _swap_sparsity(ev: dict) -> dict:
    cv = ev["criterion_values"]
    frac = cv.get("fraction_std_ratio_above_1")
    return _cv(ev, ratios=[1.0 / r for r in cv.get("ratios", []) if r],
               fraction_std_ratio_above_1=None if frac is None else 1.0 - frac,
               slowdown_prf=cv["slowdown_rks"], slowdown_rks=cv["slowdown_prf"])


def _swap_variance(ev: dict) -> dict:
    cv = ev["criterion_values"]
    return _cv(ev, pi_gmm_rks=cv["pi_gmm_prf"], pi_gmm_prf=cv["pi_gmm_rks"])


def _swap_listops(ev: dict) -> dict:
    return _cv(ev, prf_minus_rks={k: -v for k, v in ev["criterion_values"]["prf_minus_rks"].items()})


def _swap_eigen(ev: dict) -> dict:
    # Sigma's eigenvalues read as those of the precision Sigma^-1 (a convention slip): the largest becomes
    # 1/min, the mean at least 1/mean (Jensen). Learned covariances below 1 then read as above 1.
    cv = {k: ({"max": 1.0 / v["min"], "mean": 1.0 / v["mean"], "min": 1.0 / v["max"]}
              if isinstance(v, dict) and {"min", "mean", "max"} <= set(v) else v)
          for k, v in ev["criterion_values"].items()}
    return {**ev, "criterion_values": cv}


label_swap("kl.sec4.2-sparsity", "GMM-RKS <-> GMM-PRF", _swap_sparsity, ("criterion_values",),
           paper_direction=lambda ev: {**ev, "size": "small", "budget_fraction": 1.0, "criterion_values": {
               **ev.get("criterion_values", {}), "ratios": [2.0] * 4, "fraction_std_ratio_above_1": 1.0,
               "slowdown_prf": 2.0, "slowdown_rks": 1.0}})
label_swap("kl.sec4.1-variance-metrics", "GMM-RKS <-> GMM-PRF", _swap_variance, ("criterion_values",),
           paper_direction=lambda ev: {**ev, "size": "small", "budget_fraction": 1.0, "scale": {"passes": 10},
                                       "criterion_values": {
               **ev.get("criterion_values", {}), "n_points": 8, "pi_gmm_rks": 0.1, "pi_gmm_prf": 0.5,
               "correlations": {k: {"spearman": 0.9} for k in ("rsd-agv", "rsd-pi", "agv-pi")}}})
label_swap("kl.lra-listops", "RKS <-> PRF in every pair", _swap_listops, ("criterion_values",),
           paper_direction=lambda ev: {**ev, "size": "small", "budget_fraction": 1.0, "criterion_values": {
               **ev.get("criterion_values", {}), "prf_minus_rks": {"gmm-prf-gmm-rks": 0.2},
               "softmax_accuracy": 0.6, "majority_class_rate": 0.2}})
label_swap("kl.table4-eigenvalues", "covariance <-> precision (eigenvalues read as 1/lambda; no methods are "
           "compared, so the convention is what is swapped)", _swap_eigen, ("criterion_values",),
           paper_direction=lambda ev: {**ev, "size": "small", "budget_fraction": 1.0, "criterion_values": {
               f"{m} wd={wd}": {"max": 0.4, "mean": 0.05, "min": 0.01} for m in ("gmm-rks", "gmm-prf")
               for wd in (0.1, 0.0)}})
