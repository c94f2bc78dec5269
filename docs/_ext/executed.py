"""Executed code on the site: pages whose code runs while the site is built.

``.. readme-tour::`` runs the README's tour: its code is read from ``README.md`` (the ```python block between
``<!-- section: tour`` and ``<!-- end section: tour -->``), so the page and the README cannot drift apart.

``.. executed::`` (content: Python code) runs one cell of a tutorial page. The cells of a page share one
namespace, in page order, like a notebook run top to bottom; each cell is shown with what it printed and how
long it ran, and every matplotlib figure it left open is saved as a PNG (``<outdir>/../executed/``) and shown
below it, then closed.

Code runs with stdout captured. An exception fails the build (-W or not): a tutorial that does not run is not
published.

**Cached by input hash.** A page's outputs depend on its inputs: the page's source (every cell; for the tour,
README.md), the package sources it can import (every ``.py`` under :data:`SOURCE_PACKAGES`) and the installed
distributions with their versions. :func:`input_key` hashes them. A page is re-read whenever its key differs
from the key of its last successful read (or it has none: a page whose code raised is re-read on every build),
so an incremental build never shows a stale or empty page. Its outputs (printed text, seconds, figures) are
stored under ``<outdir>/../executed-cache/<key>/``; a page whose key is there is shown from it without
running, with a caption saying so, and a clean ``docs/_build`` starts with no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from sphinx.util import logging

logger = logging.getLogger(__name__)

SOURCE_PACKAGES = ("refattn", "validation", "paper_checks", "accel")   # what executed code imports from here
_TOUR = re.compile(r"<!-- section: tour.*?-->.*?```python\n(.*?)```.*?<!-- end section: tour -->", re.S)


def readme_tour(readme: Path) -> str:
    """The tour's Python code from `readme` (ValueError when the README has no tour section)."""
    m = _TOUR.search(readme.read_text())
    if m is None:
        raise ValueError(f"{readme}: no ```python block between '<!-- section: tour' and "
                         "'<!-- end section: tour -->'")
    return m.group(1)


def run_code(code: str, label: str, namespace: dict | None = None) -> tuple[str, float]:
    """Execute `code` in `namespace` (a fresh one when None); return its stdout and the seconds it took."""
    out = io.StringIO()
    ns = {"__name__": "__main__"} if namespace is None else namespace
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        exec(compile(code, label, "exec"), ns)   # noqa: S102 (the project's own pages)
    return out.getvalue(), time.perf_counter() - t0


def save_open_figures(directory: Path, stem: str) -> list[Path]:
    """Save every open matplotlib figure as ``directory/stem-<n>.png`` and close it (none: [])."""
    import sys

    if "matplotlib.pyplot" not in sys.modules:
        return []
    import matplotlib.pyplot as plt

    paths = []
    for n, num in enumerate(plt.get_fignums()):
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{stem}-{n}.png"
        plt.figure(num).savefig(path, dpi=90, bbox_inches="tight")
        paths.append(path)
    plt.close("all")
    return paths


def environment_fingerprint() -> str:
    """The Python version and every installed distribution with its version, one string (sorted)."""
    from importlib import metadata

    dists = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions()
                    if d.metadata['Name']})
    return "\n".join([sys.version, *dists])


def sources_digest(root: Path, packages=SOURCE_PACKAGES) -> str:
    """sha256 over the paths and contents of every ``.py`` file under ``root/<package>`` for `packages`."""
    h = hashlib.sha256()
    for pkg in packages:
        for f in sorted((Path(root) / pkg).rglob("*.py")):
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def input_key(page_text: str, sources: str, environment: str) -> str:
    """The cache key of a page: sha256 of its source text, the package sources' digest and the environment."""
    h = hashlib.sha256()
    for part in (page_text, sources, environment):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


_BUILD_INPUTS: dict[str, str] = {}      # per build: the sources' digest and the environment (computed once)


def page_key(env, docname: str) -> str:
    """:func:`input_key` of `docname` as it is now (README.md's text joins a page that shows the tour)."""
    if not _BUILD_INPUTS:
        _BUILD_INPUTS["sources"] = sources_digest(Path(env.srcdir).parent)
        _BUILD_INPUTS["environment"] = environment_fingerprint()
    text = Path(env.doc2path(docname)).read_text()
    if ".. readme-tour::" in text:
        text += "\0" + (Path(env.srcdir).parent / "README.md").read_text()
    return input_key(text, _BUILD_INPUTS["sources"], _BUILD_INPUTS["environment"])


def _cache_dir(env) -> Path:
    return Path(env.app.outdir).parent / "executed-cache"


def _page_state(env) -> dict:
    """This read's state of the current page: key, cached cells (or None), cells run, failure flag."""
    state = env.temp_data.get("refattn_exec")
    if state is None:
        key = page_key(env, env.docname)
        entry = _cache_dir(env) / key / "cells.json"
        cached = json.loads(entry.read_text()) if entry.exists() else None
        state = env.temp_data["refattn_exec"] = {"key": key, "cached": cached, "cells": [], "failed": False,
                                                 "namespace": {"__name__": "__main__"}}
        shown = getattr(env, "refattn_executed_docs", set())
        shown.add(env.docname)
        env.refattn_executed_docs = shown
    return state


def _run_cell(directive, code: str, label: str) -> tuple[str, float, list[Path], str | None]:
    """Printed text, seconds, figure files and the cache date of the page's next cell: from the page's cache
    entry when its key is there, else by running `code` in the page's namespace."""
    env = directive.state.document.settings.env
    state = _page_state(env)
    n = len(state["cells"])
    figdir = Path(env.app.outdir).parent / "executed"
    stem = f"{env.docname.replace('/', '-')}-cell{n + 1}"
    cached = state["cached"]
    if cached is not None and n < len(cached["cells"]) and cached["cells"][n]["code"] == code:
        cell = cached["cells"][n]
        figs = []
        for name in cell["figures"]:
            figdir.mkdir(parents=True, exist_ok=True)
            figs.append(Path(shutil.copy2(_cache_dir(env) / state["key"] / name, figdir / name)))
        state["cells"].append(cell)
        return cell["printed"], cell["seconds"], figs, cached["date"]
    if cached is not None:                       # the entry does not fit this page: run it all afresh
        raise directive.error(f"{label}: the cache entry {_cache_dir(env) / state['key']} does not hold "
                              "this cell (a damaged cache: delete it)")
    try:
        printed, secs = run_code(code, label, state["namespace"])
    except Exception as exc:                       # fail the build, saying where
        state["failed"] = True
        raise directive.error(f"{label} raised {type(exc).__name__}: {exc}") from exc
    figs = save_open_figures(figdir, stem)
    state["cells"].append({"code": code, "printed": printed, "seconds": secs,
                           "figures": [f.name for f in figs]})
    return printed, secs, figs, None


def _caption(secs: float, date: str | None) -> str:
    if date is None:
        return f"Output ({secs:.2f} s, run while this page was built):"
    return (f"Output ({secs:.2f} s when run on {date} for the same inputs: this page, the package sources "
            "and the installed versions, by hash):")


class ReadmeTour(Directive):
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        readme = Path(env.srcdir).parent / "README.md"
        env.note_dependency(str(readme))
        code = readme_tour(readme)
        printed, secs, _, date = _run_cell(self, code, "readme-tour: the README tour")
        block = nodes.literal_block(code, code, language="python")
        caption = nodes.paragraph(text=_caption(secs, date))
        out = nodes.literal_block(printed, printed or "(nothing printed)", language="text")
        return [block, caption, out]


class Executed(Directive):
    """One code cell of a tutorial page, run in the page's namespace (see the module docstring)."""

    has_content = True
    option_spec = {"hide-output": directives.flag}

    def run(self):
        import matplotlib

        matplotlib.use("Agg")                           # no display while building
        env = self.state.document.settings.env
        code = "\n".join(self.content) + "\n"
        cell = len(_page_state(env)["cells"]) + 1
        label = f"executed: {env.docname}.rst, cell {cell}"
        cpu0 = time.process_time()
        printed, secs, figs, date = _run_cell(self, code, label)
        times = env.temp_data.setdefault("refattn_seconds", {})
        wall, cpu = times.get(env.docname, (0.0, 0.0, None))[:2]
        times[env.docname] = (wall + secs, cpu + time.process_time() - cpu0, date)
        out: list = [nodes.literal_block(code, code, language="python")]
        if printed and "hide-output" not in self.options:
            out.append(nodes.paragraph(text=_caption(secs, date)))
            out.append(nodes.literal_block(printed, printed, language="text"))
        for fig in figs:
            rel = Path(os.path.relpath(fig, Path(env.srcdir).resolve())).as_posix()
            container = nodes.container(classes=["executed-figure"])
            drawn = "while this page was built" if date is None else f"when run on {date} (cached by hash)"
            lines = [f".. figure:: /{rel}", "   :width: 85%", "",
                     f"   Drawn by cell {cell} {drawn}.", ""]
            self.state.nested_parse(StringList(lines, source=label), self.content_offset, container)
            out.append(container)
        return out


def _store(app, doctree) -> None:
    """After a page's read: remember its key (not after a failure) and store a run's outputs in the cache."""
    env = app.env
    state = env.temp_data.get("refattn_exec")
    if state is None:
        return
    keys = getattr(env, "refattn_executed_keys", {})
    env.refattn_executed_keys = keys
    if state["failed"]:
        keys.pop(env.docname, None)               # re-read (and re-run) on the next build
        return
    keys[env.docname] = state["key"]
    secs = env.temp_data.get("refattn_seconds", {}).get(env.docname)
    if state["cached"] is not None:
        logger.info(f"[executed] {env.docname}: shown from the cache ({state['key'][:12]})")
        return
    if secs is not None:
        logger.info(f"[executed] {env.docname}: cells ran in {secs[0]:.1f} s ({secs[1]:.1f} s CPU)")
    entry = _cache_dir(env) / state["key"]
    entry.mkdir(parents=True, exist_ok=True)
    figdir = Path(app.outdir).parent / "executed"
    for cell in state["cells"]:
        for name in cell["figures"]:
            shutil.copy2(figdir / name, entry / name)
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    tmp = entry / "cells.json.tmp"
    tmp.write_text(json.dumps({"date": date, "docname": env.docname, "cells": state["cells"]}))
    os.replace(tmp, entry / "cells.json")


def _outdated(app, env, added, changed, removed):
    """Pages with executed code whose inputs changed since their last successful read (or that failed)."""
    keys = getattr(env, "refattn_executed_keys", {})
    _BUILD_INPUTS.clear()
    return sorted(d for d in getattr(env, "refattn_executed_docs", set()) & set(env.found_docs)
                  if keys.get(d) != page_key(env, d))


def _purge(app, env, docname):
    getattr(env, "refattn_executed_docs", set()).discard(docname)
    getattr(env, "refattn_executed_keys", {}).pop(docname, None)


def _merge(app, env, docnames, other):
    env.refattn_executed_docs = (getattr(env, "refattn_executed_docs", set())
                                 | getattr(other, "refattn_executed_docs", set()))
    keys = getattr(env, "refattn_executed_keys", {})
    keys.update({d: k for d, k in getattr(other, "refattn_executed_keys", {}).items() if d in docnames})
    env.refattn_executed_keys = keys


def setup(app):
    directives.register_directive("executed", Executed)
    directives.register_directive("readme-tour", ReadmeTour)
    app.connect("env-get-outdated", _outdated)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("doctree-read", _store)
    return {"version": "0.1", "parallel_read_safe": True}
