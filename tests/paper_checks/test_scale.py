"""paper_checks.scale on a real LocalCluster of worker processes: claims, ctx.map batches inside a
claim task and a tiny experiment give the serial run's JSON number for number (wall-clock fields exempt); a
killed worker's task is rerun elsewhere; a raising check is reported exactly as serially; Ctrl-C cancels the
outstanding tasks and writes nothing; without dask, --scheduler exits 2 with the install command."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from paper_checks import scale
from paper_checks.__main__ import main
from paper_checks.catalog import load_all, run_by_id
from paper_checks.registry import Context

ROOT = Path(__file__).resolve().parents[2]
needs_dask = pytest.mark.skipif(not scale.available(), reason="dask.distributed not installed (extra scale)")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster) as c:
            yield c


def _strip(x, roots):
    """`x` without wall-clock fields (keys naming seconds), with the report directories replaced by one
    placeholder."""
    if isinstance(x, dict):
        return {k: _strip(v, roots) for k, v in x.items() if "seconds" not in k}
    if isinstance(x, list):
        return [_strip(v, roots) for v in x]
    if isinstance(x, str):
        for r in roots:
            x = x.replace(str(r), "<REPORT>")
    return x


def _files(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "report.md"}


# ---- levels (a), (b), (c) through the CLI: identity with the serial run -----------------------------------
#: (b), (c); the experiment is the cheapest tiny one (ListOps: about 1 s of training at tiny, against 4.4 s
#: for the image grid of horn.shift-robustness)
IDS = ["kl.eq3-rks", "kl.thm3-prf-mse", "horn.s1-shift-invariance", "kl.lra-listops"]


@needs_dask
def test_cli_scheduler_output_is_the_serial_output(client, tmp_path):
    from distributed import get_task_stream
    from distributed.utils import key_split

    args = [a for i in IDS for a in ("--only", i)] + ["--size", "tiny", "--all"]
    a, b = tmp_path / "serial", tmp_path / "dask"
    # the serial reference is the CLI in a fresh process: the experiments memoise their runs in-process, so a
    # test process that already trained the image grid would write fewer files
    subprocess.run([sys.executable, "-m", "paper_checks", *args, "--json", str(a / "out.json"), "--report",
                    str(a)], cwd=ROOT, check=True, capture_output=True)
    with get_task_stream(client) as ts:
        assert main(args + ["--json", str(b / "out.json"), "--report", str(b),
                            "--scheduler", client.scheduler.address]) == 0
    ra, rb = (json.loads((d / "out.json").read_text()) for d in (a, b))
    workers = rb[0]["provenance"]["cluster"]["workers"]          # where the claims ran
    assert sum(w["n_workers"] for w in workers) == 2 and workers[0]["numpy"] == np.__version__
    for r in ra + rb:                # the provenance describes the process that wrote the file
        r.pop("provenance", None)
    assert [r["id"] for r in rb] == IDS
    assert _strip(ra, [a]) == _strip(rb, [b])                                   # number for number
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == sorted(fb) and any(k.endswith(".png") for k in fb)      # figures came back as bytes
    for k in fa:
        if k.endswith(".json") and k != "out.json":                              # experiment records
            assert _strip(json.loads(fa[k]), [a]) == _strip(json.loads(fb[k]), [b]), k
        elif k.endswith(".png"):
            assert fa[k] == fb[k], k
    ran = [key_split(t["key"]) for t in ts.data]
    assert ran.count("claim_task") == len(IDS)                                  # claims ran as cluster tasks
    assert len(ran) > len(IDS)                                # and so did the ctx.map batches inside them


@needs_dask
def test_seeds_mode_on_the_cluster_prints_the_serial_table(client, capsys):
    args = ["--seeds", "0-1", "--only", "kl.eq3-rks", "--only", "kl.thm3-prf-mse", "--size", "tiny"]
    assert main(args) == 0
    serial = capsys.readouterr().out
    assert main(args + ["--scheduler", client.scheduler.address]) == 0
    assert capsys.readouterr().out == serial and "2/2 claims" in serial


# ---- level (b) directly: ctx.map from inside a task, and a killed worker ----------------------------------
def _draw(task):
    """A Monte Carlo batch: its own SeedSequence; stalls (to be killed) the first time task 1 runs when a
    marker directory is given."""
    seq, i, marker_dir = task
    if marker_dir is not None and i == 1:
        try:
            fd = os.open(os.path.join(marker_dir, "first"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass                                                                 # the rerun: finish
        else:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            time.sleep(120)                                                      # killed here
    return os.getpid(), np.random.default_rng(seq).standard_normal(5)


def _claim_like(tasks):
    """What a claim does: ctx.map over its batches, from inside a cluster task."""
    ctx = Context(seed=3, size="tiny", claim_id="test.scale", executor=scale.DaskMap())
    return ctx.map(_draw, tasks)


def _tasks(marker_dir):
    ctx = Context(seed=3, size="tiny", claim_id="test.scale")
    return [(s, i, marker_dir) for i, s in enumerate(ctx.seed_sequences(4))]


@needs_dask
def test_ctx_map_inside_a_task_survives_a_killed_worker(client, tmp_path):
    serial = Context(seed=3, size="tiny", claim_id="test.scale").map(_draw, _tasks(None))
    fut = client.submit(_claim_like, _tasks(str(tmp_path)), pure=False)
    marker = tmp_path / "first"
    t0 = time.monotonic()
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() - t0 < 60, "the batch never started"
        time.sleep(0.05)
    killed = int(marker.read_text())
    os.kill(killed, signal.SIGKILL)                                              # a worker dies mid-task
    out = fut.result(timeout=120)
    assert [p for p, _ in out][1] != killed                                      # task 1 reran elsewhere
    for (_, x), (_, y) in zip(out, serial, strict=True):
        assert np.array_equal(x, y)


def _part(seq):
    """A batch whose memory layout is not C order (replicates on the contiguous axis), like a stack of
    transposed features."""
    return np.random.default_rng(seq).standard_normal((3, 3, 2000)).transpose(2, 0, 1)


def _reduce_parts(executor):
    ctx = Context(seed=5, size="tiny", claim_id="test.layout", executor=executor)
    return np.concatenate(ctx.map(_part, ctx.seed_sequences(4))).mean(axis=0).tobytes()


@needs_dask
def test_ctx_map_results_keep_their_memory_layout(client):
    serial = _reduce_parts(None)
    # the planted error this guards against: a plain pickle round trip makes the batches C-contiguous and the
    # same values reduce to different last bits
    ctx = Context(seed=5, size="tiny", claim_id="test.layout")
    plain = np.concatenate([pickle.loads(pickle.dumps(_part(s))) for s in ctx.seed_sequences(4)])
    assert plain.mean(axis=0).tobytes() != serial
    assert client.submit(_reduce_parts, scale.DaskMap(), pure=False).result() == serial


# ---- failures ----------------------------------------------------------------------------------------------
@needs_dask
def test_a_raising_check_is_reported_as_serially(client):
    c = load_all()["kl.thm3-prf-mse"]
    serial = run_by_id(c.id, 0, "huge", None, False)           # ctx.pick has no size "huge": the check raises
    (res, _, err), = scale.run_claims(client, [c], seed=0, size="huge", report_dir=None, run_slow=False)
    assert serial[0] is None and res is None
    assert err == serial[2] and "KeyError: 'huge'" in err and "Traceback" in err


def _nap(s):
    time.sleep(s)
    return s


@needs_dask
def test_interrupt_cancels_outstanding_tasks(client):
    def stop(i, _):
        raise KeyboardInterrupt

    before = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
    with pytest.raises(KeyboardInterrupt):
        scale.run_tasks(client, _nap, [(0.0,), (3.0,), (3.0,), (3.0,), (3.0,)], on_done=stop)
    t0 = time.monotonic()
    while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) > before:
        assert time.monotonic() - t0 < 2.5, "outstanding tasks were not cancelled"
        time.sleep(0.1)


@needs_dask
def test_cli_interrupt_writes_nothing(tmp_path, monkeypatch, capsys):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(scale, "run_claims", interrupted)
    js = tmp_path / "out.json"
    assert main(["--only", "kl.eq1-softmax", "--json", str(js), "--scheduler", "local:1"]) == 130
    assert not js.exists() and "cancelled" in capsys.readouterr().err


@needs_dask
def test_an_unreachable_scheduler_is_a_scheduler_error():
    with pytest.raises(scale.SchedulerError, match="tcp://127.0.0.1:1"):
        with scale.connect("tcp://127.0.0.1:1", timeout="1s"):
            pass


def test_timing_claims_run_last_and_alone(monkeypatch):
    calls = []

    def fake_run_tasks(client, fn, arg_lists, on_done=None, priority=0):
        calls.append([(a[0], a[5]) for a in arg_lists])                 # (claim id, timing flag)
        for j in range(len(arg_lists)):
            on_done(j, {"result": None, "seconds": 0.0, "error": "e", "files": {}, "tmp": None})

    monkeypatch.setattr(scale, "run_tasks", fake_run_tasks)
    reg = load_all()
    ids = ["horn.complexity", "kl.eq1-softmax", "horn.shift-robustness", "kl.table1-complexity"]
    out = scale.run_claims(object(), [reg[i] for i in ids], seed=0, size="tiny", report_dir=None,
                           run_slow=True)
    assert calls == [[("horn.shift-robustness", False), ("kl.eq1-softmax", False)],   # slow ones first
                     [("horn.complexity", True)], [("kl.table1-complexity", True)]]   # then one at a time
    assert [o[2] for o in out] == ["e"] * 4                                          # back in claim order


def test_scheduler_without_dask_exits_2_with_the_install_command(monkeypatch, capsys):
    monkeypatch.setattr(scale, "available", lambda: False)
    assert main(["--only", "kl.eq1-softmax", "--scheduler", "local"]) == 2
    assert "pip install" in capsys.readouterr().err and "[scale]" in scale.INSTALL_HINT


@pytest.mark.parametrize("bad", ["", "local:0", "local:x", "nonsense"])
def test_bad_scheduler_values(bad, capsys):
    with pytest.raises(ValueError, match="--scheduler"):
        scale.parse_scheduler(bad)
    assert main(["--only", "kl.eq1-softmax", "--scheduler", bad]) == 2
    assert "--scheduler" in capsys.readouterr().err


def test_scheduler_values_and_conflicts():
    assert scale.parse_scheduler("local") == ("local", None)
    assert scale.parse_scheduler("local:3") == ("local", 3)
    assert scale.parse_scheduler("tcp://10.0.0.1:8786") == ("address", "tcp://10.0.0.1:8786")
    assert "--workers" in scale.scheduler_problem("local", workers=2)
    assert "--power" in scale.scheduler_problem("local", power=True)


def test_relocate_rewrites_worker_paths_only():
    new = Path("out")
    ev = {"json": "/tmp/w1/experiments/x/x.json", "figs": ["/tmp/w1/figures/a.png"], "n": 3,
          "note": "see /tmp/w1/figures/a.png", "other": "/tmp/w10/y"}
    got = scale._relocate(ev, "/tmp/w1", new)
    assert got == {"json": "out/experiments/x/x.json", "figs": ["out/figures/a.png"], "n": 3,
                   "note": "see out/figures/a.png", "other": "/tmp/w10/y"}
