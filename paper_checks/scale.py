"""Scale-out on dask.distributed: claims, Monte Carlo batches and experiment runs as tasks.

``python -m paper_checks --scheduler local[:N] | ADDRESS`` runs the selected claims as tasks on a
``distributed`` cluster: ``local`` starts a :class:`distributed.LocalCluster` of N worker processes (default:
the machine's cores) with one thread and one BLAS thread each; an address (``tcp://host:8786``) connects to a
running scheduler (``dask scheduler`` + ``dask worker ADDRESS --nthreads 1``; README "Running on a cluster").

One mechanism, three levels of tasks:

a. every claim is a task (:func:`run_claims`);
b. inside a claim, ``ctx.map(fn, tasks)`` (Monte Carlo replicate batches whose boundaries the claim fixes)
   runs through :class:`DaskMap`: from inside a task it opens ``distributed.worker_client()``, which secedes
   the task's thread from the worker's pool while it waits, so a worker waiting on its batches never holds
   the slot they need (no deadlock with one thread per worker);
c. an experiment's (method, seed) training runs go through the same ``ctx.map``.

**Identity with the serial run.** A task computes exactly what the serial run computes: the same function
(:func:`paper_checks.catalog.run_by_id`), the same seeds (``Context.rng`` / ``Context.seed_sequences``: from
``--seed``, the claim id and the task's key, never from a worker, a time or a finish order), one BLAS thread,
and ``ctx.map`` returns results in task order, so the reduction adds them in the same order. The JSON output
is therefore identical number for number to the serial run, whatever the worker count; only wall-clock fields
(``seconds``, timings) differ. Timing claims (:data:`TIMING_CLAIMS`) run after the others, alone on the
cluster, with their ``ctx.map`` serial, so nothing runs beside them.

**Files.** Workers need not share the client's filesystem: a task writes its figures and experiment files into
a temporary directory of its own, returns their bytes with the result, and the client writes them under
``--report DIR`` (paths in the evidence are rewritten from the worker's directory to the client's) when the
claim has finished. The report and JSON are written by the caller only after every claim has finished.

**Failures.** A worker that dies mid-task has its task rerun on another worker (dask's
``distributed.scheduler.allowed-failures``, default 3); the rerun draws the same seeds, so the result is the
same. A check that raises is caught inside the task by ``run_by_id``, exactly as serially, and comes back as
the claim's error text with its traceback. Ctrl-C cancels every outstanding task and re-raises
:class:`KeyboardInterrupt` (the CLI then exits 130 without writing a report or JSON).

Power mutations (``--power``) patch functions in the client's process, which a worker would not see: they
always run in-process.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import socket
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from .catalog import run_by_id
from .report import blas_info
from .runner import pin_blas

__all__ = ["INSTALL_HINT", "TIMING_CLAIMS", "SchedulerError", "available", "parse_scheduler",
           "scheduler_problem", "probe_scheduler", "connect", "DaskMap", "run_tasks", "run_claims",
           "run_seeds", "worker_environments"]

INSTALL_HINT = 'pip install "refattn[scale]"  (from a checkout: pip install -e ".[scale]")'

#: Claims that measure wall-clock time: run alone on the cluster (nothing beside them), their ctx.map serial.
TIMING_CLAIMS = frozenset({"horn.complexity", "kl.table1-complexity"})

#: Environment variables the CLI uses to talk to checks (e.g. ``--data``), forwarded to every claim task.
ENV_PREFIXES = ("PAPER_CHECKS_", "REFATTN_")

_TEXT_SUFFIXES = {".json", ".md", ".txt", ".csv"}   # returned files whose worker paths are rewritten
_SUB_PRIORITY = 10    # ctx.map batches before further claims: a claim that fanned out finishes first

#: Seconds to reach a scheduler and receive its handshake (``--scheduler ADDRESS``), and the largest first
#: message a dask scheduler sends on connect (its handshake is a few hundred bytes).
CONNECT_TIMEOUT = 5.0
MAX_HANDSHAKE_BYTES = 1 << 20
#: The most worker processes ``local:N`` starts (the CLI's ``--workers`` bound too).
MAX_LOCAL_WORKERS = 256


class SchedulerError(RuntimeError):
    """The cluster of ``--scheduler`` could not be started or reached (the CLI prints it and exits 2)."""


def available() -> bool:
    """Whether ``distributed`` (the ``scale`` extra) can be imported."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def parse_scheduler(spec: str) -> tuple[str, Any]:
    """``"local"`` -> ``("local", None)`` (one worker per core), ``"local:N"`` -> ``("local", N)``, an address
    (``tcp://host:8786``, ``host:8786``, ``tls://...``) -> ``("address", spec)``.

    Raises ``ValueError`` naming the value when it is none of these."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"--scheduler: expected local, local:N or a scheduler address; got {spec!r}")
    spec = spec.strip()
    if spec == "local":
        return "local", None
    if spec.startswith("local:"):
        n = spec[len("local:"):]
        if not n.isdigit() or not 1 <= int(n[:6]) <= MAX_LOCAL_WORKERS or len(n) > 6:
            raise ValueError(f"--scheduler: local:N needs a worker count 1 <= N <= {MAX_LOCAL_WORKERS}; got "
                             f"{spec[:40]!r}")
        return "local", int(n)
    if ":" not in spec:
        raise ValueError(f"--scheduler: expected local, local:N or a scheduler address such as "
                         f"tcp://host:8786; got {spec!r}")
    scheme, sep, rest = spec.partition("://")
    if not sep:
        scheme, rest = "tcp", spec
    host, _, port = rest.rpartition(":")
    if scheme not in ("tcp", "tls") or not host or not port.isdigit() or not 1 <= int(port[:6]) <= 65535:
        raise ValueError(f"--scheduler: expected local, local:N or an address tcp://HOST:PORT (or tls://, or "
                         f"HOST:PORT) with a port in 1..65535; got {spec[:80]!r}")
    return "address", spec


def scheduler_problem(spec: str, workers: int = 0, power: bool = False) -> str | None:
    """Why ``--scheduler spec`` cannot be used (the CLI prints it and exits 2), or None."""
    try:
        parse_scheduler(spec)
    except ValueError as exc:
        return str(exc)
    if workers:
        return "--scheduler and --workers exclude each other (the scheduler's workers are the parallelism)"
    if power:
        return ("--power runs in this process (its mutations patch functions here, which workers would not "
                "see); drop --scheduler")
    if not available():
        return f"--scheduler needs dask.distributed, which is not installed: {INSTALL_HINT}"
    return None


@contextlib.contextmanager
def connect(spec: str, *, log: Callable[[str], None] | None = None, timeout: str = "10s") -> Iterator[Any]:
    """A ``distributed.Client`` for ``--scheduler spec`` (a LocalCluster of processes started and closed here,
    or the scheduler at an address); the dashboard address is passed to `log` (default: stderr)."""
    from distributed import Client, LocalCluster

    log = log or (lambda s: print(s, file=sys.stderr))
    kind, arg = parse_scheduler(spec)
    cluster = None
    try:
        if kind == "local":
            pin_blas()                   # inherited by the worker processes (dask sets them for nannies too)
            n = arg or os.cpu_count() or 1
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0")
            client = Client(cluster)
        else:
            probe_scheduler(arg)
            client = Client(arg, timeout=timeout)
    except SchedulerError:
        raise
    except Exception as exc:             # a refused or timed-out connection (OSError), a bad address
        if cluster is not None:
            cluster.close()
        raise SchedulerError(f"--scheduler {spec}: no cluster ({type(exc).__name__}: {exc})") from None
    try:
        n_workers = len(client.scheduler_info().get("workers", {}))
        log(f"paper_checks: dask scheduler {client.scheduler.address} with {n_workers} worker(s); "
            f"dashboard {client.dashboard_link}")
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def probe_scheduler(address: str, timeout: float | None = None) -> None:
    """Check that a dask scheduler answers at `address` before a ``Client`` is made: a TCP connection and the
    scheduler's first frame (dask's comm handshake, which a scheduler sends unasked) within `timeout`
    seconds (default :data:`CONNECT_TIMEOUT`), its length read from the 8-byte header and bounded by
    :data:`MAX_HANDSHAKE_BYTES`.

    A silent listener (or an HTTP server, which waits for a request) times out; a server that answers with
    something else gives a header that is not a dask frame length; both raise :class:`SchedulerError`
    naming the address. A ``tls://`` address gets the TCP connection only (no listener, an unreachable host:
    refused here); its handshake is encrypted and needs the client's certificates, which ``Client`` brings,
    and its own timeout covers a listener that is not a scheduler."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    what = f"--scheduler {address}"
    timeout = CONNECT_TIMEOUT if timeout is None else timeout
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            if scheme == "tls":
                return
            sock.settimeout(timeout)
            head = b""
            while len(head) < 8:
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    raise SchedulerError(f"{what}: the connection was closed without a dask handshake; not a "
                                         "dask scheduler")
                head += chunk
    except SchedulerError:
        raise
    except socket.timeout:
        raise SchedulerError(f"{what}: no dask handshake within {timeout:g} s (a listener that is not a dask "
                             "scheduler, or none reachable)") from None
    except OSError as exc:
        raise SchedulerError(f"{what}: cannot connect ({exc.strerror or exc})") from None
    (n,) = struct.unpack("Q", head)                   # dask frames: a native-order uint64 length first
    if not 0 < n <= MAX_HANDSHAKE_BYTES:
        raise SchedulerError(f"{what}: the server answered {head!r}, not a dask frame (length {n}); not a "
                             "dask scheduler")


def _inside_task() -> bool:
    try:
        from distributed import get_worker
    except ImportError:
        return False
    try:
        get_worker()
    except ValueError:
        return False
    return True


class DaskMap:
    """A ``concurrent.futures``-style ``map`` over a dask cluster, for ``Context(executor=DaskMap())``.

    ``map(fn, tasks)`` returns ``[fn(t) for t in tasks]`` (a list, in task order) computed as cluster tasks.
    Called from inside a task it uses ``worker_client()`` (the calling task secedes while it waits); called
    elsewhere it uses the current client. `fn` must be a picklable module-level function. A single task runs
    in place (nothing to spread). Holds no connection, so it pickles with the Context.

    Task keys are content hashes of ``(fn, task)`` (dask's ``pure=True``): ``ctx.map``'s contract is that a
    task's result depends on the task only, so two claims that map the same tasks at the same time (the three
    image-experiment claims share one training grid) have them computed once."""

    def __init__(self, priority: int = _SUB_PRIORITY):
        self.priority = int(priority)

    def __repr__(self) -> str:
        return f"DaskMap(priority={self.priority})"

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
        tasks = list(tasks)
        if len(tasks) <= 1:
            return [fn(t) for t in tasks]
        if _inside_task():
            from distributed import worker_client

            with worker_client() as client:      # secede: this thread's slot is free for the batches
                return _gather_in_order(client, fn, tasks, self.priority)
        from distributed import get_client

        return _gather_in_order(get_client(), fn, tasks, self.priority)


def _gather_in_order(client: Any, fn: Callable, tasks: list, priority: int) -> list:
    from dask.base import tokenize

    packed = [_pack(t) for t in tasks]
    name = getattr(fn, "__name__", "task")
    keys = [f"{name}-{tokenize(fn, t)}" for t in packed]
    futures = client.map(_call_packed, [fn] * len(packed), packed, key=keys, priority=priority)
    try:
        return [_unpack(r) for r in client.gather(futures)]   # a raise re-raises here (remote traceback)
    except BaseException:
        client.cancel(futures)
        raise


# ---- arrays cross the wire with their memory layout --------------------------------------------------------
# NumPy reductions add in an order set by the memory layout (which axis is contiguous) and take other loops on
# unaligned data. Pickling makes a non-contiguous array C-contiguous, and dask may hand back arrays that sit
# unaligned in a receive buffer: the same values then reduce to different last bits than in the serial run
# (measured: kl.eq5-gmm-rks's z moved in the 13th digit). So every array in a ctx.map task and in its result
# is sent as its dense copy in memory order plus the axis permutation, and rebuilt as an aligned array with
# the strides of ``np.array(a, order="K")``, which are ``a``'s own for a dense array.
class _Arr:
    __slots__ = ("data", "perm")

    def __init__(self, data: Any, perm: tuple):
        self.data, self.perm = data, perm

    def __getstate__(self) -> tuple:
        return self.data, self.perm

    def __setstate__(self, state: tuple) -> None:
        self.data, self.perm = state

    def __dask_tokenize__(self) -> tuple:
        from dask.base import tokenize

        return "_Arr", tokenize(self.data), self.perm


def _pack(x: Any) -> Any:
    if isinstance(x, np.ndarray) and x.dtype != object:
        d = np.array(x, order="K", copy=True)
        perm = tuple(int(i) for i in np.argsort([-st for st in d.strides], kind="stable"))
        return _Arr(d.transpose(perm).copy(order="C"), perm)
    return _walk(x, _pack)


def _unpack(x: Any) -> Any:
    if isinstance(x, _Arr):
        inv = tuple(int(i) for i in np.argsort(x.perm)) if x.perm else ()
        return np.array(x.data, order="C", copy=True).transpose(inv)     # own, aligned memory
    return _walk(x, _unpack)


def _walk(x: Any, f: Callable[[Any], Any]) -> Any:
    """`x` with `f` applied to the items of its lists, tuples (named tuples too) and dicts."""
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(f(v) for v in x))
    if type(x) in (list, tuple):
        return type(x)(f(v) for v in x)
    if type(x) is dict:
        return {k: f(v) for k, v in x.items()}
    return x


def _call_packed(fn: Callable, packed: Any) -> Any:
    return _pack(fn(_unpack(packed)))


def run_tasks(client: Any, fn: Callable, arg_lists: Sequence[tuple], *,
              on_done: Callable[[int, Any], None] | None = None, priority: int = 0) -> list:
    """Submit ``fn(*args)`` for every args of `arg_lists` and return the results in order.

    ``on_done(index, result)`` runs on the client as each task finishes (progress, writing its files). On
    any exception, and on Ctrl-C (:class:`KeyboardInterrupt`), every outstanding task is cancelled and the
    exception re-raised."""
    from distributed import as_completed

    futures = [client.submit(fn, *args, pure=False, priority=priority) for args in arg_lists]
    index = {f.key: i for i, f in enumerate(futures)}
    out: list = [None] * len(futures)
    try:
        for fut in as_completed(futures):
            i = index[fut.key]
            out[i] = fut.result()
            if on_done is not None:
                on_done(i, out[i])
    except BaseException:
        client.cancel(futures)
        raise
    return out


# ---- claims as tasks ---------------------------------------------------------------------------------------
def _claim_task(claim_id: str, seed: int, size: str, want_files: bool, run_slow: bool, timing: bool,
                env: dict) -> dict:
    """The worker side of one claim: run ``run_by_id`` (what the serial CLI runs) with a :class:`DaskMap`
    executor (serial for a timing claim) and, when a report was asked for, a private temporary report
    directory whose files come back as bytes."""
    pin_blas()
    os.environ.update(env)
    tmp = tempfile.mkdtemp(prefix="refattn-task-") if want_files else None
    try:
        res, secs, err = run_by_id(claim_id, seed, size, Path(tmp) if tmp else None, run_slow,
                                   executor=None if timing else DaskMap())
        files = {}
        if tmp is not None:
            for p in sorted(Path(tmp).rglob("*")):
                if p.is_file():
                    files[p.relative_to(tmp).as_posix()] = p.read_bytes()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"result": res, "seconds": secs, "error": err, "files": files, "tmp": tmp}


def _relocate(x: Any, old: str, new: Path) -> Any:
    """`x` with every path under the worker's directory `old` rewritten to the same path under `new`."""
    if isinstance(x, str):
        if x == old:
            return str(new)
        if x.startswith(old + "/"):
            return str(new / x[len(old) + 1:])
        return re.sub(re.escape(old) + r"(?![\w.-])", lambda _: str(new), x) if old in x else x
    if isinstance(x, dict):
        return {k: _relocate(v, old, new) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_relocate(v, old, new) for v in x)
    return x


def _relocate_text(rel: str, data: bytes, old: str, new: Path) -> bytes:
    """A returned text file (an experiment's JSON record names its own figures) with the worker's paths
    rewritten to the client's; other files unchanged."""
    if Path(rel).suffix not in _TEXT_SUFFIXES or old.encode() not in data:
        return data
    return _relocate(data.decode("utf-8"), old, new).encode("utf-8")


def _write_files(report_dir: Path, files: dict) -> None:
    """Write a finished claim's files under `report_dir` (each through a temporary name, then renamed)."""
    root = report_dir.resolve()
    for rel, data in files.items():
        dest = (report_dir / rel).resolve()
        if root not in dest.parents:
            raise ValueError(f"a task returned a file outside the report directory: {rel!r}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        part.write_bytes(data)
        os.replace(part, dest)


def _finish(out: dict, report_dir: Path | None) -> tuple:
    """Client side of a finished claim task: files written, paths relocated -> (result, seconds, error)."""
    res, tmp = out["result"], out["tmp"]
    if report_dir is not None and out["files"]:
        _write_files(report_dir, {rel: _relocate_text(rel, data, tmp, report_dir)
                                  for rel, data in out["files"].items()})
    if res is not None and tmp is not None and report_dir is not None:
        res.evidence = _relocate(res.evidence, tmp, report_dir)
        res.figures = _relocate(list(res.figures), tmp, report_dir)
        res.summary = _relocate(res.summary, tmp, report_dir)
        res.corrected = _relocate(res.corrected, tmp, report_dir)
    return res, out["seconds"], out["error"]


def run_claims(spec_or_client: Any, claims: Sequence[Any], *, seed: int, size: str,
               report_dir: Path | None, run_slow: bool, progress: bool = False,
               log: Callable[[str], None] | None = None, info: dict | None = None) -> list[tuple]:
    """Run `claims` as tasks on the cluster ``--scheduler spec`` (or on an existing ``distributed.Client``)
    and return ``[(result or None, seconds, error text or None)]`` in claim order, as the serial CLI does.

    Claims that will only report ``skipped`` (slow, without `run_slow`) do not leave the client. The other
    claims are submitted slow ones first (the long experiments start early); timing claims run last, one at a
    time, with nothing beside them. `info`, when given, receives the scheduler address and the workers'
    environments (:func:`worker_environments`) for the run's provenance."""
    return _run_jobs(spec_or_client, [(c, seed) for c in claims], size=size, report_dir=report_dir,
                     run_slow=run_slow, progress=progress, log=log, info=info)


def run_seeds(spec_or_client: Any, claims: Sequence[Any], seeds: Sequence[int], *, size: str,
              progress: bool = False, log: Callable[[str], None] | None = None) -> list[list[tuple]]:
    """``--seeds`` on the cluster: every (claim, seed) pair is a task; returns ``out[claim][seed]`` outcomes
    (as :func:`run_claims`), no files."""
    flat = _run_jobs(spec_or_client, [(c, s) for c in claims for s in seeds], size=size, report_dir=None,
                     run_slow=False, progress=progress, log=log)
    k = len(seeds)
    return [flat[i * k:(i + 1) * k] for i in range(len(claims))]


def _run_jobs(spec_or_client: Any, jobs: list[tuple[Any, int]], *, size: str, report_dir: Path | None,
              run_slow: bool, progress: bool, log: Callable[[str], None] | None,
              info: dict | None = None) -> list[tuple]:
    """(claim, seed) jobs as tasks (see :func:`run_claims`); outcomes in job order."""
    if isinstance(spec_or_client, str):
        with connect(spec_or_client, log=log) as client:
            return _run_jobs(client, jobs, size=size, report_dir=report_dir, run_slow=run_slow,
                             progress=progress, log=log, info=info)
    client = spec_or_client
    if info is not None:
        info.update(scheduler=client.scheduler.address, workers=worker_environments(client))
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    want_files = report_dir is not None
    outcomes: list = [None] * len(jobs)
    for i, (c, seed) in enumerate(jobs):
        if c.slow and not run_slow:
            outcomes[i] = run_by_id(c.id, seed, size, report_dir, run_slow)
    remote = [i for i in range(len(jobs)) if outcomes[i] is None]
    timing = [i for i in remote if jobs[i][0].id in TIMING_CLAIMS]
    batch = sorted((i for i in remote if i not in timing), key=lambda i: (not jobs[i][0].slow, i))
    bar = _bar(len(remote), progress)

    def args(i: int) -> tuple:
        c, seed = jobs[i]
        return c.id, seed, size, want_files, run_slow, c.id in TIMING_CLAIMS, env

    def done(order: list[int]) -> Callable[[int, Any], None]:
        def on_done(j: int, out: dict) -> None:
            outcomes[order[j]] = _finish(out, report_dir)
            if bar is not None:
                bar.update(1)
        return on_done

    try:
        run_tasks(client, _claim_task, [args(i) for i in batch], on_done=done(batch))
        for i in timing:                      # alone: every other task has finished
            run_tasks(client, _claim_task, [args(i)], on_done=done([i]))
    finally:
        if bar is not None:
            bar.close()
    return outcomes


def _environment() -> dict:
    try:
        import refattn
        import scipy
    except ImportError:  # pragma: no cover - both are dependencies
        return {}
    return {"refattn": getattr(refattn, "__version__", None), "python": platform.python_version(),
            "numpy": np.__version__, "scipy": scipy.__version__, "blas": blas_info(),
            "platform": platform.platform()}


def worker_environments(client: Any) -> list[dict]:
    """The distinct environments of the cluster's workers (versions, BLAS libraries and threads, platform),
    each with its worker count: where the claims actually ran."""
    envs: list[dict] = []
    for env in client.run(_environment).values():
        for e in envs:
            if {k: v for k, v in e.items() if k != "n_workers"} == env:
                e["n_workers"] += 1
                break
        else:
            envs.append({**env, "n_workers": 1})
    return envs


def _bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="claims", unit="claim", file=sys.stderr, leave=False)
