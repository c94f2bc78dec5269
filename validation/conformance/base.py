"""What a conformance adapter declares: the implementation, its rows (one validator run each), its findings.

An adapter module of :mod:`validation.conformance` exposes one :class:`Implementation`: where its source lies
under the sources directory, how its version or commit is read, and its :class:`Row` s -- each a candidate
callable in one of the validator's contracts (``kind``, ``family``), built from the outside code by the
adapter, which bridges conventions (layouts, scalings, argument correspondence, draws substituted) and fixes
nothing. Its :class:`Finding` s say, per row and check, what the validator is expected to report and the
judgement on it; the report marks each as reproduced or not by this run, and names the test that establishes
the fact without the validator.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import subprocess
import sys
from typing import Callable

__all__ = ["Row", "Finding", "Implementation", "JUDGEMENTS", "source_path", "source_revision",
           "dist_version", "on_path", "load_package", "load_extension"]

#: the three judgements a finding receives
JUDGEMENTS = {
    "defect": "the implementation computes something other than what it claims",
    "convention": "it computes a documented other thing (a convention difference)",
    "pass": "it computes what it claims, within the check's threshold",
    "limitation": "the validator's verdict misses the fact (a validator limitation found on the way)",
}


@dataclasses.dataclass(frozen=True)
class Row:
    """One validator run: ``check(make(sources), kind=kind, family=family, framework=framework)``."""

    label: str                                  # e.g. "Favor features"
    kind: str                                   # draw | features | attention
    family: str | None                          # the family it claims (--as); None: the kind's default
    framework: str                              # numpy | torch
    make: Callable[[str], Callable]             # sources dir -> the candidate callable
    dtype: str = "float64"
    note: str = ""                              # the adapter's bridge for this row, one sentence


@dataclasses.dataclass(frozen=True)
class Finding:
    """What the validator is expected to report on one row and check, and the judgement on it."""

    row: str                                    # Row.label
    check: str                                  # the validator check's name
    verdict: str                                # the expected verdict: "FAIL" or "pass"
    judgement: str                              # a key of JUDGEMENTS
    sentence: str                               # the finding in one sentence
    confirmed_by: str                           # the test (path::name) that computes the fact without the
    #                                             validator
    fix: str = ""                               # for a defect: the smallest change in the outside code


@dataclasses.dataclass(frozen=True)
class Implementation:
    """An outside implementation: its name, where it lies in the sources directory, its rows and findings."""

    name: str                                   # e.g. "fast-transformers"
    family: str                                 # what it implements, in words (the table's "family")
    source: str                                 # how to get it (a git URL or a PyPI name)
    subdir: str | None                          # its directory under the sources dir (None: an installed
    #                                             package)
    dist: str | None                            # the installed distribution's name (version), if any
    rows: tuple[Row, ...]
    findings: tuple[Finding, ...]
    requires: tuple[str, ...] = ()              # importable modules it needs (e.g. torch)

    def missing(self, sources: str | None) -> str | None:
        """Why this implementation cannot run with `sources` (None when it can)."""
        import importlib.util
        absent = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if absent:
            return f"needs {', '.join(absent)} (not installed)"
        if self.subdir is not None:
            if sources is None:
                return "no --sources directory given"
            if not os.path.isdir(source_path(sources, self.subdir)):
                return f"{source_path(sources, self.subdir)} does not exist"
        return None

    def version(self, sources: str | None) -> str:
        """The installed version, or the commit of the checkout."""
        if self.subdir is None:
            return dist_version(self.dist or self.name)
        return source_revision(source_path(sources, self.subdir))


def source_path(sources: str, subdir: str) -> str:
    return os.path.join(os.path.abspath(sources), subdir)


def source_revision(path: str) -> str:
    """The commit of a checkout: ``git rev-parse HEAD`` when `path` is a git work tree, else the first word of
    its ``REVISION`` file (written by :mod:`validation.conformance.layout` for an exported tree)."""
    rev_file = os.path.join(path, "REVISION")
    if os.path.isfile(rev_file):
        with open(rev_file) as f:
            words = f.read().split()
        if words:
            return words[0]
    if os.path.exists(os.path.join(path, ".git")):
        r = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.strip()
    return "unknown commit"


def dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def on_path(path: str) -> None:
    """Put the checkout `path` first on ``sys.path`` (its packages are imported from there)."""
    if path not in sys.path:
        sys.path.insert(0, path)


def load_package(name: str, path: str, *, run_init: bool = True):
    """The package at directory `path` registered as `name` (an alias: two checkouts that both call themselves
    ``fast_transformers`` load side by side). ``run_init=False`` registers it without executing its
    ``__init__.py`` (whose imports may need compiled extensions); its pure-Python submodules then import
    through ``importlib.import_module(name + ".sub")``."""
    import importlib.util
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"),
                                                  submodule_search_locations=[path])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    if run_init:
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
    return mod


def load_extension(name: str, so_path: str):
    """A compiled extension module from `so_path`, registered as `name`."""
    import importlib.util
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, so_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[name] = mod
    return mod
