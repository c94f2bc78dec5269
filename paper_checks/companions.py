"""Must-fail companions of the trained (experiment) claims, and the decision rules of those registered without
one: imported by :func:`paper_checks._claims.load_all` after the paper packages.

A trained claim's companion is its own decision rule applied to its own evidence with the method labels
swapped (the compared methods exchanged): a rule that decides from the measurement must flip a ``holds`` to
``fails`` when the labels are swapped, and a guard (too small a run, a model that did not learn) must stay a
guard. ``tests/paper_checks/test_rules.py`` checks both on the measured evidence and, for the flip itself, on
evidence moved into the paper's direction (so that the flip is shown at every size the suite runs).

The swaps below read only the evidence keys the rules read; each says which labels it exchanges.
"""

from __future__ import annotations

import math
from typing import Callable

from ._claims import REGISTRY, Context, Result, import_paper_modules, must_fail, refine
from ._rules import with_rule
from .power import MUTATIONS, mutation, patched

__all__ = ["SWAPS", "PAPER_DIRECTION", "swapped"]


# ---- rules for the Chowdhury et al. trained claims (paper_checks/chowdhury/experiments.py decides from the
# record with ``decide(record) -> (verdict, summary)``; the same criterion as a function of the evidence)

def _experiment_rule(exp_decide: Callable[[dict], tuple], criterion: str) -> Callable[[dict], str]:
    def decide(ev: dict) -> str:
        if "criterion_values" not in ev or ev.get("size") == "tiny":
            return "not-checkable"
        return exp_decide({"criterion_values": ev["criterion_values"], "scale": ev.get("scale")})[0]

    return with_rule(decide, "not-checkable at size tiny (a smoke run) or when a model piece is missing; "
                             "otherwise the pre-registered criterion: " + criterion)


def _kl_rules() -> None:
    from .chowdhury import experiments  # noqa: F401  (registers the claims)
    from .experiments import eigenvalues, listops, sparse_task, variance_metrics

    tiny = {"tiny": "not-checkable"}   # the harness never applies a criterion to the smoke run (its design)
    for cid, mod in (("kl.sec4.2-sparsity", sparse_task), ("kl.sec4.1-variance-metrics", variance_metrics),
                     ("kl.table4-eigenvalues", eigenvalues), ("kl.lra-listops", listops)):
        if cid in REGISTRY:
            refine(cid, decide=_experiment_rule(mod.decide, mod.CRITERION),
                   expected={**tiny, "full": REGISTRY[cid].expected})


def _decide_table14(ev: dict) -> str:
    tol = float(ev.get("tolerance", 1e-4))
    as_headed = float(ev.get("max_rel_err_rks_over_prf", ev.get("max_rel_err", math.inf)))
    swapped_dir = float(ev.get("max_rel_err_prf_over_rks", math.inf))
    if as_headed <= tol:
        return "holds"
    return "erratum" if swapped_dir <= tol else "fails"


_TABLE14_RULE = with_rule(_decide_table14, (
    "holds iff the columns as headed (RKS/PRF) reproduce all 24 printed ratios within the tolerance "
    "(max_rel_err_rks_over_prf <= 1e-4, the printed 6-7 digits); erratum iff they do not and PRF/RKS does; "
    "fails otherwise (exact arithmetic on the printed table)."))


def _table14() -> None:
    from .chowdhury import experiments as kl_exp

    if "kl.table14-ratio-columns" not in REGISTRY:
        return
    refine("kl.table14-ratio-columns", decide=_TABLE14_RULE)

    @mutation("kl.table14-ratio-columns", "PRF std column x 2 (a misread table)")
    def _prf_x2():
        t = {p: [(c, rs, ra, 2 * ps, pa, q1, q2) for c, rs, ra, ps, pa, q1, q2 in rows]
             for p, rows in kl_exp._TABLE14.items()}
        return patched(kl_exp, "_TABLE14", t)

    @mutation("kl.table14-ratio-columns", "RKS and PRF columns exchanged (label slip)")
    def _exchanged():
        t = {p: [(c, ps, pa, rs, ra, q1, q2) for c, rs, ra, ps, pa, q1, q2 in rows]
             for p, rows in kl_exp._TABLE14.items()}
        return patched(kl_exp, "_TABLE14", t)


# ---- label swaps -------------------------------------------------------------------------------------------

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


def _swap_table1(ev: dict) -> dict:
    return {**ev, "gain_s1": -float(ev["gain_s1"]), "gain_s2": -float(ev["gain_s2"])}


def _swap_shift(ev: dict) -> dict:
    r = dict(ev["retention"])
    r["absolute"], r["s1"], r["s2"] = min(r["s1"], r["s2"]), r["absolute"], r["absolute"]
    return {**ev, "retention": r}


def _swap_eigen(ev: dict) -> dict:
    # Sigma's eigenvalues read as those of the precision Sigma^-1 (a convention slip): the largest becomes
    # 1/min, the mean at least 1/mean (Jensen). Learned covariances below 1 then read as above 1.
    cv = {k: ({"max": 1.0 / v["min"], "mean": 1.0 / v["mean"], "min": 1.0 / v["max"]}
              if isinstance(v, dict) and {"min", "mean", "max"} <= set(v) else v)
          for k, v in ev["criterion_values"].items()}
    return {**ev, "criterion_values": cv}


def _swap_flt(ev: dict) -> dict:
    return {**ev, "gain_flt": -float(ev["gain_flt"])}


#: claim id -> (which labels are exchanged, the swap, the evidence keys it needs)
SWAPS: dict[str, tuple[str, Callable[[dict], dict], tuple[str, ...]]] = {
    "kl.sec4.2-sparsity": ("GMM-RKS <-> GMM-PRF", _swap_sparsity, ("criterion_values",)),
    "kl.sec4.1-variance-metrics": ("GMM-RKS <-> GMM-PRF", _swap_variance, ("criterion_values",)),
    "kl.lra-listops": ("RKS <-> PRF in every pair", _swap_listops, ("criterion_values",)),
    "kl.table4-eigenvalues": ("covariance <-> precision (eigenvalues read as 1/lambda; no methods are "
                              "compared, so the convention is what is swapped)", _swap_eigen,
                              ("criterion_values",)),
    "horn.table1-ordering": ("S1, S2 <-> No-Pos (each gain negated)", _swap_table1, ("gain_s1", "gain_s2")),
    "horn.shift-robustness": ("Absolute <-> S1 and S2", _swap_shift, ("retention",)),
    "flt.image-classification": ("FLT <-> No-Pos (gain negated)", _swap_flt, ("gain_flt",)),
}

#: claim id -> evidence moved into the direction the paper states (guards passed), for the flip test
PAPER_DIRECTION: dict[str, Callable[[dict], dict]] = {
    "kl.sec4.2-sparsity": lambda ev: {**ev, "size": "small", "criterion_values": {
        **ev.get("criterion_values", {}), "ratios": [2.0] * 4, "fraction_std_ratio_above_1": 1.0,
        "slowdown_prf": 2.0, "slowdown_rks": 1.0}},
    "kl.sec4.1-variance-metrics": lambda ev: {
        **ev, "size": "small", "scale": {"passes": 10}, "criterion_values": {
            **ev.get("criterion_values", {}), "n_points": 8, "pi_gmm_rks": 0.1, "pi_gmm_prf": 0.5,
            "correlations": {k: {"spearman": 0.9} for k in ("rsd-agv", "rsd-pi", "agv-pi")}}},
    "kl.lra-listops": lambda ev: {**ev, "size": "small", "criterion_values": {
        **ev.get("criterion_values", {}), "prf_minus_rks": {"gmm-prf-gmm-rks": 0.2},
        "softmax_accuracy": 0.6, "majority_class_rate": 0.2}},
    "kl.table4-eigenvalues": lambda ev: {**ev, "size": "small", "criterion_values": {
        f"{m} wd={wd}": {"max": 0.4, "mean": 0.05, "min": 0.01} for m in ("gmm-rks", "gmm-prf")
        for wd in (0.1, 0.0)}},
    "horn.table1-ordering": lambda ev: {**ev, "size": "small", "data_stand_in": False,
                                        "min_margin_over_floor": 0.0, "gain_s1": 0.2, "gain_s2": 0.2},
    "horn.shift-robustness": lambda ev: {**ev, "size": "small", "data_stand_in": False,
                                         "min_margin_over_floor": 0.0,
                                         "retention": {"no-pos": 0.5, "absolute": 0.1, "s1": 0.9, "s2": 0.9}},
    "flt.image-classification": lambda ev: {**ev, "size": "small", "data_stand_in": False,
                                            "min_margin_over_floor": 0.0, "gain_flt": 0.2, "spread": 0.05},
}


def swapped(claim_id: str, evidence: dict) -> dict:
    """`evidence` with claim `claim_id`'s method labels swapped (unchanged when the keys the swap reads are
    absent: a run that produced no comparison, e.g. a missing model piece, has nothing to swap)."""
    what, fn, keys = SWAPS[claim_id]
    if not all(k in evidence for k in keys):
        return {**evidence, "labels_swapped": f"{what} (nothing to swap)"}
    out = fn(evidence)
    out["labels_swapped"] = what
    return out


def _companion(claim_id: str) -> Callable[[Context], Result]:
    def companion(ctx: Context) -> Result:
        c = REGISTRY[claim_id]
        res = c.check(ctx)
        ev = swapped(claim_id, res.evidence)
        verdict = c.decide(ev)
        return Result(verdict, ev, summary=f"labels swapped ({SWAPS[claim_id][0]}): {verdict} (unswapped: "
                                           f"{res.verdict})")

    companion.__doc__ = f"{claim_id}'s rule on its evidence with the labels swapped ({SWAPS[claim_id][0]})."
    return companion


def _register() -> None:
    import_paper_modules()                 # also when this module is imported before load_all()
    _kl_rules()
    if "kl.table14-ratio-columns" not in MUTATIONS:
        _table14()
    for cid in SWAPS:
        c = REGISTRY.get(cid)
        if c is not None and c.must_fail is None and c.decide is not None:
            must_fail(cid)(_companion(cid))


_register()
