"""refattn.limits: the allocation bound is scoped, validated, and fails before allocating with a message
naming what asked."""

import contextvars
import doctest

import pytest

from refattn import limits


def test_doctest():
    assert doctest.testmod(limits, optionflags=doctest.ELLIPSIS).failed == 0


def test_scoped_bound_and_restore():
    before = limits.get_max_bytes()
    with limits.max_bytes(100):
        assert limits.get_max_bytes() == 100
        limits.check_nbytes(100, "x")                    # at the bound: allowed
        with pytest.raises(MemoryError, match=r"^config\['m'\]: this request needs 101 bytes"):
            limits.check_nbytes(101, "config['m']")
    assert limits.get_max_bytes() == before


def test_set_max_bytes_is_context_local():
    def inner():
        previous = limits.set_max_bytes(7)
        return previous, limits.get_max_bytes()

    previous, inside = contextvars.copy_context().run(inner)
    assert inside == 7 and previous == limits.get_max_bytes() != 7


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "lots", None])
def test_bad_bound_rejected(bad):
    with pytest.raises(ValueError, match="expected a positive integer number of bytes"):
        limits.set_max_bytes(bad)
