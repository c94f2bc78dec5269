"""Render paper-check verdicts and evidence on the paper pages, from committed records.

At ``builder-inited`` this reads the fast (non-slow) claims' results from the committed record
``paper_checks/records/docs-tiny/`` (written by ``python docs/_tools/record_checks.py``: the ``--json`` rows
of ``python -m paper_checks --size tiny --seed 0``, its figures and its command.txt), so the build runs no
claim; the pages say which record, commit and date they show. ``REFATTN_DOCS_RUN_CHECKS=1`` runs that command
afresh instead (in a subprocess, 20-60 s on 2 cores; the figures under ``<outdir>/../paper_checks_report``),
and ``REFATTN_DOCS_CHECKS_JSON=<path>`` renders an existing JSON. A registered fast claim with no row in what
is rendered is a warning (an error under ``-W``). Three directives read the rows:

``.. paper-claim:: <claim id>``
    the claim as the registry states it (section, statement, expected verdict, decision rule), then the
    measured verdict, the summary, the corrected statement for an erratum and the evidence table.
``.. paper-claims-table:: <glob>``
    one row per matching claim: id (linking to its paper-claim block), section, expected, measured verdict.
``.. code-of:: <module.function>``
    the body of that function as it is in the source now (docstring elided, real line numbers), with a link to
    its API entry: the lines that compute an equation, read from the code at build time; lines whose comment
    names an equation (``# Eq. (3)``) are highlighted.

A slow claim (skipped at this size) is rendered from the newest committed experiment record that has
it: ``paper_checks/records/<group>/results.json`` (the ``--json`` output of a run with ``--all``), with
its figures (``<group>/figures/*.png``) and the command, date and machine of ``<group>/command.txt``,
under a note "from the committed record of <date>, size <size>"; without a record it says "no committed
record yet" and gives the command that runs it. ``REFATTN_DOCS_RECORDS=<dir>`` reads records from another
directory.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from sphinx.util import logging

logger = logging.getLogger(__name__)
_ROWS: dict[str, dict] = {}
PAPER_PREFIXES = ("horn.", "kl.", "flt.")   # every registered claim with these ids must be on a page
_META: dict[str, object] = {}
_RECORDS: dict[str, dict] = {}    # claim id -> the newest record row that has it (load_records)
REPO = Path(__file__).resolve().parents[2]
RECORDS_DIR = REPO / "paper_checks" / "records"
FAST_RECORD = "docs-tiny"           # the group of the fast claims' record (docs/_tools/record_checks.py)
NOT_MEASURED = ("skipped", "error")   # verdicts that say nothing about the claim

_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2})(?::\d{2})?)?\s*(UTC|Z|[+-]\d{2}:?\d{2})?")


def _git(args: list[str], cwd: Path) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def record_date(command_txt: str) -> str | None:
    """The first date (``YYYY-MM-DD`` and, when given, ``HH:MM`` and a zone) written in a command.txt; a date
    without a time takes the time of a later "finished HH:MM"."""
    m = _DATE.search(command_txt)
    if m is None:
        return None
    day, hm, zone = m.groups()
    if hm is None:     # "date: 2026-11-24, started 14:16 UTC, finished 15:33 UTC": the finishing time
        fin = re.search(r"\bfinished (?:at )?(\d{2}:\d{2})\s*(UTC|Z)?", command_txt[m.end():])
        if fin is not None:
            hm, zone = fin.groups()
    zone = "UTC" if zone in ("Z", "UTC", "+00:00", "+0000") else zone
    return " ".join(x for x in (day, hm, zone if hm else None) if x)


def load_records(root: Path) -> dict[str, dict]:
    """Claim id -> the newest measured row among ``root/<group>/results.json``.

    Each row returned is the record's row (verdict, summary, evidence, figures, ...) plus ``_record``: group,
    directory, date (from command.txt, else the commit date of results.json), the text of command.txt, the
    size the record ran at, the commit that last touched results.json ('' when it is not committed) and the
    figures found under ``<group>/figures`` (also as the row's ``figures``, replacing the paths the run
    wrote). Rows whose verdict is ``skipped`` or ``error`` are ignored. A
    results.json that is not valid JSON raises ValueError naming the file (a broken record must not vanish
    from the site silently)."""
    best: dict[str, dict] = {}
    root = Path(root)
    if not root.is_dir():
        return best
    for res in sorted(root.glob("*/results.json")):
        group_dir = res.parent
        if group_dir.name == FAST_RECORD:      # the fast claims' record: rendered as this build's rows
            continue
        try:
            rows = json.loads(res.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{res}: not valid JSON ({exc})") from None
        cmd_file = group_dir / "command.txt"
        cmd_text = cmd_file.read_text().strip() if cmd_file.exists() else ""
        commit = _git(["log", "-1", "--format=%h %cI", "--", str(res)], cwd=group_dir)
        date = record_date(cmd_text) or (record_date(commit.split(" ", 1)[1]) if " " in commit else None)
        for row in rows:
            if row.get("verdict") in NOT_MEASURED:
                continue
            figs = [group_dir / "figures" / Path(f).name for f in row.get("figures") or []]
            meta = {"group": group_dir.name, "dir": str(group_dir), "date": date or "an unknown date",
                    "sort": date or "", "command": cmd_text,
                    "size": (row.get("provenance") or {}).get("size", "?"),
                    "commit": commit.split(" ")[0] if commit else "",
                    "figures": [str(f) for f in figs if f.exists()]}
            old = best.get(row["id"])
            if old is None or meta["sort"] >= old["_record"]["sort"]:
                best[row["id"]] = {**row, "figures": meta["figures"], "_record": meta}
    return best


def _run_checks(app) -> None:
    given = os.environ.get("REFATTN_DOCS_CHECKS_JSON")
    record = RECORDS_DIR / FAST_RECORD
    _META.clear()
    if given:
        path = Path(given)
    elif os.environ.get("REFATTN_DOCS_RUN_CHECKS") == "1":
        path = Path(app.outdir).parent / "paper_checks.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        report = path.parent / "paper_checks_report"      # figures (PNGs) of the checks that draw them
        cmd = [sys.executable, "-m", "paper_checks", "--size", "tiny", "--seed", "0", "--json", str(path),
               "--report", str(report)]
        path.unlink(missing_ok=True)                      # never render a previous build's results
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=Path(app.srcdir).parent, capture_output=True, text=True)
        if proc.returncode not in (0, 1) or not path.exists():
            raise RuntimeError(f"paper checks failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        if proc.returncode == 1:              # a claim raised: shown as such, and -W fails the build
            logger.warning(f"paper checks: some claims raised (exit 1): {proc.stderr.strip()[-1500:]}")
        _META["seconds"] = time.perf_counter() - t0
        _META["fresh"] = True
        logger.info(f"[paperclaims] ran {' '.join(cmd[1:])} in {_META['seconds']:.1f} s")
    else:
        path = record / "results.json"
        if not path.exists():
            raise RuntimeError(f"{path} is missing: run `python docs/_tools/record_checks.py` (or build with "
                               "REFATTN_DOCS_RUN_CHECKS=1)")
        cmd_file = record / "command.txt"
        _META["record"] = {"command": cmd_file.read_text().strip() if cmd_file.exists() else "",
                           "commit": _git(["log", "-1", "--format=%h", "--", str(path)], cwd=record)}
    rows = json.loads(path.read_text())
    if "record" in _META:                 # figure paths in the record are relative to it
        for r in rows:
            r["figures"] = [str(record / f) for f in r.get("figures") or []]
    _ROWS.clear()
    _ROWS.update({r["id"]: r for r in rows})
    _META["path"] = str(path)
    _META["provenance"] = rows[0].get("provenance", {}) if rows else {}
    records_dir = Path(os.environ.get("REFATTN_DOCS_RECORDS") or RECORDS_DIR)
    _RECORDS.clear()
    _RECORDS.update(load_records(records_dir))
    if _RECORDS:
        logger.info(f"[paperclaims] {len(_RECORDS)} claims have committed records under {records_dir}")


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        s = ", ".join(_fmt(x) for x in v[:8])
        return f"[{s}{', ...' if len(v) > 8 else ''}]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in list(v.items())[:8]) + "}"
    return str(v)


def _literal(text: str) -> str:
    """`text` as an inline literal that survives rst parsing (backquotes dropped)."""
    text = str(text).replace("`", "'").replace("\n", " ")
    return f"``{text}``" if text.strip() else ""


def _esc(text: str) -> str:
    """Plain rst text: escape the characters rst would interpret."""
    out = str(text).replace("\\", "\\\\")
    for ch in "*`|_[]":
        out = out.replace(ch, "\\" + ch)
    return out.replace("\n", " ")


def _provenance_line() -> str:
    p = _META.get("provenance", {})
    keys = ("refattn", "git_commit", "numpy", "seed", "size")
    measured = ", ".join(f"{k} {p.get(k)}" for k in keys if k in p)
    rec = _META.get("record")
    if rec is not None:
        date = record_date(rec["command"]) or "an unknown date"
        commit = f"commit ``{rec['commit']}``" if rec["commit"] else "**not committed yet**"
        head = (f"Fast claims: from the committed record ``paper_checks/records/{FAST_RECORD}/`` ({commit}), "
                f"run on {_esc(date)}: {measured}; ``python docs/_tools/record_checks.py`` re-runs it. ")
    elif _META.get("fresh"):
        head = f"Fast claims: run while this site was built: {measured}. "
    else:
        head = f"Fast claims: from ``{Path(str(_META.get('path', '?'))).name}``: {measured}. "
    return head + ("Slow (trained) claims: from the newest committed record under ``paper_checks/records/`` "
                   "where one exists, marked as such.")


def _measured_where() -> str:
    """How the fast claims' figures came to be, for their captions."""
    if "record" in _META:
        return f"from the record ``{FAST_RECORD}``"
    return "drawn by the check during this build" if _META.get("fresh") else "from the rendered JSON"


def _row_lines(r: dict, srcdir: Path, figure_caption: str) -> list[str]:
    """rst of one measured row: verdict, statement, rule, summary, erratum table, figures, evidence."""
    lines = [f"**Claim** ``{r['id']}`` ({_esc(r['section'])}): measured verdict **{r.get('verdict')}** "
             f"(expected: {r.get('expected')}).", "",
             f"*Statement (as printed):* {_esc(r['statement'])}", ""]
    if r.get("rule"):
        lines += [f"*Decision rule:* {_esc(r['rule'])}", ""]
    if r.get("summary"):
        lines += [f"*Result:* {_esc(r['summary'])}", ""]
    if r.get("corrected"):   # the erratum side by side: as printed | corrected
        lines += [".. list-table::", "   :header-rows: 1", "   :widths: 50 50", "",
                  "   * - as printed", "     - corrected",
                  f"   * - {_esc(r['statement'])}", f"     - {_esc(r['corrected'])}", ""]
    slips = r.get("slips") or (r.get("evidence") or {}).get("slips") or []
    if slips:                # notation slips: quoted, corrected, checked
        lines += [".. list-table:: notation slips", "   :header-rows: 1", "   :widths: 30 30 40", "",
                  "   * - as printed", "     - corrected", "     - why notation only"]
        for sl in slips:
            lines += [f"   * - {_esc(sl['printed'])}", f"     - {_esc(sl['corrected'])}",
                      f"     - {_esc(sl['why'])}"]
        lines.append("")
    for fig in r.get("figures") or []:
        fp = Path(fig).resolve()
        if not fp.exists():
            continue        # a path the run wrote elsewhere (REFATTN_DOCS_CHECKS_JSON from another machine)
        rel = Path(os.path.relpath(fp, Path(srcdir).resolve()))     # may leave the docs tree ('../'): fine
        lines += [f".. figure:: /{rel.as_posix()}", "   :width: 80%", "",
                  f"   ``{fp.name}``, {figure_caption}.", ""]
    ev = r.get("evidence") or {}
    if ev:   # collapsed: a <details> element in HTML, a plain table elsewhere
        summary = f"<details><summary>Evidence ({len(ev)} quantities)</summary>"
        lines += [".. raw:: html", "", f"   {summary}", ""]
        lines += [".. list-table::", "   :header-rows: 1", "",
                  "   * - quantity", "     - value"]
        for k, v in ev.items():
            lines += [f"   * - {_literal(k)}", f"     - {_literal(_fmt(v))}"]
        lines += ["", ".. raw:: html", "", "   </details>", ""]
    return lines


def claim_lines(cid: str, row: dict | None, record: dict | None, srcdir: Path) -> list[str]:
    """The rst of one ``.. paper-claim::`` block.

    `row` is this build's result for `cid` (None when the run did not produce it), `record` the newest
    committed record row (:func:`load_records`) or None. A row measured in this build wins; a slow claim this
    build skipped is rendered from `record` under a note naming its date, size, group and commit, with the
    record's command.txt; without a record the block says "no committed record yet" and gives the command."""
    lines: list[str] = [f".. _claim-{cid}:", ""]
    if row is not None and row.get("verdict") != "skipped":     # measured (or raised) in this build
        return lines + _row_lines(row, srcdir, _measured_where())
    if record is not None:
        meta = record["_record"]
        where = f"``paper_checks/records/{meta['group']}/``"
        commit = f", commit ``{meta['commit']}``" if meta["commit"] else ", **not committed yet**"
        lines += [".. admonition:: From the committed record of " + _esc(meta["date"]) + ", size "
                  + _esc(str(meta["size"])), "   :class: note paper-claim-record", "",
                  f"   Not run while this site was built (a slow, trained claim): the verdict, evidence and "
                  f"figures below are read from {where}{commit}. It was produced by:", "",
                  "   .. code-block:: text", ""]
        lines += ["      " + ln for ln in (meta["command"] or "(no command.txt in the record)").splitlines()]
        lines += [""]
        return lines + _row_lines(record, srcdir, f"from the record of {_esc(meta['date'])}")
    from paper_checks import REGISTRY, load_all
    load_all()
    c = REGISTRY.get(cid)
    if c is None:
        raise KeyError(cid)
    status = "**no committed record yet**" if c.slow else "**not run in this build**"
    lines += [f"**Claim** ``{cid}`` ({_esc(c.section)}) -- {status}"
              + (" (slow: not run while the site is built)" if c.slow else "")
              + f"; run it with ``{c.command}``.", "",
              f"*Statement:* {_esc(c.statement)}", ""]
    if c.rule:
        lines += [f"*Decision rule:* {_esc(c.rule)}", ""]
    return lines


class PaperClaim(Directive):
    required_arguments = 1
    has_content = False

    def run(self):
        cid = self.arguments[0]
        env = self.state.document.settings.env
        if not hasattr(env, "refattn_claims_shown"):
            env.refattn_claims_shown = {}
        env.refattn_claims_shown[cid] = env.docname
        try:
            lines = claim_lines(cid, _ROWS.get(cid), _RECORDS.get(cid), Path(env.srcdir))
        except KeyError:
            raise self.error(f"paper-claim: no claim {cid!r} in the registry") from None
        container = nodes.container(classes=["paper-claim"])
        self.state.nested_parse(StringList(lines, source=f"paper-claim {cid}"), self.content_offset,
                                container)
        return [container]


def measured_cell(cid: str, row: dict | None, record: dict | None, slow: bool) -> str:
    """The 'measured' cell of the claims table."""
    if row is not None and row.get("verdict") != "skipped":
        return f"**{row['verdict']}**"
    if record is not None:
        meta = record["_record"]
        return f"**{record['verdict']}** (record {_esc(meta['date'])}, size {_esc(str(meta['size']))})"
    return "no committed record yet (slow)" if slow else "not run"


class PaperClaimsTable(Directive):
    required_arguments = 1
    has_content = False

    def run(self):
        pattern = self.arguments[0]
        from paper_checks import REGISTRY, load_all
        load_all()
        ids = sorted(i for i in REGISTRY if fnmatch.fnmatch(i, pattern))
        if not ids:
            raise self.error(f"paper-claims-table: no claim matches {pattern!r}")
        lines = [_provenance_line(), "", ".. list-table::", "   :header-rows: 1",
                 "   :widths: 30 40 15 15", "",
                 "   * - claim", "     - section", "     - expected", "     - measured"]
        for i in ids:
            c, r = REGISTRY[i], _ROWS.get(i)
            measured = measured_cell(i, r, _RECORDS.get(i), c.slow)
            lines += [f"   * - :ref:`{i} <claim-{i}>`", f"     - {_esc(c.section)}", f"     - {c.expected}",
                      f"     - {measured}"]
        lines.append("")
        container = nodes.container(classes=["paper-claims-table"])
        src = StringList(lines, source=f"paper-claims-table {pattern}")
        self.state.nested_parse(src, self.content_offset, container)
        return [container]


# what computes: arithmetic operators, and the array functions that do maths (not shapes, not checks)
_ARITH_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult, ast.Pow, ast.FloorDiv)
MATH_CALLS = frozenset({
    "exp", "expm1", "log", "log1p", "logaddexp", "sin", "cos", "tan", "tanh", "sinh", "cosh", "arctan2",
    "sqrt", "square", "abs", "sum", "cumsum", "prod", "mean", "var", "max", "min", "maximum", "minimum",
    "matmul", "einsum", "tensordot", "vecdot", "outer", "sinc", "fft", "ifft", "rfft", "irfft", "softmax",
    "logsumexp", "clip", "sign", "where", "erf",
})


def _computes(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, _ARITH_OPS):
            return True
        if isinstance(sub, ast.UnaryOp) and isinstance(sub.op, ast.USub) \
                and not isinstance(sub.operand, ast.Constant):
            return True
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in MATH_CALLS:
                return True
    return False


def arithmetic_lines(source: str) -> list[int]:
    """1-based line numbers (within `source`, one function's dedented source) of the statements that compute:
    an assignment, augmented assignment, return or yield whose value holds an arithmetic operator (``+ - * /
    @ ** //``, a negation) or a maths call (:data:`MATH_CALLS`: exp, cos, sum, einsum, ...). Argument checks
    (``check_*`` calls, ``raise``, ``assert``) and plain calls of another function are not arithmetic."""
    fn = ast.parse(source).body[0]
    lines: set[int] = set()
    for node in ast.walk(fn):
        assigns = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)
        if isinstance(node, assigns) and node.value is not None:
            value = node.value
        elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Yield, ast.YieldFrom)):
            value = node.value
        else:
            continue
        if isinstance(node, ast.AugAssign) and isinstance(node.op, _ARITH_OPS) or _computes(value):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return sorted(lines)


def core_calls(source: str) -> list[str]:
    """The names of the ``*_core`` functions that one function's `source` calls, in order of appearance."""
    fn = ast.parse(source).body[0]
    calls = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name.endswith("_core") and name not in calls:
                calls.append(name)
    return calls


def excerpt_problem(source: str, composition: str | None) -> str | None:
    """Why one function's `source` cannot stand beside an equation (None when it can): it needs an arithmetic
    line (:func:`arithmetic_lines`); a function marked as a composition (its equation is a chain of layers,
    each computed in its own core) instead needs to call at least two ``*_core`` functions and no checks."""
    if arithmetic_lines(source):
        return None
    if composition:
        cores = core_calls(source)
        checks = re.findall(r"\bcheck_\w+\(", source.split('"""')[-1])
        if len(cores) >= 2 and not checks:
            return None
        return (f"marked as a composition, but it calls {len(cores)} core(s) ({', '.join(cores) or 'none'}) "
                f"and {len(checks)} check(s): a composition calls two or more cores and no check")
    return "no arithmetic line (only checks and calls): show the core or the lines that compute the equation"


def public_of(qual: str, given: str | None) -> str | None:
    """The documented public function whose computation `qual` is: `given` (an option) when set, else the
    name without its ``_core`` suffix (``f_fwd_core`` -> ``f_fwd``), then without ``_fwd`` (-> ``f``);
    None when none of them has an API page."""
    from xrefs import resolve_name

    if given:
        return resolve_name(given, None)
    modname, name = qual.rsplit(".", 1)
    base = name[:-len("_core")] if name.endswith("_core") else name
    tries = [base] + ([base[:-len("_fwd")]] if base.endswith("_fwd") else [])
    for n in tries:
        if n.startswith("_"):
            continue
        found = resolve_name(f"{modname}.{n}", None)
        if found is not None:
            return found
    return None


class CodeOf(Directive):
    """``.. code-of:: module.function``: the function's source, docstring elided, with its arithmetic lines
    highlighted and a link to the public function it computes for (option ``:public: name`` when the name
    cannot be derived; ``:composition: reason`` for a function that chains layer cores, see
    :func:`excerpt_problem`)."""

    required_arguments = 1
    has_content = False
    option_spec = {"public": directives.unchanged, "composition": directives.unchanged_required}

    def run(self):
        import importlib
        import inspect
        import textwrap

        qual = self.arguments[0]
        modname, name = qual.rsplit(".", 1)
        try:
            obj = getattr(importlib.import_module(modname), name)
        except (ImportError, AttributeError) as exc:
            raise self.error(f"code-of: cannot import {qual!r}: {exc}") from None
        src, start = inspect.getsourcelines(obj)
        source = textwrap.dedent("".join(src))
        fn = ast.parse(source).body[0]
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raise self.error(f"code-of: the source inspect found for {qual!r} (line {start}) does not start "
                             "with its def: was the file edited while the site was being built?")
        composition = self.options.get("composition")
        problem = excerpt_problem(source, composition)
        if problem is not None:
            raise self.error(f"code-of: {qual}: {problem}")
        arith = arithmetic_lines(source) or [n for n, ln in enumerate(source.splitlines(), 1)
                                             if any(f"{c}(" in ln for c in core_calls(source))]
        body = fn.body
        keep = list(range(len(src)))
        first = body[0] if body else None
        is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        if is_doc and isinstance(first.value.value, str):
            d0, d1 = body[0].lineno - 1, body[0].end_lineno          # 0-based [d0, d1) within src
            indent = src[d0][: len(src[d0]) - len(src[d0].lstrip())]
            keep = list(range(d0)) + [-1] + list(range(d1, len(src)))
            elided = indent + '"""..."""  # docstring: see the API entry\n'
            text = "".join(elided if i < 0 else src[i] for i in keep)
        else:
            text = "".join(src)
        path = Path(inspect.getsourcefile(obj)).resolve()
        try:
            rel = path.relative_to(Path(self.state.document.settings.env.srcdir).parent)
        except ValueError:
            rel = path
        public = public_of(qual, self.options.get("public"))
        if public is not None:
            link = f"computes :func:`{public}`" if callable(obj) else f"of :obj:`{public}`"
            intro = f"``{rel}``, line {start}: ``{name}``, {link}"
            if composition:
                intro += f"; a composition ({_esc(composition)}): the highlighted calls are its steps"
        elif modname.split(".")[0] == "paper_checks":
            intro = f"``{rel}``, line {start}: ``{name}``, the check's own construction (not an API function)"
        else:
            raise self.error(f"code-of: no documented public function for {qual!r}: give ':public: <name>'")
        para = nodes.container(classes=["code-of"])
        self.state.nested_parse(StringList([intro, ""], source=f"code-of {qual}"), self.content_offset, para)
        block = nodes.literal_block(text, text, language="python", linenos=True)
        # highlight the lines that compute (numbered as shown: the docstring is one line there)
        shift = {}
        for shown_i, src_i in enumerate(keep):
            if src_i >= 0:
                shift[src_i + 1] = shown_i + 1
        hl = sorted(shift[n] for n in arith if n in shift)
        block["highlight_args"] = {"linenostart": start, "hl_lines": hl}
        para += block
        return [para]


def _always_reread(app, env, added, changed, removed):
    """The paper pages show the rows and the source code as they are now, so they are re-read on every build
    (reading them runs nothing)."""
    return [d for d in env.found_docs if d.startswith("papers/")]


def _check_coverage(app, env):
    """Warn (an error under -W) for every registered paper claim that no page shows."""
    from paper_checks import REGISTRY, load_all
    load_all()
    shown = getattr(env, "refattn_claims_shown", {})
    for cid in sorted(REGISTRY):
        if cid.startswith(PAPER_PREFIXES) and cid not in shown:
            logger.warning(f"paper claim {cid!r} is registered but no paper page shows it (.. paper-claim::)")
        if cid.startswith(PAPER_PREFIXES) and not REGISTRY[cid].slow and cid not in _ROWS:
            logger.warning(f"paper claim {cid!r} is registered but has no row in {_META.get('path')}: run "
                           "`python docs/_tools/record_checks.py` to bring the record up to date")


def _purge(app, env, docname):
    shown = getattr(env, "refattn_claims_shown", {})
    for cid in [c for c, d in shown.items() if d == docname]:
        del shown[cid]


def setup(app):
    app.connect("env-check-consistency", _check_coverage)
    app.connect("env-purge-doc", _purge)
    app.connect("builder-inited", _run_checks)
    app.connect("env-get-outdated", _always_reread)
    directives.register_directive("paper-claim", PaperClaim)
    directives.register_directive("paper-claims-table", PaperClaimsTable)
    directives.register_directive("code-of", CodeOf)
    return {"version": "0.1", "parallel_read_safe": True}
