"""The runner: resolve a TARGET, pick the checks of its kind (and claimed family), run them into a Report.

A TARGET string naming a module or file runs in a worker process (:mod:`validation.worker`: one per run,
a time limit per call, output captured); a callable object and the built-in targets run in this process
unless ``isolate=True``. Either way the candidate gets copies of its inputs and an in-place change fails the
run (the ``inputs`` row).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from .base import Framework, TargetError, UsageError
from .checks.catalog import CHECKS, KIND_CHECKS, KINDS, RUNNERS
from .checks.context import QUICK, SIZES, Ctx, check_signature, probe
from .checks.favor import ATTENTION_FAMILIES, FEATURE_FAMILIES, RENAMED
from .checks.report import CheckResult, Report
from .crosscheck.registry import BUILTIN_TARGETS, get_framework
from .families.catalog import FAMILIES
from .worker import ARG_NAMES, DEFAULT_TIMEOUT, InputLog, RemoteFramework, RemoteTarget, Worker, guarded, \
    resolve_target, target_problem

__all__ = ["check", "resolve_target", "known_families", "validate_options", "DEFAULT_TIMEOUT"]


def known_families(kind: str) -> list[str]:
    """Family names accepted by ``--as`` for `kind` (omega-contract families and the papers' families)."""
    omega = FEATURE_FAMILIES if kind == "features" else ATTENTION_FAMILIES if kind == "attention" else ()
    return sorted(omega) + sorted(n for n, s in FAMILIES.items() if kind in s.kinds)


def validate_options(kind: str, dtype: str, family: str | None, checks: tuple[str, ...] | None) -> list[str]:
    """Problems with the options (one message each; empty when all are valid)."""
    bad = []
    if kind not in KINDS:
        bad.append(f"kind: unknown kind {kind!r}; expected one of {KINDS}")
    if dtype not in ("float32", "float64"):
        bad.append(f"dtype: expected 'float32' or 'float64'; got {dtype!r}")
    if family is not None and kind in KINDS and family not in known_families(kind):
        hint = f" ({family!r} is now {RENAMED[family]})" if family in RENAMED else ""
        bad.append(f"--as {family!r}: unknown family for kind {kind}{hint}; expected one of "
                   f"{known_families(kind)}")
    if checks is not None:
        unknown = [c for c in checks if c not in CHECKS]
        if unknown:
            bad.append(f"checks: unknown check(s) {unknown}; expected names from {CHECKS}")
    return bad


def check(fn: Callable[..., Any] | str, *, kind: str, framework: str | None = None, family: str | None = None,
          dtype: str = "float64", seed: int = 0, quick: bool = False, checks: tuple[str, ...] | None = None,
          name: str | None = None, isolate: bool | None = None, timeout: float = DEFAULT_TIMEOUT,
          worker: Worker | None = None) -> Report:
    """Cross-check a candidate against refattn (contracts and checks: :mod:`validation.checks.catalog`).

    Parameters
    ----------
    fn : callable or str
        The candidate, or a TARGET string (built-in name, ``module:callable``, ``path.py:callable``).
    kind : {"draw", "features", "attention"}
    framework : {"numpy", "torch", "jax"}, optional
        The candidate's array framework (default: numpy, or the built-in target's own).
    family : str, optional
        The refattn map the candidate claims (``--as``): the omega contract's ``positive``,
        ``positive-scaled``, ``hyperbolic``, ``gaussian-positive``, ``gaussian-trig``, ``softmax-trig``
        (attention ``positive``, ``hyperbolic``, ``softmax-trig``, ``gaussian-trig``; default positive;
        the old name ``trig`` is refused with a hint naming its two successors), or one of the papers'
        families with its
        own contract (:data:`validation.families.FAMILIES`: ``gmm-rks``, ``gmm-prf``, ``fastfood-rks``,
        ``fastfood-prf``, ``generative-rks``, ``generative-prf``, ``s1``, ``s2``, ``flt``).
    dtype : {"float32", "float64"}
        Input dtype of the checks (``dtype`` always tries both).
    seed : int
        Every random input and draw derives from it.
    quick : bool
        Smaller Monte Carlo sizes (<= 15 s per target).
    checks : tuple of str, optional
        Run only these (of the kind's checks).
    name : str, optional
        The target's name in the report.
    isolate : bool, optional
        Run the target in a worker process (:mod:`validation.worker`). Default: True for a ``module:callable``
        or ``file.py:callable`` string (and whenever `worker` is given), False for a built-in target name and
        for a callable object (which cannot be isolated: pass its TARGET string instead).
    timeout : float
        Seconds each request to the worker may take (a call, an autograd product, the import of the target);
        default :data:`DEFAULT_TIMEOUT` (60 s). Not applied in-process.
    worker : Worker, optional
        A running worker to load the target into (a test suite shares one); by default each isolated run
        starts its own and stops it at the end.

    Returns
    -------
    Report
        One :class:`CheckResult` per check run (``passed`` True, False or None when skipped, the figure, its
        threshold and a one-line detail); ``report.passed`` is True when no check failed, ``report[name]``
        gives one check, ``str(report)`` the table that ``python -m validation check`` prints. A candidate
        that changed an input in place gets a failing ``inputs`` row naming it; ``report.output`` is what
        an isolated target wrote to stdout and stderr.

    Raises
    ------
    UsageError
        (a ``ValueError``) unknown kind/framework/family/dtype/check, a TARGET whose file, module or attribute
        does not exist, a candidate with the wrong signature, one that raises on the probe call or returns the
        wrong shape.
    TargetError
        (a ``RuntimeError``) the target could not be run: its import raised, it exited, crashed or did not
        answer within `timeout` (``.report``: the checks finished before; ``.output``: what it printed).

    Examples
    --------
    A hand-written FAVOR+ feature map (Choromanski et al.'s positive features, ``omega: (m, d)``), checked
    as the refattn family ``positive``:

    >>> import numpy as np
    >>> from validation import check
    >>> def my_features(x, omega):                      # x: (..., L, d) -> (..., L, m)
    ...     m = omega.shape[0]
    ...     return np.exp(x @ omega.T - 0.5 * np.sum(x * x, axis=-1, keepdims=True)) / m ** 0.5
    >>> report = check(my_features, kind="features", family="positive", quick=True)
    >>> report.passed
    True
    >>> [(c.name, c.passed) for c in report.checks]    # None: skipped (NumPy has no autodiff)
    [('values', True), ('gradients', None), ('kernel', True), ('unbiased', True), ('dtype', True)]

    The same map with the wrong normalisation (``1/m`` for ``1/sqrt(m)``) is caught:

    >>> def wrong_features(x, omega):
    ...     return my_features(x, omega) / omega.shape[0] ** 0.5
    >>> report = check(wrong_features, kind="features", family="positive", quick=True)
    >>> report.passed, report["values"].passed, report["kernel"].passed
    (False, False, False)
    """
    t0 = time.perf_counter()
    problems = validate_options(kind, dtype, family, checks)
    if problems:
        raise UsageError("; ".join(problems))
    if isolate is None:
        isolate = worker is not None or (isinstance(fn, str) and fn not in BUILTIN_TARGETS)
    if isolate:
        if not isinstance(fn, str):
            raise UsageError(f"isolate: a callable object runs in this process; pass its TARGET string "
                             f"(module:callable or file.py:callable) to run it in a worker; got {fn!r}")
        problem = target_problem(fn)
        if problem:                                   # before a worker starts
            raise UsageError(problem)
        if framework is not None:
            get_framework(framework)                  # unknown or not installed: before a worker starts
        own = worker is None
        w = Worker(timeout) if own else worker
        try:
            return _run_isolated(w, fn, kind, framework, family, dtype, seed, quick, checks, name or fn, t0)
        finally:
            if own:
                w.close()
    note = ""
    if isinstance(fn, str):
        name = name or fn
        fn, framework, fam0, note = resolve_target(fn, kind, framework, family)
        family = family or fam0
    name = name or getattr(fn, "__qualname__", None) or repr(fn)
    fw = get_framework(framework or "numpy")
    spec = FAMILIES[family].contract(kind) if family in FAMILIES else None
    check_signature(fn, kind, name, spec)
    log = InputLog()
    names = tuple(spec.arg_names) if spec is not None else ARG_NAMES[kind]
    fn = guarded(fn, fw, names, log)
    return _run(fn, fw, log, kind, family, dtype, seed, quick, checks, name, note, t0)


def _run_isolated(w: Worker, target: str, kind, framework, family, dtype, seed, quick, checks, name, t0):
    try:
        fw_name, fam0, note = w.load(target, kind, framework, family, name)
        real = get_framework(fw_name)
        rep = _run(RemoteTarget(w), RemoteFramework(w, real), w.log, kind, family or fam0, dtype, seed, quick,
                   checks, name, note, t0)
    except TargetError as e:
        e.output = w.output()
        raise
    rep.output = w.output()
    return rep


def _run(fn: Callable, fw: Framework, log: InputLog, kind, family, dtype, seed, quick, checks, name, note,
         t0) -> Report:
    """The checks of `kind` (or of `family`'s contract) on the guarded candidate `fn`."""
    spec = FAMILIES.get(family) if family is not None else None
    todo = spec.checks[kind] if spec is not None else KIND_CHECKS[kind]
    if checks is not None:
        todo = tuple(c for c in todo if c in checks)
    ctx = Ctx(fn, fw, kind, family, dtype, seed, QUICK if quick else SIZES, name,
              spec.contract(kind) if spec is not None else None)
    results: list[CheckResult] = []

    def report() -> Report:
        changed = log.result()
        rows = results + ([changed] if changed else [])
        return Report(name, kind, fw.name, dtype, seed, family, rows, note, time.perf_counter() - t0)
    try:
        with fw.session():
            log.check = "probe"
            try:
                probe(ctx)
            except UsageError:
                if log.failure is not None:      # the probe call exited, crashed or timed out
                    raise log.failure from None
                raise
            for c in todo:
                log.check = c
                try:
                    results.append(RUNNERS[c](ctx))
                except (UsageError, TargetError):
                    raise
                except Exception as e:  # noqa: BLE001 - a candidate failing inside a check fails that check
                    results.append(CheckResult(c, False, math.inf, None, f"raised {type(e).__name__}: {e}"))
                if log.failure is not None:      # a check caught it: the target could not be run all the same
                    raise log.failure
    except TargetError as e:
        e.report = report()
        raise
    return report()
