"""Executed code on the site: ``.. readme-tour::`` runs the README's tour while the site is built.

The tour's code is read from ``README.md`` (the ```python block between ``<!-- section: tour`` and
``<!-- end section: tour -->``), so the page and the README cannot drift apart; it is executed in a fresh
namespace with stdout captured, and the page shows the code, what it printed and how long it ran. An exception
fails the build (-W or not): a tour that does not run is not published.
"""

from __future__ import annotations

import contextlib
import io
import re
import time
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives

_TOUR = re.compile(r"<!-- section: tour.*?-->.*?```python\n(.*?)```.*?<!-- end section: tour -->", re.S)


def readme_tour(readme: Path) -> str:
    """The tour's Python code from `readme` (ValueError when the README has no tour section)."""
    m = _TOUR.search(readme.read_text())
    if m is None:
        raise ValueError(f"{readme}: no ```python block between '<!-- section: tour' and "
                         "'<!-- end section: tour -->'")
    return m.group(1)


def run_code(code: str, label: str) -> tuple[str, float]:
    """Execute `code` in a fresh namespace; return its stdout and the seconds it took."""
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        exec(compile(code, label, "exec"), {"__name__": "__main__"})   # noqa: S102 (the project's own tour)
    return out.getvalue(), time.perf_counter() - t0


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


def setup(app):
    directives.register_directive("readme-tour", ReadmeTour)
    return {"version": "0.1", "parallel_read_safe": True}
