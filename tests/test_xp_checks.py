"""The check family of refattn._xp (integers, choices, shapes, namespaces): value first, name second, one
message style."""

import numpy as np
import pytest

from refattn._xp import check_choice, check_nonneg_int, check_positive_int, check_shape


def test_positive_int_accepts_and_returns_int():
    assert check_positive_int(3, "m") == 3
    out = check_positive_int(np.int64(5), "m")
    assert out == 5 and type(out) is int


@pytest.mark.parametrize("value, exc, match", [
    (0, ValueError, r"^m: expected a positive integer; got 0$"),
    (-2, ValueError, r"^m: expected a positive integer; got -2$"),
    (2.5, TypeError, r"^m: expected a positive integer; got 2.5 of type builtins.float$"),
    (True, TypeError, r"^m: expected a positive integer; got the bool True$"),
    ("3", TypeError, r"^m: expected a positive integer; got '3' of type builtins.str$"),
])
def test_positive_int_rejects(value, exc, match):
    with pytest.raises(exc, match=match):
        check_positive_int(value, "m")


def test_nonneg_int():
    assert check_nonneg_int(0, "k") == 0
    assert check_nonneg_int(np.int32(7), "k") == 7
    with pytest.raises(ValueError, match=r"^k: expected a non-negative integer; got -1$"):
        check_nonneg_int(-1, "k")
    msg = r"^k: expected a non-negative integer; got 1.0 of type builtins.float$"
    with pytest.raises(TypeError, match=msg):
        check_nonneg_int(1.0, "k")


def test_choice():
    assert check_choice("raise", "on_nonpositive", ("raise", "ignore")) == "raise"
    with pytest.raises(ValueError, match=r"^on_nonpositive: expected one of 'raise', 'ignore'; got 'warn'$"):
        check_choice("warn", "on_nonpositive", ("raise", "ignore"))
    with pytest.raises(ValueError, match=r"^x: expected one of 1, 2; got \[1\]$"):
        check_choice([1], "x", {1: "a", 2: "b"})


def test_namespace_lookups_remembered_per_type_still_refuse_mixtures_and_bad_dtypes():
    """namespace() remembers each array type's library and each dtype's class; what it refused before it has
    seen a type must still be refused after."""
    strict = pytest.importorskip("array_api_strict")
    from refattn._xp import namespace
    a, b = np.ones(2), strict.ones(2)
    for _ in range(2):                                        # the second round runs on remembered answers
        assert namespace(a) is namespace(a, a)
        assert namespace(b) is strict
        with pytest.raises(TypeError, match="several libraries"):
            namespace(a, b, names=("a", "b"))
        with pytest.raises(TypeError, match="float16 is not supported"):
            namespace(np.ones(2, np.float16), names=("h",))
        with pytest.raises(TypeError, match="expected a real floating dtype"):
            namespace(np.arange(2), names=("i",))
        assert namespace(np.arange(2), names=("i",), allow_int=("i",)) is namespace(a)
        with pytest.raises(TypeError, match="differs from"):
            namespace(a, np.ones(2, np.float32), names=("a", "f"))
        with pytest.raises(TypeError, match="expected an array"):
            namespace([1.0], names=("lst",))


def test_shape_spec_fixed_sizes_named_axes_and_batch():
    """A spec's integer literals fix a size (every time: specs are parsed once and remembered), its names
    bind across the arguments of one call, ``...`` binds the leading axes."""
    x = np.zeros((2, 5, 3))
    sizes = check_shape("x", x, "..., L, 3")
    assert sizes == {"L": (5, "x"), "...": ((2,), "x")}
    for _ in range(2):                                     # the remembered parse still refuses
        with pytest.raises(ValueError, match=r"^x: expected shape \(\.\.\., L, 4\) .*; got \(2, 5, 3\)$"):
            check_shape("x", x, "..., L, 4")
    with pytest.raises(ValueError, match=r"^y: expected shape \(\.\.\., L, 3\) with \.\.\. = \(2,\) "
                                         r"\(from x\), L = 5 \(from x\); got \(2, 6, 3\)$"):
        check_shape("y", np.zeros((2, 6, 3)), "..., L, 3", sizes)
    with pytest.raises(ValueError, match=r"leading batch axes must be equal"):
        check_shape("z", np.zeros((4, 5, 3)), "..., L, 3", sizes)
    with pytest.raises(ValueError, match=r"^w: expected shape \(L, 3\); got \(5,\) \(expected 2 dimensions, "
                                         r"got 1\)$"):
        check_shape("w", np.zeros(5), "L, 3")
