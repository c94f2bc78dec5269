"""Every registered claim returns its expected verdict; every must-fail companion returns "fails"."""

from __future__ import annotations

import pytest

from paper_checks import Context, load_all

CLAIMS = sorted(load_all().values(), key=lambda c: c.id)


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_claim_verdict(claim, tmp_path):
    """Non-slow claims run at the default size and must give their expected verdict; slow ones run tiny."""
    ctx = Context(seed=0, size="tiny" if claim.slow else "small", report_dir=tmp_path, claim_id=claim.id)
    res = claim.check(ctx)
    if not claim.slow:
        assert res.verdict == claim.expected, f"{claim.id}: {res.verdict} != expected {claim.expected}: {res.summary}"
    else:
        assert res.verdict in ("holds", "erratum", "fails", "not-checkable"), res.verdict
    assert res.summary, f"{claim.id} gives no summary"
    for f in res.figures:
        assert (tmp_path / "figures").exists() and str(f).endswith(".png")


WITH_COMPANION = [c for c in CLAIMS if c.must_fail is not None]


@pytest.mark.parametrize("claim", WITH_COMPANION, ids=[c.id for c in WITH_COMPANION])
def test_must_fail_companion(claim):
    ctx = Context(seed=0, size="tiny" if claim.slow else "small", claim_id=claim.id)
    res = claim.must_fail(ctx)
    assert res.verdict == "fails", f"{claim.id}: the check against a wrong formula returned {res.verdict}"


def test_every_statistical_claim_has_a_companion():
    """Claims whose check is statistical declare a companion; the registry records which have none."""
    missing = [c.id for c in CLAIMS if c.must_fail is None and c.expected in ("holds", "erratum")
               and not c.slow and "exact" not in c.derivation.lower() and "not statistical" not in c.derivation.lower()]
    assert not missing, f"claims without a must-fail companion (say 'not statistical' in the derivation if exact): {missing}"
