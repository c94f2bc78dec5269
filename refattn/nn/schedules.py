r"""Learning-rate schedules as pure functions of the step (0-based), so that a rerun uses the same rates.

A schedule is a plain dict (JSON-serialisable, recorded with a training run)::

    {"warmup_steps": W, "decay": None | "cosine" | "inverse_sqrt", "total_steps": T, "min_lr": lr_min}

:func:`learning_rate` gives the rate of step t for a base rate ``lr``: ``lr`` times the linear warm-up
(:func:`warmup_factor`), then decayed towards ``lr_min`` by :func:`cosine_factor` or by
:func:`inverse_sqrt_factor` (``decay=None``: constant after the warm-up).
"""

from __future__ import annotations

import math

from .._xp import check_choice, check_nonneg_int, check_positive_int

__all__ = ["check_schedule", "learning_rate", "warmup_factor", "cosine_factor", "inverse_sqrt_factor"]

_DEFAULTS = {"warmup_steps": 0, "decay": None, "total_steps": None, "min_lr": 0.0}


def check_schedule(schedule) -> dict:
    r"""Validate a learning-rate schedule dict and return it with the defaults filled in.

    Parameters
    ----------
    schedule : dict or None
        ``{"warmup_steps", "decay", "total_steps", "min_lr"}`` (module docstring); None: constant rate.

    Returns
    -------
    dict
        A new dict with all four keys (defaults: no warm-up, no decay, ``min_lr=0.0``).

    Raises
    ------
    TypeError, ValueError
        `schedule` neither a dict nor None; an unknown key or a bad value (cosine decay needs ``total_steps >
        warmup_steps``).
    """
    if schedule is None:
        schedule = {}
    if not isinstance(schedule, dict):
        raise TypeError(f"schedule: expected a dict or None; got {type(schedule).__name__}")
    unknown = sorted(set(schedule) - set(_DEFAULTS))
    if unknown:
        raise ValueError(f"schedule: unknown key(s) {unknown}; accepted: {sorted(_DEFAULTS)}")
    s = {**_DEFAULTS, **schedule}
    s["warmup_steps"] = check_nonneg_int(s["warmup_steps"], "schedule['warmup_steps']")
    check_choice(s["decay"], "schedule['decay']", (None, "cosine", "inverse_sqrt"))
    if s["decay"] == "cosine":
        if s["total_steps"] is None:
            raise ValueError("schedule['total_steps']: required for decay='cosine' (the step where it "
                             "reaches min_lr)")
        s["total_steps"] = check_positive_int(s["total_steps"], "schedule['total_steps']")
        if s["total_steps"] <= s["warmup_steps"]:
            raise ValueError(f"schedule['total_steps']: expected more than warmup_steps = "
                             f"{s['warmup_steps']}; got {s['total_steps']}")
    if not (isinstance(s["min_lr"], (int, float)) and math.isfinite(s["min_lr"]) and s["min_lr"] >= 0):
        raise ValueError(f"schedule['min_lr']: expected a finite number >= 0; got {s['min_lr']!r}")
    return s


def warmup_factor(step: int, warmup_steps: int) -> float:
    r"""Linear warm-up factor ``(t + 1) / W`` at step ``t < W`` (0-based), else 1 (Goyal et al. 2017)."""
    return (step + 1) / warmup_steps if step < warmup_steps else 1.0


def cosine_factor(step: int, warmup_steps: int, total_steps: int) -> float:
    r"""Cosine decay factor ``(1 + cos(pi p)) / 2``, ``p = (t - W) / (T - W)`` clipped to [0, 1] (Loshchilov &
    Hutter 2017, without restarts): the rate is ``lr_min + (lr - lr_min) factor``."""
    p = min(max((step - warmup_steps) / (total_steps - warmup_steps), 0.0), 1.0)
    return 0.5 * (1.0 + math.cos(math.pi * p))


def inverse_sqrt_factor(step: int, warmup_steps: int) -> float:
    r"""Inverse-sqrt decay factor ``sqrt(max(W, 1) / (t + 1))`` for ``t >= W``, 1 before: Vaswani et al.
    Sec. 5.3's ``d^-0.5 min(t^-0.5, t W^-1.5)`` normalised to peak at ``lr`` and continuous at W."""
    if step < warmup_steps:
        return 1.0
    return math.sqrt(max(warmup_steps, 1) / (step + 1))


def learning_rate(step: int, *, lr: float, schedule=None) -> float:
    r"""The learning rate of step `step` (0-based) for base rate `lr` under `schedule` (module docstring).

    Parameters
    ----------
    step : int
        The step, >= 0.
    lr : float
        Base (peak) rate, finite and > 0.
    schedule : dict, optional
        A schedule (:func:`check_schedule`); None: constant `lr`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        A bad `step`, `lr` or schedule.

    Examples
    --------
    >>> from refattn.nn.schedules import learning_rate
    >>> schedule = {"warmup_steps": 2, "decay": "cosine", "total_steps": 4}
    >>> [round(learning_rate(t, lr=1.0, schedule=schedule), 3) for t in range(5)]
    [0.5, 1.0, 1.0, 0.5, 0.0]
    """
    s = check_schedule(schedule)
    step = check_nonneg_int(step, "step")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr: expected a finite number > 0; got {lr!r}")
    rate = lr * warmup_factor(step, s["warmup_steps"])
    if s["decay"] == "cosine":
        return s["min_lr"] + (rate - s["min_lr"]) * cosine_factor(step, s["warmup_steps"], s["total_steps"])
    if s["decay"] == "inverse_sqrt":
        return rate * inverse_sqrt_factor(step, s["warmup_steps"])
    return rate
