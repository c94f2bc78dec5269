"""Checkpoints as untrusted input: every hostile file fails with one CheckpointError naming file and entry,
before anything large is allocated; a valid file round-trips exactly."""

import io
import json
import os
import re
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from refattn.limits import max_bytes
from refattn.nn.checkpoint import CheckpointError, flatten_tree, load, save
from refattn.nn.config import check_config
from refattn.nn.init import draw_attention_features, init_transformer, model_nbytes

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
    arrays["params/head/b"] = np.array([{"a": 1}, 2, 3], dtype=object)
    bad = tmp_path / "pickled.npz"
    np.savez(bad, **arrays)          # np.savez pickles object arrays
    with pytest.raises(CheckpointError, match=r"entry 'params/head/b' .*"):
        load(bad)                    # refused from the archive directory (size) or the header (objects)
    arrays = _arrays(path)
    arrays["params/evil"] = np.array([{"a": 1}], dtype=object)
    np.savez(bad, **arrays)
    with pytest.raises(CheckpointError, match=r"entries not implied by the configuration: \['params/evil'\]"):
        load(bad)                    # never opened


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
    with pytest.raises(CheckpointError, match=r"entry 'params/head/W' has shape \(9, 3\) and dtype float64; "
                                              r"the configuration implies shape \(8, 3\)"):
        load(bad)


# ---- hostile files, each loaded in a child process under a memory limit (RLIMIT_AS) and a timeout ------
S2 = dict(CFG, attention={"kind": "s2", "clip": 2})
#: a child loads every file, under RLIMIT_AS = its size after import + _HEADROOM, and reports per file the
#: exception, the time taken and the peak resident memory so far (ru_maxrss, monotonic)
_HEADROOM = 400 * 2**20
_CHILD = r"""
import json, os, resource, sys, time
from refattn.nn.checkpoint import load
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + int(sys.argv[2]), vm + int(sys.argv[2])))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = []
for name in json.loads(sys.argv[1]):
    t0 = time.perf_counter()
    try:
        load(name)
        exc = None
    except BaseException as e:
        exc = e
    types = [c.__name__ for c in type(exc).__mro__] if exc is not None else ["loaded"]
    out.append({"file": os.path.basename(name), "seconds": time.perf_counter() - t0, "types": types,
                "message": str(exc),
                "rss_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024})
print(json.dumps(out))
"""


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(a), allow_pickle=False)
    return buf.getvalue()


def _with_config(src, dst, cfg, *, replace=None):
    """Copy checkpoint `src` to `dst` with `cfg` as its configuration (and entries in `replace` swapped)."""
    replace = replace or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = _npy(json.dumps(cfg)) if info.filename == "__config__.npy" else zin.read(info)
            zout.writestr(info.filename, replace.get(info.filename, data))
    return dst


def _hostile_files(tmp_path):
    """``{file: regex its CheckpointError must match}``: every kind of hostile checkpoint
    (docs/guide/reliability.md), generated small."""
    s2 = tmp_path / "s2.npz"
    save(s2, init_transformer(np.random.default_rng(0), S2), S2)
    tp_cfg = dict(CFG, attention="toeplitz")
    tp = tmp_path / "toeplitz.npz"
    save(tp, init_transformer(np.random.default_rng(0), tp_cfg), tp_cfg)
    files = {}
    # S2 clipped tables: 1.6 GB within the bound (the file holds 13 rows), 64 GB and just over 4 GiB above it;
    # w is (H - C, 2k + 1, d) = (1, 2k + 1, 4) float64: 32 (2k + 1) bytes
    for clip, match in ((25_000_000, r"entry '__config__' implies \d+ bytes of 'params/' arrays, but the "
                                     r"archive directory declares"),
                        (10**9, r"entry '__config__'.*above refattn's bound"),
                        (2**26, r"entry '__config__'.*this request needs 4294\d+ bytes")):
        files[_with_config(s2, tmp_path / f"s2_clip_{clip}.npz", dict(S2, attention={"kind": "s2",
                                                                                     "clip": clip}))] = match
    files[_with_config(tp, tmp_path / "toeplitz_1e9.npz", dict(tp_cfg, max_len=10**9))] = \
        r"entry '__config__'.*above refattn's bound"
    # a zip bomb: 64 MB of zeros deflated to ~64 KB, declared by a consistent configuration
    bomb_cfg = dict(CFG, vocab_size=1_000_000)
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(_rewrite_valid(tmp_path)) as zin, \
            zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zout:
        for info in zin.infolist():
            if info.filename == "params/embed.npy":
                hdr = io.BytesIO()
                np.lib.format.write_array_header_1_0(hdr, {"descr": "<f8", "fortran_order": False,
                                                           "shape": (1_000_000, 8)})
                with zout.open(info.filename, "w") as fh:
                    fh.write(hdr.getvalue())
                    for _ in range(64):
                        fh.write(bytes(10**6))
            elif info.filename == "__config__.npy":
                zout.writestr(info.filename, _npy(json.dumps(bomb_cfg)))
            else:
                zout.writestr(info.filename, zin.read(info))
    files[bomb] = r"entry 'params/embed' declares 64000128 bytes compressed into \d+: more than 20 to 1"
    # a configuration nested 100000 deep (json.loads: RecursionError)
    deep = tmp_path / "deep.npz"
    nested = '{"task": ' + "[" * 10**5 + "]" * 10**5 + "}"
    _with_config(s2, deep, {}, replace={"__config__.npy": _npy(nested)})
    files[deep] = r"entry '__config__' nests deeper than 16 levels"
    # damaged directory bytes: an unknown compression method (NotImplementedError), the encryption flag
    # (RuntimeError) on the last entry
    raw = bytearray(s2.read_bytes())
    cd = raw.rfind(b"PK\x01\x02")
    last = raw[cd + 46:cd + 46 + int.from_bytes(raw[cd + 28:cd + 30], "little")].decode()[:-4]
    bad = bytearray(raw)
    bad[cd + 10:cd + 12] = (99).to_bytes(2, "little")
    (tmp_path / "method99.npz").write_bytes(bytes(bad))
    files[tmp_path / "method99.npz"] = f"entry '{last}' uses compression method 99"
    bad = bytearray(raw)
    bad[cd + 8] |= 1
    (tmp_path / "encrypted.npz").write_bytes(bytes(bad))
    files[tmp_path / "encrypted.npz"] = f"entry '{last}' is encrypted"
    # not regular files: devices that never end, a FIFO nobody writes to
    for target in ("/dev/zero", "/dev/urandom"):
        link = tmp_path / f"link_{target[5:]}.npz"
        link.symlink_to(target)
        files[link] = r"not a regular file \(a device\)"
    os.mkfifo(tmp_path / "fifo.npz")
    files[tmp_path / "fifo.npz"] = r"not a regular file \(a FIFO\)"
    return files


def _rewrite_valid(tmp_path):
    path = tmp_path / "valid.npz"
    save(path, init_transformer(np.random.default_rng(0), CFG), CFG)
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS, /proc, /dev/zero and FIFOs")
def test_hostile_files_refused_fast_and_small(tmp_path):
    """Every hostile file of `_hostile_files` is one CheckpointError naming the entry, each in under 1 s and
    under 100 MB (measured in a child under RLIMIT_AS and a timeout, so a regression fails instead of
    exhausting memory). Before: clip 2.5e7 took 3.2 GB and 10 s; clip 1e9 and Toeplitz max_len 1e9 NumPy's
    "Unable to allocate"; the bomb loaded (2.6 GB); deep nesting RecursionError; method 99
    NotImplementedError; encryption RuntimeError; /dev/zero 5.4 GB, /dev/urandom and the FIFO never
    returned."""
    files = _hostile_files(tmp_path)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([str(f) for f in files]), str(_HEADROOM)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = {r["file"]: r for r in json.loads(proc.stdout)}
    for path, match in files.items():
        r = results[path.name]
        assert "CheckpointError" in r["types"], (path.name, r)
        assert re.search(match, r["message"]), (path.name, match, r["message"])
        assert r["seconds"] < 1.0 and r["rss_mb"] < 100, (path.name, r)
    over = results["s2_clip_67108864.npz"]
    assert "MemoryError" in over["types"]          # CheckpointTooLargeError: both kinds


def test_model_nbytes_matches_every_kind():
    """The declared cost of every kind (parameters and drawn arrays) equals what init really allocates: the
    checkpoint's size checks and the bound rest on it."""
    from tests.nn.test_transformer import KINDS, tiny_config
    for name, att in KINDS.items():
        cfg = tiny_config(dict(att), "classify")
        params, feats = model_nbytes(cfg)
        tree = init_transformer(np.random.default_rng(0), cfg)
        drawn = draw_attention_features(np.random.default_rng(0), cfg)
        assert params == sum(a.nbytes for a in flatten_tree(tree).values()), name
        assert feats == sum(a.nbytes for a in flatten_tree(drawn, "f").values()), name


def test_init_refuses_configs_over_the_bound():
    """init_transformer (and init_mha) count every kind's own tables before drawing: S2 clip 1e9 (64 GB) and
    a Toeplitz table of max_len 1e9 fail at once with a MemoryError naming the attention (before: NumPy's
    "Unable to allocate 59.6 GiB")."""
    from refattn.nn.init import init_mha
    t0 = time.perf_counter()
    with pytest.raises(MemoryError, match=r"'kind': 's2'.*above refattn's bound"):
        init_transformer(np.random.default_rng(0), dict(S2, attention={"kind": "s2", "clip": 10**9}))
    with pytest.raises(MemoryError, match=r"'kind': 'toeplitz'.*above refattn's bound"):
        init_transformer(np.random.default_rng(0), dict(CFG, max_len=10**9, attention="toeplitz"))
    with pytest.raises(MemoryError, match=r"init_mha: the projections and the kind's parameters"):
        init_mha(np.random.default_rng(0), 8, 2, {"kind": "s2", "clip": 10**9})
    assert time.perf_counter() - t0 < 1.0


def test_save_is_atomic(good, tmp_path, monkeypatch):
    """A save that fails part-way (the disk fills up after 100 bytes) leaves the previous checkpoint intact
    and no temporary file (before: a truncated file, the old checkpoint gone)."""
    import refattn.nn.checkpoint as ck
    path, params = good
    before = path.read_bytes()

    def full_disk(fh, **arrays):
        fh.write(b"PK\x03\x04" + bytes(96))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ck.np, "savez", full_disk)
    with pytest.raises(OSError, match="No space left"):
        save(path, params, CFG)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.npz"]
    monkeypatch.undo()
    load(path, config=CFG)
