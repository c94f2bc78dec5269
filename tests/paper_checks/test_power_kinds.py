"""The power that counts: mutations of refattn's public functions, declared and verified.

* every mutation declares its kind (``refattn`` or ``target``) and, when it plants a realistic bug, a class
  from ``BUG_CLASSES``; applying it shows the declaration is true: a ``refattn`` mutation replaces a callable
  defined in refattn (``PATCH_LOG`` while it is active), a ``target`` mutation none;
* every non-slow claim that calls refattn carries at least two ``refattn`` mutations, one of them a realistic
  bug class (not a pure rescaling of an output);
* the claims exempt from that rule are exactly the ones that call no refattn function (checked by running
  them at tiny under a profiler).
"""

from __future__ import annotations

import sys

import pytest

from paper_checks import Context, load_all
from paper_checks.mutations import BUG_CLASSES, KINDS, MUTATIONS, PATCH_LOG
from paper_checks.power import power_summary, power_table
from paper_checks.runner import run_check

REGISTRY = load_all()
ALL = [(cid, m) for cid, ms in sorted(MUTATIONS.items()) for m in ms]

# Non-slow claims whose checks call no refattn function: analytic statements of a paper's own algebra or
# tables (Lemma 1's decomposition, Lemma S.3's argmax, Table 14's columns) and the not-checkable Turing claim.
CALL_NO_REFATTN = {"horn.lemma1", "horn.lemma1-converse", "kl.lemma-s3", "kl.table14-ratio-columns",
                   "kl.thm1-thm2-turing"}


def _from_refattn(obj) -> bool:
    return callable(obj) and str(getattr(obj, "__module__", "") or "").startswith("refattn")


@pytest.mark.parametrize("cid,m", ALL, ids=[f"{cid}: {m.name}" for cid, m in ALL])
def test_mutation_kind_is_what_it_patches(cid, m):
    assert m.kind in KINDS and (m.bug is None or m.bug in BUG_CLASSES)
    assert not PATCH_LOG
    with m.apply():
        replaced = list(PATCH_LOG)
    assert replaced, f"{cid}: {m.name!r} patches nothing through paper_checks.mutations.patched"
    hits = [f"{getattr(o, '__module__', '')}.{getattr(o, '__name__', a)}" for _, a, o in replaced
            if _from_refattn(o)]
    if m.kind == "refattn":
        assert hits, f"{cid}: {m.name!r} is declared kind='refattn' but replaces no refattn callable"
    else:
        assert not hits, f"{cid}: {m.name!r} is declared kind='target' but replaces refattn's {hits}"
    assert not PATCH_LOG


NEEDS_POWER = sorted(c.id for c in REGISTRY.values() if not c.slow and c.id not in CALL_NO_REFATTN)

# Claims that call refattn but whose verdict no realistic refattn bug can move (a known gap, reported):
# expected 'fails' because the box's g is not integrable -- only a wrong spectrum (an integrable g) moves it.
NO_REALISTIC_MOVE = {"flt.local-sinc-estimator": 2, "flt.thm4.2-local-rpe": 2}


@pytest.mark.parametrize("cid", NEEDS_POWER)
def test_two_refattn_mutations_one_realistic(cid):
    ref = [m for m in MUTATIONS.get(cid, []) if m.kind == "refattn"]
    if cid in NO_REALISTIC_MOVE:
        assert len(ref) >= NO_REALISTIC_MOVE[cid] and not any(m.realistic for m in ref), \
            f"{cid}: the gap is closed or changed: update NO_REALISTIC_MOVE"
        return
    assert len(ref) >= 2, f"{cid}: {len(ref)} refattn mutations ({[m.name for m in ref]}); needs >= 2"
    assert any(m.realistic for m in ref), (f"{cid}: no refattn mutation plants a realistic bug class "
                                           f"({sorted(BUG_CLASSES)}); all rescale: {[m.name for m in ref]}")


@pytest.mark.parametrize("cid", sorted(CALL_NO_REFATTN))
def test_exempt_claims_call_no_refattn(cid):
    """The exemption is a fact: running the claim at tiny calls no function defined in refattn."""
    calls = set()

    def prof(frame, event, arg):
        if event == "call" and str(frame.f_globals.get("__name__", "")).startswith("refattn"):
            calls.add(f"{frame.f_globals['__name__']}.{frame.f_code.co_name}")

    sys.setprofile(prof)
    try:
        run_check(REGISTRY[cid], Context(seed=0, size="tiny", claim_id=cid))
    finally:
        sys.setprofile(None)
    assert not calls, f"{cid} calls refattn ({sorted(calls)[:5]}): it needs refattn mutations, no exemption"


def test_power_table_reports_the_two_kinds_apart():
    rows = [{"claim": "a.x", "mutation": "m1", "kind": "refattn", "bug": "sign", "size": "tiny",
             "baseline": "holds", "verdict": "fails", "moved": True},
            {"claim": "a.x", "mutation": "m2", "kind": "refattn", "bug": None, "size": "tiny",
             "baseline": "holds", "verdict": "holds", "moved": False},
            {"claim": "a.x", "mutation": "m3", "kind": "target", "bug": None, "size": "tiny",
             "baseline": "holds", "verdict": "fails", "moved": True}]
    assert power_summary(rows) == ("refattn mutations: 1/2 moved (1/1 realistic bug classes); "
                                   "check-target mutations: 1/1 moved (1 claims)")
    text = power_table(rows)
    assert text.index("refattn's public functions") < text.index("m1") < text.index("m2") \
        < text.index("check's own target") < text.index("m3")
    assert "NO  <-- no power" in text and text.endswith(power_summary(rows))
