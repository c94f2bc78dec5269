"""Targets as untrusted code (validation.worker): inputs as copies with in-place changes named, output
captured apart from the report, closures of the checks sent to the worker, exit / crash / timeout -> status 4.

One worker serves the module's non-destructive tests (startup once); the destructive ones (a crash, a hang, an
exit at import) run the CLI's ``main`` (in this process), each starting its own worker, and pin exit status 4.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from validation import TargetError, check
from validation.__main__ import EXIT_FAILED, EXIT_TARGET_ERROR, main
from validation.worker import InputLog, Worker, dumps, guarded, loads

from . import untrusted

ROOT = Path(__file__).resolve().parents[2]
UNTRUSTED = "tests/validation/untrusted.py"


@pytest.fixture(scope="module")
def worker():
    with Worker(timeout=120) as w:
        yield w


# ---- inputs as copies (in-process: the same guard as in the worker)

def test_a_candidate_zeroing_q_in_place_fails_values_and_is_named():
    """A reference computed after the call on the same arrays would see the zeroed q: error 0, a pass."""
    rep = check(untrusted.zero_q, kind="attention", quick=True, checks=("values",))
    assert rep["values"].passed is False and rep["values"].figure > 0.1
    assert rep["inputs"].passed is False and "the target modified q in place" in rep["inputs"].detail
    assert rep.exit_code == EXIT_FAILED


def test_a_correct_candidate_scaling_q_in_place_passes_values_but_fails_inputs():
    """A reference computed on the same arrays after the call would see the scaled q and fail this."""
    rep = check(untrusted.scale_q, kind="attention", quick=True, checks=("values",))
    assert rep["values"].passed is True and rep["values"].figure < 1e-12
    assert rep["inputs"].passed is False and rep["inputs"].detail.startswith("the target modified q in place")
    assert [c.name for c in rep.checks] == ["values", "inputs"]


def test_the_guard_names_tree_leaves_and_leaves_the_callers_arrays_alone():
    log = InputLog()
    from validation.base import NumpyFramework

    def f(x, params, n):
        params["W"][0] = 7.0
        x += 1
        return x
    x, params = np.zeros(3), {"W": np.ones(2), "b": np.ones(2)}
    g = guarded(f, NumpyFramework(), ("x", "params", "n"), log)
    out = g(x, params, 3)
    assert np.all(out == 1) and np.all(x == 0) and params["W"][0] == 1.0          # the caller's: unchanged
    assert log.calls == 1 and list(log.modified) == ["x", "params/W"]
    g(np.zeros(3) + 5, {"W": np.ones(2), "b": np.ones(2)}, 3)
    assert log.modified["x"][0] == 2 and log.result().figure == 4.0


def test_the_guard_never_reads_arrays_of_an_immutable_framework():
    """JAX arrays cannot change in place, and inside ``jax.vjp`` they are tracers that refuse conversion to
    NumPy: the guard neither copies nor compares them (an array that refuses ``to_numpy`` stands for the
    tracer; tests/validation/test_crosscheck.py::test_jax_adapter runs the real one where jax is
    installed)."""
    from validation.base import Framework

    class Traced:
        pass

    class Immutable(Framework):
        name = "immutable"
        mutable = False

        def is_array(self, x):
            return isinstance(x, Traced)

        def copy(self, x):
            return x

        def to_numpy(self, x):
            raise TypeError("a tracer cannot be converted to NumPy")

    log = InputLog()
    t = Traced()
    assert guarded(lambda x, n: n, Immutable(), ("x", "n"), log)(t, 3) == 3
    assert log.calls == 1 and not log.modified


def test_closures_are_sent_by_value():
    def outer(a):
        def inner(b, c=2):
            return a * b + c
        return inner
    f = loads(dumps(outer(3)))
    assert f(5) == 17 and f(5, c=0) == 15
    g = loads(dumps(lambda t: np.sum(t)))                          # globals from the module that defined it
    assert g(np.ones(4)) == 4.0


# ---- in the worker

def test_in_place_change_in_the_worker_is_named(worker):
    rep = check(f"{UNTRUSTED}:scale_omega", kind="features", family="positive", quick=True,
                checks=("values",), worker=worker)
    assert rep["values"].passed is True
    assert rep["inputs"].passed is False and "the target modified omega in place" in rep["inputs"].detail


def test_target_output_is_captured_apart_from_the_report(worker, capfd):
    rep = check(f"{UNTRUSTED}:chatty", kind="attention", quick=True, checks=("values",), worker=worker)
    out, err = capfd.readouterr()
    assert "chatty" not in out + err                                 # nothing reached our stdout / stderr
    assert rep.passed and "chatty: a line on stdout" in rep.output
    assert "chatty: a line on stderr" in rep.output
    text = str(rep)
    table, _, section = text.partition("target output (its stdout and stderr, captured;")
    assert "chatty: a line" not in table and "  | chatty: a line on stdout" in section
    assert rep.to_dict()["target_output"] == rep.output


def test_sys_exit_in_a_call_is_a_target_error_not_a_pass(worker):
    with pytest.raises(TargetError, match=r"called sys.exit\(0\)"):
        check(f"{UNTRUSTED}:exits", kind="attention", quick=True, worker=worker)
    assert worker.alive                                    # caught in the worker: it serves the next target


def test_torch_gradients_through_the_worker_equal_in_process(worker):
    """The gradients check sends its closure around the candidate to the worker (autograd runs there)."""
    pytest.importorskip("torch")
    for kw in ({"kind": "attention"}, {"kind": "features", "family": "gmm-rks"}):
        a = check("refattn", framework="torch", quick=True, checks=("gradients",), worker=worker, **kw)
        b = check("refattn", framework="torch", quick=True, checks=("gradients",), **kw)
        assert a["gradients"].passed and a["gradients"].figure == b["gradients"].figure, (a, b)


def test_a_callable_cannot_be_isolated():
    from validation import UsageError
    with pytest.raises(UsageError, match="pass its TARGET string"):
        check(untrusted.chatty, kind="attention", isolate=True)


# ---- through the CLI (in this process; each run starts its own worker): exit status 4, never 0, never 2

@pytest.mark.parametrize("target, env, extra, message", [
    ("aborts", None, (), "the target crashed: the worker process was killed by SIGABRT"),
    ("hangs", None, ("--timeout", "2"), "the target did not answer within 2 s"),
    ("chatty", {"VALIDATION_TEST_EXIT_AT_IMPORT": "1"}, (), "ended the worker process (exit status 0) during "
                                                            "the import"),
])
def test_exit_crash_and_timeout_exit_4(tmp_path, monkeypatch, capsys, target, env, extra, message):
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)                                     # the worker inherits the environment
    monkeypatch.chdir(ROOT)
    out = tmp_path / "r.json"
    code = main(["check", f"{UNTRUSTED}:{target}", "--kind", "attention", "--quick", "--json", str(out),
                 *extra])
    err = capsys.readouterr().err
    assert code == EXIT_TARGET_ERROR, err
    assert message in err and "Traceback" not in err
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "ERROR" and doc["passed"] is False and message in doc["error"]
