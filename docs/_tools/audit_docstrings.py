"""List the public functions whose docstrings lack a numpydoc Parameters or Returns section.

``python docs/_tools/audit_docstrings.py`` prints one line per function (``module.name: missing ...``) and
the count. "Public" is what the modules documented on the site export in ``__all__`` (docs/_ext/apigen.py
MODULES); each object is counted once, under the module that defines it. A function without arguments is
not required to have Parameters. docs/conf.py turns numpydoc validation into build errors only when the
count is 0.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))

from apigen import MODULES, canonical_objects  # noqa: E402
from numpydoc.docscrape import FunctionDoc  # noqa: E402


def missing_sections(obj) -> list[str]:
    """The numpydoc sections `obj`'s docstring lacks (empty when it has what it needs)."""
    doc = inspect.getdoc(obj) or ""
    if not doc:
        return ["docstring"]
    parsed = FunctionDoc(obj, doc=doc)
    out = []
    try:
        params = [p for p in inspect.signature(obj).parameters.values()
                  if p.name not in ("self", "cls")]
    except (TypeError, ValueError):
        params = []
    if params and not parsed["Parameters"]:
        out.append("Parameters")
    if not parsed["Returns"] and not parsed["Yields"]:
        out.append("Returns")
    return out


def audit() -> tuple[list[str], int]:
    """Lines ``qualified name: missing A, B`` for every public function lacking sections, and the total number
    of public functions looked at."""
    lines, total = [], 0
    for modname, names in canonical_objects().items():
        mod = importlib.import_module(modname)
        for name in names:
            obj = getattr(mod, name)
            if not inspect.isfunction(obj):
                continue
            total += 1
            miss = missing_sections(obj)
            if miss:
                lines.append(f"{modname}.{name}: missing {', '.join(miss)}")
    return lines, total


if __name__ == "__main__":
    lines, total = audit()
    print("\n".join(lines))
    print(f"{len(lines)} of {total} public functions lack a numpydoc Parameters/Returns section "
          f"(modules: {', '.join(MODULES)})")
