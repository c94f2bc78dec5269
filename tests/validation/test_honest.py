"""The validator says what it measured, no more and no less: --as honoured for every family, inconclusive
for a kernel it does not know (and still FAIL for a defect in a known one), zero-variance pairs compared
exactly, degenerate draws and NaN outputs in words, batch independence, S2 on 2-D grids, the bidirectional
figure when causal mode raises, the likely cause of every failing check, and no figure ``inf``."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from validation import check
from validation.checks.causes import DEFECTS, cause_key
from validation.findings import KNOWN
from validation.runner import known_families

from . import family_candidates as fc
from . import honest_candidates as hc
from . import planted as pl

OMEGA_FAMILIES = {
    "features": ["gaussian-positive", "gaussian-trig", "hyperbolic", "hyperbolic-scaled", "positive",
                 "positive-scaled", "softmax-trig"],
    "attention": ["gaussian-trig", "hyperbolic", "positive", "softmax-trig", "s2", "s2-grid", "s2-grid-cls"],
}


def _no_failure(rep):
    for c in rep.checks:
        assert c.verdict in ("pass", "skip"), (f"{rep.target} as {rep.family}: {c.name} {c.verdict}: "
                                               f"{c.detail}")
    assert rep.passed and rep.exit_code == 0


@pytest.mark.parametrize("kind, family", [(k, f) for k, fs in OMEGA_FAMILIES.items() for f in fs])
def test_refattn_as_every_family_passes(kind, family):
    assert family in known_families(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                  # no NumPy RuntimeWarning either
        rep = check("refattn", kind=kind, family=family, quick=True)
    _no_failure(rep)
    assert rep["values"].figure <= 1e-12                               # refattn's own map, not positive's


def test_trig_is_no_longer_ambiguous():
    assert "trig" not in known_families("features") and "trig" not in known_families("attention")


def test_unknown_kernel_is_inconclusive_and_a_defect_in_a_known_one_fails():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = check(hc.arccos_features, kind="features", quick=True)
    assert rep["kernel"].inconclusive and rep["kernel"].passed is None, rep["kernel"].detail
    assert "matches none of the known" in rep["kernel"].detail
    assert not rep.failed and rep.inconclusive and rep.exit_code == 3 and not rep.passed
    assert "INCONCLUSIVE" in str(rep)
    # the same map claimed as a known family: FAIL, never inconclusive
    rep = check(hc.arccos_features, kind="features", family="positive", quick=True, checks=("kernel",))
    assert rep["kernel"].passed is False and rep.exit_code == 1
    # a known kernel with a wrong normalisation, no family claimed: FAIL naming the constant factor
    rep = check(hc.one_over_m_features, kind="features", quick=True, checks=("kernel",))
    assert rep["kernel"].passed is False and cause_key(rep["kernel"].cause) == "normalisation", rep["kernel"]
    # the KL Eq. (9) offset claimed as positive: FAIL naming the offset
    rep = check(pl.wrong_offset_features, kind="features", family="positive", quick=True, checks=("kernel",))
    assert rep["kernel"].passed is False and cause_key(rep["kernel"].cause) == "wrong-offset"


def test_zero_variance_pairs_are_exact_and_out_of_the_z_scores():
    """Trig features give exactly 1 on q = k: those pairs are compared exactly, the z-scores are over the
    others (a finite figure, not ~1e17), and a correct map's figure is its z, not the threshold."""
    rep = check(hc.gaussian_trig_features, kind="features", family="gaussian-trig", quick=True,
                checks=("kernel", "unbiased"))
    for name in ("kernel", "unbiased"):
        c = rep[name]
        assert c.passed and "4 exact" in c.detail and c.figure < c.threshold, c.detail
    rep = check(hc.gaussian_trig_features, kind="features", family="softmax-trig", quick=True,
                checks=("kernel",))
    c = rep["kernel"]
    assert c.passed is False and cause_key(c.cause) == "gaussian-for-softmax", c
    assert c.figure is None or c.figure < 1e6, c.figure
    zs = [float(t.split("z=")[1].split()[0].rstrip(",")) for t in c.detail.split("(", 1)[1].split(", ")
          if "z=" in t]
    assert zs and max(zs) < 1e6, c.detail


def test_degenerate_draws_and_nan_outputs_in_words():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = check(hc.zero_draw, kind="draw", quick=True)
        assert rep["haar"].passed is False and "the draw is all zeros" in rep["haar"].detail
        assert rep["unbiased"].passed is False and "the draw is all zeros" in rep["unbiased"].detail
        assert "nan" not in str(rep).lower() and "inf" not in str(rep).split(":", 1)[1].replace("info", "")
        rep = check(hc.nan_features, kind="features", family="positive", quick=True,
                    checks=("values", "kernel"))
    for name in ("values", "kernel"):
        c = rep[name]
        assert c.passed is False and "are not finite" in c.detail and "NaN" in c.detail, c.detail
        assert cause_key(c.cause) == "not-finite"


def test_batch_independence_flags_a_batch_wide_stabiliser():
    rep = check(hc.batch_max_favor, kind="attention", quick=True, checks=("batch_independence",))
    c = rep["batch_independence"]
    assert c.passed is False and cause_key(c.cause) == "batch-max", c
    assert "bidirectional" in c.cause and "causal" in c.cause            # both modes leak
    rep = check(pl.global_max_eps_favor, kind="attention", quick=True,
                checks=("batch_independence",))
    assert rep["batch_independence"].passed is True               # per-(batch, head) maximum: no coupling


@pytest.mark.parametrize("family", ["s2-grid", "s2-grid-cls"])
def test_s2_on_grids(family):
    _no_failure(check(fc.s2_grid, kind="attention", family=family, quick=True))
    for fn in (hc.s2_grid_chebyshev, hc.s2_grid_unclipped):
        rep = check(fn, kind="attention", family=family, quick=True, checks=("values",))
        assert rep["values"].passed is False, fn.__name__
    if family == "s2-grid-cls":
        rep = check(hc.s2_grid_cls_below, kind="attention", family=family, quick=True, checks=("values",))
        assert rep["values"].passed is False


def test_bidirectional_figure_shown_when_causal_mode_raises():
    rep = check(hc.causal_raises_favor, kind="attention", quick=True, checks=("values",))
    c = rep["values"]
    assert c.passed is False and "bidirectional 0.00e+00" in c.detail
    assert "raised NotImplementedError" in c.detail
    assert c.figure == 0.0 and cause_key(c.cause) == "causal-raises"


CAUSES = [
    (pl.qr_no_sign, "draw", None, "float64", "haar", "non-haar-qr"),
    (pl.qr_no_sign, "draw", None, "float64", "unbiased", "non-haar-bias"),
    (pl.separate_qk_favor, "attention", None, "float64", "same_features", "separate-qk"),
    (pl.global_max_eps_favor, "attention", None, "float64", "prefix_invariance", "global-max-eps"),
    (pl.global_max_favor, "attention", None, "float32", "prefix_invariance", "global-max-underflow"),
    (pl.no_scale_favor, "attention", None, "float64", "kernel", "missing-d-quarter"),
    (pl.no_scale_favor, "attention", None, "float64", "values", "missing-d-quarter"),
    (pl.upcast_favor, "attention", None, "float32", "dtype", "upcast"),
    (pl.wrong_offset_features, "features", "positive", "float64", "kernel", "wrong-offset"),
    (pl.unstabilised_favor, "attention", None, "float32", "stability", "no-stabiliser"),
]


@pytest.mark.parametrize("fn, kind, fam, dtype, name, key", CAUSES, ids=[f"{c[4]}-{c[5]}" for c in CAUSES])
def test_every_failing_check_names_its_likely_cause(fn, kind, fam, dtype, name, key):
    rep = check(fn, kind=kind, family=fam, dtype=dtype, quick=True, checks=(name,))
    c = rep[name]
    assert c.passed is False and cause_key(c.cause) == key, (c.cause, c.detail)
    assert "likely cause" in str(rep)


def test_the_findings_use_the_same_catalogue():
    assert {k for k, *_ in KNOWN} <= set(DEFECTS)


def test_prefix_invariance_never_prints_inf():
    rep = check(pl.global_max_favor, kind="attention", dtype="float32", quick=True,
                checks=("prefix_invariance", "stability"))
    c = rep["prefix_invariance"]
    assert c.passed is False and (c.figure is None or math.isfinite(c.figure))
    assert "inf" not in str(rep).replace("finite", ""), str(rep)
    assert np.isfinite(c.threshold)
