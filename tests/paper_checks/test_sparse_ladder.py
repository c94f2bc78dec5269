"""The KL sparse-task budget ladder (``paper_checks.experiments.sparse_task`` rungs,
``paper_checks.experiments.sparse_ladder``) and its claims' rules over the ladder
(``paper_checks.experiments.sparse_rules``): rung sizes and cache keys, a tiny ladder trained and collected,
and the registered rules on synthetic ladder evidence."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from paper_checks import load_all
from paper_checks.experiments import eigenvalues as E  # noqa: N812
from paper_checks.experiments import listops as L  # noqa: N812
from paper_checks.experiments import sparse_ladder as SL  # noqa: N812
from paper_checks.experiments import sparse_rules as R  # noqa: N812
from paper_checks.experiments import sparse_task as S  # noqa: N812
from paper_checks.experiments import variance_metrics as V  # noqa: N812
from paper_checks.registry import Context
from paper_checks.report import json_safe

REGISTRY = load_all()
KL_FULL = Path(__file__).resolve().parents[2] / "paper_checks" / "records" / "kl-full" / "previous-settings"


# ---- rungs and keys ----------------------------------------------------------------------------------------
def test_rung_size_scales_steps_and_evaluation_only():
    q = S.rung_size("full", "1/4")
    assert (q["steps"], q["eval_every"]) == (625, 12)
    assert {k for k in q if q[k] != S.SIZES["full"][k]} == set(S.RUNG_SCALED)
    assert S.rung_size("full", "1") == S.SIZES["full"]
    assert S.rung_size("tiny", "1/4")["steps"] == 1                   # at least one step
    for bad in ("0", "3/2", "a quarter"):
        with pytest.raises(ValueError, match="rung: expected a fraction"):
            S.rung_size("full", bad)


def _earlier_full():
    """``SIZES["full"]`` with the start records/kl-full/previous-settings ran (``S = 0.25 I``) in place of the
    authors'."""
    return {**{k: v for k, v in S.SIZES["full"].items() if k != "gmm_init"}, "s_init": S.EARLIER_S_INIT}


def test_rung_1_keys_follow_the_settings_and_lower_rungs_are_named_apart(monkeypatch):
    """The committed kl-full/previous-settings runs are found under their own names with the settings they
    ran (the earlier start S = 0.25 I: the only setting of the size that changed), so the names cover the
    size's settings; the current settings (the authors' start) name every run apart from them, so none is
    reused."""
    committed = {p.stem for p in (KL_FULL / "experiments" / "sparse_task" / "runs").glob("*.json")}
    current = {t.key() for t in SL.ladder_tasks("full", 0)}
    assert len(current) == 40 and not current & committed
    with monkeypatch.context() as m:
        m.setitem(S.SIZES, "full", _earlier_full())
        assert {t.key() for t in SL.ladder_tasks("full", 0, rungs=("1",))} == committed
    lower = [t.key() for t in SL.ladder_tasks("full", 0, rungs=("1/4", "1/2"))]
    assert len(set(lower)) == 24 and not set(lower) & committed
    assert all("-r1of4-" in k for k in lower[:12]) and all("-r1of2-" in k for k in lower[12:])


def test_full_runs_the_authors_gmm_start():
    """config_for passes the size's start to the gmm kind; the drawn start has the authors' mean eigenvalue
    (measures.initial_eigenvalue, what the eigenvalue claim divides by)."""
    from refattn.nn import init_transformer

    from paper_checks.experiments import measures

    for method in S.METHODS:
        cfg = S.config_for(method, S.SIZES["full"])
        assert cfg["attention"]["init"] == "authors" and "s_init" not in cfg["attention"]
        gp = init_transformer(np.random.default_rng(0), cfg)["blocks"][0]["attn"]["attn"]["gmm"]
        S_ = np.asarray(gp.S)                                                        # (C, d, d)
        off_diagonal = S_ * (1 - np.eye(16))
        assert S_.shape == (2, 16, 16) and np.any(off_diagonal != 0) == (method == "gmm-rks")
    assert "init" not in S.config_for("gmm-rks", S.SIZES["tiny"])["attention"]          # tiny: S = I
    assert measures.initial_eigenvalue({"init": "scaled-identity", "s_init": 0.25}, 16, 4) == 0.0625


# The authors' start's mean eigenvalue (measures.initial_eigenvalue) against draws. RKS: the mean eigenvalue
# of S S^T is trace / d = sum of the squared entries / d, one replicate per component (C = 256; its relative
# SE is sqrt(0.8 / d^2) / sqrt(C) = 0.35 %, so 5 SE catch 1.8 %; 2 / (d + 1), the fan without the heads,
# is 18 % off at d 16, H 4). PRF: the eigenvalues are exp(s), s ~ U(+-b), b^2 = 6 / (d + H) (N = C d = 4096
# replicates, Var exp(s) = sinh(2b) / (2b) - (sinh(b) / b)^2 = 0.109, SE 0.0052: the value 1 that a log
# read as zero-mean on average would suggest is 0.051 = 10 SE away).
@pytest.mark.parametrize("features", ["rks", "prf"])
def test_initial_eigenvalue_is_the_authors_starts_mean(seed, features):
    from refattn.random import init_gmm_authors

    from paper_checks.experiments import measures
    from validation import mean_test

    d, heads = 16, 4
    gp = init_gmm_authors(np.random.default_rng(seed), 256, d, features=features, heads=heads)
    ev = measures.covariance_eigenvalues(gp.S, d)
    samples = ev.mean(axis=-1).reshape(-1, 1) if features == "rks" else ev.reshape(-1, 1)
    want = measures.initial_eigenvalue({"init": "authors", "features": features}, d, heads)
    assert mean_test(samples, np.array([want])).passed
    wrong = 2 / (d + 1) if features == "rks" else 1.0
    assert not mean_test(samples, np.array([wrong])).passed


@pytest.mark.parametrize("method", S.METHODS)
def test_an_untrained_authors_start_reads_one_relative_to_itself(method):
    """The eigenvalue claim reads a run against its own start (harness.initial_params from the run seed):
    the untrained start is (1, 1). Against the start's mean alone its largest eigenvalue reads above 1
    before any training (GMM-RKS about 3.8, GMM-PRF about 1.6), so that reading would fail the claim's
    'max < 1' whatever was learnt; an aggregated row carries the runs' own ratios."""
    from paper_checks.experiments import harness, measures

    cfg = S.config_for(method, S.SIZES["full"])
    p0 = harness.initial_params(cfg, 3)
    row = measures.spectrum(p0, cfg, np.random.default_rng(0), initial_params=p0)
    assert E._relative(row) == (1.0, 1.0)
    assert E._relative({k: v for k, v in row.items() if not k.startswith("initial_")})[1] > 1.5
    half = {**row, "mean": row["mean"] / 2, "max": row["max"] / 4}
    agg = E._agg([{"eigenvalues": row}, {"eigenvalues": half}])
    assert (agg["relative_mean"], agg["relative_max"]) == (0.75, 1.0) and E._relative(agg) == (0.75, 1.0)


def test_tiny_ladder_trains_rung_by_rung_caches_and_collects(tmp_path, monkeypatch):
    from paper_checks.experiments import harness

    monkeypatch.setattr(harness, "_MEMO", {})     # what another test of this process memoised: trained here
    ctx = Context(seed=0, size="tiny", report_dir=tmp_path)
    runs = SL.train_ladder(ctx)
    assert [r["rung"] for r in runs] == ["1/4"] * 4 + ["1/2"] * 4 + ["1"] * 6
    assert [r["steps_trained"] for r in runs[::4]] == [1, 2, 4, 4]
    cache = tmp_path / "experiments" / S.NAME / "runs"
    assert len(list(cache.glob("*.json"))) == 14

    def no_training(task):
        raise AssertionError(f"trained again: {task}")

    monkeypatch.setattr(S, "train_one", no_training)
    status = SL.collect(cache, tmp_path / "rec", "tiny")
    assert [(row["done"], row["of"]) for row in status["rungs"].values()] == [(4, 4)] * 3
    assert status["ablation_wd0"]["done"] == 2 and status["estimate_cpu_seconds_to_finish"] == 0
    assert len(list((tmp_path / "rec" / "runs").glob("*.json"))) == 14
    assert (tmp_path / "rec" / "runs.md").read_text().count("| 1/2 | gmm-") == 4
    ladder = S.ladder(runs, "tiny")                     # every rung complete, its compute the rung's share
    assert [(r["rung"], r["steps"]) for r in ladder] == [("1/4", 1), ("1/2", 2), ("1", 4)]
    assert [r["budget_fraction"] for r in ladder] == pytest.approx([0.25e-6, 0.5e-6, 1e-6])
    # the claims on the complete rungs: what each claim's own ladder reads; the variance claim once the
    # report's ListOps runs are there
    claims = status["claims"]
    assert _same(claims["kl.sec4.2-sparsity"], ladder)
    assert _same(claims["kl.table4-eigenvalues"], E.ladder(runs, "tiny")) and len(E.ladder(runs, "tiny")) == 3
    assert claims["kl.sec4.1-variance-metrics"] is None
    # trained here into the report's cache (the memo is this test's own: another test's ListOps runs in it
    # would leave the cache empty)
    lo_runs, majority = L.grid(Context(seed=0, size="tiny", report_dir=tmp_path), 0)
    assert len(list((tmp_path / "experiments" / L.NAME / "runs").glob("*.json"))) == len(lo_runs)
    claims = SL.collect(cache, tmp_path / "rec", "tiny")["claims"]
    assert _same(claims["kl.sec4.1-variance-metrics"], V.ladder(runs, lo_runs, majority, "tiny"))
    md = (tmp_path / "rec" / "runs.md").read_text()
    for cid in claims:
        assert md.count(f"| {cid} | ") == 3, cid


def _same(a, b) -> bool:
    """Equal as JSON (NaN as null): what runs.json stores."""
    return json.dumps(json_safe(a), sort_keys=True) == json.dumps(json_safe(b), sort_keys=True)


def test_collect_of_a_partial_ladder_estimates_what_is_missing(tmp_path, monkeypatch):
    """Under the settings the kl-full/previous-settings runs ran (they are that ladder's rung 1)."""
    monkeypatch.setitem(S.SIZES, "full", _earlier_full())
    cache = tmp_path / "experiments" / S.NAME / "runs"          # a report's layout, its ListOps runs beside
    cache.mkdir(parents=True)
    for t in SL.ladder_tasks("full", 0, rungs=("1",)):
        (cache / f"{t.key()}.json").write_text((KL_FULL / "experiments" / "sparse_task" / "runs" /
                                                f"{t.key()}.json").read_text())
    shutil.copytree(KL_FULL / "experiments" / L.NAME / "runs", tmp_path / "experiments" / L.NAME / "runs")
    records = {r["id"]: r for r in json.loads((KL_FULL / "results.json").read_text())}
    majority = records["kl.lra-listops"]["evidence"]["scale"]["majority_class_rate"]  # as recorded
    monkeypatch.setattr(L, "majority_rate", lambda size, seed: majority)    # (25 s to regenerate ListOps)
    st = SL.collect(cache, tmp_path / "rec", "full")
    assert [st["rungs"][r]["done"] for r in S.LADDER] == [0, 0, 12]
    assert st["rungs"]["1"]["train_cpu_seconds"] == pytest.approx(1028.8)      # runs_summary.md's 12 rows
    # 6 missing runs per model and rung, each at its model's measured CPU-s per step times 625 or 1250 steps
    runs = [json.loads(p.read_text()) for p in cache.glob("*.json")]
    per_step = {m: np.mean([r["cpu_seconds_per_step"] for r in runs if r["method"] == m]) for m in S.METHODS}
    assert st["estimate_cpu_seconds_to_finish"] == round(sum(per_step.values()) * 6 * (625 + 1250))
    # the claims' rung 1 from these runs is the record's own numbers (kl-full/previous-settings/results.json,
    # written by the claims from the same runs)
    ev = {cid: r["evidence"]["criterion_values"] for cid, r in records.items()}
    (sp,), (eig,), (var,) = (st["claims"][c] for c in ("kl.sec4.2-sparsity", "kl.table4-eigenvalues",
                                                        "kl.sec4.1-variance-metrics"))
    assert sp["rung"] == eig["rung"] == var["rung"] == "1"
    assert sp["parts"]["A"]["effect"] == pytest.approx(
        ev["kl.sec4.2-sparsity"]["fraction_std_ratio_above_1"] - R.A_FRACTION)
    for m in S.METHODS:
        rec = ev["kl.table4-eigenvalues"][f"{m} wd=0.1"]
        assert eig["relative"][m] == pytest.approx({"mean": rec["mean"] / rec["initial"],
                                                    "max": rec["max"] / rec["initial"]})
    vm = ev["kl.sec4.1-variance-metrics"]
    assert var["n_points"] == vm["n_points"] == 14
    assert var["parts"]["correlations"]["effect"] == pytest.approx(
        min(c["spearman"] for c in vm["correlations"].values()) - 0.5)
    assert var["parts"]["pi_order"]["effect"] == pytest.approx(vm["pi_gmm_prf"] - vm["pi_gmm_rks"])
    assert "| kl.sec4.1-variance-metrics | 1 | " in (tmp_path / "rec" / "runs.md").read_text()


# ---- the rules ---------------------------------------------------------------------------------------------
def test_weakest_part_is_chosen_in_units_of_its_own_se():
    """A wrong combination (the smaller raw effect) picks A here (-0.2, 1.6 SE) and misses B's reversal
    (-0.15 at SE 0.05: 3 SE)."""
    r = R.weakest({"A": {"effect": -0.2, "se": 0.125}, "B": {"effect": -0.15, "se": 0.05}})
    assert r["part"] == "B" and r["effect"] == pytest.approx(-3.0) and r["se"] == 1.0
    # an unmeasured part: the rung is inconclusive unless the other contradicts the claim on its own
    unmeasured = {"effect": math.nan, "se": 1.0}
    assert math.isnan(R.weakest({"A": {"effect": 0.2, "se": 0.1}, "B": unmeasured})["effect"])
    assert R.weakest({"A": {"effect": -0.2, "se": 0.1}, "B": unmeasured})["part"] == "A"


def test_sparsity_rung_from_cells_and_convergence_times():
    cells = [{"std_prf_over_rks": 1.5}] + [{"std_prf_over_rks": 0.8}] * 11          # 1 of 12 above 1
    log_t = {("gmm-prf", "hi"): [math.log(500), math.log(550)], ("gmm-prf", "lo"): [math.log(200)] * 2,
             ("gmm-rks", "hi"): [math.log(500)] * 2, ("gmm-rks", "lo"): [math.log(600)] * 2}
    r = R.sparsity_rung(cells, log_t)
    a, b = r["parts"]["A"], r["parts"]["B"]
    assert a["effect"] == pytest.approx(1 / 12 - 0.75) and a["se"] == pytest.approx(math.sqrt(0.1875 / 12))
    m = (math.log(500) + math.log(550)) / 2
    assert b["effect"] == pytest.approx(m - math.log(200) - math.log(500) + math.log(600))
    assert b["se"] == pytest.approx(abs(math.log(550) - math.log(500)) / math.sqrt(2) / math.sqrt(2))
    assert r["part"] == "A" and r["effect"] == pytest.approx((1 / 12 - 0.75) / math.sqrt(0.1875 / 12))
    assert math.isnan(R.sparsity_rung(cells, {**log_t, ("gmm-rks", "lo"): None})["parts"]["B"]["effect"])


def test_eigen_rung_takes_the_smallest_term_of_either_model():
    """A rule reading the mean eigenvalue alone would call this a holding rung: GMM-RKS's largest eigenvalue
    is 5x its start."""
    r = R.eigen_rung({"gmm-rks": [(0.5, 5.0), (0.6, 4.0)], "gmm-prf": [(0.4, 0.8), (0.5, 0.9)]})
    assert r["part"] == "gmm-rks max" and r["effect"] == pytest.approx(-4.0)
    assert r["se"] == pytest.approx(math.sqrt(0.5) / math.sqrt(2))


def test_spearman_se_matches_a_simulation_where_fiellers_constant_does_not():
    """SD of atanh(Spearman's rho) over 4000 samples of 14 bivariate-normal points (Pearson 0.95: rho ~ 0.93,
    the variance claim's regime). Tolerance: the SD of 4000 draws has a relative SE of 1 / sqrt(2 * 3999) =
    1.1 %, 3 SE = 3.4 %, plus 5 % for the approximation itself (Bonett and Wright's, within a few percent at
    n >= 10): 8.5 %. Measured: 0.348; Bonett and Wright 0.361 (+3.7 %); Fieller et al.'s 1.06 / (n - 3) 0.310
    (-11 %), which fails it."""
    rng = np.random.default_rng(0)
    n, reps = 14, 4000
    x = rng.multivariate_normal([0, 0], [[1, 0.95], [0.95, 1]], size=(reps, n))
    ranks = np.argsort(np.argsort(x, axis=1), axis=1).astype(float)       # continuous data: no ties
    ranks -= ranks.mean(axis=1, keepdims=True)
    ss = (ranks ** 2).sum(1)                                                 # (reps, 2)
    rho = (ranks[..., 0] * ranks[..., 1]).sum(1) / np.sqrt(ss[:, 0] * ss[:, 1])
    sim = float(np.arctanh(rho).std(ddof=1))
    med = float(np.median(rho))
    bw = R.spearman_se(med, n) / (1 - med ** 2)                              # back on the atanh scale
    assert abs(bw / sim - 1) < 0.085
    assert abs(math.sqrt(1.06 / (n - 3)) / sim - 1) > 0.085                  # the wrong constant
    assert math.isnan(R.spearman_se(0.9, 3))


def test_variance_rung_from_correlations_and_pi():
    r = R.variance_rung({"a": 0.9, "b": 0.95}, 14, [15.0, 16.0, 14.0], [5.0, 6.0])
    c, o = r["parts"]["correlations"], r["parts"]["pi_order"]
    assert c["effect"] == pytest.approx(0.4) and c["se"] == pytest.approx(R.spearman_se(0.9, 14))
    assert R.spearman_se(0.9, 14) == pytest.approx(0.19 * math.sqrt(1.405 / 11))
    assert o["effect"] == pytest.approx(5.5 - 15.0) and o["se"] == pytest.approx(math.sqrt(1 / 3 + 0.5 / 2))
    assert r["part"] == "pi_order"


def _sparsity_ev(fails: bool, ladder: list) -> dict:
    cv = {"ratios": [1.5] * 12, "fraction_std_ratio_above_1": 1 / 12 if fails else 1.0,
          "slowdown_prf": 3.0, "slowdown_rks": 0.8, "ladder": ladder}
    return {"size": "full", "budget_fraction": 0.12, "criterion_values": cv, "scale": {}}


def _ladder(*effects):
    return [{"rung": r, "budget_fraction": f, "effect": e, "se": 1.0}
            for r, f, e in zip(S.LADDER, (0.03, 0.06, 0.12), effects, strict=False)]


@pytest.mark.parametrize("fails,ladder,verdict", [
    (False, _ladder(-5.0, -5.0, -5.0), "holds"),                 # the criterion holds at rung 1
    (True, _ladder(-5.0, -5.2, -5.3), "fails"),                  # reversed on every rung, not shrinking
    (True, _ladder(-9.0, -5.0, -2.5), "not-reproduced"),         # the reversal shrinks with the budget
    (True, _ladder(-5.0, math.nan, -5.3), "not-reproduced"),     # a censored rung: inconclusive
    (True, _ladder(-1.0, -1.5, -5.3), "not-reproduced"),         # not reversed by 2 SE on every rung
    (True, [], "not-reproduced"),                                # no ladder: the committed records
])
def test_registered_sparsity_rule_over_the_ladder(fails, ladder, verdict):
    assert REGISTRY["kl.sec4.2-sparsity"].decide(_sparsity_ev(fails, ladder)) == verdict


def test_registered_eigen_and_variance_rules_read_their_ladders():
    bad = {"max": 5.0, "mean": 1.1, "min": 0.1, "initial": 1.0}
    cv = {**{f"{m} wd={wd}": bad for m in E.METHODS for wd in (0.1, 0.0)}, "unlearned": [],
          "decay_only_eigenvalue": 0.9}
    ev = {"size": "full", "budget_fraction": 0.12, "scale": {}}
    decide = REGISTRY["kl.table4-eigenvalues"].decide
    assert decide({**ev, "criterion_values": cv}) == "not-reproduced"
    rev = [{**r, "se": 0.2, "effect": -4.0} for r in _ladder(0, 0, 0)]
    assert decide({**ev, "criterion_values": {**cv, "ladder": rev}}) == "fails"
    vcv = {"n_points": 14, "correlations": {k: {"spearman": 0.9} for k in ("rsd-agv", "rsd-pi", "agv-pi")},
           "pi_gmm_rks": 15.6, "pi_gmm_prf": 5.3}
    vdecide = REGISTRY["kl.sec4.1-variance-metrics"].decide
    vev = {**ev, "scale": {"passes": 100}}
    assert vdecide({**vev, "criterion_values": vcv}) == "not-reproduced"
    assert vdecide({**vev, "criterion_values": {**vcv, "ladder": _ladder(-3.0, -3.5, -3.5)}}) == "fails"


def test_cli_refuses_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        SL.main(["--size", "tiny", "--report", str(tmp_path), "--workers", "0"])
    assert exc.value.code == 2 and "--workers: expected a count >= 1; got 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="size: expected one of"):
        S.rung_size("huge", "1/2")


def test_ladder_text_reads_a_stored_nan_effect():
    """A record stores a rung's NaN effect (a censored part) as the string "nan" (json_safe); the summary
    text the rule writes must read it back as stored (the stored verdict is re-decided from the JSON)."""
    rungs = [{"rung": "1/4", "budget_fraction": 0.03, "effect": math.nan, "se": 1.0, "part": None},
             {"rung": "1", "budget_fraction": 0.12, "effect": -0.667, "se": 1.0, "part": "A"}]
    stored = json.loads(json.dumps(json_safe(rungs)))
    assert stored[0]["effect"] == "nan"
    assert R.ladder_text(stored) == R.ladder_text(rungs)
    assert "1/4 (0.03 of the paper's) +nan (1.000)" in R.ladder_text(stored)
