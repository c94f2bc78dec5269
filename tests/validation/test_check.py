"""validation.check: correct candidates pass every check, each planted defect is flagged by its named check,
the statistical checks keep their false-alarm rate over seeds, and bad input is a UsageError naming the
problem."""

from __future__ import annotations

import numpy as np
import pytest

from validation import UsageError, check
from validation.checks import CHECKS, KIND_CHECKS

from . import planted as pl


def _assert_all_pass(rep):
    assert [c.name for c in rep.checks] == list(KIND_CHECKS[rep.kind])
    for c in rep.checks:
        assert c.name in CHECKS
        assert c.passed is not False, (
            f"{rep.target} {rep.kind}: {c.name} failed: {c.figure} > {c.threshold}: {c.detail}"
        )
    assert rep.passed and rep.exit_code == 0


# ----------------------------------------------------------------------------------------------------------
# correct candidates pass every check


@pytest.mark.parametrize("kind", ["draw", "features", "attention"])
def test_refattn_numpy_passes_every_check(kind):
    rep = check("refattn", kind=kind, quick=True)
    _assert_all_pass(rep)
    if kind != "draw":
        assert rep["values"].figure == 0.0                  # the same code on the same inputs


@pytest.mark.parametrize("kind", ["features", "attention"])
def test_refattn_torch_adapter_passes_every_check(kind):
    pytest.importorskip("torch")
    rep = check("refattn", kind=kind, framework="torch", quick=True)
    _assert_all_pass(rep)
    assert rep["gradients"].passed is True                 # autograd through the adapter = refattn's backward


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_careful_torch_reimplementation_passes_every_check(dtype):
    pytest.importorskip("torch")
    for fn, kind, fam in ((pl.torch_draw, "draw", None), (pl.torch_positive_features, "features", "positive"),
                          (pl.torch_favor, "attention", None)):
        rep = check(fn, kind=kind, framework="torch", family=fam, dtype=dtype, quick=True)
        _assert_all_pass(rep)
        if kind != "draw":
            assert rep["gradients"].passed is True      # torch autograd agrees with refattn's manual backward


# ----------------------------------------------------------------------------------------------------------
# planted defects: each flagged by its named check (and a correct one is not)


PLANTED = [
    ("non-Haar QR", pl.qr_no_sign, "draw", "numpy", None, "float64", "haar"),
    ("non-Haar QR biases PRF", pl.qr_no_sign, "draw", "numpy", None, "float64", "unbiased"),
    ("separate q/k draws", pl.separate_qk_favor, "attention", "numpy", None, "float64", "same_features"),
    (
        "global key max + eps, causal",
        pl.global_max_eps_favor,
        "attention",
        "numpy",
        None,
        "float64",
        "prefix_invariance",
    ),
    (
        "global key max, underflow",
        pl.global_max_favor,
        "attention",
        "numpy",
        None,
        "float32",
        "prefix_invariance",
    ),
    ("missing d^-1/4", pl.no_scale_favor, "attention", "numpy", None, "float64", "kernel"),
    ("float64 upcast", pl.upcast_favor, "attention", "numpy", None, "float32", "dtype"),
    ("wrong feature offset", pl.wrong_offset_features, "features", "numpy", "positive", "float64", "kernel"),
    ("wrong custom gradient", "wrong_grad_favor", "attention", "torch", None, "float64", "gradients"),
]


@pytest.mark.parametrize("label, fn, kind, fw, fam, dtype, name", PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_defect_is_flagged_by_its_check(label, fn, kind, fw, fam, dtype, name):
    if fw == "torch":
        pytest.importorskip("torch")
        fn = getattr(pl, fn)
    rep = check(fn, kind=kind, framework=fw, family=fam, dtype=dtype, quick=True, checks=(name,))
    c = rep[name]
    assert c.passed is False, f"{label} not flagged by {name}: {c.figure} vs {c.threshold}: {c.detail}"
    assert rep.exit_code == 1


def test_planted_defects_pass_the_checks_they_do_not_break():
    """The flags are specific: the upcast candidate has correct values, the leaking one a correct limit."""
    rep = check(pl.upcast_favor, kind="attention", quick=True, checks=("values", "prefix_invariance"))
    assert rep.passed
    rep = check(
        pl.global_max_eps_favor, kind="attention", quick=True, checks=("same_features", "kernel", "dtype")
    )
    assert rep.passed
    rep = check(pl.wrong_offset_features, kind="features", family="gaussian-positive", quick=True,
                checks=("values", "kernel"))
    assert rep.passed                                   # the same map is right under its true name (KL Eq. 9)


def test_underflow_without_a_leak_is_unstable_not_a_leak():
    """An unstabilised causal map underflows to 0/0 on the underflow probe in both runs: stability fails, and
    prefix_invariance (which compares where both runs are finite) does not call it a leak."""
    rep = check(pl.unstabilised_favor, kind="attention", dtype="float32", quick=True,
                checks=("prefix_invariance", "stability"))
    assert rep["stability"].passed is False and rep["stability"].figure > 0
    assert rep["prefix_invariance"].passed is not False, rep["prefix_invariance"].detail
    assert "non-finite in both runs" in rep["prefix_invariance"].detail
    rep = check(
        pl.global_max_favor, kind="attention", dtype="float32", quick=True, checks=("prefix_invariance",)
    )
    assert rep["prefix_invariance"].passed is False and "a leak" in rep["prefix_invariance"].detail


def test_kernel_names_what_a_feature_map_estimates():
    rep = check(pl.wrong_offset_features, kind="features", quick=True, checks=("kernel",))
    assert rep.passed and "unbiased for gaussian" in rep["kernel"].detail
    rep = check(pl.no_scale_favor, kind="attention", quick=True, checks=("kernel",))
    assert "closest to softmax-unscaled" in rep["kernel"].detail


# ----------------------------------------------------------------------------------------------------------
# false-alarm rate: a correct candidate passes the statistical checks at >= 19 of 20 seeds


@pytest.mark.parametrize(
    "kind, checks",
    [
        ("draw", ("haar", "unbiased")),
        ("features", ("kernel", "unbiased")),
        ("attention", ("kernel", "same_features")),
    ],
)
def test_statistical_checks_pass_refattn_at_19_of_20_seeds(kind, checks):
    passed = [check("refattn", kind=kind, seed=s, quick=True, checks=checks).passed for s in range(20)]
    assert sum(passed) >= 19, f"{kind}: passed at {sum(passed)} of 20 seeds: {passed}"


def test_statistical_checks_state_their_false_alarm_probability():
    for kind in ("draw", "features"):
        for c in check("refattn", kind=kind, quick=True).checks:
            if c.name in ("haar", "unbiased", "kernel"):
                assert "false alarm 0.001" in c.detail


# ----------------------------------------------------------------------------------------------------------
# bad input: UsageError naming the problem


def test_unknown_kind_framework_family_check():
    with pytest.raises(UsageError, match="kind: unknown kind 'attn'"):
        check(pl.upcast_favor, kind="attn")
    with pytest.raises(UsageError, match="framework: unknown framework 'tensorflow'"):
        check(pl.upcast_favor, kind="attention", framework="tensorflow")
    with pytest.raises(UsageError, match="unknown family"):
        check(pl.wrong_offset_features, kind="features", family="softmax")
    with pytest.raises(UsageError, match="'trig' is now gaussian-trig .* or softmax-trig"):
        check(pl.wrong_offset_features, kind="features", family="trig")   # a renamed family: its successors
    with pytest.raises(UsageError, match="unknown check"):
        check(pl.upcast_favor, kind="attention", checks=("speed",))
    with pytest.raises(UsageError, match="dtype"):
        check(pl.upcast_favor, kind="attention", dtype="float16")


def test_wrong_signature_and_wrong_shape():
    with pytest.raises(UsageError, match=r"signature \(q, k, v\) does not fit the attention contract"):
        check(pl.wrong_signature, kind="attention")
    with pytest.raises(UsageError, match=r"returned shape \(2, 3, 4, 16\).*expects \(2, 3, 5, 16\)"):
        check(pl.wrong_shape_favor, kind="attention")
    with pytest.raises(UsageError, match=r"returned shape \(16, 16\).*expects \(32, 16\)"):
        check(lambda seed, m, d: np.eye(d), kind="draw")
    with pytest.raises(UsageError, match="raised ZeroDivisionError on a probe call"):
        check(lambda x, omega: 1 / 0, kind="features")
    with pytest.raises(UsageError, match="returned list; expected a numpy array"):
        check(lambda x, omega: [1.0], kind="features")


def test_target_strings():
    from validation.worker import Worker
    with pytest.raises(UsageError, match="does not exist"):
        check("missing/file.py:f", kind="draw")                     # found before a worker starts
    with pytest.raises(UsageError, match="expected module:callable"):
        check("not-a-target", kind="draw")
    with Worker() as w:                                             # one worker for the imports
        with pytest.raises(UsageError, match="importing 'no_such_module_xyz' failed"):
            check("no_such_module_xyz:f", kind="draw", worker=w)
        with pytest.raises(UsageError, match="has no attribute 'nope'"):
            check("tests.validation.planted:nope", kind="draw", worker=w)
        rep = check("tests/validation/planted.py:qr_no_sign", kind="draw", quick=True, checks=("haar",),
                    worker=w)
    assert rep.target == "tests/validation/planted.py:qr_no_sign" and not rep.passed


def test_jax_framework_skips_cleanly_when_absent():
    try:
        import jax  # noqa: F401
    except ImportError:
        with pytest.raises(UsageError, match="framework 'jax': the package 'jax' is not installed"):
            check(pl.upcast_favor, kind="attention", framework="jax")
    else:  # pragma: no cover - JAX is not installed in this environment
        pytest.skip("JAX installed: covered by test_crosscheck.py")


# ----------------------------------------------------------------------------------------------------------
# a feature map of another width than refattn's: values and gradients compare the kernel estimates


def _cat(parts):
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, -1)
    return __import__("torch").cat(parts, -1)


def _trig(x, omega):
    """The Gaussian [cos, sin] map, written out (NumPy or torch)."""
    u = x @ omega.T
    mod = np if isinstance(u, np.ndarray) else __import__("torch")
    return _cat([mod.cos(u), mod.sin(u)]) / omega.shape[0] ** 0.5


def duplicated_trig(x, omega):
    """The same estimator of width 4m: each feature twice, scaled by 1/sqrt(2)."""
    phi = _trig(x, omega) / 2 ** 0.5
    return _cat([phi, phi])


def doubled_trig(x, omega):
    """Each feature twice without the 1/sqrt(2): twice the kernel (the KL-Transformer authors' GMM-RKS at the
    standard-normal spectrum)."""
    return duplicated_trig(x, omega) * 2 ** 0.5


def test_features_of_another_width_are_compared_through_kernel_estimates():
    rep = check(duplicated_trig, kind="features", family="gaussian-trig", quick=True, checks=("values",))
    assert rep["values"].passed and "kernel estimates" in rep["values"].detail
    rep = check(doubled_trig, kind="features", family="gaussian-trig", quick=True, checks=("values",))
    assert rep["values"].passed is False
    assert "normalisation" in rep["values"].cause and "= 2 x" in rep["values"].cause


def test_gradients_of_another_width_are_compared_through_kernel_estimates():
    pytest.importorskip("torch")
    rep = check(duplicated_trig, kind="features", family="gaussian-trig", framework="torch", quick=True,
                checks=("gradients",))
    assert rep["gradients"].passed, rep["gradients"].detail
    rep = check(doubled_trig, kind="features", family="gaussian-trig", framework="torch", quick=True,
                checks=("gradients",))
    assert rep["gradients"].passed is False
