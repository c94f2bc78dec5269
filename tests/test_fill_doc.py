"""``refattn._docs.fill_doc``: a block lands at its placeholder's indentation; a stale block is refused."""

import pytest

from refattn._docs import fill_doc

BLOCK = """
x : array, shape (..., L, d)
    Inputs, :math:`{x}` left alone.
"""


def test_block_filled_at_the_placeholder_indentation():
    @fill_doc(params=BLOCK)
    def f(x):
        """One line.

        Parameters
        ----------
        {params}
        """

    assert f.__doc__.splitlines() == ["One line.", "", "Parameters", "----------",
                                      "x : array, shape (..., L, d)", "    Inputs, :math:`{x}` left alone."]


def test_missing_placeholder_is_an_error():
    with pytest.raises(ValueError, match=r"has no line '\{params\}'"):
        @fill_doc(params=BLOCK)
        def g(x):
            """One line without the placeholder."""
