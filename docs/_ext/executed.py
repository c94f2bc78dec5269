"""Executed code on the site: pages whose code runs while the site is built.

``.. readme-tour::`` runs the README's tour: its code is read from ``README.md`` (the ```python block between
``<!-- section: tour`` and ``<!-- end section: tour -->``), so the page and the README cannot drift apart.

``.. executed::`` (content: Python code) runs one cell of a tutorial page. The cells of a page share one
namespace, in page order, like a notebook run top to bottom; each cell is shown with what it printed and how
long it ran, and every matplotlib figure it left open is saved as a PNG (``<outdir>/../executed/``) and shown
below it, then closed. Pages with cells are re-read on every build, so their numbers are this build's.

Code runs in a fresh namespace with stdout captured. An exception fails the build (-W or not): a tutorial
that does not run is not published.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from sphinx.util import logging

logger = logging.getLogger(__name__)

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


class ReadmeTour(Directive):
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        readme = Path(env.srcdir).parent / "README.md"
        env.note_dependency(str(readme))
        code = readme_tour(readme)
        try:
            printed, secs = run_code(code, "README.md tour")
        except Exception as exc:                       # fail the build, saying where
            raise self.error(f"readme-tour: the README tour raised {type(exc).__name__}: {exc}") from exc
        block = nodes.literal_block(code, code, language="python")
        caption = nodes.paragraph(text=f"Output (executed while this page was built, {secs:.1f} s):")
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
        shown = getattr(env, "refattn_executed_docs", set())
        shown.add(env.docname)
        env.refattn_executed_docs = shown
        spaces = env.temp_data.setdefault("refattn_namespaces", {})
        ns = spaces.setdefault(env.docname, {"__name__": "__main__"})
        cell = env.temp_data["refattn_cell"] = env.temp_data.get("refattn_cell", 0) + 1
        code = "\n".join(self.content) + "\n"
        label = f"{env.docname}.rst, cell {cell}"
        cpu0 = time.process_time()
        try:
            printed, secs = run_code(code, label, ns)
        except Exception as exc:                       # fail the build, saying where
            raise self.error(f"executed: {label} raised {type(exc).__name__}: {exc}") from exc
        times = env.temp_data.setdefault("refattn_seconds", {})
        wall, cpu = times.get(env.docname, (0.0, 0.0))
        times[env.docname] = (wall + secs, cpu + time.process_time() - cpu0)
        out: list = [nodes.literal_block(code, code, language="python")]
        if printed and "hide-output" not in self.options:
            out.append(nodes.paragraph(text=f"Output ({secs:.2f} s while this page was built):"))
            out.append(nodes.literal_block(printed, printed, language="text"))
        figdir = Path(env.app.outdir).parent / "executed"
        for fig in save_open_figures(figdir, f"{env.docname.replace('/', '-')}-cell{cell}"):
            rel = Path(os.path.relpath(fig, Path(env.srcdir).resolve())).as_posix()
            container = nodes.container(classes=["executed-figure"])
            lines = [f".. figure:: /{rel}", "   :width: 85%", "",
                     f"   Drawn by cell {cell} while this page was built.", ""]
            self.state.nested_parse(StringList(lines, source=label), self.content_offset, container)
            out.append(container)
        return out


def _reread_executed(app, env, added, changed, removed):
    """Pages with executed cells show this build's numbers, so they are re-read on every build."""
    return sorted(getattr(env, "refattn_executed_docs", set()) & set(env.found_docs))


def _purge(app, env, docname):
    getattr(env, "refattn_executed_docs", set()).discard(docname)


def _merge(app, env, docnames, other):
    env.refattn_executed_docs = (getattr(env, "refattn_executed_docs", set())
                                 | getattr(other, "refattn_executed_docs", set()))


def _log_time(app, doctree):
    env = app.env
    secs = env.temp_data.get("refattn_seconds", {}).get(env.docname)
    if secs is not None:
        logger.info(f"[executed] {env.docname}: cells ran in {secs[0]:.1f} s ({secs[1]:.1f} s CPU)")


def setup(app):
    directives.register_directive("executed", Executed)
    app.connect("env-get-outdated", _reread_executed)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("doctree-read", _log_time)
    directives.register_directive("readme-tour", ReadmeTour)
    return {"version": "0.1", "parallel_read_safe": True}
