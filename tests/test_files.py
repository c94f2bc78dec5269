"""refattn.files: a write interrupted part-way leaves the previous file intact and no temporary file;
JSON-lines logs stay strict JSON and a torn last line is dropped on reading."""

import pytest

from refattn.files import append_jsonl, atomic_write, read_jsonl, write_bytes_atomic, write_text_atomic


def test_interrupted_write_keeps_previous_file(tmp_path):
    path = tmp_path / "report.json"
    write_text_atomic(path, '{"old": true}')
    with pytest.raises(RuntimeError, match="writer died"):
        with atomic_write(path) as fh:
            fh.write('{"new": ')
            raise RuntimeError("writer died")
    assert path.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]        # the temporary file is gone
    write_bytes_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"


def test_disk_full_keeps_previous_file(tmp_path, monkeypatch):
    """fsync failing with ENOSPC (the data did not reach the disk): nothing is replaced."""
    import refattn.files as files
    path = tmp_path / "out.txt"
    path.write_text("previous")

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(path, "x" * 1000)
    assert path.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_bad_mode_and_missing_directory(tmp_path):
    with pytest.raises(ValueError, match="mode: expected 'w' or 'wb'; got 'a'"):
        with atomic_write(tmp_path / "x", "a"):
            pass
    with pytest.raises(FileNotFoundError):
        write_text_atomic(tmp_path / "absent" / "x.json", "{}")


def test_jsonl_torn_last_line(tmp_path):
    path = tmp_path / "log.jsonl"
    with open(path, "w") as fh:
        append_jsonl(fh, {"step": 0, "loss": float("inf")})
        append_jsonl(fh, {"step": 1, "loss": 0.5})
        fh.write('{"step": 2, "lo')                                        # a crash mid-write
    entries, length = read_jsonl(path)
    assert entries == [{"step": 0, "loss": "inf"}, {"step": 1, "loss": 0.5}]
    assert length == len(path.read_bytes()) - len('{"step": 2, "lo')
    with open(path, "w") as fh:
        fh.write('{"step": 0}\n{garbage\n{"step": 2}\n')
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        read_jsonl(path)
    path.write_text('{"step": 0}\n{garbled\n')                              # complete but garbled last line
    assert read_jsonl(path)[0] == [{"step": 0}]
