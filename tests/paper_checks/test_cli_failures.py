"""Every failure of the paper_checks CLI is a clear exit: an address that is not a dask scheduler (an HTTP
server, a silent listener, a server that answers something else, a malformed address), options that a mode
would drop, Ctrl-C in a serial run (the finished claims named, kept in the JSON marked incomplete, exit
130: a planted claim raises the KeyboardInterrupt that Python's SIGINT handler raises) and a write that
fails part-way (the previous file intact). Only loopback addresses are used."""

from __future__ import annotations

import http.server
import json
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from paper_checks import REGISTRY, Result, load_all
from paper_checks import __main__ as cli
from paper_checks import scale
from paper_checks.registry import Claim

ROOT = Path(__file__).resolve().parents[2]


def _main_with_deadline(args: list[str], deadline: float = 30.0) -> tuple[int, float]:
    """cli.main(args) in a thread: (exit status, seconds); fails instead of hanging past `deadline`."""
    box: dict = {}

    def target():
        t0 = time.perf_counter()
        box["code"] = cli.main(args)
        box["secs"] = time.perf_counter() - t0

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(deadline)
    assert not th.is_alive(), f"paper_checks {' '.join(args)} still running after {deadline} s"
    return box["code"], box["secs"]


@pytest.fixture
def http_server():
    srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"tcp://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def silent_listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)                                  # accepts at the kernel level, never answers
    yield f"tcp://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def chatty_server():
    """Answers every connection with an HTTP response at once: read as a dask frame, 3 EiB."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    stop = threading.Event()

    def serve():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                time.sleep(0.5)

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    yield f"tcp://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    th.join(2)
    sock.close()


@pytest.mark.parametrize("fixture, needle", [("http_server", "no dask handshake within"),
                                             ("silent_listener", "no dask handshake within"),
                                             ("chatty_server", "not a dask frame")])
def test_scheduler_address_that_is_not_dask_exits_2_naming_it(fixture, needle, request, monkeypatch, capsys):
    pytest.importorskip("distributed")
    address = request.getfixturevalue(fixture)
    monkeypatch.setattr(scale, "CONNECT_TIMEOUT", 1.0)
    code, secs = _main_with_deadline(["--only", "kl.eq1-softmax", "--size", "tiny", "--scheduler", address])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE, err
    assert f"--scheduler {address}" in err and needle in err and "Traceback" not in err, err
    assert secs < 10, secs


def test_tls_address_gets_the_connection_probed():
    """A tls:// address with no listener is refused by the probe, naming it; with a listener the probe stops
    after the TCP connection (the encrypted handshake is Client's)."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()                                        # nothing listens there now
    with pytest.raises(scale.SchedulerError, match=f"--scheduler tls://127.0.0.1:{port}: cannot connect"):
        scale.probe_scheduler(f"tls://127.0.0.1:{port}", timeout=1.0)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(1)
    try:
        t0 = time.perf_counter()
        scale.probe_scheduler(f"tls://127.0.0.1:{listening.getsockname()[1]}", timeout=1.0)
        assert time.perf_counter() - t0 < 0.9                # no wait for a frame the server never sends
    finally:
        listening.close()


def test_scheduler_timeout_default_is_a_few_seconds():
    assert 1 <= scale.CONNECT_TIMEOUT <= 10


@pytest.mark.parametrize("spec", ["foo:bar", "tcp://host:", "tcp://:8786", "tcp://h:99999", "udp://h:1",
                                  "local:100000", "local:" + "9" * 50])
def test_malformed_scheduler_is_refused_up_front(spec, capsys, monkeypatch):
    monkeypatch.setattr(cli, "run_by_id", lambda *a, **k: pytest.fail("a claim ran"))
    monkeypatch.setattr(scale, "available", lambda: True)
    assert cli.main(["--only", "kl.eq1-softmax", "--scheduler", spec]) == cli.EXIT_USAGE
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--scheduler" in lines[0], lines


# ---- options a mode does not use are refused, not dropped -----------------------------------------------
@pytest.mark.parametrize("args", [
    ["--list", "--json", "{tmp}/x.json"], ["--list", "--report", "{tmp}/rep"], ["--list", "--seed", "3"],
    ["--seeds", "0-1", "--json", "{tmp}/x.json"], ["--seeds", "0-1", "--report", "{tmp}/rep"],
    ["--seeds", "0-1", "--all"], ["--seeds", "0-1", "--seed", "4"], ["--seeds", "0-1", "--workers", "2"],
    ["--power", "--report", "{tmp}/rep"], ["--power", "--seeds", "0-1"], ["--list", "--power"],
])
def test_options_a_mode_would_drop_are_refused(args, tmp_path, monkeypatch, capsys):
    def boom(*a, **k):
        raise AssertionError("something ran although the options conflict")

    for name in ("run_by_id", "_power", "_seeds"):
        monkeypatch.setattr(cli, name, boom)
    args = [a.format(tmp=tmp_path) for a in args]
    assert cli.main(["--only", "kl.eq1-softmax"] + args) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "exclude each other" in err or "is not used with" in err, err
    assert list(tmp_path.iterdir()) == []                 # no file, no directory


def test_power_with_json_is_honoured(tmp_path, monkeypatch):
    row = {"claim": "kl.eq1-softmax", "mutation": "m", "kind": "k", "bug": "b", "size": "tiny",
           "baseline": "holds", "verdict": "fails", "moved": True}
    monkeypatch.setattr(cli, "run_power", lambda *a, **k: [row])
    js = tmp_path / "p.json"
    assert cli.main(["--only", "kl.eq1-softmax", "--power", "--json", str(js)]) == cli.EXIT_OK
    got = json.loads(js.read_text())
    assert got[0]["mutation"] == "m" and "provenance" in got[0]


# ---- Ctrl-C in a serial run -----------------------------------------------------------------------------
def _plant(monkeypatch, second):
    load_all()
    first = Claim("zz.a-first", "P", "S", "st", "holds", "d",
                  lambda ctx: Result("holds", {"x": 1}, summary="a"))
    monkeypatch.setitem(REGISTRY, "zz.a-first", first)
    monkeypatch.setitem(REGISTRY, "zz.b-second", Claim("zz.b-second", "P", "S", "st", "holds", "d", second))
    monkeypatch.setitem(REGISTRY, "zz.c-third", Claim("zz.c-third", "P", "S", "st", "holds", "d",
                                                      lambda ctx: pytest.fail("ran after Ctrl-C")))


def test_ctrl_c_keeps_finished_claims_marked_incomplete(tmp_path, monkeypatch, capsys):
    def interrupt(ctx):
        raise KeyboardInterrupt

    _plant(monkeypatch, interrupt)
    js, rep = tmp_path / "out.json", tmp_path / "rep"
    js.write_text("previous")
    assert cli.main(["--only", "zz.*", "--json", str(js), "--report", str(rep)]) == cli.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "1 of 3 claim(s) finished: zz.a-first" in err and "not finished: zz.b-second, zz.c-third" in err
    records = json.loads(js.read_text())
    assert [r["id"] for r in records] == ["zz.a-first"] and records[0]["verdict"] == "holds"
    assert records[0]["provenance"]["incomplete"] == {"finished": ["zz.a-first"],
                                                      "not_finished": ["zz.b-second", "zz.c-third"]}
    assert not (rep / "report.md").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []   # no temporary left


def test_ctrl_c_without_json_writes_nothing(tmp_path, monkeypatch, capsys):
    def interrupt(ctx):
        raise KeyboardInterrupt

    _plant(monkeypatch, interrupt)
    assert cli.main(["--only", "zz.*"]) == cli.EXIT_INTERRUPTED
    assert "zz.a-first" in capsys.readouterr().err


def test_a_write_that_fails_part_way_keeps_the_previous_json(tmp_path, monkeypatch, capsys):
    """A full disk, simulated with a 4 KiB file-size limit (RLIMIT_FSIZE, this process, for the one call): the
    new JSON cannot be written whole; the previous file stays as it was and no temporary is left."""
    resource = pytest.importorskip("resource")
    load_all()
    big = Claim("zz.big", "P", "S", "st", "holds", "d", lambda ctx: Result("holds", {"x": "y" * 20000}))
    monkeypatch.setitem(REGISTRY, "zz.big", big)
    js = tmp_path / "out.json"
    js.write_text('["previous"]')
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # EFBIG instead of the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        code = cli.main(["--only", "zz.big", "--json", str(js)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    err = capsys.readouterr().err
    assert js.read_text() == '["previous"]', js.read_text()[:200]
    assert code == cli.EXIT_USAGE and "could not write" in err and "unchanged" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]        # no temporary left behind
