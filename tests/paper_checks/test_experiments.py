"""paper_checks.experiments: data generators, metrics, pre-registered criteria, and tiny end-to-end runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from paper_checks.experiments import harness as H  # noqa: N812
from paper_checks.experiments import data as D  # noqa: N812
from paper_checks.experiments import eigenvalues as EIG  # noqa: N812
from paper_checks.experiments import listops as LO  # noqa: N812
from paper_checks.experiments import measures as MEAS  # noqa: N812
from paper_checks.experiments import sparse_task as SP  # noqa: N812
from paper_checks.experiments import variance_metrics as VM  # noqa: N812


# ---- shifted digits ----------------------------------------------------------------------------------------
def test_digits_canvas_keeps_every_pixel():
    imgs, y = D.digits_on_canvas((8, 16))
    from sklearn.datasets import load_digits

    raw = load_digits().images / 16.0
    assert imgs.shape == (1797, 8, 16) and y.shape == (1797,)
    np.testing.assert_array_equal(imgs[:, :, 4:12], raw)
    assert not imgs[:, :, :4].any() and not imgs[:, :, 12:].any()


@pytest.mark.parametrize("canvas", [(8, 12), (16, 16)])
def test_shift_never_drops_a_nonzero_pixel(canvas):
    imgs, _ = D.digits_on_canvas(canvas)
    for max_shift in range(0, canvas[1] // 2 + 1):
        sel = imgs[D.shiftable(imgs, max_shift)]
        for dx in range(-max_shift, max_shift + 1):
            out = D.shift_horizontal(sel, dx)
            # the same non-zero pixels, each moved by dx: counts and sums per image are unchanged ...
            np.testing.assert_array_equal((out != 0).sum(axis=(1, 2)), (sel != 0).sum(axis=(1, 2)))
            np.testing.assert_array_equal(out.sum(axis=(1, 2)), sel.sum(axis=(1, 2)))
            # ... and shifting back restores the image exactly
            np.testing.assert_array_equal(D.shift_horizontal(out, -dx), sel)


def test_shift_refuses_to_drop_pixels():
    img = np.zeros((1, 2, 6))
    img[0, 0, 1] = 1.0
    np.testing.assert_array_equal(D.shift_horizontal(img, -1)[0, 0], [1, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="drop non-zero pixels"):
        D.shift_horizontal(img, -2)
    assert D.shiftable(img, 1).tolist() == [True] and D.shiftable(img, 2).tolist() == [False]


# ---- sparse sum task (Appendix E.1) ------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_sparse_labels_prefix_bound_and_balance(p):
    task = D.sparse_sum_task(np.random.default_rng(3), 900, 60, p)
    va = task.v.astype(int) * task.a
    np.testing.assert_array_equal(va.sum(axis=1), task.y - 4)                      # label = sum v_i a_i
    assert np.abs(np.cumsum(va, axis=1)).max() <= 4                                 # no prefix beyond +-4
    assert np.bincount(task.y, minlength=9).tolist() == [100] * 9                  # balanced classes
    assert set(np.unique(task.v)) <= {-1, 1} and set(np.unique(task.a)) <= {0, 1}
    assert abs(task.a.mean() - p) < 0.05                                            # Bernoulli(p) relevance
    x = D.sparse_features(task)
    assert x.shape == (900, 60, 3)
    np.testing.assert_array_equal(x[..., 0] + x[..., 1], 1.0)                      # one of v = +1 / -1
    np.testing.assert_array_equal(x[..., 2], task.a)


def test_sparse_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="multiple of 9"):
        D.sparse_sum_task(rng, 10, 20, 0.5)
    with pytest.raises(ValueError, match="p: expected a probability"):
        D.sparse_sum_task(rng, 9, 20, 0.0)
    with pytest.raises(ValueError, match="L: expected at least 4"):
        D.sparse_sum_task(rng, 9, 3, 0.5)


# ---- ListOps -----------------------------------------------------------------------------------------------
def test_listops_labels_match_the_independent_evaluator():
    data = D.listops_dataset(np.random.default_rng(1), 400, max_len=80, min_len=10, max_depth=4, max_args=5)
    assert all(D.listops_evaluate(t) == v for t, v in zip(data.tokens, data.y, strict=True))
    assert ((data.lengths >= 10) & (data.lengths <= 80)).all()
    for i in range(20):                                                              # ids encode the tokens
        L = data.lengths[i]
        assert [D.LISTOPS_VOCAB[j] for j in data.ids[i, :L]] == data.tokens[i]
        assert not data.ids[i, L:].any()
    assert len(set(data.y.tolist())) >= 8


def test_listops_evaluator_by_hand_and_malformed():
    ev = D.listops_evaluate
    assert ev("[MAX 2 9 [MIN 4 7 ] 0 ]".split()) == 9
    assert ev("[MED 1 2 ]".split()) == 1                                           # floor of the mean of 1, 2
    assert ev("[MED 3 1 9 ]".split()) == 3
    assert ev("[SM 9 9 5 ]".split()) == 3
    assert ev("[MIN [SM 5 6 ] 4 ]".split()) == 1
    for bad, msg in (("[MAX 1 2".split(), "one complete"), ("] 1".split(), "without an open"),
                     ("[FOO 1 ]".split(), "unknown operator"), ("[MAX ]".split(), "no arguments"),
                     ("[MAX 12 ]".split(), "unexpected token")):
        with pytest.raises(ValueError, match=msg):
            ev(bad)


def test_listops_generator_value_semantics_differ_from_a_wrong_median():
    """Must-fail companion: an evaluator with the upper median disagrees with the generator's labels."""
    data = D.listops_dataset(np.random.default_rng(2), 300, max_len=60, min_len=5, max_depth=3, max_args=4)

    def wrong(tokens):
        return D.listops_evaluate([t.replace("[MED", "[MAX") for t in tokens])

    assert sum(wrong(t) != v for t, v in zip(data.tokens, data.y, strict=True)) > 0


# ---- metrics -----------------------------------------------------------------------------------------------
def test_variance_metrics_by_hand():
    outs = np.array([[1.0, -2.0, 3.0], [1.0, 2.0, 3.0], [-1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])  # (passes 4, N 3)
    vm = MEAS.variance_metrics(outs, np.array([1, 1, 0]))
    np.testing.assert_array_equal(vm["pi"], [1, 1, 0])
    np.testing.assert_allclose(vm["rsd"][2], 0.0)
    np.testing.assert_allclose(vm["rsd"][0], np.std([1, 1, -1, 1], ddof=1) / 0.5)
    assert vm["accuracy"] == pytest.approx((3 + 3 + 0) / 12)
    assert vm["voting_accuracy"] == pytest.approx(2 / 3)
    assert vm["agv"] == pytest.approx((2 / 3) / 0.5)


def test_multiclass_variance_metrics_reduce_to_the_binary_ones():
    rng = np.random.default_rng(3)
    z = rng.standard_normal((7, 40, 2))                     # (passes, N, K = 2); odd passes: no ties
    y = rng.integers(0, 2, 40)
    a, b = MEAS.variance_metrics(z[..., 1] - z[..., 0], y), MEAS.variance_metrics_multiclass(z, y)
    np.testing.assert_array_equal(a["pi"], b["pi"])
    np.testing.assert_allclose(a["rsd"], b["rsd"], rtol=1e-12)
    for k in ("accuracy", "voting_accuracy", "agv"):
        assert a[k] == pytest.approx(b[k])
    # 3 classes by hand: passes predict 2, 2, 0 for the one example (label 2) -> PI 1, VA 1, accuracy 2/3
    z3 = np.array([[[0.0, 0.0, 1.0]], [[0.0, 0.5, 2.0]], [[1.0, 0.0, 0.5]]])
    m = MEAS.variance_metrics_multiclass(z3, np.array([2]))
    assert m["pi"].tolist() == [1] and m["voting_accuracy"] == 1.0 and m["accuracy"] == pytest.approx(2 / 3)
    margins = [1.0, 1.5, -0.5]                                           # z_2 - max(others) per pass
    assert m["rsd"][0] == pytest.approx(np.std(margins, ddof=1) / abs(np.mean(margins)))


def test_schedule_decay_only_and_extrapolation():
    sch = H.warmup_cosine(100, 1e-3)
    assert sch == {"warmup_steps": 10, "decay": "cosine", "total_steps": 100, "min_lr": 1e-4}
    assert H.decay_only_factor(3, 0.1, 0.5, None) == pytest.approx(0.95 ** 3)       # constant rate
    from refattn.nn.schedules import learning_rate

    want = np.prod([1 - 0.1 * learning_rate(t, lr=1e-3, schedule=sch) for t in range(100)])
    assert H.decay_only_factor(100, 1e-3, 0.1, sch) == pytest.approx(want)
    steps = [100, 200, 400, 800]
    acc = [0.1 + 0.05 * np.log(s) for s in steps]
    assert H.extrapolated_steps(steps, acc, 0.1 + 0.05 * np.log(3200)) == pytest.approx(3200, rel=1e-6)
    assert H.extrapolated_steps(steps, [0.3] * 4, 0.5) is None
    assert H.extrapolated_steps(steps, acc, 0.2) == 800


def test_curve_records_and_stops():
    accs = iter([0.2, 0.5, 0.95])
    c = H.Curve(lambda params: {"val_acc": next(accs)}, stop=lambda m: m["val_acc"] >= 0.9)
    assert [c(s, None) for s in (10, 20, 30)] == [False, False, True]
    assert c.data["step"] == [10, 20, 30] and c.data["val_acc"] == [0.2, 0.5, 0.95]
    assert len(c.data["cpu_seconds"]) == 3 and c.data["cpu_seconds"] == sorted(c.data["cpu_seconds"])


def test_train_loop_skips_nonfinite_steps_and_stops_a_diverged_run(monkeypatch):
    """An RKS normaliser at ~0 makes a step non-finite: the step is skipped and counted; too many stop."""
    import importlib

    tr_mod = importlib.import_module("refattn.nn.transformer")         # the module, not the function

    real = tr_mod.loss_and_grads
    bad = set()

    def flaky(params, x, y, features, *, config):
        if len(calls) in bad:
            calls.append(1)
            raise ValueError("linear_attention: the normaliser or output is not finite although ...")
        calls.append(0)
        return real(params, x, y, features, config=config)

    monkeypatch.setattr(tr_mod, "loss_and_grads", flaky)
    cfg = SP.config_for("softmax", SP.SIZES["tiny"])
    x, y, _, _ = SP.dataset("tiny", 0, 0.1)
    calls, bad, stats = [], {1, 2}, {}
    H.train_loop(cfg, x, y, seed=0, steps=4, batch=8, lr=1e-3, stats=stats)
    assert stats["skipped_steps"] == 2 and stats["skipped_at"] == [1, 2] and "diverged_at" not in stats
    calls, bad, stats = [], set(range(1, 40)), {}
    H.train_loop(cfg, x, y, seed=0, steps=40, batch=8, lr=1e-3, stats=stats)
    assert stats["diverged_at"] == 11 and len(calls) == 12                 # more than max(10, 40 // 10)
    monkeypatch.setattr(tr_mod, "loss_and_grads", lambda *a, **k: (_ for _ in ()).throw(ValueError("shape")))
    with pytest.raises(ValueError, match="shape"):                          # other errors still raise
        H.train_loop(cfg, x, y, seed=0, steps=2, batch=8, lr=1e-3)


def test_failed_passes_count_as_wrong_and_inconsistent():
    logits = np.array([[[0.0, 1.0]], [[np.nan, np.nan]], [[0.0, 2.0]]])      # (passes 3, N 1, K 2)
    assert H.predictions(logits[:, 0]).tolist() == [1, -1, 1]
    assert H.accuracy(logits[:, 0], np.array([1, 1, 1])) == pytest.approx(2 / 3)
    m = MEAS.variance_metrics_multiclass(logits, np.array([1]))
    assert m["pi"].tolist() == [1] and m["voting_accuracy"] == 1.0
    assert m["rsd"][0] == pytest.approx(np.std([1.0, 2.0], ddof=1) / 1.5)     # over the finite passes


def test_run_grid_memo_and_cache(tmp_path):
    """Each result is computed once: a second call (or a fresh process, via the cache file) reuses it."""
    from paper_checks import Context

    calls = []
    ctx = Context(seed=0, size="tiny", report_dir=tmp_path)
    task = LO.Run("softmax", 12345, 0, "tiny")
    first = H.run_grid(ctx, lambda t: calls.append(t) or {"v": 1.5, "key": t.key()}, [task], name="t")
    assert first == [{"v": 1.5, "key": task.key()}] and len(calls) == 1
    assert H.run_grid(ctx, lambda t: calls.append(t), [task], name="t") == first and len(calls) == 1
    H._MEMO.pop(task.key())
    assert H.grid_if_done(ctx, [task], name="t") == first                   # read back from the cache file
    assert (tmp_path / "experiments" / "t" / "runs" / f"{task.key()}.json").is_file()
    assert H.grid_if_done(ctx, [LO.Run("softmax", 12346, 0, "tiny")], name="t") is None


def test_classifier_input_grad_matches_finite_differences():
    rng = np.random.default_rng(0)
    h, W, b = rng.standard_normal((5, 6)), rng.standard_normal((6, 9)), rng.standard_normal(9)
    y = rng.integers(0, 9, 5)

    def loss(h):
        z = h @ W + b
        z = z - z.max(axis=1, keepdims=True)
        return np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(5), y])

    g = SP.classifier_input_grad(h @ W + b, y, W)
    eps = 1e-6
    fd = np.zeros(6)
    for j in range(6):                      # the summed-over-batch gradient: move every example's h_j
        e = np.zeros(6)
        e[j] = eps
        fd[j] = (loss(h + e) - loss(h - e)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)
    assert not np.allclose(SP.classifier_input_grad(h @ W + b, (y + 1) % 9, W), fd, atol=1e-3)  # must fail


def test_gradient_stats_and_eigenvalues():
    g = np.array([[1.0, -2.0], [-1.0, 2.0], [1.0, 2.0]])
    st = SP.gradient_stats(g)
    assert st["abs_mean"] == pytest.approx(1.5)
    assert st["std"] == pytest.approx(np.mean([np.std([1, -1, 1], ddof=1), np.std([-2, 2, 2], ddof=1)]))
    rng = np.random.default_rng(0)
    S = rng.standard_normal((2, 3, 3))
    ev = MEAS.covariance_eigenvalues(S, 3)
    np.testing.assert_allclose(np.sort(ev, axis=1),
                               np.sort(np.linalg.eigvalsh(S @ S.transpose(0, 2, 1)), axis=1))
    np.testing.assert_allclose(MEAS.covariance_eigenvalues(np.array([[0.5, 2.0]]), 2), [[0.25, 4.0]])


# ---- pre-registered criteria -------------------------------------------------------------------------------
def test_sparse_criterion():
    def rec(ratios, sp, sr):
        return {"criterion_values": {"ratios": [{"std_prf_over_rks": r} for r in ratios],
                                     "fraction_std_ratio_above_1": float(np.mean(np.array(ratios) > 1)),
                                     "slowdown_prf": sp, "slowdown_rks": sr}}

    assert SP.decide(rec([1.2, 1.5, 0.9, 2.0], 2.0, 1.0))[0] == "holds"
    assert SP.decide(rec([1.2, 0.5, 0.9, 2.0], 2.0, 1.0))[0] == "fails"
    assert SP.decide(rec([1.2, 1.5, 1.1, 2.0], 1.0, 1.5))[0] == "fails"
    assert SP.decide(rec([1.2, 1.5], 2.0, 1.0))[0] == "not-checkable"


def test_variance_and_eigen_and_listops_criteria():
    corr = {k: {"spearman": 0.8} for k in ("rsd-agv", "rsd-pi", "agv-pi")}
    rec = {"scale": {"passes": 100}, "criterion_values": {"n_points": 8, "correlations": corr,
                                                          "pi_gmm_rks": 1.0,
                                                          "pi_gmm_prf": 3.0}}
    assert VM.decide(rec)[0] == "holds"
    rec["criterion_values"]["pi_gmm_rks"] = 5.0
    assert VM.decide(rec)[0] == "fails"
    rec["criterion_values"]["n_points"] = 2
    assert VM.decide(rec)[0] == "not-checkable"
    cv = {f"{m} wd={wd}": {"mean": mean, "max": 0.8}
          for m in EIG.METHODS for wd, mean in ((0.1, 0.3), (0.0, 1.0))}
    assert EIG.decide({"criterion_values": cv})[0] == "holds"
    cv["gmm-prf wd=0.1"]["max"] = 1.3
    assert EIG.decide({"criterion_values": cv})[0] == "fails"
    lo = {"criterion_values": {"prf_minus_rks": {"gmm-prf-gmm-rks": 0.1}, "softmax_accuracy": 0.5,
                               "majority_class_rate": 0.2}}
    assert LO.decide(lo)[0] == "holds"
    lo["criterion_values"]["prf_minus_rks"]["gmm-prf-gmm-rks"] = 0.0
    assert LO.decide(lo)[0] == "fails"
    lo["criterion_values"]["softmax_accuracy"] = 0.22
    assert LO.decide(lo)[0] == "not-checkable"


# ---- tiny end-to-end runs ----------------------------------------------------------------------------------
# Attention kinds that have not landed are stood in for by FAVOR+ *in these tests only* (the pipeline is what
# is tested here: training, evaluation, JSON and PNG); the claims themselves report not-checkable until they
# exist.
@pytest.fixture
def stand_ins(monkeypatch):
    from refattn.nn.kinds import ATTENTION_KINDS

    for name, (kind, _) in list(H.METHODS.items()):
        if kind not in ATTENTION_KINDS:
            monkeypatch.setitem(H.METHODS, name, ("favor", {"features": "positive", "draw": "iid"}))


def _check_outputs(record, out: Path, name: str):
    js = json.loads((out / f"{name}.json").read_text())
    assert js["size"] == "tiny" and js["criterion"] and "criterion_values" in js and js["scale"]
    pngs = record["figures"]
    assert pngs and all(Path(p).exists() and Path(p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    return js


@pytest.mark.parametrize("mod", [SP, LO, VM], ids=lambda m: m.NAME)
def test_tiny_end_to_end(mod, stand_ins, tmp_path):
    with H.single_thread():
        record = mod.run("tiny", seed=0, out_dir=tmp_path)
    _check_outputs(record, tmp_path, mod.NAME)
    verdict, summary = mod.decide(record)
    assert verdict in ("holds", "fails", "not-checkable") and summary


def test_tiny_eigenvalues_end_to_end(tmp_path):
    from refattn.nn.kinds import ATTENTION_KINDS

    if not all(H.METHODS[m][0] in ATTENTION_KINDS for m in EIG.METHODS):
        with pytest.raises(H.MissingPiece, match="needs attention kind"):
            EIG.run("tiny", 0, tmp_path)
        pytest.skip("GMM attention kinds not in the kind table yet (the claim reports not-checkable)")
    with H.single_thread():
        record = EIG.run("tiny", seed=0, out_dir=tmp_path)
    _check_outputs(record, tmp_path, EIG.NAME)


def test_same_seed_same_record(stand_ins, tmp_path, monkeypatch):
    monkeypatch.setattr(H, "_MEMO", {})
    a = LO.run("tiny", seed=0, out_dir=tmp_path / "a")
    monkeypatch.setattr(H, "_MEMO", {})                                  # trained again, not memoised
    b = LO.run("tiny", seed=0, out_dir=tmp_path / "b")
    assert {m: r["test_accuracy"] for m, r in a["results"].items()} == \
           {m: r["test_accuracy"] for m, r in b["results"].items()}


# ---- real-data path: IDX reader (generated files only; the suite never reads the installed data) -----------
from paper_checks.experiments import idx as IDX  # noqa: E402, N812
from paper_checks.experiments import images as IM  # noqa: E402, N812
from paper_checks.experiments import images_rules as IR  # noqa: E402, N812


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("name", ["a-idx3-ubyte", "a-idx3-ubyte.gz"])
def test_idx_round_trip(tmp_path, dtype, name):
    a = (np.arange(2 * 3 * 5).reshape(2, 3, 5) * 7 % 113).astype(dtype)
    back = IDX.read_idx(IDX.write_idx(tmp_path / name, a))
    assert back.dtype == np.dtype(dtype) and back.shape == (2, 3, 5)
    np.testing.assert_array_equal(back, a)
    raw = (tmp_path / name).read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == name.endswith(".gz")


def test_idx_big_endian_layout(tmp_path):
    """The bytes on disk are the format's: magic 00 00 0C 01, dims and values big-endian."""
    p = IDX.write_idx(tmp_path / "x", np.array([1, 258], dtype=np.int32))
    assert p.read_bytes() == bytes.fromhex("0000 0c01 00000002 00000001 00000102".replace(" ", ""))
    np.testing.assert_array_equal(IDX.read_idx(p), [1, 258])


def test_idx_malformed_files(tmp_path):
    good = IDX.write_idx(tmp_path / "good", np.zeros((4, 2, 2), np.uint8)).read_bytes()
    cases = {"magic": (b"\x01\x00" + good[2:], "not an IDX file"),
             "type": (good[:2] + b"\x07" + good[3:], "unknown IDX type byte 0x07"),
             "short": (good[:3], "truncated IDX header"),
             "dims": (good[:8], "truncated IDX header"),
             "data": (good[:-1], "truncated IDX data: 15 bytes after the header, expected 16"),
             "trailing": (good + b"\x00", "1 unexpected byte"),
             "ndim0": (b"\x00\x00\x08\x00", "0 dimensions"),
             "gzip": (b"\x1f\x8b\x08\x00garbage", "corrupt or truncated gzip")}
    for name, (payload, msg) in cases.items():
        (tmp_path / name).write_bytes(payload)
        with pytest.raises(ValueError, match=msg) as info:
            IDX.read_idx(tmp_path / name)
        assert name in str(info.value)                                  # the message names the file
    with pytest.raises(TypeError, match="no IDX type"):
        IDX.write_idx(tmp_path / "b", np.zeros(3, np.uint64))


def _mnist_dir(d: Path, n_train=80, n_test=40, gz=True) -> Path:
    """A small MNIST-format directory: 28x28 uint8 images whose content sits in columns 10..17 (every image
    can be shifted 8 px both ways), labels cycling 0..9; label-1 images are thin vertical bars
    ("trousers")."""
    rng = np.random.default_rng(5)
    d.mkdir(parents=True, exist_ok=True)
    for stem, n in (("train", n_train), ("t10k", n_test)):
        y = (np.arange(n) % 10).astype(np.uint8)
        x = np.zeros((n, 28, 28), np.uint8)
        for i, lab in enumerate(y):
            r0 = 4 + lab                                                   # class-dependent row band
            x[i, r0:r0 + 8, 10:18] = rng.integers(1, 256, (8, 8))
            if lab == 1:
                x[i, 2:26, 12:16] = 200
        sfx = ".gz" if gz else ""
        IDX.write_idx(d / f"{stem}-images-idx3-ubyte{sfx}", x)
        IDX.write_idx(d / f"{stem}-labels-idx1-ubyte{sfx}", y)
    return d


def test_load_mnist_format_and_its_errors(tmp_path):
    d = _mnist_dir(tmp_path / "ok")
    data = IDX.load_mnist_format(d)
    assert data.x_train.shape == (80, 28, 28) and data.y_test.shape == (40,) and data.source == str(d)
    assert data.y_train.dtype == np.int64 and set(data.y_train) == set(range(10))
    plain = IDX.load_mnist_format(_mnist_dir(tmp_path / "plain", gz=False))
    np.testing.assert_array_equal(plain.x_test, data.x_test)
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        IDX.load_mnist_format(tmp_path / "nowhere")
    bad = _mnist_dir(tmp_path / "swapped")                                 # labels where images belong
    (bad / "t10k-images-idx3-ubyte.gz").write_bytes((bad / "t10k-labels-idx1-ubyte.gz").read_bytes())
    with pytest.raises(ValueError, match="expected images, a 3-D uint8"):
        IDX.load_mnist_format(bad)
    bad = _mnist_dir(tmp_path / "count")
    IDX.write_idx(bad / "train-labels-idx1-ubyte.gz", np.zeros(79, np.uint8))
    with pytest.raises(ValueError, match="80 images but 79 labels"):
        IDX.load_mnist_format(bad)
    IDX.write_idx(bad / "train-labels-idx1-ubyte.gz", np.full(80, 10, np.uint8))
    with pytest.raises(ValueError, match="label 10 out of range"):
        IDX.load_mnist_format(bad)


def test_data_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(IDX.DATA_ENV, raising=False)
    assert IDX.data_dir() == IDX.DEFAULT_DATA_DIR
    monkeypatch.setenv(IDX.DATA_ENV, str(tmp_path))
    assert IDX.find_real_data() is None                                   # empty directory: the stand-in
    assert IM.data_for("small") is None and IM.data_for("tiny") is None
    _mnist_dir(tmp_path)
    assert IDX.find_real_data() == tmp_path and IM.data_for("tiny") == str(tmp_path)


def test_cli_rejects_a_data_dir_without_mnist_files(tmp_path, capsys):
    from paper_checks.__main__ import main

    assert main(["--data", str(tmp_path), "--list"]) == 2
    assert "does not hold the MNIST-format files" in capsys.readouterr().err


# ---- pooled tokens: shifts by whole tokens are shifts by 2 px ----------------------------------------------
def test_pooling_commutes_with_even_shifts():
    rng = np.random.default_rng(0)
    x = np.zeros((30, 28, 28), np.uint8)
    x[:, 3:25, 8:20] = rng.integers(0, 256, (30, 22, 12)) * (rng.random((30, 22, 12)) < 0.6)
    tok = IM.pool_tokens(x)
    assert tok.shape == (30, 14, 14) and tok.min() >= 0 and tok.max() <= 16
    pooled = x.reshape(30, 14, 2, 14, 2).astype(float).mean(axis=(2, 4))
    np.testing.assert_array_equal(tok == 0, pooled == 0)                  # id 0 exactly for background
    for s in (-4, -1, 1, 4):
        px = D.shift_horizontal(x.astype(float), 2 * s)
        np.testing.assert_array_equal(IM.pool_tokens(px.astype(np.uint8)), IM.shift_tokens(tok, s))
    # pixel-shiftable by 8 px <=> token-shiftable by 4 tokens
    np.testing.assert_array_equal(D.shiftable(x.astype(float), 8), IM.shiftable_tokens(tok, 4))
    with pytest.raises(ValueError, match="even H and W"):
        IM.pool_tokens(np.zeros((1, 27, 28), np.uint8))


# ---- the claims' decision rules: each moves when the evidence says the opposite ----------------------------
def _ev(**kw):
    ev = {"size": "full", "data_stand_in": False, "min_margin_over_floor": 0.05, "budget_fraction": 1.0,
          "gain_s1": 0.2, "gain_s2": 0.15, "se_gain_s1": 0.02, "se_gain_s2": 0.02,
          "gain_flt": 0.05, "se_gain_flt": 0.02,
          "retention_worst": {"absolute": 0.1, "s1": 0.95, "s2": 0.85, "no-pos": 1.0}}
    ev.update(kw)
    return ev


def test_image_claim_rules():
    """At the paper's compute (budget_fraction 1) the criteria decide holds / fails; below it a fails reads
    not-reproduced, and the learning guard applies."""
    assert IR.decide_table1(_ev()) == "holds"
    assert IR.decide_table1(_ev(gain_s2=0.09)) == "fails"                             # below the margin
    assert IR.decide_table1(_ev(se_gain_s2=0.08)) == "fails"                          # within 2 SE
    assert IR.decide_table1(_ev(gain_s1=-0.2, gain_s2=-0.15)) == "fails"             # labels swapped
    assert IR.decide_shift(_ev()) == "holds"
    assert IR.decide_shift(_ev(retention_worst={"absolute": 0.95, "s1": 0.1, "s2": 0.85})) == "fails"
    assert IR.decide_shift(_ev(retention_worst={"absolute": 0.31, "s1": 0.95, "s2": 0.85})) == "fails"
    # the positional guard: a relative model not above No-Pos (within 2 SE) makes its retention vacuous
    assert IR.decide_shift(_ev(gain_s1=0.03)) == "not-checkable"
    assert IR.decide_shift(_ev(gain_s2=-0.1, budget_fraction=0.01)) == "not-checkable"
    assert IR.decide_shift(_ev(gain_s2=0.05)) == "holds"                              # 2.5 SE: learned
    assert IR.decide_flt(_ev()) == "holds"
    assert IR.decide_flt(_ev(gain_flt=-0.05)) == "fails"
    assert IR.decide_flt(_ev(gain_flt=0.035)) == "fails"                              # within 2 SE
    for rule in (IR.decide_table1, IR.decide_shift, IR.decide_flt):
        assert rule(_ev(size="tiny")) == "not-checkable"
        assert rule(_ev(data_stand_in=True)) == "not-checkable"
        assert rule(_ev(size="small", data_stand_in=True)) != "not-checkable"
        below = _ev(budget_fraction=0.01)
        assert rule(below) == "holds"
        assert rule(dict(below, min_margin_over_floor=-0.03)) == "not-checkable"    # the learning guard
        assert rule(dict(below, min_margin_over_floor=float("nan"))) == "not-checkable"
        assert rule(_ev(min_margin_over_floor=-0.03)) == "holds"                    # no guard at the paper's
    assert IR.decide_table1(_ev(budget_fraction=0.01, gain_s2=0.0)) == "not-reproduced"
    assert IR.decide_shift(_ev(budget_fraction=0.01,
                               retention_worst={"absolute": 0.9, "s1": 0.95, "s2": 0.85})) == "not-reproduced"
    assert IR.decide_flt(_ev(budget_fraction=0.01, gain_flt=0.0)) == "not-reproduced"


def test_image_rung_and_decision_numbers():
    """The ladder rung of a grid's evidence, from its runs: table1's effect is the smaller gain minus the
    margin, with that arm's SE from the seed spread."""
    runs = [{"method": m, "test_acc": a, "shifts": [-1, 0, 1], "shift_acc": sh, "n_trousers": 5}
            for m, accs, sh in (("no-pos", (0.50, 0.52), (1, 1, 1)), ("s1", (0.70, 0.74), (0.9, 1, 0.8)),
                                ("s2", (0.60, 0.60), (0.5, 1, 1)), ("absolute", (0.8, 0.8), (0.1, 1, 1)))
            for a in accs]
    ev = {"size": "small", "budget_fraction": 0.001}
    t1 = IR.decision_numbers("table1", runs, ev)
    assert t1["gain_s1"] == pytest.approx(0.21) and t1["gain_s2"] == pytest.approx(0.09)
    se2 = np.sqrt(0.0 / 2 + np.var([0.50, 0.52], ddof=1) / 2)
    assert t1["se_gain_s2"] == pytest.approx(se2)
    assert t1["ladder"] == [{"size": "small", "budget_fraction": 0.001, "effect": pytest.approx(-0.01),
                             "se": pytest.approx(se2)}]


def test_extrapolated_steps():
    steps = [100, 200, 400, 800, 1600]
    curve = {"step": steps, "test_acc": [0.1 + 0.05 * np.log(s) for s in steps]}
    assert IM.extrapolated_steps(curve, 0.1 + 0.05 * np.log(6400)) == pytest.approx(6400, rel=1e-6)
    assert IM.extrapolated_steps({"step": steps, "test_acc": [0.3] * 5}, 0.5) is None    # flat: no guess
    assert IM.extrapolated_steps(curve, 0.2) == 1600                                     # reached already


# ---- the image claims end to end at tiny, on generated IDX files and on the stand-in -----------------------
@pytest.mark.parametrize("real", [True, False], ids=["generated-idx", "stand-in"])
def test_image_claims_tiny(tmp_path, monkeypatch, real):
    from paper_checks import Context
    from paper_checks.runner import run_check
    from paper_checks.horn import experiments as horn_exp  # noqa: F401 (registers the claims)
    from paper_checks.choromanski import experiments as flt_exp  # noqa: F401
    from paper_checks.registry import REGISTRY

    data = _mnist_dir(tmp_path / "data") if real else tmp_path / "empty"
    monkeypatch.setenv(IDX.DATA_ENV, str(data))
    monkeypatch.setattr(H, "_MEMO", {})
    rep = tmp_path / "report"
    for cid, which in (("horn.table1-ordering", "table1"), ("horn.shift-robustness", "shift"),
                       ("flt.image-classification", "flt")):
        res = run_check(REGISTRY[cid], Context(seed=0, size="tiny", report_dir=rep, claim_id=cid))
        ev = res.evidence
        assert res.verdict == "not-checkable" and ev["size"] == "tiny"                 # a smoke run
        assert ev["data_stand_in"] is (not real) and ("STAND-IN" in res.summary) is (not real)
        assert ev["data"]["source"] == (str(data) if real else ev["data"]["source"])
        for m in IR.CLAIM_METHODS[which]:
            assert 0 <= ev["accuracy"][m]["mean"] <= 1
        assert res.figures and Path(res.figures[0]).read_bytes()[:4] == b"\x89PNG"
        rec = json.loads((rep / "experiments" / IM.NAME / f"{which}.json").read_text())
        assert rec["evidence"]["data"] == ev["data"] and rec["runs"][0]["curve"]["step"]
        if which == "shift":
            assert ev["n_trousers"] == (4 if real else ev["n_trousers"])     # 40 test images, 1 in 10
        # the summary names the accuracy on a fresh feature draw whenever it differs from the tested draw's
        by = ev["test_acc_by_draw"]
        assert ("fresh feature draw" in res.summary) is any(a["fresh"] != a["training"] for a in by.values())
        moved = {m: {"training": a["training"], "fresh": 0.123} for m, a in by.items()}
        text = IM.summary(which, {**ev, "test_acc_by_draw": moved})
        assert all(f"{m} 0.123" in text.split("fresh feature draw")[1] for m in moved)
    # the runs are shared: the second and third claims trained only FLT, at each rung of the ladder
    assert len(list((rep / "experiments" / IM.NAME / "runs").glob("*.json"))) == 5 * len(IM.LADDER)


# ---- the budget ladder: each rung a separate, shorter run of the same schedule shape -----------------------
def test_rung_size_scales_the_budget_coupled_settings_only():
    full = IM.SIZES["full"]
    for rung, f in (("1/4", 0.25), ("1/2", 0.5), ("1", 1.0)):
        sz = IM.rung_size("full", rung)
        assert sz["steps"] == full["steps"] * f                                      # 375, 750, 1500
        assert sz["warmup"] / sz["steps"] == pytest.approx(full["warmup"] / full["steps"], abs=1 / 750)
        assert sz["steps"] / sz["eval_every"] == pytest.approx(full["steps"] / full["eval_every"], rel=0.01)
        assert {k: v for k, v in sz.items() if k not in IM.RUNG_SCALED} == \
               {k: v for k, v in full.items() if k not in IM.RUNG_SCALED}              # same lr, model, data
        sched = IM.schedule(sz)
        assert sched["total_steps"] == sz["steps"] and sched["min_lr"] == full["lr"] / 10
    assert IM.rung_size("full", "1") == full
    for bad in ("0", "3/2", "-1/4"):
        with pytest.raises(ValueError, match="rung: expected a fraction in"):
            IM.rung_size("full", bad)
    with pytest.raises(ValueError, match="size: expected one of"):
        IM.rung_size("huge", "1")


def test_ladder_cache_keys_name_the_rung():
    """Every (rung, method, seed) of a ladder is its own cache entry; the rung is in the key's words."""
    from paper_checks import Context

    ctx = Context(seed=0, size="full")
    tasks = IM.ladder_tasks(ctx, ("no-pos", "s1"), data_dir="/data")
    keys = [t.key() for t in tasks]
    assert len(set(keys)) == len(tasks) == len(IM.LADDER) * 2 * IM.SIZES["full"]["seeds"]
    assert [t.rung for t in tasks] == sorted((t.rung for t in tasks), key=IM.LADDER.index)   # cheapest first
    one = IM.Task("s1", 0, "full", "/data", "1/2")
    assert one.key().startswith("s1-s0-full-r1of2-")


def test_image_ladder_tiny(tmp_path, monkeypatch):
    """At tiny the claims' evidence holds three rungs at 1/4, 1/2 and 1 of the size's compute, each from
    runs that trained that many steps; the ladder trainer fills the cache cheapest rung first and a rerun
    trains nothing."""
    from paper_checks import Context
    from paper_checks.experiments import images_ladder as IL  # noqa: N812
    from paper_checks.horn import experiments as horn_exp  # noqa: F401 (registers the claims)
    from paper_checks.registry import REGISTRY
    from paper_checks.runner import run_check

    monkeypatch.setenv(IDX.DATA_ENV, str(_mnist_dir(tmp_path / "data")))
    monkeypatch.setattr(H, "_MEMO", {})
    rep = tmp_path / "report"
    lines = []
    assert IL.main(["--size", "tiny", "--report", str(rep)]) == 0
    runs = sorted((rep / "experiments" / IM.NAME / "runs").glob("*.json"))
    assert len(runs) == len(IL.METHODS) * len(IM.LADDER)
    for p in runs:
        r = json.loads(p.read_text())
        assert r["curve"]["step"][-1] == r["steps"] == IM.rung_size("tiny", r["rung"])["steps"]
    assert sorted({json.loads(p.read_text())["steps"] for p in runs}) == [1, 2, 4]
    ctx = Context(seed=0, size="tiny", report_dir=rep, claim_id="images-ladder")
    monkeypatch.setattr(H, "_MEMO", {})
    monkeypatch.setattr(IM, "train_one", lambda t: pytest.fail(f"{t} trained again"))
    IL.train_ladder(ctx, data_dir=IM.data_for("tiny"), log=lines.append)
    assert [ln.split(":")[0] for ln in lines] == [t.key() for t in IM.ladder_tasks(ctx, IL.METHODS,
                                                                                    data_dir=IM.data_for("tiny"))]
    cid = "horn.table1-ordering"
    ev = run_check(REGISTRY[cid], Context(seed=0, size="tiny", report_dir=rep, claim_id=cid)).evidence
    lad = ev["ladder"]
    assert [r["rung"] for r in lad] == list(IM.LADDER) and [r["steps"] for r in lad] == [1, 2, 4]
    top = lad[-1]["budget_fraction"]
    assert top == ev["budget_fraction"] and [r["budget_fraction"] / top for r in lad] == [0.25, 0.5, 1.0]
    assert all({"effect", "se"} <= set(r) for r in lad)
    assert lad[-1]["effect"] == IR.rung("table1", ev)["effect"]                     # the top rung: the rule's
    # collected for a record: every run copied, each rung complete; a missing run leaves its rung incomplete
    cache = rep / "experiments" / IM.NAME / "runs"
    other = IM.Task("s1", 0, "tiny", IM.data_for("tiny"), "1", (("qk_init", "glorot"),))    # not a ladder run
    (cache / f"{other.key()}.json").write_text(runs[0].read_text())
    status = IL.collect(cache, tmp_path / "rec", "tiny", data_dir=IM.data_for("tiny"))
    assert sorted(p.name for p in (tmp_path / "rec" / "runs").iterdir()) == [p.name for p in runs]
    assert [r["done"] for r in status["rungs"].values()] == [5, 5, 5]
    assert set(status["rungs"]["1/4"]["accuracy"]) == set(IL.METHODS)
    assert [r["budget_fraction"] for r in status["rungs"].values()] == [x["budget_fraction"] for x in lad]
    gone = next(p for p in runs if p.name.startswith("s2-s0-tiny-r1of2-"))
    gone.unlink()
    status = IL.collect(cache, tmp_path / "rec2", "tiny", data_dir=IM.data_for("tiny"))
    half = status["rungs"]["1/2"]
    assert half["done"] == 4 and half["missing"] == ["s2 s0"] and "accuracy" not in half
    assert "rung incomplete" in (tmp_path / "rec2" / "runs.md").read_text()
    assert status["estimate_cpu_seconds_to_finish"] >= 0 and not status["estimate_unknown"]


def test_full_without_real_data_is_not_checkable_and_names_the_install(tmp_path, monkeypatch):
    from paper_checks import Context
    from paper_checks.horn import experiments as horn_exp  # noqa: F401
    from paper_checks.registry import REGISTRY
    from paper_checks.runner import run_check

    monkeypatch.setenv(IDX.DATA_ENV, str(tmp_path))
    cid = "horn.table1-ordering"
    res = run_check(REGISTRY[cid], Context(seed=0, size="full", claim_id=cid))
    assert res.verdict == "not-checkable" and "apt-get install dataset-fashion-mnist" in res.summary
    assert res.evidence["data_stand_in"] and "accuracy" not in res.evidence             # nothing was trained


# ---- the ablation: from the former settings to the authors', each change alone and cumulatively ---------
def test_ablation_configurations():
    from paper_checks.experiments import images_ablation as AB  # noqa: N812

    confs = AB.configurations()
    names = [n for n, _ in confs]
    live = [n for n, _ in AB.CHANGES if n not in AB.skipped()]
    assert names[0] == "baseline" and confs[0][1] == IM.PREVIOUS_SETTINGS
    assert confs[-1][1] == IM.AUTHORS_SETTINGS                               # cumulatively: the authors'
    assert len(confs) == 1 + len(live) + len(live) - 1
    for n, keys in AB.CHANGES:
        if n in live:                                   # alone: exactly its settings moved to the authors'
            st = dict(confs)[f"alone: {n}"]
            assert {k for k in st if st[k] != IM.PREVIOUS_SETTINGS[k]} == \
                {k for k in keys if IM.AUTHORS_SETTINGS[k] != IM.PREVIOUS_SETTINGS[k]} != set()
            assert all(st[k] == IM.AUTHORS_SETTINGS[k] for k in keys)
    assert AB.skipped() == {}


def test_ablation_measures_the_class_token_without_moving_the_ladder():
    """The ablation's readout change uses the authors' class token; the ladder's settings (whose cache keys
    name the committed and running runs) and every other configuration keep the mean readout."""
    from paper_checks.experiments import images_ablation as AB  # noqa: N812

    assert IM.AUTHORS_READOUT == "class-token" and IM.SETTINGS["readout"] == "mean"
    assert IM.PREVIOUS_SETTINGS["readout"] == "mean"
    assert IM.AUTHORS_SETTINGS == {**IM.SETTINGS, "readout": "class-token"}
    confs = dict(AB.configurations())
    assert confs["alone: readout"] == {**IM.PREVIOUS_SETTINGS, "readout": IM.AUTHORS_READOUT}
    assert confs["cumulative: + readout"] == IM.AUTHORS_SETTINGS
    assert confs["cumulative: + optimiser betas and clipping"] == IM.SETTINGS   # the ladder's settings
    with_token = {n for n, st in confs.items() if st["readout"] == IM.AUTHORS_READOUT}
    assert with_token == {"alone: readout", "cumulative: + readout"}
    assert all(st["readout"] == "mean" for n, st in confs.items() if n not in with_token)
    cfg = IM.model_config("s1", IM.SIZES["tiny"], IM.AUTHORS_SETTINGS)
    assert cfg["readout"] == "class-token" and IM.model_config("s1", IM.SIZES["tiny"])["readout"] == "mean"


def test_ablation_tiny(tmp_path, monkeypatch):
    """Each configuration's runs train with its settings (the model and optimiser they record), runs that
    are the same share one cache entry, and the authors' configuration is the ladder's rung-1 run."""
    from paper_checks import Context
    from paper_checks.experiments import images_ablation as AB  # noqa: N812

    monkeypatch.setenv(IDX.DATA_ENV, str(_mnist_dir(tmp_path / "data")))
    monkeypatch.setattr(H, "_MEMO", {})
    rep = tmp_path / "report"
    assert AB.main(["--size", "tiny", "--report", str(rep)]) == 0
    res = json.loads((rep / "experiments" / IM.NAME / "ablation.json").read_text())
    assert [r["configuration"] for r in res["configurations"]] == [n for n, _ in AB.configurations()]
    runs = [json.loads(p.read_text()) for p in (rep / "experiments" / IM.NAME / "runs").glob("*.json")]
    # No-Pos ignores S1's initialisation: the baseline's and "alone: S1 initialisation"'s No-Pos are one run,
    # and so are "alone: query/key scale"'s and "cumulative: + query/key scale"'s
    assert len(runs) == len(AB.configurations()) * len(AB.METHODS) - 2
    for r in runs:
        att = r["model"]["attention"]
        assert att["redraw_every"] == r["settings"]["redraw_every"] and r["model"]["qk_init"] == \
            r["settings"]["qk_init"]
        if r["method"] == "s1":
            assert att["init"] == r["settings"]["s1_init"]
        assert r["eval_draw"] == r["settings"]["eval_draw"]
        assert r["test_acc"] == r["test_acc_by_draw"][r["settings"]["eval_draw"]]
        assert r["model"]["readout"] == r["settings"]["readout"]
    moved = {(r["settings"]["redraw_every"], r["model"]["qk_init"]) for r in runs}
    assert moved == {(1, "glorot"), (1, "torch"), (1000, "glorot"), (1000, "torch")}
    ctx = Context(seed=0, size="tiny")
    top = {t.key() for t in IM.ladder_tasks(ctx, AB.METHODS, data_dir=IM.data_for("tiny"), rungs=("1",))}
    assert top <= {t.key() for _, t in AB.ablation_tasks(ctx, data_dir=IM.data_for("tiny"))}
    assert "| baseline | none |" in (rep / "experiments" / IM.NAME / "ablation.md").read_text()
    # collected for a record: the complete ablation is the trained one; a run gone from the cache leaves
    # every configuration that shares it incomplete, naming it, with an estimate of what finishing costs
    cache = rep / "experiments" / IM.NAME / "runs"
    full = AB.collect(cache, tmp_path / "rec", "tiny", data_dir=IM.data_for("tiny"))
    assert full["runs_done"] == full["runs_distinct"]
    stored = json.loads((tmp_path / "rec" / "ablation.json").read_text())
    assert stored["configurations"] == res["configurations"]
    assert len(list((tmp_path / "rec" / "runs").glob("*.json"))) == len(runs)
    gone = next(t for n, t in AB.ablation_tasks(ctx, data_dir=IM.data_for("tiny")) if n == "baseline")
    (cache / f"{gone.key()}.json").unlink()
    part = AB.collect(cache, tmp_path / "rec2", "tiny", data_dir=IM.data_for("tiny"))
    hit = [r["configuration"] for r in part["configurations"] if r["missing"]]
    assert hit == ["baseline", "alone: S1 initialisation"]                    # No-Pos s0 is shared by both
    assert all(r["missing"] == [f"{gone.method} s{gone.run_seed}"] and "accuracy" not in r
               for r in part["configurations"] if r["missing"])
    left = [r["train_cpu_seconds"] for r in map(json.loads, map(Path.read_text, cache.glob("*.json")))
            if r["method"] == gone.method]                                 # the finished runs of its method
    assert part["runs_done"] == part["runs_distinct"] - 1
    assert part["estimate_cpu_seconds_to_finish"] == round(float(np.mean(left)))
    assert "1 of 2 runs; missing: no-pos s0" in (tmp_path / "rec2" / "ablation.md").read_text()
