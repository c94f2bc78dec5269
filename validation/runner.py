"""The runner: resolve a TARGET, pick the checks of its kind (and claimed family), run them into a Report."""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import sys
import time
from typing import Any, Callable

from .base import UsageError
from .checks.catalog import CHECKS, KIND_CHECKS, KINDS, RUNNERS
from .checks.context import QUICK, SIZES, Ctx, check_signature, probe
from .checks.favor import ATTENTION_FAMILIES, FEATURE_FAMILIES
from .checks.report import CheckResult, Report
from .crosscheck.registry import BUILTIN_TARGETS, builtin_target, get_framework
from .families.catalog import FAMILIES

__all__ = ["check", "resolve_target", "known_families", "validate_options"]


def resolve_target(spec: str, kind: str, framework: str | None = None,
                   family: str | None = None) -> tuple[Callable, str, str | None, str]:
    """``(fn, framework, family, note)`` for a TARGET: a built-in name, ``module:callable`` or
    ``file.py:callable``."""
    if spec in BUILTIN_TARGETS:
        t = builtin_target(spec, kind, framework, family)
        if framework is not None and framework != t.framework:
            raise UsageError(f"target {spec}: its {kind} callable takes {t.framework} arrays; got "
                             f"--framework {framework}")
        return t.fn, t.framework, t.family, t.note
    if ":" not in spec:
        raise UsageError(f"TARGET {spec!r}: expected module:callable, path/to/file.py:callable or a built-in "
                         f"target ({', '.join(BUILTIN_TARGETS)})")
    mod_name, _, attr = spec.rpartition(":")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            if not os.path.isfile(mod_name):
                raise UsageError(f"TARGET {spec!r}: file {mod_name!r} does not exist")
            name = "_validation_target_" + str(abs(hash(os.path.abspath(mod_name))))
            specobj = importlib.util.spec_from_file_location(name, mod_name)
            mod = importlib.util.module_from_spec(specobj)
            sys.modules[name] = mod
            specobj.loader.exec_module(mod)
        else:
            mod = importlib.import_module(mod_name)
    except UsageError:
        raise
    except BaseException as e:  # noqa: BLE001 - anything the import raises (incl. SystemExit) is a usage error
        raise UsageError(f"TARGET {spec!r}: importing {mod_name!r} failed: {type(e).__name__}: {e}") from None
    fn = mod
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise UsageError(f"TARGET {spec!r}: {mod_name!r} has no attribute {attr!r}")
        fn = getattr(fn, part)
    return fn, framework or "numpy", None, ""


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
        bad.append(f"--as {family!r}: unknown family for kind {kind}; expected one of {known_families(kind)}")
    if checks is not None:
        unknown = [c for c in checks if c not in CHECKS]
        if unknown:
            bad.append(f"checks: unknown check(s) {unknown}; expected names from {CHECKS}")
    return bad


def check(fn: Callable[..., Any] | str, *, kind: str, framework: str | None = None, family: str | None = None,
          dtype: str = "float64", seed: int = 0, quick: bool = False, checks: tuple[str, ...] | None = None,
          name: str | None = None) -> Report:
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
        ``positive-scaled``, ``hyperbolic``, ``gaussian-positive``, ``trig``, ``softmax-trig`` (attention
        ``positive``, ``hyperbolic``, ``trig``; default positive), or one of the papers' families with its
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

    Returns
    -------
    Report
        One :class:`CheckResult` per check run (``passed`` True, False or None when skipped, the figure, its
        threshold and a one-line detail); ``report.passed`` is True when no check failed, ``report[name]``
        gives one check, ``str(report)`` the table that ``python -m validation check`` prints.

    Raises
    ------
    UsageError
        (a ``ValueError``) unknown kind/framework/family/dtype/check, a target that does not import, a
        candidate with the wrong signature, one that raises on the probe call or returns the wrong shape.

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
    note = ""
    if isinstance(fn, str):
        name = name or fn
        fn, framework, fam0, note = resolve_target(fn, kind, framework, family)
        family = family or fam0
    name = name or getattr(fn, "__qualname__", None) or repr(fn)
    fw = get_framework(framework or "numpy")
    spec = FAMILIES.get(family) if family is not None else None
    todo = spec.checks[kind] if spec is not None else KIND_CHECKS[kind]
    if checks is not None:
        todo = tuple(c for c in todo if c in checks)
    check_signature(fn, kind, name, spec.contract(kind) if spec is not None else None)
    ctx = Ctx(fn, fw, kind, family, dtype, seed, QUICK if quick else SIZES, name,
              spec.contract(kind) if spec is not None else None)
    results = []
    with fw.session():
        probe(ctx)
        for c in todo:
            try:
                results.append(RUNNERS[c](ctx))
            except UsageError:
                raise
            except Exception as e:  # noqa: BLE001 - a candidate failing inside a check fails that check
                results.append(CheckResult(c, False, math.inf, None, f"raised {type(e).__name__}: {e}"))
    return Report(name, kind, fw.name, dtype, seed, family, results, note, time.perf_counter() - t0)
