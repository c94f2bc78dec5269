"""The state one run of checks shares: the candidate, its framework, sizes, seeded generators, and the calls.

Every check receives a :class:`Ctx`. ``ctx.call(*args)`` calls the candidate with NumPy arrays converted to
its framework and returns NumPy (``raw=True`` keeps the framework's array, for the dtype check).
``ctx.rng(*key)`` is a generator seeded from the run's seed and a label, so each check draws the same inputs
whatever ran before.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import zlib
from typing import Any, Callable

import numpy as np

from refattn.random import draw_gaussian

from ..assertions import default_rtol
from ..base import Framework, UsageError

__all__ = [
    "ALPHA",
    "Sizes",
    "SIZES",
    "QUICK",
    "Ctx",
    "CONTRACT",
    "combine",
    "gradfn",
    "check_signature",
    "probe",
    "tol",
    "zcrit",
    "kernel_points",
    "mc_z",
    "convert",
    "nonfinite_text",
    "rel_err",
]

#: false-alarm probability of each statistical check (haar, unbiased, kernel)
ALPHA = 1e-3


@dataclasses.dataclass(frozen=True)
class Sizes:
    d: int = 16
    n_draws: int = 2000     # draw kind: candidate draws (haar, unbiased)
    n_kernel: int = 1000    # features kind: omega draws for kernel / unbiased
    m_kernel: int = 64
    n_attn: int = 8         # attention kind: omega draws for kernel / same_features
    m_attn: int = 1024
    L_attn: int = 32


SIZES = Sizes()
QUICK = Sizes(n_draws=400, n_kernel=300, n_attn=4)


def tol(dtype) -> float:
    """Tolerance of the exact comparisons: ``4 sqrt(eps(dtype))`` (``validation.assertions.default_rtol``)."""
    return default_rtol(np.dtype(dtype).name)


def zcrit(n_tests: int, alpha: float = ALPHA) -> float:
    """Two-sided normal critical value for `n_tests` z-scores at family-wise false alarm `alpha`."""
    import scipy.stats      # here, not at the top: it is most of the CLI's start-up, which --help never needs
    return float(scipy.stats.norm.isf(alpha / (2 * n_tests)))


def mc_z(mt) -> float:
    """The figure of a ``validation.montecarlo.mean_test`` result, such that ``figure <= n_se`` iff passed:
    its max |z| over positive-SE entries; inf when the mean is not finite or a zero-SE entry misses its exact
    comparison; capped at ``n_se`` when the test's absolute slack (atol) covers a larger z."""
    if not np.all(np.isfinite(mt.mean)):
        return math.inf
    if mt.passed:
        return min(float(mt.z), float(mt.n_se))
    return float(mt.z) if mt.z > mt.n_se else math.inf        # failed within n_se: a zero-SE entry is off


class Ctx:
    """One run: candidate `fn` in `fw`'s arrays, its kind, claimed family (name, spec), dtype, seed, sizes."""

    def __init__(self, fn, fw: Framework, kind, family, dtype, seed, sizes, name, spec=None):
        self.fn, self.fw, self.kind, self.family = fn, fw, kind, family
        self.dtype, self.seed, self.s, self.name = np.dtype(dtype), seed, sizes, name
        self.spec = spec                       # a validation.families spec, or None for the omega contract
        self.cache: dict[str, Any] = {}

    def rng(self, *key: str) -> np.random.Generator:
        return np.random.default_rng([self.seed] + [zlib.crc32(k.encode()) for k in key])

    def normal(self, rng, *shape, scale=1.0, dtype=None):
        return (scale * rng.standard_normal(shape)).astype(dtype or self.dtype)

    def omega(self, rng, m, dtype=None):
        return draw_gaussian(rng, m, self.s.d, dtype=dtype or self.dtype)

    def call(self, *args, raw=False):
        """The candidate on `args` (NumPy arrays converted to its framework; other values passed as given)."""
        fw = self.fw
        conv = [convert(fw, a) for a in args]
        out = combine(self.fn(*conv), self.kind)
        if not fw.is_array(out):
            raise UsageError(f"{self.name}: returned {type(out).__name__}; expected a {fw.name} array")
        return out if raw else fw.to_numpy(out)


def nonfinite_text(a: np.ndarray, what: str = "outputs") -> str:
    """The non-finite entries of `a` in words (``"3 of 128 outputs are NaN, 1 is inf"``), or ``""``."""
    a = np.asarray(a)
    n_nan, n_inf = int(np.sum(np.isnan(a))), int(np.sum(np.isinf(a)))
    if n_nan + n_inf == 0:
        return ""
    parts = [f"{n} {'is' if n == 1 else 'are'} {kind}" for n, kind in ((n_nan, "NaN"), (n_inf, "inf")) if n]
    return f"{n_nan + n_inf} of {a.size} {what} are not finite ({', '.join(parts)})"


def rel_err(y: np.ndarray, ref: np.ndarray) -> float:
    """``max |y - ref| / max |ref|`` (inf when `y` is not finite; the absolute error when ref is all zeros),
    without NumPy warnings."""
    y, ref = np.asarray(y, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(y)):
        return math.inf
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = float(np.max(np.abs(y - ref))) if y.size else 0.0
    return err / scale if scale > 0 else err


def convert(fw: Framework, a: Any) -> Any:
    """NumPy arrays (also in dicts and lists) as the candidate framework's arrays; other values as given."""
    if isinstance(a, np.ndarray):
        return fw.asarray(a)
    if isinstance(a, dict):
        return {k: convert(fw, v) for k, v in a.items()}
    if isinstance(a, list):
        return [convert(fw, v) for v in a]
    return a


def combine(out, kind):
    """``(phi, log_scale)`` -> ``phi * exp(log_scale)[..., None]`` in the candidate's own framework."""
    if kind == "features" and isinstance(out, tuple) and len(out) == 2:
        import array_api_compat
        phi, ls = out
        if (
            array_api_compat.is_array_api_obj(phi)
            and array_api_compat.is_array_api_obj(ls)
            and ls.ndim == phi.ndim - 1
        ):
            xp = array_api_compat.array_namespace(phi)
            return phi * xp.exp(ls)[..., None]
    return out


def gradfn(fn, kind):
    """The candidate with a stabilised ``(phi, log_scale)`` output combined, for autograd."""
    if kind == "features":
        return lambda *a: combine(fn(*a), kind)
    return fn


CONTRACT = {"draw": "fn(seed, m, d) -> omega (m, d)", "features": "fn(x, omega) -> phi (..., L, m')",
            "attention": "fn(q, k, v, omega, causal) -> out (..., L, d_v)"}
N_ARGS = {"draw": 3, "features": 2, "attention": 5}


def contract(kind: str, spec=None) -> tuple[str, int]:
    """The contract text and the number of positional arguments of `kind` (a family's own when `spec`)."""
    if spec is not None:
        return spec.signature, len(spec.arg_names)
    return CONTRACT[kind], N_ARGS[kind]


def check_signature(fn, kind, name, spec=None):
    if not callable(fn):
        raise UsageError(f"{name}: {type(fn).__name__} object is not callable")
    text, n = contract(kind, spec)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return                                                     # builtins without a signature: try calling
    try:
        sig.bind(*range(n))
    except TypeError as e:
        raise UsageError(f"{name}: signature {sig} does not fit the {kind} contract {text} ({e})") from None


def probe(ctx: Ctx):
    """One call with small inputs: the candidate must run and return the contract's shape (or UsageError)."""
    d, rng = ctx.s.d, ctx.rng("probe")
    text, _ = contract(ctx.kind, ctx.spec)
    try:
        if ctx.spec is not None:
            ok, out, want = ctx.spec.probe(ctx, rng)
        elif ctx.kind == "draw":
            m = 2 * d
            out = np.asarray(ctx.call(ctx.seed, m, d))
            want = (m, d)
            ok = out.shape == want
        elif ctx.kind == "features":
            x, om = ctx.normal(rng, 2, 3, 5, d, scale=0.5), ctx.omega(rng, 8)
            out = ctx.call(x, om)
            want = "(2, 3, 5, m')"
            ok = out.ndim == 4 and out.shape[:3] == (2, 3, 5) and out.shape[3] >= 1
        else:
            q, k, v = (ctx.normal(rng, 2, 3, 5, d, scale=0.5) for _ in range(3))
            out = ctx.call(q, k, v, ctx.omega(rng, 8), False)
            want = (2, 3, 5, d)
            ok = out.shape == want
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - the candidate's failure, reported as a usage problem
        raise UsageError(f"{ctx.name}: raised {type(e).__name__} on a probe call of the {ctx.kind} contract "
                         f"{text}: {e}") from None
    if not ok:
        raise UsageError(f"{ctx.name}: returned shape {tuple(out.shape)} on the probe call; the {ctx.kind} "
                         f"contract {text} expects {want}")


def kernel_points(d: int, rng: np.random.Generator, r: float) -> dict[str, np.ndarray]:
    """Four points of norm `r`: along e1, the all-ones direction and two random directions."""
    e1 = np.eye(d)[0]
    ones = np.ones(d) / math.sqrt(d)
    rnd = rng.standard_normal((2, d))
    rnd /= np.linalg.norm(rnd, axis=-1, keepdims=True)
    return {"e1": r * e1, "all-ones": r * ones, "random-1": r * rnd[0], "random-2": r * rnd[1]}


def feature_estimates(ctx: Ctx, X: np.ndarray, draw: Callable, n: int, m: int) -> np.ndarray:
    """(n, P, P) kernel estimates phi(X) phi(X)^T from n calls of the candidate, omegas `draw(rng, m)`."""
    rng = ctx.rng("features-draws", str(X.shape), str(n))
    Xc = X.astype(ctx.dtype)[None, None]                                                   # (1, 1, P, d)
    est = np.empty((n, X.shape[0], X.shape[0]))
    for t in range(n):
        phi = ctx.call(Xc, draw(rng, m))[0, 0].astype(np.float64)                          # (P, m')
        est[t] = phi @ phi.T
    return est
