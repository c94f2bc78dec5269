"""Check that every page of a built site shows its equations without a network.

``python docs/_tools/check_offline.py docs/_build/html``: exit status 0 when every page passes, 1 with the
problems listed.

For each ``*.html`` page under the directory (``_static/`` holds the theme's templates, not pages):

- nothing is loaded from another host: no ``src=``/``href=`` of a ``<script>``, ``<link>``, ``<img>``,
  ``<iframe>``, ``<source>`` or ``<object>`` starts with ``http:``, ``https:`` or ``//``, and no script or
  ``<link>`` names a known CDN or MathJax (the equations are MathML, rendered by the browser itself);
- every file the page loads (a relative ``src``/``href`` of those tags) is present in the build, and so is
  every file its local stylesheets load (``url(...)``: the math font);
- math is rendered: a page with math elements (``class="math``) holds ``<math`` elements and no LaTeX left
  between ``\\(``/``\\[`` delimiters for a script to typeset.

Links a reader follows (``<a href="https://...">``) are not loads and are allowed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

_TAG = re.compile(r"<(script|link|img|iframe|source|object)\b([^>]*)>", re.I)
_ATTR = re.compile(r"\b(src|href|data|rel)\s*=\s*[\"']([^\"']*)[\"']", re.I)
_LOADED_LINKS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut", "apple-touch-icon", "manifest"}
_REMOTE = re.compile(r"^(https?:)?//", re.I)
_CDN = re.compile(r"cdn\.jsdelivr|cdnjs\.|unpkg\.com|polyfill\.io|googleapis\.com|mathjax", re.I)
_MATH_CLASS = re.compile(r"class=\"math\b")
_UNRENDERED = re.compile(r"\\\(.+?\\\)|\\\[.+?\\\]", re.S)


_CSS_URL = re.compile(r"url\(\s*[\"']?([^\"')]+)[\"']?\s*\)")


def css_problems(css: Path) -> list[str]:
    """What a stylesheet loads from the network, or names and lacks (fonts, images: ``url(...)``)."""
    out = []
    for url in _CSS_URL.findall(css.read_text(encoding="utf-8", errors="replace")):
        if url.startswith("data:") or url.startswith("#"):
            continue
        if _REMOTE.match(url):
            out.append(f"loads {url} from the network")
        elif not (css.parent / unquote(urlsplit(url).path)).exists():
            out.append(f"loads {url}, which is not in the build")
    return out


def page_problems(page: Path, root: Path) -> list[str]:
    """The problems of one built page (see the module docstring); [] when it passes."""
    text = page.read_text(encoding="utf-8", errors="replace")
    rel = page.relative_to(root).as_posix()
    problems = []
    for tag, attrs in _TAG.findall(text):
        found = {k.lower(): v for k, v in _ATTR.findall(attrs)}
        if tag.lower() == "link" and not set(found.get("rel", "").lower().split()) & _LOADED_LINKS:
            continue                     # rel="next", "canonical", ...: a link, not a load
        url = found.get("src") or found.get("href") or found.get("data") or ""
        if _REMOTE.match(url):
            problems.append(f"{rel}: <{tag}> loads {url} from the network")
            continue
        path = unquote(urlsplit(url).path)
        if not path or url.startswith(("#", "data:", "mailto:")):
            continue
        target = (page.parent / path).resolve()
        if not target.exists():
            problems.append(f"{rel}: <{tag}> loads {url}, which is not in the build")
        elif target.suffix == ".css":
            problems += [f"{rel}: {url} {p}" for p in css_problems(target)]
    for code in re.findall(r"<script\b.*?</script>|<link\b[^>]*>", text, flags=re.S | re.I):
        for m in _CDN.finditer(code):     # in a script or a link tag (prose may name MathJax)
            problems.append(f"{rel}: a script or link names {m.group(0)!r}: {code[:120]!r}")
    if _MATH_CLASS.search(text):
        if "<math" not in text:
            problems.append(f"{rel}: has math elements but no <math> (MathML) in it")
        body = text.split("<body", 1)[-1]
        body = re.sub(r"<(pre|code|script|style)\b.*?</\1>", "", body, flags=re.S | re.I)
        left = _UNRENDERED.search(body)
        if left is not None:
            problems.append(f"{rel}: LaTeX left for a script to typeset: {left.group(0)[:80]!r}")
    return problems


def site_problems(root: Path) -> tuple[int, list[str]]:
    """(number of pages checked, every problem found) under the built site `root`."""
    root = Path(root)
    pages = sorted(p for p in root.rglob("*.html") if "_static" not in p.relative_to(root).parts)
    problems = [p for page in pages for p in page_problems(page, root)]
    return len(pages), problems


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python docs/_tools/check_offline.py BUILT_HTML_DIR (a directory)", file=sys.stderr)
        return 2
    n, problems = site_problems(Path(argv[0]))
    if n == 0:
        print(f"check_offline: no .html page under {argv[0]}", file=sys.stderr)
        return 1
    for p in problems:
        print(p)
    with_math = sum(1 for p in Path(argv[0]).rglob("*.html") if "<math" in p.read_text(errors="replace"))
    print(f"check_offline: {n} pages, {with_math} with MathML, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
