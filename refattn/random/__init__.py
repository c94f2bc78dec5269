"""NumPy-only edge: every random draw of refattn is made in this package from a ``numpy.random.Generator``.

One module per family: ``performer`` (Gaussian and Haar-orthogonal projections), ``spectra`` (KL-Transformer
GMM / FastFood / generator noise), ``positional`` (S1 frequencies, FLT frequency draws); everything is
re-exported here, so ``refattn.random.draw_gaussian`` works.

The core never draws: feature maps and attention take the drawn arrays (``omega``, FastFood's diagonals, ...),
so queries and keys share one draw by construction. Draws are returned as NumPy arrays; move them to another
array library with :func:`as_xp` (``as_xp(omega, like=x)``), an explicit, small transfer.

Conventions (style.md 2.6):

* ``rng`` is the required first argument of every ``draw_*``/``init_*`` function and must be a
  ``numpy.random.Generator``; ``None`` is rejected (a reference library never draws fresh entropy silently);
* independent streams are split with ``rng.spawn(n)`` / ``SeedSequence.spawn``, never re-seeded with
  neighbouring integers;
* redraw policies are pure functions of a step counter (:func:`rng_for_step`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._xp import device_of, namespace

__all__ = ["check_rng", "as_xp", "rng_for_step", "check_dtype_arg"]


def check_rng(rng: Any, name: str = "rng") -> np.random.Generator:
    """Return `rng` if it is a ``numpy.random.Generator``; raise ``TypeError`` otherwise (``None`` included)."""
    if not isinstance(rng, np.random.Generator):
        got = "None" if rng is None else type(rng).__name__
        raise TypeError(
            f"{name}: expected a numpy.random.Generator (e.g. numpy.random.default_rng(0)); got {got}. "
            "refattn never draws fresh entropy silently"
        )
    return rng


def check_dtype_arg(dtype: Any, name: str = "dtype") -> np.dtype:
    """Return `dtype` as a NumPy real floating dtype (float32 or float64); raise ``TypeError`` otherwise."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name}: expected float32 or float64; got {dtype!r}") from None
    if dt not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64; got {dt}")
    return dt


def as_xp(arr: Any, *, like: Any) -> Any:
    """`arr` (a NumPy draw) as an array of `like`'s namespace, device and dtype (an explicit transfer)."""
    xp = namespace(like, names=("like",))
    return xp.asarray(np.asarray(arr), dtype=like.dtype, device=device_of(like))


def rng_for_step(seed: int, step: int, every: int | None) -> np.random.Generator:
    """The generator for training step `step` under a redraw policy, a pure function of its arguments.

    ``every=None`` (fixed features): one draw for all steps; ``every=k``: a fresh draw every k steps
    (``every=1``: every step). Seeds ``[seed, step // every]`` so a rerun redraws the same arrays at the same
    steps.
    """
    if every is None:
        return np.random.default_rng([int(seed), 0, 0])
    if every <= 0:
        raise ValueError(f"every: expected a positive integer or None; got {every}")
    return np.random.default_rng([int(seed), 1, int(step) // int(every)])


# Family modules (each re-exports its draw_*/init_* functions through its __all__).
from .nn import *  # noqa: E402,F401,F403  (nn layer inits, dropout masks, tree transfers)
from .nn import __all__ as _nn_all  # noqa: E402
__all__ += list(_nn_all)
from .performer import *  # noqa: E402,F401,F403  (Performer projections: Gaussian, Haar-orthogonal)
__all__ += ["draw_gaussian", "draw_orthogonal"]
from .spectra import *  # noqa: E402,F401,F403  (KL-Transformer spectra: GMM, FastFood, generator noise)
from .spectra import __all__ as _spectra_all  # noqa: E402
__all__ += list(_spectra_all)
from .positional import *  # noqa: E402,F401,F403  (S1 frequency inits; FLT draws)
from .positional import __all__ as _positional_all  # noqa: E402
__all__ += list(_positional_all)
