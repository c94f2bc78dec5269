"""Every verdict is a function of its evidence, and every statistical claim has power.

* each claim's decision rule, re-applied to the evidence its check stored, gives the check's verdict (at tiny,
  claims and companions; ``run_check`` raises otherwise);
* every planted mutation (``paper_checks/power.py``) moves its claim's verdict at tiny: a mutation that does
  not move is a finding about the check, never a reason to delete the mutation;
* every claim has a rule and every statistical non-slow claim at least two mutations;
* a trained claim's companion is its rule on the label-swapped evidence: it flips the paper's direction to
  fails and leaves a guard a guard.
"""

from __future__ import annotations

import pytest

from paper_checks import Context, load_all
from paper_checks.companions import PAPER_DIRECTION, SWAPS, swapped
from paper_checks.mutations import MUTATIONS
from paper_checks.power import power_table, run_power
from paper_checks.rules import (bound_respected, guarded, holds_iff_accepted, printed_vs_corrected, ranked,
                                separated)
from paper_checks.runner import run_check

from . import baseline

REGISTRY = load_all()
CLAIMS = sorted(REGISTRY.values(), key=lambda c: c.id)
# Non-slow claims here; test_claims.py runs the slow claims and every companion at tiny (and the non-slow
# claims at small) through the same run_check, so together every claim's rule is re-applied at tiny.
FAST_WITH_RULE = [c for c in CLAIMS if c.decide is not None and not c.slow]


@pytest.mark.parametrize("claim", FAST_WITH_RULE, ids=[c.id for c in FAST_WITH_RULE])
def test_rule_reapplied_to_stored_evidence(claim):
    """The check's verdict equals its rule on its evidence (run_check re-applies it and raises on a mismatch)
    at tiny."""
    res = baseline.tiny(claim.id)
    assert claim.decide(res.evidence) == res.verdict
    assert claim.rule and len(claim.rule) > 20


def test_every_claim_has_a_rule():
    missing = sorted(c.id for c in CLAIMS if c.decide is None)
    assert not missing, f"claims without a decision rule: {missing}"


def test_every_statistical_claim_has_two_mutations():
    lacking = sorted(c.id for c in CLAIMS
                     if c.statistical and not c.slow and len(MUTATIONS.get(c.id, [])) < 2)
    assert not lacking, f"statistical claims with fewer than 2 power mutations: {lacking}"


def test_kl_claims_have_rules_and_mutations():
    """The part of the two tests above owned here: every non-slow KL claim (kl.table14-ratio-columns via
    paper_checks/companions.py)."""
    kl = [c for c in CLAIMS if c.id.startswith("kl.") and not c.slow]
    assert kl and not [c.id for c in kl if c.decide is None]
    assert not [c.id for c in kl if c.statistical and len(MUTATIONS.get(c.id, [])) < 2]


POWERED = [c for c in CLAIMS if not c.slow and c.id in MUTATIONS]


def test_mutations_registered():
    assert len(POWERED) >= 30, f"only {len(POWERED)} claims have power mutations"


@pytest.mark.parametrize("claim", POWERED, ids=[c.id for c in POWERED])
def test_power_at_tiny_every_mutation_moves(claim):
    rows = run_power([claim], seed=0, outcome_of=baseline.outcome)   # the runs other tests share
    stuck = [f"{r['claim']}: {r['mutation']} ({r['baseline']} -> {r['verdict']})"
             for r in rows if not r["moved"]]
    assert not stuck, ("mutations that do not move their claim's verdict (fix the check):\n"
                       + "\n".join(stuck) + "\n" + power_table(rows))


@pytest.mark.parametrize("cid", sorted(c for c in SWAPS if c in REGISTRY))
def test_trained_companion_swaps_labels(cid):
    c = REGISTRY[cid]
    assert c.must_fail is not None and c.decide is not None, f"{cid}: no rule or companion"
    ctx = Context(seed=0, size="tiny", claim_id=cid)
    res = run_check(c, ctx)
    comp = run_check(c, ctx, companion=True)
    if res.verdict == "not-checkable":                  # a guard stays a guard under the swap
        assert comp.verdict == "not-checkable"
    if res.verdict == "holds":
        assert comp.verdict == "fails"
    paper = PAPER_DIRECTION[cid](res.evidence)     # the flip itself, on evidence in the paper's direction
    assert c.decide(paper) == "holds", f"{cid}: the rule does not accept evidence in the paper's direction"
    assert c.decide(swapped(cid, paper)) == "fails", f"{cid}: the rule does not flip under the label swap"


def test_rule_builders():
    r = printed_vs_corrected("p", "c", n_se=5)
    got = [r({"p": 1, "c": 9}), r({"p": 7, "c": 1}), r({"p": 7, "c": 6}), r({"p": float("nan"), "c": 1})]
    assert got == ["holds", "erratum", "fails", "erratum"]
    assert holds_iff_accepted("z")({"z": -4.9}) == "holds" and holds_iff_accepted("z")({"z": 5}) == "fails"
    assert bound_respected("m", "b", slack="s")({"m": 1.1, "b": 1, "s": 0.2}) == "holds"
    s = separated("a", "b")
    assert [s({"a": 1, "b": 9}), s({"a": 9, "b": 1}), s({"a": 1, "b": 1}), s({"a": 9, "b": 9})] == \
        ["holds", "erratum", "not-checkable", "fails"]
    rk = ranked("acc", "se", ["x", "y"], n_se=2)
    assert rk({"acc": {"x": 0.9, "y": 0.5}, "se": {"x": 0.01, "y": 0.01}}) == "holds"
    assert rk({"acc": {"x": 0.5, "y": 0.9}, "se": {"x": 0.01, "y": 0.01}}) == "fails"
    assert rk({"acc": {"x": 0.5, "y": 0.51}, "se": {"x": 0.1, "y": 0.1}}) == "not-checkable"
    g = guarded(holds_iff_accepted("z"), "acc", 0.5)
    assert g({"acc": 0.2, "z": 0}) == "not-checkable" and g({"acc": 0.9, "z": 0}) == "holds"
    with pytest.raises(KeyError, match="needs evidence"):
        holds_iff_accepted("z")({})


def test_cli_power_seeds_and_readme_power_table(tmp_path, capsys):
    from paper_checks import readme_table
    from paper_checks.__main__ import main

    js = tmp_path / "power.json"
    assert main(["--power", "--only", "kl.eq1-*", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "power: refattn mutations: 3/3 moved (3/3 realistic bug classes)" in out
    assert "check-target mutations: 0/0 moved" in out and "NO  <-- no power" not in out
    assert readme_table.main(["--power", str(js)]) == 0
    assert "3 of 3 mutations over 1 claims moved their claim's verdict: refattn mutations 3/3" in \
        capsys.readouterr().out
    assert main(["--seeds", "0-2", "--only", "kl.eq1-*", "--size", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "seed 2" in out and "1/1 claims give the same verdict at every seed" in out
    assert main(["--seeds", "x-y", "--only", "kl.eq1-*"]) == 2
