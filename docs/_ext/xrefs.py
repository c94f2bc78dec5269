"""Python cross-references resolved to the one page that documents their object (nitpicky builds).

The API reference documents each exported object once, under its home module (``_ext/apigen.py``): the
function defined in ``refattn/features/positive.py`` and exported by ``refattn.features`` has its page at
``refattn.features.positive_features``. Docstrings name objects by whichever import path reads best where
they are written: the defining module (``refattn.features.positive.positive_features``), a package that
re-exports it, or a bare name inside the module (``draw_dropout_masks``). Sphinx finds only the documented
path; for every other reference it emits ``missing-reference``, and this handler resolves it:

1. the target is imported (the longest importable module prefix, then attributes); an object that has an API
   page, found by identity (and, for a str/int/float constant, also by name), resolves to that page;
2. a module resolves to the page of the listed module that contains it (``refattn.rpe.spectra`` ->
   ``refattn.rpe``, which documents what ``refattn.rpe.spectra`` exports);
3. a bare or partial name is tried inside the reference's current module (and class) and its parents, then as
   the unique documented object with that last name (for 4., first in the module that defines the object
   whose API page holds the reference);
4. an object of this project that has no API page (a helper, a registry constant, a submodule's class)
   resolves to its definition in the site's source listing (``sphinx.ext.viewcode``'s ``_modules/`` page
   of its module, at the object's anchor for a function, class or method, at the top for a constant); the
   listing is created for it. The source is found without importing the module, so a module that needs an
   extra the docs build lacks (``paper_checks.scale`` and dask) still resolves.

A reference that none of these resolves stays unresolved: under ``nitpicky`` (conf.py) and ``-W`` the build
fails and names it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import types

from docutils import nodes
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)
_INDEX: dict[str, object] = {}
_BACK_IDS: set[tuple[str, str]] = set()     # (page, id) given to a reference as a viewcode back-link target


def _documented() -> tuple[dict[tuple[int, str], str], dict[str, list[str]], tuple[str, ...]]:
    """(id, last name) -> documented name; last name -> documented names; the listed modules."""
    if not _INDEX:
        import apigen

        by_id: dict[tuple[int, str], str] = {}
        by_name: dict[str, list[str]] = {}
        for modname, names in apigen.canonical_objects().items():
            mod = importlib.import_module(modname)
            for n in names:
                by_id[(id(getattr(mod, n)), n)] = f"{modname}.{n}"
                by_name.setdefault(n, []).append(f"{modname}.{n}")
        _INDEX.update(by_id=by_id, by_name=by_name, modules=tuple(apigen.MODULES))
    return _INDEX["by_id"], _INDEX["by_name"], _INDEX["modules"]


def import_path(path: str):
    """The object at dotted `path` (longest importable module prefix, then attributes); None if none."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        except Exception:      # a module that fails to import for another reason: not a target
            return None
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return None
        return obj
    return None


def documented_name(path: str) -> str | None:
    """The documented qualified name (an API page, or a listed module) of the object at `path`, else None."""
    by_id, _, modules = _documented()
    obj = import_path(path)
    if obj is None:
        return None
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
        homes = [m for m in modules if name == m or name.startswith(m + ".")]
        return max(homes, key=len) if homes else None
    return by_id.get((id(obj), path.rsplit(".", 1)[-1]))


PROJECT = ("refattn", "validation", "paper_checks", "accel")


def candidates(target: str, module: str | None, klass: str | None = None) -> list[str]:
    """Dotted paths to try for `target` written in `module` (in `klass`): inside the class, the module and its
    parents, then as written."""
    out = []
    if module:
        if klass:
            out.append(f"{module}.{klass}.{target}")
        parts = module.split(".")
        out += [".".join(parts[:i]) + "." + target for i in range(len(parts), 0, -1)]
    out.append(target)
    return out


def source_target(path: str, _seen: frozenset = frozenset()) -> tuple[str, str, str | None] | None:
    """(module, kind, anchor) of the definition of `path` in this project's source, found without importing
    the module: kind ``tag`` (a def or class, anchor its qualified name) or ``data`` (a module-level
    assignment, no anchor); None when `path` names nothing defined in a project module."""
    parts = path.split(".")
    if parts[0] not in PROJECT or path in _seen or len(_seen) > 8:
        return None
    for i in range(len(parts) - 1, 0, -1):
        modname, qual = ".".join(parts[:i]), ".".join(parts[i:])
        try:
            spec = importlib.util.find_spec(modname)
        except (ImportError, ValueError):
            continue
        if spec is None or not (spec.origin or "").endswith(".py"):
            continue
        analyzer = ModuleAnalyzer.for_module(modname)
        analyzer.find_tags()
        if qual in analyzer.tags:
            return modname, "tag", qual
        assigned = {t.id for node in ast.parse(analyzer.code).body
                    if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(t, ast.Name)}
        if qual in assigned:
            return modname, "data", None
        head, _, rest = qual.partition(".")
        for node in ast.parse(analyzer.code).body:      # imported there: follow it to its definition
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == head for a in node.names):
                name = next(a.name for a in node.names if (a.asname or a.name) == head)
                package = modname if spec.submodule_search_locations else modname.rpartition(".")[0]
                source = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                return source_target(".".join(x for x in (source, name, rest) if x), _seen | {path})
    return None


def _page_module(docname: str) -> str | None:
    """The defining module of the object an API page (``api/generated/<name>``) documents, else None."""
    if not docname.startswith("api/generated/"):
        return None
    obj = import_path(docname.rsplit("/", 1)[-1])
    return getattr(obj, "__module__", None) if obj is not None else None


def _source_reference(app, env, node, contnode, target: str):
    """A reference node to `target`'s definition in the source listing (see the module docstring, 4.)."""
    if app.builder.format != "html" or "sphinx.ext.viewcode" not in app.extensions:
        return None
    paths = candidates(target.lstrip("~."), node.get("py:module"), node.get("py:class"))
    home = _page_module(node["refdoc"])          # a docstring's bare name: the documented object's module
    if home and "." not in target:
        paths.insert(0, f"{home}.{target.lstrip('~.')}")
    for path in paths:
        found = source_target(path)
        if found is None:
            continue
        modname, _, anchor = found
        modules = env.__dict__.setdefault("_viewcode_modules", {})
        entry = modules.get(modname)
        if not entry:
            analyzer = ModuleAnalyzer.for_module(modname)
            analyzer.find_tags()
            entry = modules[modname] = (analyzer.code, analyzer.tags, {}, modname)
        page = "_modules/" + modname.replace(".", "/")
        uri = app.builder.get_relative_uri(node["refdoc"], page) + (f"#{anchor}" if anchor else "")
        ref = nodes.reference("", "", internal=True, refuri=uri, reftitle=f"{path} (source)")
        ref += contnode
        if anchor is not None:
            # viewcode writes the anchor with a "[docs]" link back to <first referring page>#<refname>.<name>:
            # that id is given to this reference, so the link back lands on it
            if entry[2].setdefault(anchor, node["refdoc"]) == node["refdoc"]:
                back = f"{entry[3]}.{anchor}"
                if (node["refdoc"], back) not in _BACK_IDS:
                    _BACK_IDS.add((node["refdoc"], back))
                    ref["ids"].append(back)
        return ref
    return None


def resolve_name(target: str, module: str | None, klass: str | None = None) -> str | None:
    """The documented name `target` (written in `module`, `klass`) refers to (module docstring, 1.-3.), else
    None."""
    target = target.lstrip("~.")
    for path in candidates(target, module, klass):
        found = documented_name(path)
        if found is not None:
            return found
    _, by_name, _ = _documented()
    same = by_name.get(target.rsplit(".", 1)[-1], [])
    if "." not in target and len(same) == 1:
        return same[0]
    return None


def _missing_reference(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    found = resolve_name(node["reftarget"], node.get("py:module"), node.get("py:class"))
    if found is None:
        return _source_reference(app, env, node, contnode, node["reftarget"])
    domain = env.get_domain("py")
    role = "mod" if node.get("reftype") == "mod" or found in _documented()[2] else "obj"
    return domain.resolve_xref(env, node["refdoc"], app.builder, role, found, node, contnode)


def setup(app):
    app.connect("missing-reference", _missing_reference)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
