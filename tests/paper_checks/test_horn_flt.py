"""Horn and FLT claims: verdicts at tiny from their decision rules, the mutations that must move them, and the
measured numbers behind the changed verdicts. (Every mutation moving at tiny is tested for all claims in
test_rules.py::test_power_at_tiny_every_mutation_moves.)"""

from __future__ import annotations

import math

import pytest

from paper_checks import Context, load_all
from paper_checks.mutations import MUTATIONS
from paper_checks.runner import run_check

from . import baseline

REGISTRY = load_all()
OWN = sorted((c for c in REGISTRY.values() if c.id.split(".")[0] in ("horn", "flt")
              and not c.check.__module__.endswith("experiments")), key=lambda c: c.id)


def _run(cid, size="tiny", seed=0, mutation=None):
    res = baseline.outcome(cid, mutation, size, seed)
    assert not isinstance(res, str), f"{cid} ({mutation or 'unmutated'}) raised: {res}"
    return res


@pytest.mark.parametrize("claim", [c for c in OWN if not c.slow], ids=lambda c: c.id)
def test_verdict_at_tiny_is_its_rule_and_expected(claim):
    res = _run(claim.id)
    assert claim.decide is not None and claim.decide(res.evidence) == res.verdict
    assert res.verdict == claim.expected_at("tiny"), f"{claim.id}: {res.verdict} ({res.summary})"
    if claim.statistical:
        assert len(MUTATIONS.get(claim.id, [])) >= 2, f"{claim.id}: fewer than 2 power mutations"


def test_every_own_claim_has_a_rule():
    assert not [c.id for c in OWN if c.decide is None or not c.rule]


@pytest.mark.parametrize("mutation", ["target mask x 0.9", "positions x 0.5 (flt_attention)"])
def test_alg1_wrong_target_fails(mutation):
    """Algorithm 1 must converge to the masked softmax itself; a target mask x 0.9, or positions x 0.5 inside
    flt_attention, leave a bias many null SD above the correct code's mean z^2. (Mask x 0.9 is the smallest
    of the mask mutations: the bias grows with |1 - factor|, so x 0.5 and x 2 lie further out; that they move
    the verdict is tested with every mutation in test_rules.py. At tiny, seed 0: 21.5, 606 and 3115 null SD
    for x 0.9, x 0.5 and x 2.)"""
    base = _run("flt.alg1-favor")
    assert base.verdict == "holds" and base.evidence["top_mean_z2_excess_null_sd"] < 5
    res = _run("flt.alg1-favor", mutation=mutation)
    assert res.verdict == "fails", res.summary
    assert res.evidence["top_mean_z2_excess_null_sd"] > 10


def test_lemma1_verdict_follows_its_numbers():
    """The lemma as Eq. (3) states it holds; the sentence's W_q^T W_k and the proof's line-2 sign are two
    notation slips, each with its number; with both corrected no slip is recorded."""
    base = _run("horn.lemma1")
    assert base.verdict == "holds" and len(base.slips) == 2
    assert base.evidence["max_change_under_shift_when_only_WqT_Wk_is_rotation_form"] > 1e-3
    assert base.evidence["proof_line2_corrected_max_err"] < 1e-12 < base.evidence["proof_line2_max_err"]
    from paper_checks.horn.lemma1 import corrected_notation

    with corrected_notation():                     # a fresh run (the cached baseline is the uncorrected one)
        res = run_check(REGISTRY["horn.lemma1"], Context(seed=0, size="tiny", claim_id="horn.lemma1"))
    assert res.verdict == "holds" and not res.slips, res.evidence


def test_thm41_measures_the_erratum_and_keeps_zero_se_apart():
    res = _run("flt.thm4.1-unbiased")
    ev = res.evidence
    assert ev["z_printed_literal"] >= 5 > ev["z_corrected"]
    assert ev["zero_se_entries"] > 0 and ev["zero_se_max_dev"] < 1e-12      # the kernels' exact diagonals
    assert math.isfinite(ev["z_corrected"])
    assert set(ev["readings"]) and any("hypothesis" in k for k in ev["readings"])
    assert res.verdict == "erratum" and [sl["corrected"][:11] for sl in res.slips] == ["E[N1 N2^T] "]


def test_local_sinc_pair_transforms_the_printed_f():
    """l = 2: the transform of prod_j C 1[...] is C times the printed g (C inside), equal to it with C
    outside."""
    ev = _run("flt.local-sinc-pair").evidence
    key = "l=2: [transform of printed f, printed g, transform of C-outside f] at 4 xi"
    for inside, printed, outside in ev[key]:
        if abs(printed) > 1e-3:
            assert inside / printed == pytest.approx(ev["C"], rel=1e-3)
            assert outside == pytest.approx(printed, abs=1e-3)
    assert ev["err_printed_l1"] < 1e-10 < ev["max_err_printed_l23"]
    assert len(ev["readings"]) == 2


@pytest.mark.parametrize("cid", ["flt.local-sinc-pair", "flt.thm4.1-unbiased", "flt.gm-pair"])
def test_both_readings_are_stated(cid):
    readings = _run(cid).evidence["readings"]
    assert len(readings) >= 2 and all(isinstance(v, str) and v for v in readings.values())
