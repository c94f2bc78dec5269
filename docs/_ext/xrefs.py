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
3. a bare or partial name is tried inside the reference's current module and its parents, then as the
   unique documented object with that last name.

A reference that none of these resolves stays unresolved: under ``nitpicky`` (conf.py) and ``-W`` the build
fails and names it.
"""

from __future__ import annotations

import importlib
import types

from sphinx.util import logging

logger = logging.getLogger(__name__)
_INDEX: dict[str, object] = {}


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


def candidates(target: str, module: str | None) -> list[str]:
    """Dotted paths to try for `target` written in `module`: inside it and its parents, then as written."""
    out = []
    if module:
        parts = module.split(".")
        out += [".".join(parts[:i]) + "." + target for i in range(len(parts), 0, -1)]
    out.append(target)
    return out


def resolve_name(target: str, module: str | None) -> str | None:
    """The documented name `target` (written in `module`) refers to (see the module docstring), else None."""
    target = target.lstrip("~.")
    for path in candidates(target, module):
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
    found = resolve_name(node["reftarget"], node.get("py:module"))
    if found is None:
        return None
    domain = env.get_domain("py")
    role = "mod" if node.get("reftype") == "mod" or found in _documented()[2] else "obj"
    return domain.resolve_xref(env, node["refdoc"], app.builder, role, found, node, contnode)


def setup(app):
    app.connect("missing-reference", _missing_reference)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
