"""The verdict taxonomy (docs/guide/paper-checks.md, "The criterion"): notation slips counted apart,
``not-reproduced`` decided by a budget ladder, and the derived constants of the rules checked just inside and
just outside their boundaries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paper_checks.choromanski import local_rpe
from paper_checks.choromanski._common import divergence, diverges
from paper_checks.readme_table import summary_table
from paper_checks.registry import Result
from paper_checks.report import totals_line
from paper_checks.rules import budget_ladder, slip

LADDER = budget_ladder()


def _rungs(*triples):
    return {"ladder": [{"budget_fraction": b, "effect": e, "se": s} for b, e, s in triples]}


@pytest.mark.parametrize("rungs,verdict", [
    (((0.001, -0.05, 0.01), (0.004, -0.08, 0.01), (0.016, -0.12, 0.01)), "fails"),     # reversal grows
    (((0.001, -0.05, 0.01), (0.004, -0.05, 0.01)), "fails"),                           # reversal holds
    (((0.001, -0.10, 0.01), (0.004, -0.03, 0.01)), "not-reproduced"),                  # reversal shrinks
    (((0.001, 0.00, 0.01), (0.004, 0.01, 0.01)), "not-reproduced"),                    # flat, absent
    (((0.003, -0.20, 0.01),), "not-reproduced"),                                       # one rung: no ladder
    (((0.001, 0.00, 0.01), (0.004, 0.08, 0.01)), "holds"),                             # the effect appears
    (((1.0, 0.00, 0.01),), "fails"),                                                   # the paper's scale
])
def test_budget_ladder(rungs, verdict):
    assert LADDER(_rungs(*rungs)) == verdict


def test_budget_ladder_needs_its_evidence():
    with pytest.raises(KeyError, match="ladder"):
        LADDER({"budget_fraction": 0.01})


def test_slips_are_quoted_corrected_and_checked():
    s = slip("N1 N2", "N1 N2^T", "ill-typed", {"z literal": 257.0})
    assert Result("holds", {"slips": [s]}).slips == [s]
    with pytest.raises(ValueError, match="required"):
        slip("N1 N2", "N1 N2^T", "", {})
    with pytest.raises(ValueError, match="slips"):
        Result("holds", {"slips": [{"printed": "x"}]})


def test_totals_and_summary_count_slips_apart():
    s = slip("a", "b", "c", {"d": 1})
    recs = [{"paper": "P", "verdict": "holds", "slips": [s]}, {"paper": "P", "verdict": "holds", "slips": []},
            {"paper": "P", "verdict": "erratum", "evidence": {"slips": [s]}},
            {"paper": "Q", "verdict": "not-reproduced"}]
    assert totals_line(recs) == ("holds 2 (1 with notation slips), erratum 1 (1 with notation slips), "
                                 "not-reproduced 1")
    table = summary_table(recs)
    assert "| P | 3 | 2 (1 with notation slips) | 1 (1 with notation slips) | 0 | 0 |" in table
    assert "| **all** | **4** | **2** (1 with notation slips)" in table


# --- the divergence tolerance: log growth (no mean) against integrable tails --------------------------------

V = 2.0


def _tail(p: float, scale: float = 1.0):
    """C sin(2 pi v xi) / (pi |xi|^p): the sinc for p = 1, integrable for p > 1 (same half-period)."""
    return lambda xi: scale * np.sin(2 * np.pi * V * xi) / (np.pi * np.abs(xi) ** p)


def _eps_at(rel: float) -> float:
    """Tail exponent 1 + e whose decade ratio 10^-e is 1 - rel."""
    return -math.log10(1.0 - rel)


def test_divergence_inside_and_outside_its_derived_tolerance():
    sinc = divergence(_tail(1.0), 1.0, V)
    tol = sinc["ratio tolerance 1/(2 v B0)^2"]
    assert tol == pytest.approx(1 / (2 * V * 10) ** 2)
    assert diverges(sinc) and sinc["last increment matches the log law"]
    assert diverges(divergence(_tail(1.0, 1.001), 1.0, V))                # a g off by a constant: diverges
    assert not diverges(divergence(_tail(1.1), 1.0, V))                   # 1/xi^1.1: integrable
    assert not diverges(divergence(_tail(1 + _eps_at(2 * tol)), 1.0, V))  # just outside the tolerance
    assert diverges(divergence(_tail(1 + _eps_at(tol / 2)), 1.0, V))      # just inside: B <= 1000 cannot tell


# --- the sin^k continuity threshold -------------------------------------------------------------------------


def test_jump_ratio_separates_steep_continuous_from_small_jumps():
    x = np.linspace(-2.0, 2.0, 8001)
    h = x[1] - x[0]
    ramp = np.clip(x / (8 * h), -0.5, 0.5)              # continuous, neighbour steps 0.125 (> the old 0.2/2)
    steep = np.clip(x / (3 * h), -0.5, 0.5)             # continuous, steps 0.33: the old 0.2 called it a jump
    small_jump = 0.01 * (x > 0.3) + 0.001 * x           # a jump of 0.01: the old 0.2 missed it
    assert local_rpe._jump_ratio(ramp) < local_rpe.JUMP_RATIO
    assert local_rpe._jump_ratio(steep) < local_rpe.JUMP_RATIO
    assert local_rpe._jump_ratio(small_jump) > local_rpe.JUMP_RATIO


# --- Table 14's rounding bound ------------------------------------------------------------------------------


@pytest.mark.parametrize("units,verdict", [(0.5, "holds"), (2.5, "fails")])
def test_table14_rounding_bound_inside_and_outside(monkeypatch, units, verdict):
    """A printed ratio moved by `units` of its cell's rounding bound (from the reproduced value): inside the
    bound the columns still reproduce, outside they do not (both orientations then fail)."""
    from paper_checks.chowdhury import experiments as ex

    table = {p: list(rows) for p, rows in ex._TABLE14.items()}
    c, rs, ra, ps, pa, q_std, q_abs = table[0.5][0]
    exact = ps / rs
    bound = ex._half_unit(ps) + ex._half_unit(rs) + ex._half_unit(q_std)
    table[0.5][0] = (c, rs, ra, ps, pa, exact * (1 + units * bound), q_abs)
    monkeypatch.setattr(ex, "_TABLE14", table)
    worst = ex._table14_worst(True)
    assert (worst <= 1.0) == (verdict == "holds")
    assert ex._decide_table14({"worst_rks_over_prf_in_rounding_bounds": ex._table14_worst(False),
                               "worst_prf_over_rks_in_rounding_bounds": worst}) == verdict


def test_table14_label_slip_is_recorded_not_counted():
    from paper_checks.catalog import load_all
    from paper_checks.chowdhury.experiments import exchanged_columns
    from paper_checks.registry import Context
    from paper_checks.runner import run_check

    c = load_all()["kl.table14-ratio-columns"]
    base = run_check(c, Context(claim_id=c.id, size="tiny"))
    assert base.verdict == "holds" and len(base.slips) == 1
    with exchanged_columns():
        fixed = run_check(c, Context(claim_id=c.id, size="tiny"))
    assert fixed.verdict == "holds" and not fixed.slips


# --- rounding and truncation bounds: a case just inside each decides one way, just outside the other -------


@pytest.mark.parametrize("s,ok", [(0.5, True), (2.0, False)])
def test_sin_k_rounding_bounds_inside_and_outside(s, ok):
    """A degree-k term whose k-th difference k! a h^k is s times the derived bound, and an odd part s times
    the evenness bound, planted on refattn's B-spline (k = 3): inside the bound it is still read as degree
    k - 1 and even, outside not."""
    from refattn.rpe import BSpline, spectrum_f

    x = np.linspace(-2.0, 2.0, 8001)
    h, k, v = x[1] - x[0], 3, 0.5
    f = np.asarray(spectrum_f(BSpline(np.array(1.0), np.array([v]), k), x[:, None]))
    diffk_bound, even_bound = local_rpe.rounding_bounds(x, v, k)
    base = local_rpe._properties(f, x, v, k)
    assert base["diff^k / its rounding bound"] < 0.1 and base["even err / its rounding bound"] < 0.1
    a = s * diffk_bound / (math.factorial(k) * h ** k)
    p = local_rpe._properties(f + a * x ** k, x, v, k)
    assert (p["diff^k / its rounding bound"] <= 1.0) == ok
    odd = local_rpe._properties(f + s * even_bound / 2 * np.tanh(x / 0.1), x, v, k)
    assert (odd["even err / its rounding bound"] <= 1.0) == ok


@pytest.mark.parametrize("s,verdict", [(0.5, "holds"), (2.0, "fails")])
def test_local_pair_quadrature_tolerance_inside_and_outside(monkeypatch, s, verdict):
    """The printed g off by s times the derived tolerance (pair_tolerance): inside it the pair holds, outside
    it fails."""
    from paper_checks.registry import Context

    ctx = Context(seed=0, size="tiny", claim_id="flt.local-sinc-pair")
    tol = local_rpe._local_pair(ctx)["tolerance"]
    assert 1e-13 < tol < 1e-12
    orig = local_rpe.printed_g
    monkeypatch.setattr(local_rpe, "printed_g", lambda C, v, xi: orig(C, v, xi) + s * tol)
    assert local_rpe._decide_pair(local_rpe._local_pair(ctx)) == verdict


@pytest.mark.parametrize("s,verdict", [(0.9, "erratum"), (1.1, "fails")])
def test_local_boundary_truncation_bound_inside_and_outside(monkeypatch, s, verdict):
    """A truncated inverse s times its derived truncation bound away from the limit (C/2 at |D| = v, C inside,
    0 outside): inside the bound the closed form is sound and the verdict is the erratum, outside it fails."""
    from paper_checks.registry import Context

    lim, bound = local_rpe.inverse_limit, local_rpe.truncation_bound
    assert bound(1.0, 3.0, 3.0, 1e5) == pytest.approx(1 / (2 * math.pi ** 2 * 3e5))
    monkeypatch.setattr(local_rpe, "truncated_inverse",
                        lambda C, v, D, B: lim(C, v, D) - s * bound(C, v, D, B) if B > 10 else
                        C / np.pi * (local_rpe.special.sici(2 * np.pi * B * (v + D))[0]
                                     + local_rpe.special.sici(2 * np.pi * B * (v - D))[0]))
    ev = local_rpe._local_boundary(Context(seed=0, size="tiny", claim_id="flt.local-sinc-boundary"))
    assert local_rpe._decide_boundary(ev) == verdict


def test_local_boundary_decides_on_refattn_box_value(monkeypatch):
    """refattn's Box f(v) one ulp-scale rounding (eps |C|) off still matches C/2; off by 4 eps it fails."""
    from paper_checks.registry import Context

    ctx = Context(seed=0, size="tiny", claim_id="flt.local-sinc-boundary")
    eps = float(np.finfo(np.float64).eps)
    orig = local_rpe.spectrum_f
    for off, verdict in ((eps / 2, "erratum"), (4 * eps, "fails")):
        monkeypatch.setattr(local_rpe, "spectrum_f", lambda spec, d, off=off: np.asarray(orig(spec, d)) + off)
        assert local_rpe._decide_boundary(local_rpe._local_boundary(ctx)) == verdict


@pytest.mark.parametrize("s,verdict", [(0.5, "holds"), (2.0, "fails")])
def test_lemma1_rounding_bound_inside_and_outside(monkeypatch, s, verdict):
    """Lemma 1's printed value moved by s times the smallest per-draw rounding bound (lemma1_bound, relative
    to 1 + |a| + |b|): inside it the identity holds, outside it fails."""
    from paper_checks.horn import lemma1
    from paper_checks.registry import Context

    ctx = Context(seed=0, size="tiny", claim_id="horn.lemma1")
    lo = lemma1._lemma1(ctx, 1.0)["rounding bound (lemma1_bound) min, max over the 20 draws"][0]
    orig = lemma1.printed_value
    monkeypatch.setattr(lemma1, "printed_value",
                        lambda a, b, om, d: orig(a, b, om, d) + s * lo * (1 + abs(a) + abs(b)))
    assert lemma1._decide_lemma1(lemma1._lemma1(ctx, 1.0)) == verdict


@pytest.mark.parametrize("factor,verdict", [(1.02, "holds"), (0.98, "fails")])
def test_lemma_s1_tau_inside_and_outside(monkeypatch, factor, verdict):
    """tau just above tau_half (2 sum_m e^{-tau m^2} = 1) puts more than half the weight on v_beta(i) for
    every query, and the weight off it is within its derived bound; just below, the middle queries lose the
    majority."""
    from paper_checks.chowdhury import turing
    from paper_checks.registry import Context

    tau_half = turing.tau_half()
    assert 2 * sum(math.exp(-tau_half * m * m) for m in range(1, 50)) == pytest.approx(1.0)
    monkeypatch.setattr(turing, "TAU", factor * tau_half)
    assert turing._lemma_s1(Context(seed=0, size="tiny", claim_id="kl.lemma-s1"), False).verdict == verdict


def test_lemma_s1_off_target_bound_is_the_measured_weight():
    """At tau = 25 the weight off v_beta(i) is within its bound and at least half of it (the bound is tight:
    an interior query's two neighbours carry 2 e^{-25})."""
    from paper_checks.chowdhury import turing
    from paper_checks.registry import Context

    ev = turing._lemma_s1(Context(seed=0, size="tiny", claim_id="kl.lemma-s1"), False).evidence
    assert 0.5 * ev["off_target_bound"] < ev["max_weight_off_beta"] <= ev["off_target_bound"]
