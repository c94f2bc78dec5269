"""Checkpoints as untrusted input: every hostile file fails with one CheckpointError naming file and entry,
before anything large is allocated; a valid file round-trips exactly."""

import io
import json
import time
import zipfile

import numpy as np
import pytest

from refattn.limits import max_bytes
from refattn.nn.checkpoint import CheckpointError, load, save
from refattn.nn.config import check_config
from refattn.nn.init import init_transformer

CFG = {"task": "classify", "vocab_size": 11, "n_classes": 3, "d_model": 8, "n_heads": 2, "n_layers": 1,
       "max_len": 6, "d_ff": 12, "attention": "softmax"}


@pytest.fixture
def good(tmp_path):
    params = init_transformer(np.random.default_rng(0), CFG)
    path = tmp_path / "model.npz"
    save(path, params, CFG)
    return path, params


def _arrays(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _rewrite(tmp_path, arrays, name="bad.npz"):
    bad = tmp_path / name
    np.savez(bad, **arrays)
    return bad


def test_roundtrip_and_config_mismatch(good):
    path, params = good
    loaded, cfg = load(path, config=CFG)
    assert cfg == check_config(CFG)
    np.testing.assert_array_equal(loaded["head"].W, params["head"].W)
    with pytest.raises(CheckpointError, match=r"configuration mismatch \(d_ff: file 12 vs expected 16"):
        load(path, config=dict(CFG, d_ff=16))
    assert issubclass(CheckpointError, ValueError)


def test_entry_shape_missing_and_extra(good, tmp_path):
    path, _ = good
    arrays = _arrays(path)
    arrays["params/head/W"] = arrays["params/head/W"][:, :2]
    with pytest.raises(CheckpointError, match=r"bad.npz: entry 'params/head/W' has shape \(8, 2\)"):
        load(_rewrite(tmp_path, arrays))
    arrays = _arrays(path)
    del arrays["params/head/W"]
    with pytest.raises(CheckpointError, match=r"entry 'params/head/W' is missing"):
        load(_rewrite(tmp_path, arrays))
    arrays = _arrays(path)
    arrays["params/extra"] = np.zeros(3)
    with pytest.raises(CheckpointError, match=r"entries not implied by the configuration: \['params/ex"):
        load(_rewrite(tmp_path, arrays))


@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
def test_non_finite_parameters_rejected(good, tmp_path, bad_value):
    path, _ = good
    arrays = _arrays(path)
    arrays["params/blocks/0/ff1/W"][1, 2] = bad_value
    with pytest.raises(CheckpointError, match=r"'params/blocks/0/ff1/W' holds non-finite values \(1 of"):
        load(_rewrite(tmp_path, arrays))


def test_truncated_and_random_files(good, tmp_path):
    path, _ = good
    raw = path.read_bytes()
    for cut in (10, len(raw) // 2, len(raw) - 30):
        bad = tmp_path / f"cut{cut}.npz"
        bad.write_bytes(raw[:cut])
        with pytest.raises(CheckpointError, match=f"checkpoint {bad}"):
            load(bad)
    rnd = tmp_path / "random.npz"
    rnd.write_bytes(np.random.default_rng(1).integers(0, 256, 2048, dtype=np.uint8).tobytes())
    with pytest.raises(CheckpointError, match="not a refattn checkpoint"):
        load(rnd)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load(tmp_path / "absent.npz")


def test_pickled_entry_refused(good, tmp_path):
    path, _ = good
    arrays = _arrays(path)
    arrays["params/evil"] = np.array([{"a": 1}], dtype=object)
    bad = tmp_path / "pickled.npz"
    np.savez(bad, **arrays)          # np.savez pickles object arrays
    with pytest.raises(CheckpointError, match=r"entry 'params/evil' holds Python objects \(pickled data\)"):
        load(bad)


def test_config_entry_validated(good, tmp_path):
    path, _ = good
    arrays = _arrays(path)
    del arrays["__config__"]
    with pytest.raises(CheckpointError, match="'__config__' is missing"):
        load(_rewrite(tmp_path, arrays))
    for text, match in (("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object"),
                        (json.dumps(dict(CFG, n_heads=3)), "valid configuration: config\\['n_heads'\\]"),
                        (json.dumps(dict(CFG, d_model="8")), "not a valid configuration")):
        arrays = _arrays(path)
        arrays["__config__"] = np.asarray(text)
        with pytest.raises(CheckpointError, match=match):
            load(_rewrite(tmp_path, arrays))
    arrays = _arrays(path)
    arrays["__config__"] = np.zeros(3)
    with pytest.raises(CheckpointError, match="must be a 0-d unicode string"):
        load(_rewrite(tmp_path, arrays))


@pytest.mark.parametrize("vocab", [10**7, 10**9])
def test_oversized_config_fails_before_allocating(good, tmp_path, vocab):
    """A 2 KB file whose configuration says vocab_size = 1e7 (1e9) fails on the header arithmetic alone,
    before anything is allocated."""
    path, _ = good
    arrays = _arrays(path)
    cfg = json.loads(str(arrays["__config__"]))
    cfg["vocab_size"] = vocab
    arrays["__config__"] = np.asarray(json.dumps(cfg))
    bad = _rewrite(tmp_path, arrays)
    t0 = time.perf_counter()
    with pytest.raises((CheckpointError, MemoryError), match=r"bad.npz"):
        load(bad)
    assert time.perf_counter() - t0 < 2.0
    with max_bytes(1024), pytest.raises(MemoryError, match="above refattn's bound of 1024 bytes"):
        load(path)                                     # the bound itself applies to a valid file too


def test_header_lying_about_size(good, tmp_path):
    """An entry whose .npy header declares more data than the zip member stores is rejected from the
    header."""
    path, _ = good
    buf = io.BytesIO()
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(buf, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "params/head/W.npy":
                data = data.replace(b"(8, 3)", b"(9, 3)")
            zout.writestr(info, data)
    bad = tmp_path / "liar.npz"
    bad.write_bytes(buf.getvalue())
    with pytest.raises(CheckpointError, match=r"entry 'params/head/W' declares shape \(9, 3\).*but stores"):
        load(bad)
