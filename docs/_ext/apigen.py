"""Generate the API reference pages from each module's ``__all__`` (no hand-written listings).

At ``config-inited`` this writes ``docs/api/<module>.rst`` for every module in :data:`MODULES`: the module
docstring (``automodule``), then an ``autosummary`` table of the names in its ``__all__``. Each object gets
exactly one generated page, under the module that defines it (the most specific listed module whose name
prefixes ``obj.__module__``); a module that re-exports it (``refattn`` re-exports the subpackages) lists it
in a table linking to that page. Adding a name to ``__all__`` adds it to the site; a public function whose
docstring does not parse breaks the ``-W`` build.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path

MODULES = ("refattn", "refattn.attention", "refattn.features", "refattn.layers", "refattn.rpe", "refattn.nn",
           "refattn.random", "refattn.tree", "refattn.limits", "validation", "validation.montecarlo",
           "validation.assertions", "paper_checks")


def _home(obj, modname: str) -> str:
    """The listed module that documents `obj`: the longest prefixing ``obj.__module__``, else `modname`."""
    where = getattr(obj, "__module__", None) or modname
    best = None
    for m in MODULES:
        if (where == m or where.startswith(m + ".")) and (best is None or len(m) > len(best)):
            best = m
    return best or modname


def exported(modname: str) -> list[str]:
    """The non-module names of ``modname.__all__`` (ValueError when the module has none)."""
    mod = importlib.import_module(modname)
    names = getattr(mod, "__all__", None)
    if names is None:
        raise ValueError(f"{modname}: the API reference is generated from __all__, and this module has none")
    return [n for n in names if not isinstance(getattr(mod, n), types.ModuleType)]


def canonical_objects() -> dict[str, list[str]]:
    """``{module: [names it documents]}``: every exported object once, under its home module."""
    out: dict[str, list[str]] = {m: [] for m in MODULES}
    seen: set[int] = set()
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in exported(modname):
            obj = getattr(mod, name)
            home = _home(obj, modname)
            if home != modname or id(obj) in seen:
                continue
            seen.add(id(obj))
            out[modname].append(name)
    return out


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "classes"
    if callable(obj):
        return "functions"
    return "data"


def data_comment(modname: str, name: str) -> str | None:
    """The ``#:`` doc comment of the data object ``modname.name`` where it is assigned: in `modname` itself
    or, for a re-export, in the submodule of `modname` that assigns the same object (None when there is none).

    autodoc reads ``#:`` comments only in the module it is pointed at, so a constant re-exported by a package
    ``__init__`` would show its type's docstring (``int([x]) -> integer``); the page quotes this instead."""
    from sphinx.errors import PycodeError
    from sphinx.pycode import ModuleAnalyzer

    obj = getattr(importlib.import_module(modname), name)
    for m in [modname] + sorted(k for k in list(sys.modules) if k.startswith(modname + ".")):
        if getattr(sys.modules.get(m), name, None) is not obj:
            continue
        try:
            analyzer = ModuleAnalyzer.for_module(m)
            analyzer.analyze()
        except PycodeError:
            continue
        doc = analyzer.attr_docs.get(("", name))
        if doc:
            return "\n".join(doc).strip()
    return None


def data_entry(modname: str, name: str) -> list[str]:
    """The rst of one data object: a ``py:data`` entry with its value (when short) and its ``#:`` comment
    (ValueError when it has none: an undocumented constant fails the build's generation)."""
    doc = data_comment(modname, name)
    if doc is None:
        raise ValueError(f"{modname}.{name}: exported data needs a '#:' doc comment where it is assigned")
    value = repr(getattr(importlib.import_module(modname), name))
    lines = [f".. py:data:: {name}", f"   :module: {modname}"]
    if len(value) <= 60:
        lines.append(f"   :value: {value}")
    return lines + [""] + [f"   {line}" if line else "" for line in doc.splitlines()] + [""]


def write_pages(api_dir: Path) -> list[Path]:
    """Write ``api_dir/<module>.rst`` for every module and ``api_dir/index.rst``; return the paths written
    (only files whose text changed are rewritten, so Sphinx's incremental build stays incremental)."""
    api_dir.mkdir(parents=True, exist_ok=True)
    canon = canonical_objects()
    # where each object is documented: id -> qualified name
    qual = {}
    for modname, names in canon.items():
        mod = importlib.import_module(modname)
        for n in names:
            qual[id(getattr(mod, n))] = f"{modname}.{n}"
    written = []
    stubs = set()                       # the autosummary pages asked for: generated/<module>.<name>.rst
    for modname in MODULES:
        mod = importlib.import_module(modname)
        title = f"``{modname}``"
        lines = [title, "=" * len(title), "", f".. automodule:: {modname}", "   :no-members:", ""]
        own = {}
        for n in canon[modname]:
            own.setdefault(_kind(getattr(mod, n)), []).append(n)
        for kind in ("functions", "classes", "data"):
            if kind not in own:
                continue
            lines += [kind.capitalize(), "-" * len(kind), "", f".. currentmodule:: {modname}", ""]
            if kind == "data":              # each with its '#:' comment, wherever it is assigned
                lines += [line for n in own[kind] for line in data_entry(modname, n)]
                continue
            lines += [".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
            lines += [f"   {n}" for n in own[kind]] + [""]
            stubs |= {f"{modname}.{n}.rst" for n in own[kind]}
        reexp = [n for n in exported(modname) if n not in canon[modname]]
        if reexp:
            lines += ["Re-exported", "-----------", "",
                      f"Also importable as ``{modname}.<name>``; documented where they are defined.", "",
                      ".. currentmodule:: None", "", ".. autosummary::", "   :nosignatures:", ""]
            lines += [f"   ~{qual.get(id(getattr(mod, n)), f'{modname}.{n}')}" for n in reexp] + [""]
        path = api_dir / f"{modname}.rst"
        _write_if_changed(path, "\n".join(lines))
        written.append(path)
    index = ["API reference", "=============", "",
             "Generated from each module's ``__all__`` (``docs/_ext/apigen.py``).", "",
             ".. toctree::", "   :maxdepth: 1", ""] + [f"   {m}" for m in MODULES] + [""]
    _write_if_changed(api_dir / "index.rst", "\n".join(index))
    for stale in sorted((api_dir / "generated").glob("*.rst")):
        if stale.name not in stubs:     # an object moved to another page, or data (no stub): an orphan page
            stale.unlink()
    return written


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _on_config_inited(app, config) -> None:
    write_pages(Path(app.srcdir) / "api")


def setup(app):
    # config-inited: before Sphinx lists the source files, so a fresh checkout (no docs/api) sees the pages
    # and autosummary generates their stubs (builder-inited is too late: found_docs is already fixed).
    app.connect("config-inited", _on_config_inited)
    return {"version": "0.1", "parallel_read_safe": True}
