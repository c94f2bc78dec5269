"""False alarms measured, not hoped for; the guide's figures read from a committed record.

``validation/records/false_alarms.json`` (written by ``python -m tests.validation.false_alarms``, by hand:
refattn and one independent implementation per family, every check, seeds 0-19) must stay within the binomial
99% bound of the checks' stated false-alarm rates. The rate of each check is derived from its threshold:

- a statistical check (``haar``, ``unbiased``, the features ``kernel``) passes when ``max_i |z_i| <= z*`` over
  its ``n`` z-scores, with ``z* = zcrit(n) = Phi^{-1}(1 - ALPHA / (2 n))`` (two-sided, Bonferroni). Under the
  null each ``|z_i| > z*`` with probability ``2 (1 - Phi(z*)) = ALPHA / n``, so by the union bound the check
  fails with probability at most ``n * ALPHA / n = ALPHA``. From a recorded threshold ``t``,
  ``n = ALPHA / (2 (1 - Phi(t)))`` must come out a whole number (``t`` is a Bonferroni critical value at
  ``ALPHA``), and the check's rate is ``ALPHA``;
- every other check compares with a deterministic tolerance (``4 sqrt(eps)`` against refattn on the same
  inputs and draws, ``0`` non-finite outputs, dtype equality, a slope above 0.5 where shared features give
  ~1 +- 0.02, an error at most twice refattn's on the same draws): a correct implementation differs from
  refattn by rounding (~eps), so its stated rate is 0.

With ``N`` statistical results the number of failures is at most Binomial(N, ALPHA): the record must show no
more than its 99% quantile, and none among the deterministic checks. "inconclusive" counts as a failure here.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest

from refattn.features import positive_features
from validation import check
from validation.checks.favor import ATTENTION_FAMILIES, FEATURE_FAMILIES
from validation.families.catalog import FAMILIES

from . import planted
from .false_alarms import bonferroni_tests, rows, summary, tally

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "validation" / "records" / "false_alarms.json"
FINDINGS = ROOT / "validation" / "records" / "findings.md"
GUIDE = ROOT / "docs" / "guide" / "validation.md"
STATISTICAL = {"haar", "unbiased", "row_norms", "kernel"}


@pytest.fixture(scope="module")
def record():
    return json.loads(RECORD.read_text())


def test_the_record_covers_every_family_at_the_fixed_seeds(record):
    assert record["seeds"] == list(range(20)) and record["command"].startswith("python -m tests.validation")
    seeds = {(r["implementation"], r["kind"], r["family"], r["seed"]) for r in rows(record)}
    runs = Counter((i, k, f) for i, k, f, _ in seeds)
    assert all(n == 20 for n in runs.values()), runs
    want = {("draw", None)} | {("features", f) for f in FEATURE_FAMILIES} | {
        ("attention", f) for f in ATTENTION_FAMILIES} | {(k, f) for f, s in FAMILIES.items() for k in s.kinds}
    for impl in ("refattn", "independent"):
        missing = want - {(k, f) for i, k, f in runs if i == impl}
        assert not missing, f"{impl}: no record for {sorted(missing, key=str)}: re-run {record['command']}"


def test_statistical_thresholds_are_bonferroni_critical_values(record):
    kinds = {}
    for r in rows(record):
        kinds.setdefault(r["check"], set()).add(bonferroni_tests(r["threshold"]) is not None)
    for name, is_stat in kinds.items():
        if name in STATISTICAL - {"kernel"}:
            assert is_stat == {True}, name
        elif name not in STATISTICAL:
            assert is_stat <= {False}, name                 # (the attention kernel check is deterministic)


def test_false_alarms_within_the_binomial_99_percent_bound(record):
    t = tally(record)
    assert t["stat"] >= 900 and t["exact"] >= 4000                  # 60 runs x 20 seeds
    assert t["stat_failed"] <= t["bound"], t
    assert t["exact_failed"] == 0, [r for r in rows(record) if r["verdict"] in ("FAIL", "inconclusive")
                                    and bonferroni_tests(r["threshold"]) is None]


def test_the_guide_quotes_the_false_alarm_record(record):
    assert summary(record) in GUIDE.read_text()


@pytest.mark.parametrize("fn, family", [
    (planted.wrong_offset_features, "positive"),       # estimates the Gaussian kernel, claims softmax
    (positive_features, "positive-scaled"),             # missing d^-1/4: the unscaled softmax kernel
])
def test_a_planted_defect_in_a_known_kernel_fails_never_inconclusive(fn, family):
    for seed in (0, 1):
        c = check(fn, kind="features", family=family, seed=seed, quick=True, checks=("kernel",))["kernel"]
        assert c.verdict == "FAIL" and not c.inconclusive, c


# ---- the guide's figures come from validation/records/findings.md (python -m validation report)

def _block(text: str) -> str:
    m = re.search(r"<!-- findings: begin.*?-->\n(.*?)<!-- findings: end -->", text, re.S)
    assert m, "docs/guide/validation.md: no <!-- findings: begin/end --> block"
    return m.group(1)


def test_the_guide_quotes_the_findings_record_verbatim():
    assert _block(GUIDE.read_text()).strip() == FINDINGS.read_text().strip()


def _figure(md: str, impl: str, kind: str, name: str) -> str:
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 5 and cells[:3] == [impl, kind, f"`{name}`"]:
            return cells[4].split(" ")[0]
    raise AssertionError(f"no row {impl} {kind} {name} in {FINDINGS}")


@pytest.mark.parametrize("target, kind, names", [("sklearn-rbf", "features", ("kernel", "unbiased")),
                                                 ("performer-pytorch", "draw", ("haar",))])
def test_the_findings_record_is_not_stale(target, kind, names):
    """Re-measures the rows the guide's text cites (default sizes, seed 0): the record must give the code's
    figures."""
    if target == "performer-pytorch":
        pytest.importorskip("performer_pytorch")
    else:
        pytest.importorskip("sklearn")
    md = FINDINGS.read_text()
    rep = check(target, kind=kind, checks=names)
    for name in names:
        assert f"{rep[name].figure:.3g}" == _figure(md, target, kind, name), (
            f"{FINDINGS.name} is stale for {target} {kind} {name}: re-run python -m validation report --out "
            f"{FINDINGS.relative_to(ROOT)} and paste it into {GUIDE.relative_to(ROOT)}")
    assert math.isfinite(rep[names[0]].figure)
