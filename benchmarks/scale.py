
"""Benchmark: ``python -m paper_checks`` serial vs ``--scheduler local:N``, end to end, and where
the speedup is lost.

    python benchmarks/scale.py [--size small] [--workers 2] [--reps 2] [--all] [--only GLOB ...]
                               [--no-breakdown]

1. **End to end.** Each repeat runs the CLI in a subprocess serially, then with ``--scheduler local:N``
   (cluster start, worker imports and shutdown included), and prints the wall times, the CPU seconds of each
   run (its process tree), the ratio and the load average before each run. The two JSON outputs are compared:
   they must be identical number for number (wall-clock fields and the command line exempt).
2. **Breakdown** (in this process, one more cluster run): cluster start, worker warm-up (the imports every
   worker repeats), and from dask's task stream the time the workers spent computing, deserialising and
   transferring; the claim granularity (the longest claim's serial seconds and the best any N-worker schedule
   of whole claims can do, LPT over the serial per-claim seconds).

BLAS is pinned to one thread in every process, serial and workers alike (the CLI and dask's nannies both set
it). The machine is shared: with more runnable processes than cores the wall-clock ratio says more about the
OS scheduler than about this code; the CPU seconds and the breakdown do not depend on the load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _strip(x):
    """The records without what may differ: wall-clock fields, fresh temporary paths (an experiment run
    without --report writes to a new temporary directory, serially too), the timing claims (their evidence is
    wall-clock times) and the provenance (the command line; the libraries the writing process loaded: a
    serial run that trained models has loaded libgomp, a dask client has not; the dask run adds the
    workers' environments)."""
    from paper_checks.scale import TIMING_CLAIMS

    if isinstance(x, list) and x and isinstance(x[0], dict) and "id" in x[0]:
        return [_strip(r) for r in x if r["id"] not in TIMING_CLAIMS]
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if "seconds" not in k and k != "provenance"}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    if isinstance(x, str) and x.startswith(tempfile.gettempdir() + "/refattn-"):
        return "<tmp>"
    return x


def _run_cli(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of one CLI run."""
    c0, t0 = _cpu_children(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "paper_checks", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, _cpu_children() - c0


def _lpt(seconds: list[float], n: int) -> float:
    """Makespan of the longest-processing-time-first schedule of `seconds` on `n` workers."""
    loads = [0.0] * n
    for s in sorted(seconds, reverse=True):
        i = loads.index(min(loads))
        loads[i] += s
    return max(loads)


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _breakdown(claims_args: dict, n: int, serial_json: Path, serial_cpu: float) -> None:
    from distributed import Client, LocalCluster, get_task_stream
    from distributed.utils import key_split

    from paper_checks import scale
    from paper_checks.catalog import load_all, select
    from paper_checks.runner import pin_blas

    pin_blas()
    claims = select(claims_args["only"])
    t0 = time.perf_counter()
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        t_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        client.run(load_all)                                      # the imports every worker repeats
        t_warm = time.perf_counter() - t0
        w0, c0, t0 = client.run(_cpu_self), _cpu_self(), time.perf_counter()
        with get_task_stream(client) as ts:
            scale.run_claims(client, claims, seed=0, size=claims_args["size"], report_dir=None,
                             run_slow=claims_args["all"])
        t_run = time.perf_counter() - t0
        cpu_workers = sum(client.run(_cpu_self).values()) - sum(w0.values())
        cpu_client = _cpu_self() - c0                          # the client with the scheduler's thread
    acts: dict[str, float] = {}
    per_fn: dict[str, int] = {}
    for t in ts.data:
        per_fn[key_split(t["key"])] = per_fn.get(key_split(t["key"]), 0) + 1
        for s in t["startstops"]:
            acts[s["action"]] = acts.get(s["action"], 0.0) + s["stop"] - s["start"]
    serial = [r["seconds"] for r in json.loads(serial_json.read_text())]
    print(f"\nbreakdown (in process, {n} workers, warm workers):")
    print(f"  cluster start {t_start:.1f} s; worker warm-up (imports, load_all) {t_warm:.1f} s")
    print(f"  run on warm workers {t_run:.1f} s wall; CPU: workers {cpu_workers:.1f} s, client + scheduler "
          f"{cpu_client:.1f} s (serial run: {serial_cpu:.1f} s)")
    print("  tasks: "
          + ", ".join(f"{k} {v}" for k, v in sorted(per_fn.items())))
    print("  task intervals by action (a claim's includes the wait for its batches): "
          + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(acts.items())))
    print(f"  serial per-claim seconds: sum {sum(serial):.1f}, longest {max(serial):.1f}; best {n}-worker "
          f"schedule of whole claims (LPT) {_lpt(serial, n):.1f} s -> granularity bound on the speedup "
          f"{sum(serial) / _lpt(serial, n):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="small")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--only", action="append")
    ap.add_argument("--no-breakdown", action="store_true")
    a = ap.parse_args()
    base = ["--size", a.size] + (["--all"] if a.all else [])
    base += [x for g in a.only or [] for x in ("--only", g)]
    print(f"# benchmarks/scale.py  python -m paper_checks {' '.join(base)}  serial vs --scheduler "
          f"local:{a.workers}  ({os.cpu_count()} cores; BLAS 1 thread per process)")
    tmp = Path(tempfile.mkdtemp(prefix="refattn-bench-scale-"))
    ratios = []
    for rep in range(a.reps):
        load = os.getloadavg()[0]
        ts, cs = _run_cli(base + ["--json", str(tmp / "serial.json")])
        load2 = os.getloadavg()[0]
        td, cd = _run_cli(base + ["--json", str(tmp / "dask.json"), "--scheduler", f"local:{a.workers}"])
        same = _strip(json.loads((tmp / "serial.json").read_text())) == _strip(
            json.loads((tmp / "dask.json").read_text()))
        ratios.append(ts / td)
        print(f"rep {rep}: serial {ts:6.1f} s wall {cs:6.1f} s CPU (load {load:.1f}) | local:{a.workers} "
              f"{td:6.1f} s wall {cd:6.1f} s CPU (load {load2:.1f}) | speedup {ts / td:.2f}x, CPU ratio "
              f"{cd / cs:.2f} | JSON identical: {same}")
    print(f"speedup (serial wall / local:{a.workers} wall): " + ", ".join(f"{r:.2f}" for r in ratios))
    if not a.no_breakdown:
        if a.reps == 0:
            _, cs = _run_cli(base + ["--json", str(tmp / "serial.json")])
        _breakdown({"only": a.only, "size": a.size, "all": a.all}, a.workers, tmp / "serial.json", cs)


if __name__ == "__main__":
    main()
