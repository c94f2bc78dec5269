"""``python -m validation``: cross-check an implementation against refattn, or write the findings table.

    python -m validation check TARGET --kind draw|features|attention [--as FAMILY] [--framework
    numpy|torch|jax]
                               [--dtype float32|float64] [--seed N] [--quick] [--json PATH]
    python -m validation report [--out PATH] [--quick]

TARGET is ``module:callable``, ``path/to/file.py:callable`` or a built-in target (``refattn``,
``performer-pytorch``, ``sklearn-rbf``). Every argument is validated before anything runs. Exit status: 0
every check passed, 1 a check failed, 2 a usage or import error (one line per bad argument, naming it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .base import UsageError
from .checks.catalog import KINDS
from .checks.favor import ATTENTION_FAMILIES, FEATURE_FAMILIES
from .crosscheck.registry import FRAMEWORKS
from .families.catalog import FAMILIES
from .findings import write_report
from .runner import check, validate_options


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
    r = sub.add_parser("report", help="run every built-in target and write the markdown findings table")
    r.add_argument("--out", default=None, metavar="PATH", help="write the markdown here (default: stdout)")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--seed", type=int, default=0)
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
        if args.framework is not None and args.framework not in FRAMEWORKS:
            bad.append(f"--framework: unknown framework {args.framework!r}; expected one of "
                       f"{sorted(FRAMEWORKS)}")
        bad += validate_options(args.kind, args.dtype, args.family, None)
        out = ("--json", args.json)
    else:
        out = ("--out", args.out)
    if out[1] is not None:
        problem = output_path_problem(*out)
        if problem:
            bad.append(problem)
    return bad


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    bad = argument_problems(args)
    if bad:
        for line in bad:
            print(f"error: {line}", file=sys.stderr)
        return 2
    try:
        if args.command == "report":
            md = write_report(quick=args.quick, seed=args.seed, progress=sys.stderr)
            if args.out:
                with open(args.out, "w") as f:
                    f.write(md)
                print(f"wrote {args.out}", file=sys.stderr)
            else:
                print(md)
            return 0
        rep = check(
            args.target,
            kind=args.kind,
            framework=args.framework,
            family=args.family,
            dtype=args.dtype,
            seed=args.seed,
            quick=args.quick,
            name=args.target,
        )
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(rep)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep.to_dict(), f, indent=2)
    return rep.exit_code


if __name__ == "__main__":
    sys.exit(main())
