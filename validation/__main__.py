"""``python -m validation``: cross-check an implementation against refattn, or write the findings table.

    python -m validation check TARGET --kind draw|features|attention [--as FAMILY] [--framework numpy|torch|jax]
                               [--dtype float32|float64] [--seed N] [--quick] [--json PATH]
    python -m validation report [--out PATH] [--quick]

TARGET is ``module:callable``, ``path/to/file.py:callable`` or a built-in target (``refattn``,
``performer-pytorch``, ``sklearn-rbf``). Exit status: 0 every check passed, 1 a check failed, 2 a usage or import
error (the message names the problem).
"""

from __future__ import annotations

import argparse
import json
import sys

from .checks import ATTENTION_FAMILIES, FEATURE_FAMILIES, KINDS, UsageError, check


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validation", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="run the checks on one target")
    c.add_argument("target", metavar="TARGET", help="module:callable, file.py:callable, or refattn | "
                   "performer-pytorch | sklearn-rbf")
    c.add_argument("--kind", required=True, choices=KINDS)
    c.add_argument("--as", dest="family", default=None,
                   help=f"refattn family: features {sorted(FEATURE_FAMILIES)}; attention {list(ATTENTION_FAMILIES)}")
    c.add_argument("--framework", default=None, help="numpy | torch | jax (default: numpy, or the target's own)")
    c.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--quick", action="store_true", help="smaller Monte Carlo sizes (<= 15 s)")
    c.add_argument("--json", default=None, metavar="PATH", help="write the report as JSON")
    r = sub.add_parser("report", help="run every built-in target and write the markdown findings table")
    r.add_argument("--out", default=None, metavar="PATH", help="write the markdown here (default: stdout)")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "report":
            from .crosscheck.report import write_report
            md = write_report(quick=args.quick, seed=args.seed, progress=sys.stderr)
            if args.out:
                with open(args.out, "w") as f:
                    f.write(md)
                print(f"wrote {args.out}", file=sys.stderr)
            else:
                print(md)
            return 0
        rep = check(args.target, kind=args.kind, framework=args.framework, family=args.family, dtype=args.dtype,
                    seed=args.seed, quick=args.quick, name=args.target)
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
