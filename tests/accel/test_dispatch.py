"""accel.use / accel.available and the core's dispatch point: scope semantics, thread isolation, clear errors,
and that the core never imports accel or numba."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

import accel
from tests.accel.helpers import unwrap as _unwrap
from refattn import _dispatch

FWD = "linear_attention.causal_fwd"
numba_ok = accel.available()["numba"]
needs_numba = pytest.mark.skipif(not numba_ok, reason="numba is not installed (extra 'accel')")


def test_available_reports_every_backend():
    av = accel.available()
    assert set(av) == set(accel.BACKENDS) == {"numba", "cupy"}
    assert all(isinstance(x, bool) for x in av.values())


def test_outside_use_the_reference_runs():
    """Through the dispatch point: no backend is active and no kernel is handed out."""
    assert _dispatch.active_backend() is None
    assert _dispatch.kernel_for(FWD) is None


@needs_numba
def test_use_switches_in_and_restores():
    from accel.numba import causal

    with accel.use("numba"):
        assert _dispatch.active_backend() == "numba"
        assert _unwrap(_dispatch.kernel_for(FWD)) is causal.causal_fwd
        assert _unwrap(_dispatch.kernel_for("linear_attention.causal_bwd")) is causal.causal_bwd
        assert _dispatch.kernel_for("contract_rows") is None          # not a numba kernel: the reference runs
    assert _dispatch.active_backend() is None
    assert _dispatch.kernel_for(FWD) is None


@needs_numba
def test_nesting_and_exceptions_restore():
    with accel.use("numba"):
        with _dispatch.use_backend(None):                             # an inner reference scope
            assert _dispatch.kernel_for(FWD) is None
        assert _dispatch.active_backend() == "numba"
        with pytest.raises(RuntimeError, match="boom"):
            with accel.use("numba"):
                raise RuntimeError("boom")
        assert _dispatch.active_backend() == "numba"
    with pytest.raises(KeyError):
        with accel.use("numba"):
            raise KeyError("x")
    assert _dispatch.active_backend() is None


@needs_numba
def test_two_threads_do_not_interfere():
    """Thread A runs inside use('numba'), thread B outside; each sees only its own backend, checked while
    the other is inside its scope (barriers order the checks)."""
    barrier = threading.Barrier(2)
    seen: dict[str, list] = {"A": [], "B": []}
    errors = []

    def a():
        try:
            with accel.use("numba"):
                barrier.wait(timeout=30)
                seen["A"].append(_dispatch.active_backend())
                barrier.wait(timeout=30)
            seen["A"].append(_dispatch.active_backend())
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    def b():
        try:
            barrier.wait(timeout=30)
            seen["B"].append(_dispatch.active_backend())
            seen["B"].append(_dispatch.kernel_for(FWD))
            barrier.wait(timeout=30)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start(), tb.start()
    ta.join(), tb.join()
    assert not errors, errors
    assert seen["A"] == ["numba", None], seen
    assert seen["B"] == [None, None], seen


@needs_numba
def test_two_threads_compute_with_their_own_backend():
    """Both threads run the causal linear attention at once; each result equals its own path's result."""
    import refattn
    from accel.numba import causal

    rng = np.random.default_rng(0)
    q, k = np.exp(rng.standard_normal((2, 2, 50, 4))), np.exp(rng.standard_normal((2, 2, 50, 4)))
    v = rng.standard_normal((2, 2, 50, 3))
    ref = refattn.linear_attention(q, k, v, causal=True)
    calls = []
    real = causal.causal_fwd
    out: dict = {}
    barrier = threading.Barrier(2)

    def spy(*args):
        calls.append(threading.current_thread().name)
        return real(*args)

    _dispatch.register("numba", FWD, spy)                             # re-registered by the next accel.use

    def run(name, backend):
        barrier.wait(timeout=30)
        if backend:
            with _dispatch.use_backend(backend):
                out[name] = refattn.linear_attention(q, k, v, causal=True)
        else:
            out[name] = refattn.linear_attention(q, k, v, causal=True)

    try:
        ts = [threading.Thread(target=run, args=("A", "numba"), name="A"),
              threading.Thread(target=run, args=("B", None), name="B")]
        [t.start() for t in ts]
        [t.join() for t in ts]
    finally:
        _dispatch.register("numba", FWD, real)
    assert calls == ["A"], calls
    np.testing.assert_allclose(out["A"], ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(out["B"], ref)


def test_unknown_backend_name():
    msg = r"accel.use: unknown backend 'numpy'; expected one of \['cupy', 'numba'\]"
    with pytest.raises(ValueError, match=msg):
        with accel.use("numpy"):
            pass


@pytest.mark.parametrize("name, extra, package", [("numba", "accel", "numba"), ("cupy", "gpu", "cupy")])
def test_unavailable_backend_names_package_and_extra(monkeypatch, name, extra, package):
    monkeypatch.setitem(accel.backends.PROBES, name,
                        lambda: (False, f"package {package!r} does not import (simulated)"))
    assert accel.available()[name] is False
    with pytest.raises(accel.BackendUnavailableError,
                       match=rf"accel.use\('{name}'\): backend unavailable: package '{package}' does not "
                             rf"import.*pip install 'refattn\[{extra}\]'"):
        with accel.use(name):
            pass
    assert _dispatch.active_backend() is None


def test_cupy_without_device_is_unavailable_here_or_registers_its_kernels():
    """Without cupy/a device, use('cupy') raises naming cupy and the 'gpu' extra; with one, the CuPy kernels
    are what the dispatch point answers inside the scope, and the reference outside it."""
    if not accel.available()["cupy"]:
        with pytest.raises(accel.BackendUnavailableError, match=r"'cupy'.*refattn\[gpu\].*cupy-cuda12x"):
            with accel.use("cupy"):
                pass
    else:  # pragma: no cover - needs a device
        from accel.cupy import causal

        with accel.use("cupy"):
            assert _dispatch.kernel_for(FWD) is causal.causal_fwd
        assert _dispatch.kernel_for(FWD) is None


def _imports_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_refattn_never_imports_accel_or_numba():
    mods = _imports_after("import refattn, refattn.attention.linear")
    assert not {m for m in mods if m == "accel" or m.startswith(("accel.", "numba", "cupy"))}, sorted(
        m for m in mods if m.startswith(("accel", "numba", "cupy")))


def test_import_accel_does_not_import_numba():
    mods = _imports_after("import accel")
    assert "accel" in mods
    assert not {m for m in mods if m.startswith(("numba", "cupy", "accel.numba"))}


def test_kernels_are_serialised_under_an_unsafe_threading_layer(monkeypatch):
    """Under numba's workqueue layer two threads must never run kernels at once: the wrapper serialises
    them."""
    pytest.importorskip("numba")
    import time

    from accel.numba import kernels as anb

    active, overlap = [0], [False]

    def slow(*args, **kwargs):
        active[0] += 1
        overlap[0] |= active[0] > 1
        time.sleep(0.05)
        active[0] -= 1

    monkeypatch.setattr(anb, "_SAFE_LAYER", [False])
    wrapped = anb._serialised_unless_safe(slow)
    threads = [threading.Thread(target=wrapped) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlap[0]
    monkeypatch.setattr(anb, "_SAFE_LAYER", [True])                 # a safe layer runs them concurrently
    wrapped = anb._serialised_unless_safe(slow)
    threads = [threading.Thread(target=wrapped) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlap[0], "with a thread-safe layer the calls should overlap (no lock)"


def test_registry_names_every_primitive_and_rejects_unknown_names():
    """One registry {name: reference}: a misspelled primitive raises instead of silently running the
    reference."""
    table = _dispatch.primitives()
    assert set(table) == set(_dispatch.PRIMITIVES) and all(callable(f) for f in table.values())
    for call in (_dispatch.kernel_for, _dispatch.reference, _dispatch.implementation):
        msg = r"primitive: unknown hot primitive 'linear_attention\.causal_fwdd'"
        with pytest.raises(ValueError, match=msg):
            call("linear_attention.causal_fwdd")
    with pytest.raises(ValueError, match=r"unknown hot primitive 'fwth'"):
        _dispatch.register("numba", "fwth", lambda x: x)
    assert _dispatch.implementation("fwht") is _dispatch.reference("fwht")


@pytest.mark.parametrize("backend", ["numba", "cupy"])
def test_every_registered_kernel_is_a_known_primitive(backend):
    """Each backend's kernel table names only registry primitives (its register() would raise otherwise), and
    the primitives it leaves out run the reference inside its scope."""
    if not accel.available()[backend]:
        pytest.skip(f"{backend} is not available here")
    with accel.use(backend):
        kernels = {p for (b, p) in _dispatch.registered(backend)}
        assert kernels <= set(_dispatch.PRIMITIVES)
        for name in set(_dispatch.PRIMITIVES) - kernels:
            assert _dispatch.implementation(name) is _dispatch.reference(name)
