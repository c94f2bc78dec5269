"""The claim runs of :mod:`tests.paper_checks.baseline` shared by the run's xdist workers."""

from __future__ import annotations

import os

import pytest

from . import baseline


@pytest.fixture(autouse=True, scope="session")
def _share_claim_runs(tmp_path_factory):
    # an xdist worker's base temp is <the run's base temp>/popen-gwN: its parent is the run's, the same for
    # every worker and new for every run
    base = tmp_path_factory.getbasetemp()
    baseline.share_in((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "claim-runs")
