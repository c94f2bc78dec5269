"""No text damaged by a mechanical line wrap: every docstring, comment and string reads in whole lines.

A wrap that only splits lines longer than the limit leaves the tail of each split line alone on a line of its
own, in the middle of the paragraph it came from::

    Estimates the softmax kernel: ``E[phi(q) . phi(k)] = exp(q . k)`` (Choromanski et
    al.
    Lemma 1; Chowdhury et al., the identity before Eq. (9)). Unstabilised: entries overflow (inf) or ...

A paragraph filled to the line length has a short line only at its end, so the repair is to re-flow the
paragraph, not to join two lines. The detector reads every ``.py`` file of the source packages (and of
``tests/``) and reports

* a *fragment*: a docstring, string or comment line of one or two words between two lines of the same
  paragraph -- the line before it is prose that does not end a sentence or clause, the line after it continues
  the paragraph (same indentation, not blank, not a list item, header, directive or code);
* a ``#:`` comment (the attribute documentation Sphinx reads) whose next line lost its ``#:`` and became a
  plain ``#`` comment;
* a piece of one or two words inside an implicit string concatenation (``"... its " "quadrature " "rule"``);
* an RST table border broken into two lines.

Short lines that are structure rather than damage are not reported: numpydoc section headers and their
underlines, parameter and type lines (``x : array``, and a name whose description is indented below it), list
items, RST directives and fields, doctest and code lines, short lines separated by blank lines, and the last
line of a paragraph.
"""

from __future__ import annotations

import ast
import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = pathlib.Path(__file__).resolve().parent / "data" / "fragments"
#: Top-level folders whose ``.py`` files are read.
SOURCE_DIRS = ("refattn", "accel", "validation", "paper_checks", "benchmarks", "tests")

#: A line longer than this (characters, stripped) is not an orphan even with two words (two long names).
MAX_FRAGMENT = 40
_SENTENCE_END = (".", ":", ";", "!", "?", "::")
_BULLET = re.compile(r"^([-*+\u2022]\s|\d+[.)]\s|\(?[a-z0-9]{1,3}\)\s|#\.\s)")
_UNDERLINE = re.compile(r"^([-=~^\"'`#*+])\1{2,}$")
_TABLE_BORDER = re.compile(r"^=+( +=+)+$")
_WORD = re.compile(r"[A-Za-z]")
_CODE_START = re.compile(r"^(>>>|\.\.\.(\s|$)|\.\. |:[\w ]+:(\s|$)|\|\s)")


def _words(text: str) -> int:
    return len(text.split())


def _is_structure(text: str) -> bool:
    """A short line that is structure rather than prose: a header underline, a bullet, a directive or field,
    a doctest line, a ``name : type`` line, a table border or row, a ``{name}`` placeholder
    (``refattn._docs.fill_doc``), or anything without a letter."""
    s = text.strip()
    return (not _WORD.search(s) or bool(_UNDERLINE.match(s)) or bool(_BULLET.match(s))
            or bool(_CODE_START.match(s)) or " : " in s or s.endswith(" :") or bool(_TABLE_BORDER.match(s))
            or "  " in s or bool(re.fullmatch(r"\{\w+\}", s)))


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def paragraph_fragments(lines: list[str]) -> list[int]:
    """Indices of the orphaned one- or two-word lines in a block of text lines (a docstring's or a comment
    block's text, prefixes already removed).

    A line ``i`` is an orphan when it holds one or two words and sits inside a paragraph: lines ``i - 1``
    and ``i + 1`` are non-blank prose at the same indentation, line ``i - 1`` ends neither a sentence nor a
    clause, and line ``i + 1`` is not a header underline, list item, directive or code. The line before an
    underline is a section header and is never an orphan; lines inside a literal block (after ``::``) are
    code.
    """
    out = []
    literal_indent = None                               # indentation of the line that opened a ``::`` block
    for i, line in enumerate(lines):
        s = line.strip()
        if literal_indent is not None:
            if s and _indent(line) <= literal_indent:
                literal_indent = None
            else:
                continue
        if s.endswith("::"):
            literal_indent = _indent(line)
        if not s or _words(s) > 2 or len(s) > MAX_FRAGMENT or i == 0 or i + 1 >= len(lines):
            continue
        prev, nxt = lines[i - 1], lines[i + 1]
        ps, ns = prev.strip(), nxt.strip()
        if not ps or not ns or not (_indent(prev) == _indent(line) == _indent(nxt)):
            continue
        if ps.endswith(_SENTENCE_END) or _is_structure(prev) or _is_structure(line):
            continue
        if _UNDERLINE.match(ns) or _is_structure(nxt):
            continue
        if i + 2 < len(lines) and _UNDERLINE.match(lines[i + 2].strip()):
            continue                                                       # the next line is a section header
        out.append(i)
    return out


_TRIPLE = re.compile(r'[rRbBuUfF]{0,2}("""|\'\'\')')


def _text_strings(tree: ast.AST, src_lines: list[str]):
    """Every multi-line string of text: docstrings (a string expression statement: module, class, function or
    attribute) and triple-quoted strings (a shared docstring block, a help text)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if node.end_lineno == node.lineno:
            continue
        if _TRIPLE.match(src_lines[node.lineno - 1][node.col_offset:]):
            yield node


def _string_lines(src_lines: list[str], node: ast.Constant) -> tuple[int, list[str]]:
    """The source lines of a triple-quoted string without its quotes, the first line's text moved to the
    indentation of the others; ``(first line number, lines)``."""
    first, last = node.lineno, node.end_lineno
    lines = list(src_lines[first - 1:last])
    opening = _TRIPLE.match(lines[0], node.col_offset)
    body = min((_indent(ln) for ln in lines[1:] if ln.strip()), default=0)
    lines[0] = " " * body + lines[0][opening.end():].strip()
    lines[-1] = re.sub(r'("""|\'\'\').*$', "", lines[-1])
    return first, lines


def _comment_blocks(toks: list[tokenize.TokenInfo]) -> list[list[tuple[int, int, str]]]:
    """Runs of comments on consecutive lines starting at the same column: ``[(line, column, text)]``. A
    comment after code starts a run that only comments on lines of their own continue (a column of comments
    after code lines, such as shape annotations, is one run per line)."""
    blocks, cur = [], []
    for tok in toks:
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        own_line = not tok.line[:col].strip()
        if cur and own_line and row == cur[-1][0] + 1 and col == cur[-1][1]:
            cur.append((row, col, tok.string))
        else:
            if cur:
                blocks.append(cur)
            cur = [(row, col, tok.string)]
    if cur:
        blocks.append(cur)
    return blocks


def _comment_text(comment: str) -> str:
    text = comment[2:] if comment.startswith("#:") else comment[1:]
    return text[1:] if text.startswith(" ") else text


def _concatenations(toks: list[tokenize.TokenInfo]) -> list[list[tuple[int, str]]]:
    """Implicit concatenations of two or more string literals: ``[(line, token)]`` per concatenation."""
    out, cur = [], []
    for tok in toks:
        if tok.type == tokenize.STRING:
            cur.append((tok.start[0], tok.string))
        elif tok.type in (tokenize.NL, tokenize.COMMENT):
            continue
        else:
            if len(cur) > 1:
                out.append(cur)
            cur = []
    if len(cur) > 1:
        out.append(cur)
    return out


def _string_value(token: str) -> str:
    m = re.match(r'^([rRbBuUfF]{0,2})("""|\'\'\'|"|\')(.*)\2$', token, re.S)
    return m.group(3) if m else token


def find_fragments(source: str) -> list[tuple[int, str, str]]:
    """``[(line, kind, text)]`` of the fragments in a module's source (line numbers 1-based)."""
    src_lines = source.splitlines()
    found = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    for node in _text_strings(tree, src_lines):
        first, lines = _string_lines(src_lines, node)
        found += [(first + i, "docstring", lines[i].strip()) for i in paragraph_fragments(lines)]
        for i in range(1, len(lines)):
            if _TABLE_BORDER.match(lines[i - 1].strip()) and re.fullmatch(r"=+", lines[i].strip()):
                found.append((first + i, "table", lines[i].strip()))
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for block in _comment_blocks(toks):
        texts = [" " * col + _comment_text(c) for _, col, c in block]
        found += [(block[i][0], "comment", texts[i].strip()) for i in paragraph_fragments(texts)]
        for (_, _, a), (row, _, b) in zip(block, block[1:], strict=False):
            if a.startswith("#:") and not b.startswith("#:"):
                found.append((row, "#: cut short", b))
    for pieces in _concatenations(toks):
        values = [_string_value(t) for _, t in pieces]
        is_f = ["f" in t[:2].lower() for _, t in pieces]
        for k in range(1, len(pieces) - 1):
            v, before = values[k], values[k - 1]
            if is_f[k] != is_f[k - 1] and is_f[k] != is_f[k + 1]:
                continue                            # e.g. a plain piece with literal braces among f-strings
            if (v.strip() and _words(v) <= 2 and not before.endswith(("\\n", "\n"))
                    and re.search(r"[A-Za-z0-9]", v) and _words(before) > 2):
                found.append((pieces[k][0], "string piece", v))
    first_per_line = {}
    for line, kind, text in sorted(found):
        first_per_line.setdefault(line, (line, kind, text))
    return sorted(first_per_line.values())


def _source_files():
    for top in SOURCE_DIRS:
        yield from sorted((ROOT / top).rglob("*.py"))


def tree_fragments() -> list[str]:
    """``path:line: kind: text`` of every fragment under the source folders."""
    out = []
    for path in _source_files():
        rel = path.relative_to(ROOT)
        out += [f"{rel}:{line}: {kind}: {text}" for line, kind, text in find_fragments(path.read_text())]
    return out


def test_no_orphaned_fragments():
    found = tree_fragments()
    assert not found, f"{len(found)} orphaned fragments (re-flow each paragraph):\n" + "\n".join(found)


# ---- the detector finds the damage and leaves structure alone ---------------------------------------------
#: Snippets cut (``git show``) from the source before the repair, a few lines of context each; the header of
#: each names its origin and the lines of its fragments (``# Fragments on lines: 6, 10``).
DAMAGED = sorted(p.name for p in FIXTURES.glob("damaged_*.txt"))


def _declared_lines(text: str) -> list[int]:
    m = re.search(r"^# Fragments on lines: (.*)$", text, re.M)
    return [int(n) for n in m.group(1).split(",")] if m else []


def test_every_fixture_declares_fragments():
    assert len(DAMAGED) >= 4
    assert all(_declared_lines((FIXTURES / name).read_text()) for name in DAMAGED)


@pytest.mark.parametrize("name", DAMAGED)
def test_detector_finds_the_fragments_of(name):
    text = (FIXTURES / name).read_text()
    assert [line for line, _, _ in find_fragments(text)] == _declared_lines(text)


def test_detector_leaves_legitimate_short_lines_alone():
    assert find_fragments((FIXTURES / "legitimate.txt").read_text()) == []


@pytest.mark.parametrize(("source", "kind"), [
    ('def f():\n    """One line of text that goes on and does not end\n    here\n    but continues."""\n',
     "docstring"),
    ("# A comment that goes on and does not\n# end\n# but continues on the next line.\nx = 1\n", "comment"),
    ("#: A constant's documentation that is\n# cut short.\nX = 1\n", "#: cut short"),
    ('S = ("a statement that goes on and "\n     "on "\n     "and ends here.")\n', "string piece"),
    ('"""Doc.\n\n=====  =====\n=====\na      b\n"""\n', "table"),
    ("_BLOCK = '''\n    A shared block whose text goes on and does not\n    end\n    but continues.\n"
     "    '''\n", "docstring"),
])
def test_planted_fragment_is_reported(source, kind):
    assert [k for _, k, _ in find_fragments(source)] == [kind]


@pytest.mark.parametrize("source", [
    'def f(x):\n    """Sum.\n\n    Parameters\n    ----------\n    x : array\n        Input.\n    """\n',
    # the end of a paragraph
    'def f(x):\n    """Sum of the\n    entries.\n\n    Next paragraph.\n    """\n',
    'def f():\n    """List:\n\n    - one\n    - two\n    - three\n    """\n',
    "# Short\n\n# lines\n\n# apart\nx = 1\n",
    # a column of shape comments after code
    "x = 1    # (N, d)\ny = 2    # (d,)\nz = 3    # (N,)\n",
    # a plain piece holding literal braces between f-strings
    'S = (f"{a}: expected files " "{b,c}-{d,e}.txt; " f"not all there ({f})")\n',
    # a fill_doc block and its placeholders
    "_BLOCK = '''\n    x : array\n        Input.\n    '''\n",
    "def f(x):\n    '''Sum of the\n    {shared}\n    and more.\n\n    Parameters\n    ----------\n    {x}\n"
    "    '''\n",
])
def test_short_lines_that_are_not_fragments(source):
    assert find_fragments(source) == []
