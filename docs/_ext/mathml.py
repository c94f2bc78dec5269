"""Equations rendered to MathML while the site is built: the pages need no script, no download, no network.

Sphinx's HTML math renderer ``mathml`` (``html_math_renderer = "mathml"`` in conf.py): every ``:math:`` role
and ``.. math::`` block is converted from LaTeX by ``latex2mathml`` (pure Python, the ``docs`` extra) into a
``<math>`` element that the browser lays out itself (MathML Core: Chromium 109+, Firefox, Safari). The LaTeX
source is kept in the element's ``alttext``.

Conventions of the pages' LaTeX that this renderer gives a meaning:

- ``\\tag{3}`` (anywhere in a block, also inside a multi-line equation) is taken out of the formula and
  shown as the equation's number on the right, ``(3)``, like a numbered ``.. math::`` block's number: the
  paper's own number (Sphinx's ``split`` wrapper, which MathJax is given, rejects ``\\tag`` inside it).
- A block whose text holds ``\\\\`` or ``&`` is laid out as aligned rows (``\\begin{split}``); blocks
  separated by a blank line become separate rows.

The math font: STIX Two Math (SIL Open Font License), the font file that the ``ziamath`` package (docs extra)
ships, is copied into the site (``_static/fonts/``, 1.5 MB, loaded by the browser only on pages with math) and
named in ``_static/refattn-mathfont.css``: braces, brackets and large operators stretch as in print, whatever
fonts the reader's system has. Without ``ziamath`` the browser's own math font is used.

A command ``latex2mathml`` does not know would come out as its own name in the page (``<mi>\\foo</mi>``);
that is reported as a warning at the equation's source line, so the ``-W`` build fails on it.
"""

from __future__ import annotations

import html
import importlib.util
import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.locale import _
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

logger = logging.getLogger(__name__)

_TAG = re.compile(r"\\tag\*?\{([^{}]*)\}")
# what latex2mathml emits for a command it does not know: the command's name as an identifier or operator
_UNKNOWN = re.compile(r"<m[io][^>]*>(\\[A-Za-z]+|&|&amp;)</m[io]>")    # a command, or a stray '&'
_ENVIRONMENT = re.compile(r"\\begin\{")


def split_tags(latex: str) -> tuple[str, list[str]]:
    """`latex` without its ``\\tag{...}`` commands, and the tags' texts in order."""
    return _TAG.sub("", latex), _TAG.findall(latex)


def to_mathml(latex: str, display: bool) -> str:
    """One ``<math>`` element for `latex` (ValueError naming the commands latex2mathml does not know).

    A display formula with rows (``\\\\``) or alignment points (``&``) that is not already an environment is
    wrapped in ``split`` (right-left column pairs; latex2mathml has no ``aligned``); ``\\tag`` must have been
    taken out first (:func:`split_tags`)."""
    import latex2mathml.converter

    body = latex.strip()
    if display and ("\\\\" in body or "&" in body) and not _ENVIRONMENT.match(body):
        body = "\\begin{split}" + body + "\\end{split}"
    try:
        out = latex2mathml.converter.convert(body, display="block" if display else "inline")
    except Exception as exc:        # latex2mathml raises its own exception types for malformed input
        raise ValueError(f"latex2mathml cannot convert {latex!r}: {type(exc).__name__}: {exc}") from None
    unknown = sorted(set(_UNKNOWN.findall(out)))
    if unknown:
        raise ValueError(f"latex2mathml does not know {', '.join(unknown)} (in {latex!r}; '&' is an "
                         "alignment point outside an environment that has them)")
    alt = html.escape(" ".join(latex.split()), quote=True)
    return out.replace("<math ", f'<math alttext="{alt}" ', 1)


def _warn(node, exc: Exception) -> None:
    logger.warning(f"math: {exc}", location=node)


def html_visit_math(self, node: nodes.math) -> None:
    try:
        rendered = to_mathml(node.astext(), display=False)
    except ValueError as exc:
        _warn(node, exc)
        rendered = f"<code>{self.encode(node.astext())}</code>"
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(rendered + "</span>")
    raise nodes.SkipNode


def html_visit_displaymath(self, node: nodes.math_block) -> None:
    latex, tags = split_tags(node.astext())
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    number = get_node_equation_number(self, node) if node["number"] else None
    if number is not None or tags:
        self.body.append('<span class="eqno">(%s)' % self.encode(number if number is not None
                                                                 else ", ".join(tags)))
        if number is not None:
            self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    if node.get("no-wrap", node.get("nowrap", False)):
        parts = [latex]
    else:
        parts = [p for p in latex.split("\n\n") if p.strip()]
    for part in parts:
        try:
            self.body.append(to_mathml(part, display=True))
        except ValueError as exc:
            _warn(node, exc)
            self.body.append(f"<pre>{self.encode(part)}</pre>")
    self.body.append("</div>\n")
    raise nodes.SkipNode


MATH_FONT = "STIXTwoMath-Regular.ttf"
_FONT_CSS = """/* written by docs/_ext/mathml.py: the math font shipped with the site */
@font-face { font-family: "STIX Two Math"; src: url("fonts/%s") format("truetype"); font-display: swap; }
math { font-family: "STIX Two Math", math; }
""" % MATH_FONT


def math_font() -> Path | None:
    """The STIX Two Math font file of the installed ``ziamath`` package, else None."""
    spec = importlib.util.find_spec("ziamath")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "fonts" / MATH_FONT
    return path if path.is_file() else None


def _add_font_css(app) -> None:
    if app.builder.format == "html" and math_font() is not None:
        app.add_css_file("refattn-mathfont.css")


def _copy_font(app, exc) -> None:
    font = math_font()
    if exc is not None or app.builder.format != "html" or font is None:
        return
    static = Path(app.outdir) / "_static"
    (static / "fonts").mkdir(parents=True, exist_ok=True)
    shutil.copy2(font, static / "fonts" / MATH_FONT)
    (static / "refattn-mathfont.css").write_text(_FONT_CSS)


def setup(app):
    app.add_html_math_renderer("mathml", (html_visit_math, None), (html_visit_displaymath, None))
    app.connect("builder-inited", _add_font_css)
    app.connect("build-finished", _copy_font)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
