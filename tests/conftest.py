"""Shared fixtures: array namespaces (NumPy, array_api_strict, torch, CuPy with a device), dtypes, seeds,
BLAS threads.

* ``xp``: every core test runs under NumPy (through array-api-compat) and ``array_api_strict`` pinned to the
  standard version the core targets (``ARRAY_API_VERSION``), under torch (CPU tensors, through
  array-api-compat) when it imports, and under CuPy when it imports and a device exists. What cannot work
  under torch is listed in ``TORCH_KNOWN_FAILURES`` (expected failures, with the reason).
* ``dtype``: float64 (the reference) and float32 -- only for tests that request it.
* ``seed``: 0 by default; ``REFATTN_TEST_SEEDS=all`` runs 0..19 (every statistical test must pass for each).
* BLAS threads are pinned with threadpoolctl (1 per process by default, ``REFATTN_BLAS_THREADS`` overrides):
  oversubscribed OpenBLAS threads on a 2-core machine slow small GEMM loops by 100x, and pytest-xdist runs one
  process per core.
"""

from __future__ import annotations

import os

import array_api_compat
import numpy as np
import pytest

ARRAY_API_VERSION = "2024.12"


def _backends():
    out = [pytest.param("numpy", id="numpy")]
    try:
        import array_api_strict  # noqa: F401

        out.append(pytest.param("array_api_strict", id="strict"))
    except ImportError:
        out.append(pytest.param("array_api_strict", id="strict",
                                marks=pytest.mark.skip(reason="array_api_strict is not installed")))
    try:
        import torch  # noqa: F401

        out.append(pytest.param("torch", id="torch"))
    except ImportError:
        pass
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        out.append(pytest.param("cupy", id="cupy"))
    except Exception:
        pass
    return out


#: test function name -> why it cannot pass on torch tensors (marked xfail for the torch parameter only)
TORCH_KNOWN_FAILURES: dict[str, str] = {}   # empty: mse_bwd's x.size (a method on torch.Tensor) is fixed


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = getattr(item, "originalname", item.name)
        if "[torch" in item.name and name in TORCH_KNOWN_FAILURES:
            item.add_marker(pytest.mark.xfail(reason=TORCH_KNOWN_FAILURES[name], strict=False))


def get_namespace(name: str):
    """The array-API namespace of backend `name` (NumPy and CuPy wrapped by array-api-compat)."""
    if name == "numpy":
        return array_api_compat.array_namespace(np.empty(0))
    if name == "array_api_strict":
        import array_api_strict

        array_api_strict.set_array_api_strict_flags(api_version=ARRAY_API_VERSION)
        return array_api_strict
    if name == "cupy":
        import cupy

        return array_api_compat.array_namespace(cupy.empty(0))
    if name == "torch":
        import torch

        return array_api_compat.array_namespace(torch.empty(0))
    raise ValueError(name)


@pytest.fixture(params=_backends())
def xp(request):
    return get_namespace(request.param)


@pytest.fixture(params=["float64", "float32"])
def dtype(request, xp):
    return getattr(xp, request.param)


def pytest_generate_tests(metafunc):
    if "seed" in metafunc.fixturenames:
        seeds = list(range(20)) if os.environ.get("REFATTN_TEST_SEEDS") == "all" else [0]
        metafunc.parametrize("seed", seeds, ids=[f"seed{s}" for s in seeds])


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True, scope="session")
def _pin_blas_threads():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=int(os.environ.get("REFATTN_BLAS_THREADS", "1"))):
        yield


def asxp(xp, a, dtype=None):
    """A NumPy array (or scalar) as an array of namespace `xp` (default dtype float64)."""
    return xp.asarray(np.asarray(a), dtype=dtype if dtype is not None else xp.float64)
