"""Targets that misbehave as untrusted code does: exit, crash, hang, print, change their inputs in place.

``tests/validation/test_worker.py`` runs them in the worker process (``validation.worker``) and through
``python -m validation check``; with ``VALIDATION_TEST_EXIT_AT_IMPORT=1`` in the environment, importing this
module ends the process (``os._exit(0)``) before anything is defined.
"""

from __future__ import annotations

import os
import sys
import time

from refattn.attention import favor_attention
from refattn.features import positive_features

if os.environ.get("VALIDATION_TEST_EXIT_AT_IMPORT"):
    os._exit(0)


def exits(q, k, v, omega, causal):
    """``sys.exit(0)`` in a call: a CI job would read status 0 as "passed"."""
    sys.exit(0)


def aborts(q, k, v, omega, causal):
    """A crash: SIGABRT."""
    os.abort()


def hangs(q, k, v, omega, causal):
    """Never returns."""
    time.sleep(3600)


def chatty(q, k, v, omega, causal):
    """Correct FAVOR+, printing on stdout and stderr at every call."""
    print("chatty: a line on stdout")
    print("chatty: a line on stderr", file=sys.stderr)
    return favor_attention(q, k, v, omega, causal=causal)


def zero_q(q, k, v, omega, causal):
    """Wrong: zeroes q in place and attends with it (uniform attention). With the reference computed after
    the call on the same arrays, it would pass ``values`` with error 0."""
    q[...] = 0
    return favor_attention(q, k, v, omega, causal=causal)


def scale_q(q, k, v, omega, causal):
    """Correct output, but q is scaled in place (and the scale undone in the computation)."""
    q *= 2.0
    return favor_attention(q / 2.0, k, v, omega, causal=causal)


def scale_omega(x, omega):
    """Correct positive features; omega is halved in place (and doubled back in the computation)."""
    omega /= 2.0
    return positive_features(x, 2.0 * omega)
