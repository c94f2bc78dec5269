"""Targets as untrusted code: one worker process per run, a time limit per call, inputs passed as copies.

``python -m validation check TARGET`` (and :func:`validation.check` on a ``module:callable`` or
``file.py:callable`` string) imports the target in a worker process (a fresh interpreter started with
``subprocess``, one per run, not one per call, talking over a socket pair with
``multiprocessing.connection``) and runs every check in the calling process.
Each call of the candidate is a request over a pipe: the inputs go as pickled NumPy arrays (copies by
construction), the worker converts them to the target's framework, calls it and sends NumPy back. An autograd
product (``Framework.vjp``) is one request too: the function it differentiates -- a closure of the check
around the candidate -- is sent by value (:func:`dumps`) and runs in the worker, where the candidate lives.

What this guarantees:

- the checks and refattn's reference computations never share a process with the target: nothing it does
  (changing refattn, NumPy or a check's arrays) reaches them;
- each request answers within ``timeout`` seconds (:data:`DEFAULT_TIMEOUT`; the import of the target too), or
  the worker is stopped and the run ends with :class:`~validation.base.TargetError`;
- an exit of the target (``sys.exit`` anywhere, ``os._exit`` at import or in a call), a crash (a signal such
  as ``os.abort()``'s SIGABRT) or an exception while its module is imported ends the run with
  :class:`~validation.base.TargetError` (exit status 4 of the CLI), never with a report that looks complete;
- what the target writes to stdout and stderr goes to a file, returned as ``Report.output`` (the CLI prints
  it in its own section after the report): it never interleaves with the report;
- the candidate receives copies of its inputs (also in-process, through :func:`guarded`) and every in-place
  change is recorded by argument name: the run's report gets a failing ``inputs`` row ("the target modified
  q") and the reference is computed on the caller's unchanged arrays.

A callable object (``check(fn)``) runs in the calling process: only its inputs are guarded (copies, in-place
changes reported); there is no time limit and an ``os._exit`` in it ends the caller.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import importlib.util
import io
import marshal
import multiprocessing.connection
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import types
from typing import Any, Callable

import numpy as np

from .base import Framework, TargetError, UsageError
from .checks.context import check_signature, convert
from .checks.report import CheckResult
from .crosscheck.registry import BUILTIN_TARGETS, builtin_target, get_framework
from .families.catalog import FAMILIES

__all__ = ["DEFAULT_TIMEOUT", "ARG_NAMES", "InputLog", "guarded", "resolve_target", "target_problem",
           "Worker", "RemoteTarget", "RemoteFramework", "dumps", "loads", "serve", "local_target",
           "local_framework"]

#: seconds one request to the worker may take (a call of the candidate, an autograd product, the import)
DEFAULT_TIMEOUT = 60.0
#: seconds the worker may take to start (a Python interpreter importing NumPy, SciPy, refattn, validation)
STARTUP_TIMEOUT = 300.0

#: the candidate's positional arguments, by kind (a family's contract names its own: ``spec.arg_names``)
ARG_NAMES = {"draw": ("seed", "m", "d"), "features": ("x", "omega"),
             "attention": ("q", "k", "v", "omega", "causal")}


# ---------------------------------------------------------------------------------------------------------
# inputs as copies, in-place changes by name (in the calling process or in the worker)


class InputLog:
    """The calls of a candidate and the in-place changes of their inputs, by argument name."""

    def __init__(self) -> None:
        self.calls = 0
        self.check = "probe"                       # the check running now (set by the runner)
        self.failure: TargetError | None = None    # the target could not be run (even if a check caught it)
        self.modified: dict[str, list] = {}        # name -> [number of calls that changed it, first check]

    def add(self, calls: int, names: list[str]) -> None:
        self.calls += calls
        for n in names:
            self.modified.setdefault(n, [0, self.check])[0] += 1

    def result(self) -> CheckResult | None:
        """The failing ``inputs`` row when some call changed an input in place, else None."""
        if not self.modified:
            return None
        names = ", ".join(self.modified)
        where = "; ".join(f"{n}: {c} of {self.calls} calls, first in {chk}"
                          for n, (c, chk) in self.modified.items())
        n_calls = float(sum(c for c, _ in self.modified.values()))
        return CheckResult("inputs", False, n_calls, 0.0,
                           f"the target modified {names} in place ({where}); it was given copies: its "
                           "outputs are compared as computed, refattn's reference used the caller's "
                           "unchanged inputs")


def _copy(fw: Framework, a: Any) -> Any:
    if fw.is_array(a):
        return fw.copy(a)
    if isinstance(a, np.ndarray):
        return a.copy()
    if isinstance(a, dict):
        return {k: _copy(fw, v) for k, v in a.items()}
    if isinstance(a, (list, tuple)):
        return type(a)(_copy(fw, v) for v in a)
    return a


def _changed(fw: Framework, before: Any, after: Any, name: str) -> list[str]:
    """Names (``params/W`` inside trees) whose value in `after` differs from `before`, bit for bit (arrays
    of an immutable framework cannot change: not compared)."""
    if fw.is_array(before) and not fw.mutable:
        return []
    if fw.is_array(before) or isinstance(before, np.ndarray):
        x = np.asarray(fw.to_numpy(before) if fw.is_array(before) else before)
        try:
            y = np.asarray(fw.to_numpy(after) if fw.is_array(after) else after)
        except Exception:  # noqa: BLE001 - replaced by something that is no array
            return [name]
        same = x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
        return [] if same else [name]
    if isinstance(before, dict):
        if not isinstance(after, dict) or set(after) != set(before):
            return [name]
        return [n for k, v in before.items() for n in _changed(fw, v, after[k], f"{name}/{k}")]
    if isinstance(before, (list, tuple)):
        if type(after) is not type(before) or len(after) != len(before):
            return [name]
        return [n for i, v in enumerate(before) for n in _changed(fw, v, after[i], f"{name}/{i}")]
    return []


def guarded(fn: Callable, fw: Framework, names: tuple[str, ...], log: InputLog) -> Callable:
    """`fn` called on copies of its inputs: in-place changes are added to `log` by argument name, and a
    ``sys.exit`` in it becomes :class:`TargetError`."""
    def call(*args):
        copies = [_copy(fw, a) for a in args]
        try:
            out = fn(*copies)
        except SystemExit as e:
            where = f" (in {log.check})" if log.check else ""
            log.failure = TargetError(f"the target called sys.exit({e.code!r}){where}")
            raise log.failure from None
        changed = [n for i, (a, c) in enumerate(zip(args, copies, strict=True))
                   for n in _changed(fw, a, c, names[i] if i < len(names) else f"argument {i + 1}")]
        log.add(1, changed)
        return out
    return call


# ---------------------------------------------------------------------------------------------------------
# resolving TARGET


def _is_file(mod_name: str) -> bool:
    return mod_name.endswith(".py") or os.sep in mod_name


def target_problem(spec: str) -> str | None:
    """What is wrong with the TARGET string `spec` before anything is imported (its form, a missing file),
    or None."""
    if spec in BUILTIN_TARGETS:
        return None
    mod_name, colon, attr = spec.rpartition(":")
    if not colon or not mod_name or not attr:
        return (f"TARGET {spec!r}: expected module:callable, path/to/file.py:callable or a built-in target "
                f"({', '.join(BUILTIN_TARGETS)})")
    if _is_file(mod_name) and not os.path.isfile(mod_name):
        return f"TARGET {spec!r}: file {mod_name!r} does not exist"
    return None


def resolve_target(spec: str, kind: str, framework: str | None = None,
                   family: str | None = None) -> tuple[Callable, str, str | None, str]:
    """``(fn, framework, family, note)`` for a TARGET: a built-in name, ``module:callable`` or
    ``file.py:callable``. A missing file, module or attribute is a :class:`UsageError`; an exception or an
    exit while the module is imported is a :class:`TargetError`."""
    problem = target_problem(spec)
    if problem:
        raise UsageError(problem)
    if spec in BUILTIN_TARGETS:
        t = builtin_target(spec, kind, framework, family)
        if framework is not None and framework != t.framework:
            raise UsageError(f"target {spec}: its {kind} callable takes {t.framework} arrays; got "
                             f"--framework {framework}")
        return t.fn, t.framework, t.family, t.note
    mod_name, _, attr = spec.rpartition(":")
    failed = f"TARGET {spec!r}: importing {mod_name!r} failed"
    try:
        if _is_file(mod_name):
            name = "_validation_target_" + str(abs(hash(os.path.abspath(mod_name))))
            specobj = importlib.util.spec_from_file_location(name, mod_name)
            mod = importlib.util.module_from_spec(specobj)
            sys.modules[name] = mod
            specobj.loader.exec_module(mod)
        else:
            mod = importlib.import_module(mod_name)
    except UsageError:
        raise
    except ModuleNotFoundError as e:
        if e.name is not None and (mod_name == e.name or mod_name.startswith(e.name + ".")):
            raise UsageError(f"{failed}: ModuleNotFoundError: {e}") from None   # no such target
        raise TargetError(f"{failed}: ModuleNotFoundError: {e}") from None
    except SystemExit as e:
        raise TargetError(f"TARGET {spec!r}: importing {mod_name!r} called sys.exit({e.code!r})") from None
    except BaseException as e:  # noqa: BLE001 - whatever the target's import raises
        raise TargetError(f"{failed}: {type(e).__name__}: {e}") from None
    fn = mod
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise UsageError(f"TARGET {spec!r}: {mod_name!r} has no attribute {attr!r}")
        fn = getattr(fn, part)
    return fn, framework or "numpy", None, ""


# ---------------------------------------------------------------------------------------------------------
# sending the checks' closures by value


class _Empty:
    """An empty closure cell."""


def _importable(f: types.FunctionType) -> bool:
    obj: Any = sys.modules.get(f.__module__)
    for part in f.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is f


class _Pickler(pickle.Pickler):
    """Pickles functions that cannot be found by name (lambdas, closures) by value: their code (``marshal``:
    the worker runs the same interpreter), the module whose globals they read, defaults and closure cells."""

    def reducer_override(self, obj):
        if type(obj) is types.FunctionType and not _importable(obj):
            cells = None if obj.__closure__ is None else tuple(_cell(c) for c in obj.__closure__)
            return _function, (marshal.dumps(obj.__code__), obj.__module__, obj.__name__, obj.__qualname__,
                               obj.__defaults__, obj.__kwdefaults__, cells)
        return NotImplemented


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:
        return _Empty()


def _function(code, module, name, qualname, defaults, kwdefaults, cells):
    closure = None if cells is None else tuple(
        types.CellType() if isinstance(v, _Empty) else types.CellType(v) for v in cells)
    f = types.FunctionType(marshal.loads(code), importlib.import_module(module).__dict__, name, defaults,
                           closure)
    f.__kwdefaults__, f.__qualname__ = kwdefaults, qualname
    return f


def dumps(obj: Any) -> bytes:
    """``pickle.dumps`` that also sends lambdas and closures by value (for :class:`Worker` requests)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


loads = pickle.loads


# ---------------------------------------------------------------------------------------------------------
# the worker process


class _Foreign:
    """Stands for an output that is not an array of the target's framework (its class keeps the type name)."""


_STATE: dict[str, Any] = {}


def local_target() -> Callable:
    """In the worker: the candidate (inputs converted to its framework, copied, changes logged)."""
    return _STATE["inner"]


def local_framework() -> Framework:
    """In the worker: the target's framework adapter."""
    return _STATE["fw"]


def _export(fw: Framework, out: Any) -> Any:
    if isinstance(out, tuple):
        return tuple(_export(fw, o) for o in out)
    if fw.is_array(out):
        return np.asarray(fw.to_numpy(out))
    return ("foreign", type(out).__name__)


def _load(spec, kind, framework, family):
    fn, fw_name, fam, note = resolve_target(spec, kind, framework, family)
    fw = get_framework(fw_name)
    fs = FAMILIES.get(family or fam)
    contract = fs.contract(kind) if fs is not None else None
    check_signature(fn, kind, spec, contract)
    _STATE["session"].close()
    _STATE["session"].enter_context(fw.session())
    g = guarded(fn, fw, tuple(contract.arg_names) if contract is not None else ARG_NAMES[kind], _STATE["log"])
    _STATE.update(fw=fw, inner=lambda *a: g(*(convert(fw, x) for x in a)))
    return fw_name, fam, note


def _call(args):
    return _export(_STATE["fw"], _STATE["inner"](*args))


def _vjp(fn, args, cotangent, extra):
    fw = _STATE["fw"]
    return fw.vjp(fn, args, cotangent, *(convert(fw, e) for e in extra))


_HANDLERS = {"load": _load, "call": _call, "vjp": _vjp}


def serve(fd: int) -> None:
    """The worker's loop (stdout and stderr already go to the caller's file): answer ``load``, ``call`` and
    ``vjp`` requests on the socket `fd` until ``quit`` or the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)           # Ctrl-C is the caller's: it stops the worker
    conn = multiprocessing.connection.Connection(fd)
    log = InputLog()
    log.check = ""                                         # the caller knows the check: it names it
    _STATE.update(session=contextlib.ExitStack(), log=log)
    conn.send_bytes(dumps(("ready",)))
    while True:
        try:
            msg = loads(conn.recv_bytes())
        except EOFError:
            return
        if msg[0] == "quit":
            _STATE["session"].close()
            return
        log.calls, log.modified = 0, {}                        # counted per request by the caller
        try:
            reply: tuple = ("ok", _HANDLERS[msg[0]](*msg[1:]))
        except UsageError as e:
            reply = ("usage", str(e))
        except TargetError as e:
            reply = ("target", str(e))
        except Exception as e:  # noqa: BLE001 - the candidate's exception, raised again in the caller
            reply = ("raised", type(e).__module__, type(e).__name__, str(e))
        except BaseException as e:  # noqa: BLE001 - e.g. a KeyboardInterrupt raised by the target itself
            reply = ("target", f"the target raised {type(e).__name__}: {e}")
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        names = [n for n, (c, _) in log.modified.items() for _ in range(c)]
        try:
            data = dumps(reply + (log.calls, names))
        except Exception as e:  # noqa: BLE001 - an output that does not pickle
            data = dumps(("raised", "builtins", "TypeError", f"the target's output could not be sent back: "
                          f"{type(e).__name__}: {e}", log.calls, names))
        conn.send_bytes(data)


# ---------------------------------------------------------------------------------------------------------
# the caller's side


class TargetRaisedError(Exception):
    """An exception of the target whose class is not a builtin: the name and message are kept."""


def _exception(module: str, name: str, message: str) -> Exception:
    if module == "validation.base" and name == "UsageError":
        return UsageError(message)
    cls = getattr(builtins, name, None) if module == "builtins" else None
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except TypeError:
            pass
    return type(name, (TargetRaisedError,), {"__module__": module})(message)


_LAUNCH = "import sys; from validation.worker import serve; serve(int(sys.argv[1]))"


class Worker:
    """One worker process (``spawn``) holding a target; :meth:`load` a target, then call it through
    :class:`RemoteTarget` and :class:`RemoteFramework`. A worker may load several targets one after the other
    (the test suite shares one); ``python -m validation check`` starts one per run. Use as a context manager
    or call :meth:`close`."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise UsageError(f"timeout: expected a positive number of seconds; got {timeout!r}")
        self.timeout = float(timeout)
        self.log = InputLog()
        fd, self.output_path = tempfile.mkstemp(prefix="validation-target-", suffix=".txt")
        os.close(fd)
        ours, theirs = socket.socketpair()
        # the package's own directory first on the worker's path; the working directory is inherited (-c puts
        # it on sys.path, as python -m does), so module:callable imports as from the command line
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH"))
                                                          if p))
        with theirs, open(self.output_path, "ab") as out:
            self._proc: Any = subprocess.Popen([sys.executable, "-c", _LAUNCH, str(theirs.fileno())],
                                               pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                               stdout=out, stderr=subprocess.STDOUT, env=env)
        self._conn = multiprocessing.connection.Connection(ours.detach())
        self._ready = False

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        """What the target wrote to stdout and stderr since the last :meth:`load`."""
        try:
            with open(self.output_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def load(self, spec: str, kind: str, framework: str | None, family: str | None,
             name: str | None = None) -> tuple[str, str | None, str]:
        """Import the target in the worker: ``(framework, family, note)``, as :func:`resolve_target`."""
        with open(self.output_path, "w"):
            pass                                                   # the output of this target only
        self.log = InputLog()
        if self._proc is None:
            raise TargetError(f"the worker process was stopped before the import of {name or spec}")
        return self._request(("load", spec, kind, framework, family), f"the import of {name or spec}")

    def call(self, args: tuple) -> Any:
        out = self._request(("call", args), f"a call of the target in {self.log.check}")
        return _foreign(out)

    def vjp(self, fn: Callable, args, cotangent, extra) -> Any:
        return self._request(("vjp", fn, list(args), cotangent, tuple(extra)),
                             f"an autograd product of the target in {self.log.check}")

    def _request(self, msg: tuple, what: str) -> Any:
        try:
            return self._answer(msg, what)
        except TargetError as e:
            self.log.failure = e                 # the run ends, even where a check catches the exception
            raise

    def _answer(self, msg: tuple, what: str) -> Any:
        if self._proc is None:
            raise TargetError(f"the worker process was stopped before {what}")
        if not self._ready:                      # the worker's own imports: not the target's time
            if not self._conn.poll(STARTUP_TIMEOUT):
                self._stop()
                raise TargetError(f"the worker process did not start within {STARTUP_TIMEOUT:g} s")
            try:
                self._conn.recv_bytes()
            except (EOFError, OSError):
                raise self._ended("its start") from None
            self._ready = True
        data = dumps(msg)
        try:
            self._conn.send_bytes(data)
        except OSError:
            raise self._ended(what) from None
        if not self._conn.poll(self.timeout):
            self._stop()
            raise TargetError(f"the target did not answer within {self.timeout:g} s ({what}); the worker "
                              "process was stopped (--timeout SECONDS sets the limit)")
        try:
            reply = loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            raise self._ended(what) from None
        *reply, calls, names = reply
        self.log.add(calls, names)
        status = reply[0]
        if status == "ok":
            return reply[1]
        if status == "usage":
            raise UsageError(reply[1])
        if status == "target":
            raise TargetError(f"{reply[1]} during {what}")
        raise _exception(*reply[1:])

    def _ended(self, what: str) -> TargetError:
        try:
            code = self._proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self._stop()
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
            return TargetError(f"the target crashed: the worker process was killed by {sig} during {what}")
        return TargetError(f"the target ended the worker process (exit status {code}) during {what}: an exit "
                           "(sys.exit, os._exit) in the target")

    def _stop(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._conn.close()
            self._proc = None

    def close(self) -> None:
        """Stop the worker (politely, then by force) and remove its output file."""
        if self.alive:
            with contextlib.suppress(OSError):
                self._conn.send_bytes(dumps(("quit",)))
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        self._stop()
        with contextlib.suppress(OSError):
            os.remove(self.output_path)


def _foreign(out: Any) -> Any:
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], str) and out[0] == "foreign" and (
            isinstance(out[1], str)):
        return type(out[1], (_Foreign,), {})()
    if isinstance(out, tuple):
        return tuple(_foreign(o) for o in out)
    return out


class RemoteTarget:
    """The candidate as the checks call it: each call is a request to the :class:`Worker` (NumPy in and out).
    Inside a closure sent to the worker it stands for the candidate itself (:func:`local_target`)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def __call__(self, *args):
        return self.worker.call(args)

    def __reduce__(self):
        return local_target, ()


class RemoteFramework(Framework):
    """The target's framework seen from the caller: NumPy arrays everywhere (the worker converts), and
    autograd products computed in the worker. Inside a closure sent to the worker it stands for the target's
    own adapter (:func:`local_framework`)."""

    def __init__(self, worker: Worker, real: Framework) -> None:
        self.worker = worker
        self.name, self.autograd, self.module = real.name, real.autograd, real.module

    def asarray(self, a: np.ndarray) -> Any:
        return np.asarray(a)

    def is_array(self, x: Any) -> bool:
        return isinstance(x, np.ndarray)

    def vjp(self, fn, args, cotangent, *extra):
        return self.worker.vjp(fn, args, cotangent, extra)

    def __reduce__(self):
        return local_framework, ()
