"""Where the outside sources are: ``REFATTN_CONFORMANCE_SOURCES`` names the directory laid out by
``python -m validation.conformance.layout``; a test of a checkout that is absent skips."""

import os

import pytest


@pytest.fixture
def sources():
    """``sources(subdir)``: the sources directory, or a skip when it or its entry `subdir` is absent."""
    def get(subdir):
        root = os.environ.get("REFATTN_CONFORMANCE_SOURCES")
        if not root or not os.path.isdir(os.path.join(root, subdir)):
            pytest.skip(f"needs the checkout {subdir} under REFATTN_CONFORMANCE_SOURCES")
        return root
    return get
