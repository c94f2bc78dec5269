"""Untrusted inputs of the paper_checks CLI are bounded before anything is allocated: IDX files (a gzip bomb,
a header whose dimensions overflow int64, a FIFO, malformed data found before any claim runs) and the integer
ranges of the command line (``--seeds``, ``--seed``, ``--workers``).

Every hostile file is generated here, and every read of one runs in a subprocess under a memory limit
(RLIMIT_AS) and a timeout, so that a regression fails the test instead of exhausting the machine.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from paper_checks import __main__ as cli
from paper_checks.experiments import idx
from paper_checks.experiments.idx import DATA_ENV

ROOT = Path(__file__).resolve().parents[2]
IDX_FILE = ROOT / "paper_checks" / "experiments" / "idx.py"
CHILDREN = Path(__file__).resolve().with_name("cli_children.py")
LIMIT = 1 << 30              # 1 GiB of address space: numpy and the reader need about 300 MB
resource = pytest.importorskip("resource")


def _limited(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``cli_children.py *args`` in a fresh interpreter with RLIMIT_AS = LIMIT and a wall-clock timeout."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(CHILDREN), *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout, preexec_fn=limit)


def _read_in_subprocess(path: Path) -> dict:
    """read_idx(path) under the limits: {"error": type, "message": text} or {"shape": [...]}."""
    out = _limited("read", str(IDX_FILE), str(path))
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _header(code: int, dims: tuple[int, ...]) -> bytes:
    return bytes([0, 0, code, len(dims)]) + b"".join(int(n).to_bytes(4, "big") for n in dims)


@pytest.fixture(scope="module")
def zeros_member() -> bytes:
    """One gzip member of 16 MiB of zeros (about 16 KB): repeated members make a bomb cheaply."""
    return gzip.compress(bytes(16 << 20), compresslevel=6, mtime=0)


def test_gzip_bomb_with_a_small_declared_size_is_refused_after_the_declared_bytes(tmp_path, zeros_member):
    """A .gz of ~2 MB declaring 10 labels and inflating to 2 GiB: the reader stops one byte past the data."""
    bomb = tmp_path / "train-labels-idx1-ubyte.gz"
    with open(bomb, "wb") as f:
        f.write(gzip.compress(_header(0x08, (10,)) + bytes(10), mtime=0))
        for _ in range(128):                                                   # 128 x 16 MiB = 2 GiB
            f.write(zeros_member)
    assert bomb.stat().st_size < 4 << 20
    got = _read_in_subprocess(bomb)
    assert got.get("error") == "ValueError", got
    assert str(bomb) in got["message"] and "unexpected byte" in got["message"]


def test_gzip_declaring_more_than_the_bound_is_refused_before_reading(tmp_path, zeros_member):
    """The header declares 4.3 GB of uint8 (over MAX_IDX_BYTES): refused from the header alone."""
    bomb = tmp_path / "t10k-images-idx3-ubyte.gz"
    with open(bomb, "wb") as f:
        f.write(gzip.compress(_header(0x08, (65536, 256, 256)), mtime=0))
        for _ in range(64):
            f.write(zeros_member)
    got = _read_in_subprocess(bomb)
    assert got.get("error") == "ValueError", got
    assert str(bomb) in got["message"] and "over the bound" in got["message"]


def test_dimensions_that_overflow_int64_are_refused(tmp_path):
    """(65536,)*4 uint8 is 2**64 bytes: int64 arithmetic wraps it to 0 and the empty data block 'matches'."""
    for dims in [(65536,) * 4, (2**32 - 1,) * 3, (2**32 - 1,) * 255]:
        p = tmp_path / f"overflow-{len(dims)}"
        p.write_bytes(_header(0x0E, dims))
        got = _read_in_subprocess(p)
        assert got.get("error") == "ValueError", (dims, got)
        assert str(p) in got["message"] and "over the bound" in got["message"], got


def test_fifo_and_devices_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    for p in (fifo, link):
        got = _read_in_subprocess(p)
        assert got.get("error") == "ValueError" and "not a regular file" in got["message"], got


def test_plain_file_sizes_are_checked_from_the_file_size(tmp_path):
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    p = idx.write_idx(tmp_path / "ok", a)
    np.testing.assert_array_equal(idx.read_idx(p), a)
    p.write_bytes(p.read_bytes() + b"\0\0")
    with pytest.raises(ValueError, match="2 unexpected byte"):
        idx.read_idx(p)
    with pytest.raises(ValueError, match="over the bound"):
        idx.read_idx(idx.write_idx(tmp_path / "small.gz", a), max_bytes=11)


def _mnist_dir(d: Path, bad_label: bool = False) -> Path:
    d.mkdir()
    rng = np.random.default_rng(0)
    for stem, n in (("train", 20), ("t10k", 10)):
        idx.write_idx(d / f"{stem}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 8, 8)).astype(np.uint8))
        labels = rng.integers(0, 10, n).astype(np.uint8)
        if bad_label and stem == "t10k":
            labels[3] = 200
        idx.write_idx(d / f"{stem}-labels-idx1-ubyte.gz", labels)
    return d


@pytest.fixture
def nothing_runs(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a claim ran although --data was malformed")

    monkeypatch.setattr(cli, "run_by_id", boom)


def test_malformed_data_directory_is_refused_before_any_claim(tmp_path, nothing_runs, capsys):
    bad = _mnist_dir(tmp_path / "bad", bad_label=True)
    assert cli.main(["--data", str(bad), "--only", "kl.eq1-softmax", "--size", "tiny"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--data" in err and "t10k-labels-idx1-ubyte.gz" in err and "label 200 out of range" in err
    trunc = _mnist_dir(tmp_path / "trunc")
    f = trunc / "train-images-idx3-ubyte.gz"
    f.write_bytes(gzip.compress(gzip.decompress(f.read_bytes())[:-5], mtime=0))
    assert cli.main(["--data", str(trunc), "--only", "kl.eq1-softmax"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert str(f) in err and "truncated IDX data" in err and "Traceback" not in err


def test_implicit_data_directory_is_checked_before_any_claim(tmp_path, nothing_runs, capsys, monkeypatch):
    """Without --data the slow claims read $PAPER_CHECKS_DATA (or the default directory): a malformed or empty
    one is refused up front, naming where it came from, never read inside a claim or replaced by the
    stand-in silently."""
    bad = _mnist_dir(tmp_path / "bad", bad_label=True)
    monkeypatch.setenv(DATA_ENV, str(bad))
    assert cli.main(["--all", "--only", "horn.table1-ordering", "--size", "tiny"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"${DATA_ENV}={bad}" in err and "label 200 out of range" in err and "Traceback" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(DATA_ENV, str(empty))
    assert cli.main(["--all", "--only", "horn.table1-ordering", "--size", "tiny"]) == cli.EXIT_USAGE
    assert "does not hold the MNIST-format files" in capsys.readouterr().err
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.setattr(cli, "DEFAULT_DATA_DIR", bad)        # the default directory, named as such
    monkeypatch.setattr(cli, "find_real_data", lambda: bad)
    assert cli.main(["--all", "--only", "horn.table1-ordering", "--size", "tiny"]) == cli.EXIT_USAGE
    assert f"the default data directory {bad}" in capsys.readouterr().err


def test_wellformed_data_directory_passes(tmp_path, capsys):
    good = _mnist_dir(tmp_path / "good")
    before = os.environ.get(DATA_ENV)
    assert cli.main(["--data", str(good), "--only", "kl.eq1-softmax", "--size", "tiny"]) == cli.EXIT_OK
    # --data holds for its run only: a later run in the same process (the next test) reads its own data
    assert os.environ.get(DATA_ENV) == before


# ---- integer ranges on the command line --------------------------------------------------------------------
RANGES = [
    (["--seeds", "0-300000000"], "--seeds: at most"),
    (["--seeds", "0-99999999999999999999999999"], "--seeds: at most"),
    (["--seeds", "5-2"], "--seeds: expected A-B with A <= B"),
    (["--seeds", "1,1,2"], "--seeds: each seed once"),
    (["--seeds", ",".join(str(i) for i in range(5000))], "--seeds: at most"),
    (["--seeds", "0-" + "9" * 5000], "--seeds: at most"),
    (["--seed", str(2**200)], "--seed: expected a non-negative integer (0.."),
    (["--workers", "100000"], "--workers: expected a count >= 0 (at most"),
]


def test_huge_or_bad_ranges_exit_2_with_one_line():
    """Every case in one interpreter under RLIMIT_AS (a regression that materialises 300 million seeds fails
    with MemoryError instead of taking the machine's memory); each must exit 2 with one line, refused from the
    text (under 50 MB traced), before anything runs."""
    out = _limited("ranges", json.dumps(RANGES), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert len(rows) == len(RANGES), out.stdout[-3000:]
    bad = [r for r in rows if r["code"] != cli.EXIT_USAGE or len(r["lines"]) != 1
           or r["needle"] not in r["lines"][0] or r["peak"] > 50 << 20]
    assert not bad, bad
