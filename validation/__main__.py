"""``python -m validation``: cross-check an implementation against refattn, or write the findings table.

    python -m validation check TARGET --kind draw|features|attention [--as FAMILY] [--framework
    numpy|torch|jax]
                               [--dtype float32|float64] [--seed N] [--quick] [--json PATH]
                               [--timeout SECONDS]
    python -m validation report [--out PATH] [--quick]
    python -m validation conformance --sources DIR [--out PATH] [--json PATH] [--quick]

TARGET is ``module:callable``, ``path/to/file.py:callable`` or a built-in target (``refattn``,
``performer-pytorch``, ``sklearn-rbf``); it runs in a worker process (``validation.worker``): a time limit per
call, its stdout and stderr captured and printed after the report. Every argument is validated before anything
runs (one line per bad argument, naming it). Exit status (the table of docs/guide/reliability.md):
0 every check passed, 1 a check failed (an input changed in place included), 2 a usage error (bad arguments,
unknown family or target), 3 inconclusive, 4 the target could not be run (it exited, crashed, timed out or
its import raised), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .base import TargetError, UsageError
from .checks.catalog import KINDS
from .checks.report import EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_PASSED
from .checks.favor import ATTENTION_FAMILIES, FEATURE_FAMILIES
from .crosscheck.registry import FRAMEWORKS
from .families.catalog import FAMILIES
from .findings import write_report
from .runner import DEFAULT_TIMEOUT, check, validate_options
from .worker import target_problem

__all__ = ["main", "EXIT_PASSED", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INCONCLUSIVE", "EXIT_TARGET_ERROR",
           "EXIT_INTERRUPTED"]

#: exit statuses (one table for both CLIs: docs/guide/reliability.md, "Exit statuses"); EXIT_PASSED (0),
#: EXIT_FAILED (1) and EXIT_INCONCLUSIVE (3) are those of ``Report.exit_code``
EXIT_USAGE = 2              # bad arguments, unknown family or target (file, module or attribute missing)
EXIT_TARGET_ERROR = 4       # the target could not be run: it exited, crashed, timed out or its import raised
EXIT_INTERRUPTED = 130      # Ctrl-C


def _families_help() -> str:
    lines = ["families (--as):",
             f"  omega contract, features: {', '.join(sorted(FEATURE_FAMILIES))}",
             f"  omega contract, attention: {', '.join(ATTENTION_FAMILIES)}",
             "  the papers' families (each with its own contract; see validation.families.<module>):"]
    for name, fam in FAMILIES.items():
        for kind, c in fam.contracts.items():
            lines.append(f"    {name:15s} --kind {kind:9s} {c.signature}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validation", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="run the checks on one target", epilog=_families_help(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("target", metavar="TARGET", help="module:callable, file.py:callable, or refattn | "
                   "performer-pytorch | sklearn-rbf")
    c.add_argument("--kind", required=True, choices=KINDS)
    c.add_argument("--as", dest="family", default=None, metavar="FAMILY",
                   help="the refattn family the target implements (listed below)")
    c.add_argument("--framework", default=None, help="numpy | torch | jax (default: numpy, or the target's "
                                                     "own)")
    c.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--quick", action="store_true", help="smaller Monte Carlo sizes (<= 15 s)")
    c.add_argument("--json", default=None, metavar="PATH", help="write the report as JSON (the parent "
                                                                "directory must exist)")
    c.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"time limit of each call of the target, and of its import (default "
                        f"{DEFAULT_TIMEOUT:g}); a target that does not answer ends the run with status 4")
    r = sub.add_parser("report", help="run every built-in target and write the markdown findings table")
    r.add_argument("--out", default=None, metavar="PATH", help="write the markdown here (default: stdout)")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--seed", type=int, default=0)
    f = sub.add_parser("conformance", help="run the adapters of validation.conformance on the outside "
                                           "implementations found in DIR and write the conformance table")
    f.add_argument("--sources", required=True, metavar="DIR", help="the directory of source checkouts "
                   "(python -m validation.conformance.layout DIR lays it out)")
    f.add_argument("--out", default=None, metavar="PATH", help="write the markdown here (default: stdout)")
    f.add_argument("--json", default=None, metavar="PATH", help="write the report as JSON")
    f.add_argument("--quick", action="store_true")
    f.add_argument("--seed", type=int, default=0)
    return p


def output_path_problem(flag: str, path: str) -> str | None:
    """Why `path` cannot be written (parent missing or not writable, a directory), or None. Creates no
    directory; a probe file that did not exist before is removed again."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"{flag} {path}: the directory {parent} does not exist (it is not created)"
    if os.path.isdir(path):
        return f"{flag} {path}: is a directory; expected a file path"
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        return f"{flag} {path}: cannot be written ({e.strerror or e})"
    if not existed:
        os.remove(path)
    return None


def argument_problems(args) -> list[str]:
    """One message per bad argument (empty when every argument is valid)."""
    bad = []
    if args.seed < 0:
        bad.append(f"--seed: expected a non-negative integer; got {args.seed}")
    if args.command == "check":
        if not args.timeout > 0:                              # also rejects nan
            bad.append(f"--timeout: expected a positive number of seconds; got {args.timeout:g}")
        if args.framework is not None and args.framework not in FRAMEWORKS:
            bad.append(f"--framework: unknown framework {args.framework!r}; expected one of "
                       f"{sorted(FRAMEWORKS)}")
        bad += validate_options(args.kind, args.dtype, args.family, None)
        problem = target_problem(args.target)
        if problem:
            bad.append(problem)
        outs = [("--json", args.json)]
    elif args.command == "conformance":
        if not os.path.isdir(args.sources):
            bad.append(f"--sources {args.sources}: expected a directory of source checkouts; "
                       "it does not exist")
        outs = [("--out", args.out), ("--json", args.json)]
    else:
        outs = [("--out", args.out)]
    for out in outs:
        if out[1] is not None:
            problem = output_path_problem(*out)
            if problem:
                bad.append(problem)
    return bad


def _write_json(path: str, doc: dict) -> None:
    """`doc` to `path`, atomically (a temporary file in the same directory, then ``os.replace``)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    bad = argument_problems(args)
    if bad:
        for line in bad:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "conformance":
            from .conformance import IMPLEMENTATIONS
            from .conformance.report import main_run
            return main_run(IMPLEMENTATIONS, args.sources, seed=args.seed, quick=args.quick, out_md=args.out,
                            out_json=args.json)
        if args.command == "report":
            md = write_report(quick=args.quick, seed=args.seed, progress=sys.stderr)
            if args.out:
                tmp = f"{args.out}.tmp{os.getpid()}"
                with open(tmp, "w") as f:
                    f.write(md)
                os.replace(tmp, args.out)
                print(f"wrote {args.out}", file=sys.stderr)
            else:
                print(md)
            return EXIT_PASSED
        rep = check(
            args.target,
            kind=args.kind,
            framework=args.framework,
            family=args.family,
            dtype=args.dtype,
            seed=args.seed,
            quick=args.quick,
            name=args.target,
            isolate=True,
            timeout=args.timeout,
        )
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except TargetError as e:
        if e.report is not None and e.report.checks:
            e.report.output = e.output
            head, *rows = str(e.report).splitlines()
            head = head.rsplit(": ", 1)[0] + ": ERROR (the run stopped: the target could not be run)"
            print("\n".join([head, *rows]))
        elif e.output:
            print("target output (its stdout and stderr, captured):")
            print("\n".join(f"  | {ln}" for ln in e.output.splitlines()))
        print(f"error: the target could not be run: {e}", file=sys.stderr)
        if args.command == "check" and args.json:
            doc = e.report.to_dict() if e.report is not None else {"target": args.target, "kind": args.kind,
                                                                   "checks": [], "target_output": e.output}
            _write_json(args.json, dict(doc, error=str(e), verdict="ERROR", passed=False))
        return EXIT_TARGET_ERROR
    print(rep)
    if args.json:
        _write_json(args.json, rep.to_dict())
    return rep.exit_code


if __name__ == "__main__":
    sys.exit(main())
