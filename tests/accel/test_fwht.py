"""accel.numba.fwht: bit-for-bit the reference's butterflies; FastFood features under accel.use('numba') equal
the reference (forward and gradients); clear errors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
fwht_mod = pytest.importorskip("refattn.features.fwht")

import accel  # noqa: E402
from tests.accel.helpers import unwrap as _unwrap  # noqa: E402
from accel.numba import fwht as nfwht  # noqa: E402
from refattn import _dispatch  # noqa: E402
from tests.helpers import get_namespace  # noqa: E402
from validation import check_vjp  # noqa: E402

DTYPES = nfwht.SUPPORTED["fwht"]["dtypes"]
NP_XP = get_namespace("numpy")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (2,), (5, 8), (2, 3, 64), (3, 1024)], ids=str)
def test_kernel_equals_reference_bitwise(rng, dtype, shape):
    x = rng.standard_normal(shape).astype(dtype)
    x_before = x.copy()
    y = nfwht.fwht(x)
    y0 = _dispatch.reference("fwht")(x, xp=NP_XP)
    assert y.dtype == y0.dtype and y.shape == y0.shape
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(x, x_before)                        # the input is not transformed in place


def test_equals_dense_hadamard(rng):
    D = 16
    H = np.array([[1.0]])
    while H.shape[0] < D:
        H = np.block([[H, H], [H, -H]])
    x = rng.standard_normal((3, D))
    np.testing.assert_allclose(nfwht.fwht(x), x @ H, rtol=1e-13, atol=1e-13)


def test_public_fwht_under_use(rng):
    x = rng.standard_normal((2, 3, 32))
    y0 = fwht_mod.fwht(x)
    with accel.use("numba"):
        assert _unwrap(_dispatch.kernel_for("fwht")) is nfwht.fwht
        y1 = fwht_mod.fwht(x)
        check_vjp(fwht_mod.fwht_fwd, fwht_mod.fwht_bwd, dict(x=x))
    np.testing.assert_array_equal(y1, y0)


def test_errors():
    with pytest.raises(ValueError,
                       match=r"x: the FWHT needs a last axis of power-of-two length.*got shape \(2, 6\)"):
        nfwht.fwht(np.ones((2, 6)))
    with pytest.raises(TypeError, match=r"x: numba kernels take NumPy arrays; got array_api_strict\.Array"):
        nfwht.fwht(get_namespace("array_api_strict").ones((2, 4)))
    with pytest.raises(TypeError, match=r"supports dtypes float32, float64; got dtype float16"):
        nfwht.fwht(np.ones((2, 4), dtype=np.float16))
