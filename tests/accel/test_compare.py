"""Every kernel of every available backend against its reference, pair by pair (numpy-groupies' test_compare),
iterating over the one registry of hot primitives (``refattn._dispatch.primitives()``): a primitive added to
the registry without sample inputs here fails, and so does a kernel that disagrees with its reference."""

from __future__ import annotations

import numpy as np
import pytest

import accel
from refattn import _dispatch
from tests.helpers import get_namespace

TOL = {"float64": 1e-10, "float32": 2e-4}


def _causal_args(rng, dt, frames):
    phi_q = np.exp(rng.standard_normal((2, 37, 16))).astype(dt)
    phi_k = np.exp(rng.standard_normal((2, 37, 16))).astype(dt)
    v_aug = np.concatenate([rng.standard_normal((2, 37, 5)), np.ones((2, 37, 1))], -1).astype(dt)
    if frames:
        s = np.maximum.accumulate(3.0 * rng.standard_normal((2, 37, 16)), axis=-2).astype(dt)
        s[..., 20:, 3] += 40.0                                     # one chunk on the exact path
    else:
        s = (5.0 * rng.standard_normal((2, 37))).astype(dt)
    return phi_q, phi_k, v_aug, s


def _samples(name, rng, dt):
    """(args, kwargs) for the reference and the kernels of `name` (same signature)."""
    if name == "linear_attention.causal_fwd":
        return _causal_args(rng, dt, False) + (8,), {}
    if name == "linear_attention.causal_bwd":
        phi_q, phi_k, v_aug, s = _causal_args(rng, dt, False)
        _, M = _dispatch.reference("linear_attention.causal_fwd")(phi_q, phi_k, v_aug, s, 8)
        return (rng.standard_normal(v_aug.shape).astype(dt), phi_q, phi_k, v_aug, s, M, 8), {}
    if name == "linear_attention.causal_frames_fwd":                 # keeping nothing: comparable outputs
        return _causal_args(rng, dt, True) + (8, None), {}
    if name == "linear_attention.causal_frames_bwd":
        phi_q, phi_k, v_aug, s = _causal_args(rng, dt, True)
        _, kept = _dispatch.reference("linear_attention.causal_frames_fwd")(phi_q, phi_k, v_aug, s, 8, 2)
        return (rng.standard_normal(v_aug.shape).astype(dt), phi_q, phi_k, v_aug, s, 8, kept, 2), {}
    if name == "positive_features_stable":
        x = (2.0 * rng.standard_normal((2, 9, 8))).astype(dt)
        frame = (20.0 * rng.standard_normal((2, 1, 24))).astype(dt)
        return (x, rng.standard_normal((24, 8)).astype(dt), frame), {}
    if name == "positive_key_features_stable":
        return ((2.0 * rng.standard_normal((2, 9, 8))).astype(dt), rng.standard_normal((24, 8)).astype(dt),
                True), {}
    if name == "fwht":
        return (rng.standard_normal((3, 5, 16)).astype(dt),), {}
    if name == "s2_window_sums":
        return (rng.standard_normal((2, 11, 3)).astype(dt), 2, None), {"adjoint": False}
    if name == "contract_rows":
        return (rng.standard_normal((2, 40, 6)).astype(dt), rng.standard_normal((2, 40, 4)).astype(dt)), {}
    raise KeyError(name)


def _call_reference(name, args, kwargs):
    ref = _dispatch.reference(name)
    if name == "fwht":                                             # the reference takes its namespace
        return ref(*args, xp=get_namespace("numpy"))
    return ref(*args, **kwargs)


def test_every_primitive_has_samples():
    """Every registered primitive has a sample builder, and its reference runs on the samples (a new primitive
    without a builder raises here, so the comparison tests below cannot silently skip it)."""
    rng = np.random.default_rng(0)
    for name in _dispatch.primitives():
        args, kwargs = _samples(name, rng, "float64")
        assert _call_reference(name, args, kwargs) is not None, name


def _kernel_cases():
    out = []
    for backend in sorted(accel.BACKENDS):
        if not accel.available()[backend]:
            continue
        with accel.use(backend):
            names = sorted(p for (b, p) in _dispatch.registered(backend))
        out += [pytest.param(backend, n, id=f"{backend}-{n}") for n in names]
    return out or [pytest.param(None, None, marks=pytest.mark.skip(reason="no accelerator backend here"))]


def _to_backend(backend, tree):
    """The sample arrays on the backend's device (CuPy kernels take CuPy arrays; numba's take NumPy's)."""
    if backend != "cupy":
        return tree
    import cupy
    if isinstance(tree, np.ndarray):
        return cupy.asarray(tree)
    if isinstance(tree, tuple):
        moved = [_to_backend(backend, t) for t in tree]
        return type(tree)(*moved) if hasattr(tree, "_fields") else tuple(moved)
    return tree


def _to_host(tree):
    """Outputs back on the host as NumPy arrays (a CuPy array converts only through ``.get()``)."""
    if isinstance(tree, tuple):
        moved = [_to_host(t) for t in tree]
        return type(tree)(*moved) if hasattr(tree, "_fields") else tuple(moved)
    return tree.get() if hasattr(tree, "get") and not isinstance(tree, (np.ndarray, dict)) else tree


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend, name", _kernel_cases())
def test_kernel_equals_reference(backend, name, dtype):
    rng = np.random.default_rng(1)
    args, kwargs = _samples(name, rng, dtype)
    with accel.use(backend):
        kernel = _dispatch.kernel_for(name)
        got = _to_host(kernel(*_to_backend(backend, args), **kwargs))
    want = _call_reference(name, args, kwargs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:
            assert g is None
            continue
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        assert g.shape == w.shape, f"{name} output {i}: shape {g.shape}, reference {w.shape}"
        scale = max(float(np.max(np.abs(w))), 1e-300)
        err = float(np.max(np.abs(g - w))) / scale
        assert err <= TOL[dtype], f"{backend} {name} output {i} ({dtype}): normwise error {err:.2e}"
