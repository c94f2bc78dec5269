"""``python -m paper_checks``: check the three papers' claims numerically and print a verdict per claim.

    python -m paper_checks [--all] [--only GLOB ...] [--list] [--json PATH] [--report DIR] [--seed N]
                           [--size tiny|small|full] [--workers N] [--data DIR] [--scheduler local[:N]|ADDRESS]

    python -m paper_checks --power [--only GLOB ...] [--size S]     # planted errors must move each verdict
    python -m paper_checks --seeds 0-4 [--only GLOB ...] [--size S]   # verdict per seed (seed stability)

Without ``--all`` the slow experiment claims are reported as ``skipped`` with the command that runs them.
Every verdict is re-derived from its evidence by the claim's decision rule (``runner.run_check``); the JSON
records and the report carry the provenance (versions, commit, BLAS threads, command line, seed, size).
Exit status (docs/guide/reliability.md, "Exit statuses"; the constants below): 0 when every claim's verdict
equals its expected one, 1 when a verdict differs or a claim raised (named), 2 for bad or incompatible
arguments, a bad data directory or IDX file and an unreachable scheduler (before any claim runs), 130 on
Ctrl-C (the claims that finished are printed, and with ``--json`` written, marked incomplete).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from refattn.files import write_text_atomic

from . import scale
from .catalog import run_by_id, select
from .experiments.idx import DATA_ENV, DEFAULT_DATA_DIR, find_real_data, load_mnist_format, mnist_files
from .power import power_table, run_power
from .registry import SIZES
from .report import provenance, totals_line, write_json, write_report
from .runner import pin_blas

# ---- exit statuses: the table of docs/guide/reliability.md, "Exit statuses" (shared with validation) -------
EXIT_OK = 0              # every claim's verdict equals its expected
EXIT_DIFFERS = 1         # a verdict differs from expected, or a claim raised
EXIT_USAGE = 2           # bad/incompatible arguments, bad data directory / IDX files, unreachable scheduler
EXIT_INTERRUPTED = 130   # Ctrl-C; results written so far are marked incomplete

# ---- bounds of the integer arguments (checked from the text, before anything is built) --------------------
MAX_SEED = 2**32 - 1     # --seed and every seed of --seeds
MAX_SEEDS = 1000         # seeds in one --seeds run
MAX_WORKERS = 256        # --workers (and local:N of --scheduler, paper_checks/scale.py)

#: Options each mode does not use: given together, they are refused (exit 2) rather than dropped.
_UNUSED = {
    "--list": ("--json", "--report", "--seed", "--workers", "--scheduler", "--data", "--all"),
    "--power": ("--report",),
    "--seeds": ("--json", "--report", "--seed", "--workers", "--all"),
}


#: What each verdict says (``--help``); the criterion that separates them is docs/guide/paper-checks.md.
VERDICT_HELP = {
    "holds": "the statement holds as evidently meant, within the check's stated tolerance",
    "erratum": "its mathematical content as printed is false, and a corrected statement (printed with the "
               "result) is verified",
    "fails": "it is false and no correction is verified (a trained claim: only when more budget would not "
             "change it)",
    "not-reproduced": "a trained effect not seen at a budget below the paper's (the fraction is in the "
                      "evidence)",
    "not-checkable": "no measurement can decide it (the evidence says why)",
    "skipped": "a slow, trained claim not selected; --all (or --only ID) runs it, and the summary gives the "
               "command",
}
#: Notation-only slips: not a verdict of their own, counted apart inside holds and erratum.
SLIPS_HELP = ("slips: a notation-only slip (a statement that holds as evidently meant, with a typo in "
              "its notation) is quoted, corrected and checked in the evidence; the totals line counts such "
              "claims apart, e.g. 'holds 22 (7 with notation slips)'")
EXPECTED_HELP = ("the table's expected column: the verdict each claim is registered to give at this --size, "
                 "fixed in paper_checks before any run, with its derivation (--list lists the expected "
                 "verdicts, --report gives each derivation). Exit 0 when every verdict equals its expected "
                 "one ('skipped' always does), 1 when one differs (marked '<-- differs from expected') or a "
                 "claim raised, 2 for bad arguments, 130 on Ctrl-C.")
EVIDENCE_HELP = ("the evidence: the console shows one summary line per claim; --report DIR writes report.md "
                 "(statement, rule, evidence, correction, figures as PNG) and --json PATH every record with "
                 "its provenance (versions, commit, BLAS threads, command line, seed, size). Reading them: "
                 "docs/guide/paper-checks.md.")
#: The one line printed above the table: what its columns are.
COLUMNS_LINE = ("columns: claim id | verdict of this run, decided by the claim's rule from its evidence | "
                "expected: the verdict registered before the run for this size (a differing one is marked "
                "and exits 1) | sec: wall seconds | summary: the measurement in one line")


def _epilog() -> str:
    width = max(len(v) for v in VERDICT_HELP)
    lines = ["verdicts (one per claim):"]
    for v, text in VERDICT_HELP.items():
        lines += textwrap.wrap(text, 96, initial_indent=f"  {v:{width}s}  ",
                               subsequent_indent=" " * (width + 4))
    for paragraph in (SLIPS_HELP, EXPECTED_HELP, EVIDENCE_HELP):
        lines += ["", *textwrap.wrap(paragraph, 96, subsequent_indent="  ")]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m paper_checks", description=__doc__.split("\n")[0],
                                epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--all", action="store_true", help="also run the slow experiment claims")
    p.add_argument("--only", action="append", metavar="GLOB", help="claim ids to run (glob; repeatable)")
    p.add_argument("--list", action="store_true", help="list the claims and exit")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--report", metavar="DIR", help="write report.md and PNG figures to DIR")
    p.add_argument("--seed", type=int, default=None, help=f"root seed in 0..{MAX_SEED} (default 0)")
    p.add_argument("--size", choices=SIZES, default=None,
                   help="size knob of the checks (default small; --power: tiny unless a mutation asks for "
                        "more)")
    p.add_argument("--seeds", metavar="A-B|A,B,...",
                   help="seed stability: run every selected non-slow claim at each seed (size small unless "
                        "--size) and print claim x seed verdicts, marking claims whose verdict flips")
    p.add_argument("--power", action="store_true",
                   help="run every registered mutation (paper_checks/power.py) and print claim -> "
                        "mutation -> verdict -> moved?")
    p.add_argument("--workers", type=int, default=None,
                   help="run claims in N parallel processes (0: serial; results are identical either way: "
                        "every claim seeds its own generators from --seed and its id)")
    p.add_argument("--scheduler", metavar="local[:N]|ADDRESS",
                   help="run claims, their Monte Carlo batches and experiment runs as dask.distributed "
                        "tasks: local[:N] starts N worker processes (default: one per core), an address "
                        "(tcp://host:8786) uses a running scheduler; results are identical to the serial run "
                        "(needs the scale extra)")
    p.add_argument("--data", metavar="DIR",
                   help="MNIST-format directory for the image experiments (default: Debian's "
                        "/usr/share/datasets/fashion-mnist from 'apt-get install dataset-fashion-mnist'; "
                        "without it they fall back to a digits stand-in and say so)")
    return p


def _probe_dir(directory: Path) -> str | None:
    """None if a file can be created in `directory` (tried: a temporary file, removed at once; permission
    bits alone say nothing for root or on /proc), else the reason."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".paper_checks_probe_"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def _writable(path: Path, is_dir: bool, option: str) -> str | None:
    """Why `path` cannot be written (one line naming `option`), or None. Nothing is created: a file's parent
    directory must exist and be writable; a report directory must be a writable directory, or not exist yet
    with an existing writable parent (the report directory itself is created when the report is written)."""
    if is_dir and path.exists():
        if not path.is_dir():
            return f"{option}: {path} exists and is not a directory"
        parent = path
    else:
        if not is_dir and path.is_dir():
            return f"{option}: {path} is a directory"
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            extra = f" (paper_checks creates {option}'s directory only, not its parents)" if is_dir else ""
            return f"{option}: the directory {parent} does not exist{extra}"
    why = _probe_dir(parent)
    return None if why is None else f"{option}: cannot write in {parent} ({why})"


def _progress(items, enabled: bool):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc="claims", unit="claim", file=sys.stderr, leave=False)


def _power(claims: list, args: argparse.Namespace, argv: list[str] | None) -> int:
    """``--power``: every registered mutation of the selected claims, at tiny (or --size)."""
    pin_blas()
    t0 = time.perf_counter()
    rows = run_power([c for c in claims if not c.slow or args.all], seed=args.seed, size=args.size,
                     workers=args.workers)
    print(power_table(rows))
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.json:
        prov = provenance(seed=args.seed, size=args.size or "tiny (per mutation)", argv=argv)
        write_text_atomic(Path(args.json), json.dumps([{**r, "provenance": prov} for r in rows], indent=2))
    return EXIT_OK


def _parse_seeds(text: str) -> list[int]:
    """'0-4' -> [0, 1, 2, 3, 4]; '0,3,7' -> [0, 3, 7]; ValueError naming the option otherwise.

    Bounded from the text before any list is built: at most :data:`MAX_SEEDS` seeds, each in
    ``0..MAX_SEED``, each once."""
    shown = repr(text if len(text) <= 60 else text[:57] + "...")
    parts = text.split("-", 1) if "-" in text else text.split(",")
    if not all(t.strip().isdigit() and t.strip().isascii() for t in parts):
        raise ValueError(f"--seeds: expected A-B or A,B,... with non-negative integers; got {shown}")
    too_many = ValueError(f"--seeds: at most {MAX_SEEDS} seeds, each in 0..{MAX_SEED}; got {shown}")
    if len(parts) > MAX_SEEDS or any(len(t.strip()) > len(str(MAX_SEED)) for t in parts):
        raise too_many                                   # before int() of a long digit string
    nums = [int(t) for t in parts]
    if max(nums) > MAX_SEED:
        raise too_many
    if "-" in text:
        a, b = nums
        if a > b:
            raise ValueError(f"--seeds: expected A-B with A <= B; got {shown}")
        if b - a + 1 > MAX_SEEDS:
            raise too_many
        return list(range(a, b + 1))
    if len(set(nums)) != len(nums):
        raise ValueError(f"--seeds: each seed once; got {shown}")
    return nums


def _seeds(claims: list, args: argparse.Namespace) -> int:
    """``--seeds A-B``: the verdict of every selected non-slow claim at each seed (size small unless --size);
    a claim whose verdict differs between seeds is marked. Exit 1 when a verdict (at any seed) differs from
    the claim's expected one or a claim raised, else 0; 130 on Ctrl-C."""
    try:
        seeds = _parse_seeds(args.seeds)
    except ValueError as exc:
        print(f"paper_checks: {exc}", file=sys.stderr)
        return EXIT_USAGE
    pin_blas()
    size = args.size or "small"
    chosen = [c for c in claims if not c.slow]
    width = max([len(c.id) for c in chosen] + [5])
    print(f"seed stability at size {size}, seeds {seeds}")
    print(f"{'claim':{width}s}  " + "  ".join(f"seed {s:<8d}" for s in seeds) + "  stable?")
    flips = []
    table = None
    if args.scheduler is not None:         # every (claim, seed) a dask task (paper_checks/scale.py)
        try:
            table = scale.run_seeds(args.scheduler, chosen, seeds, size=size, progress=sys.stderr.isatty())
        except scale.SchedulerError as exc:
            print(f"paper_checks: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print("paper_checks: interrupted: outstanding tasks cancelled", file=sys.stderr)
            return EXIT_INTERRUPTED
    differs = False
    for i, c in enumerate(chosen):
        try:
            results = ([o[0] for o in table[i]] if table is not None
                       else [run_by_id(c.id, s, size, None, False)[0] for s in seeds])
        except KeyboardInterrupt:
            print(f"paper_checks: interrupted at claim {c.id}; the rows above are complete", file=sys.stderr)
            return EXIT_INTERRUPTED
        verdicts = ["ERROR" if r is None else r.verdict for r in results]
        differs |= any(v != c.expected_at(size) for v in verdicts)
        stable = len(set(verdicts)) == 1
        if not stable:
            flips.append(c.id)
        cells = "  ".join(f"{v:13s}" for v in verdicts)
        print(f"{c.id:{width}s}  {cells}  {'yes' if stable else 'FLIPS'}")
    print(f"{len(chosen) - len(flips)}/{len(chosen)} claims give the same verdict at every seed"
          + (f"; flips: {', '.join(flips)}" if flips else ""))
    return EXIT_DIFFERS if differs else EXIT_OK


def _incompatible(args: argparse.Namespace) -> list[str]:
    """One line per option given with a mode that would not use it, and per pair of modes."""
    given = {"--json": args.json is not None, "--report": args.report is not None,
             "--seed": args.seed is not None, "--workers": args.workers is not None,
             "--scheduler": args.scheduler is not None, "--data": args.data is not None, "--all": args.all}
    modes = [m for m, on in (("--list", args.list), ("--power", args.power),
                             ("--seeds", args.seeds is not None)) if on]
    if len(modes) > 1:
        return [f"{' and '.join(modes)} exclude each other (each is a mode of its own); give one"]
    out = []
    for mode in modes:
        for opt in _UNUSED[mode]:
            if given[opt]:
                out.append(f"{opt} is not used with {mode} (it would be ignored); drop it or run without "
                           f"{mode}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad arguments already
        return int(exc.code or 0)
    # every argument is validated before anything runs; one line per bad argument, exit 2
    problems: list[str] = _incompatible(args)
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        problems.append(f"--seed: expected a non-negative integer (0..{MAX_SEED}); got {args.seed}")
    args.seed = 0 if args.seed is None else args.seed
    if args.workers is not None and not 0 <= args.workers <= MAX_WORKERS:
        problems.append(f"--workers: expected a count >= 0 (at most {MAX_WORKERS}); got {args.workers}")
    args.workers = args.workers or 0
    if args.seeds is not None:
        try:
            _parse_seeds(args.seeds)
        except ValueError as exc:
            problems.append(str(exc))
    if args.scheduler is not None:         # paper_checks/scale.py; names the install command
        problem = scale.scheduler_problem(args.scheduler, args.workers, args.power)
        if problem:
            problems.append(problem)
    if args.data is not None:              # the experiments and worker processes read it from the environment
        if mnist_files(args.data) is None:
            problems.append(f"--data: {args.data} does not hold the MNIST-format files "
                            "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]")
        else:                              # every file read and checked now, not inside a claim
            try:
                load_mnist_format(args.data)
            except (ValueError, OSError) as exc:
                problems.append(f"--data: {exc}")
    claims = []
    try:
        claims = select(args.only)
    except ValueError as exc:
        problems.append(str(exc))
    if args.data is None and args.all and any(c.slow for c in claims):
        problems.extend(_implicit_data_problems())
    report_problem = None if args.report is None else _writable(Path(args.report), True, "--report")
    if report_problem:
        problems.append(report_problem)
    if args.json is not None:
        js = Path(args.json)
        inside_report = (args.report is not None and report_problem is None and not Path(args.report).exists()
                         and js.parent.resolve() == Path(args.report).resolve())   # created just below
        problem = None if inside_report and not js.is_dir() else _writable(js, False, "--json")
        if problem:
            problems.append(problem)
    if problems:
        for problem in problems:
            print(f"paper_checks: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.report is not None and not args.list:
        Path(args.report).mkdir(exist_ok=True)   # the directory the user named (its parent exists: checked)
    with _data_environment(args.data):
        return _run(claims, args, argv)


def _implicit_data_problems() -> list[str]:
    """The data the slow claims will read without ``--data`` (``$PAPER_CHECKS_DATA``, else the default
    directory when it holds the files), every file read and checked before any claim runs: one message per
    problem, naming where the directory came from (empty when there is nothing to read or all is well)."""
    named = os.environ.get(DATA_ENV)
    where = f"${DATA_ENV}={named}" if named else f"the default data directory {DEFAULT_DATA_DIR}"
    if named and mnist_files(named) is None:      # an explicit choice never falls back to the stand-in
        return [f"{where} does not hold the MNIST-format files "
                "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; set it to such a directory or pass "
                "--data DIR"]
    found = find_real_data()
    if found is None:
        return []
    try:
        load_mnist_format(found)
    except (ValueError, OSError) as exc:
        return [f"{where}: {exc}; pass --data DIR to read another directory"]
    return []


@contextlib.contextmanager
def _data_environment(data: str | None):
    """``$PAPER_CHECKS_DATA`` set to `data` (resolved) for the run, where the experiments and worker
    processes read it, and restored afterwards: a later caller of :func:`main` keeps its own data source."""
    before = os.environ.get(DATA_ENV)
    if data is not None:
        os.environ[DATA_ENV] = str(Path(data).resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DATA_ENV, None)
        else:
            os.environ[DATA_ENV] = before


def _run(claims: list, args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run the validated command line: the power table, the seeds table, the list, or the claims."""
    if args.power:
        return _power(claims, args, argv)
    if args.seeds is not None:
        return _seeds(claims, args)
    if args.size is None:
        args.size = "small"
    if args.list:
        for c in claims:
            print(f"{c.id:36s} {'slow' if c.slow else '    '}  expected {c.expected:13s} {c.section}")
        return EXIT_OK

    pin_blas()
    report_dir = Path(args.report) if args.report else None
    rows = []
    failed: list[str] = []
    cluster: dict = {}                     # --scheduler: the workers' environments, for the provenance
    if args.scheduler is not None:         # claims, ctx.map batches and experiment runs as dask tasks
        try:
            outcomes = scale.run_claims(args.scheduler, claims, seed=args.seed, size=args.size,
                                  report_dir=report_dir, run_slow=args.all, progress=sys.stderr.isatty(),
                                  info=cluster)
        except scale.SchedulerError as exc:      # no cluster at that address (or none could start)
            print(f"paper_checks: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:          # outstanding tasks were cancelled; nothing half-written
            print("paper_checks: interrupted: outstanding tasks cancelled, no report or JSON written",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
    elif args.workers > 0:                 # claims in parallel processes; seeds depend on the claim id only
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            futures = [pool.submit(run_by_id, c.id, args.seed, args.size, report_dir, args.all)
                       for c in claims]
            outcomes = [f.result() for f in _progress(futures, sys.stderr.isatty())]
    else:
        outcomes = []
        try:
            for c in _progress(claims, sys.stderr.isatty()):
                outcomes.append(run_by_id(c.id, args.seed, args.size, report_dir, args.all))
        except KeyboardInterrupt:          # Ctrl-C: keep what finished, write nothing partial
            return _interrupted(claims, outcomes, args, argv)
    for c, (res, secs, err) in zip(claims, outcomes, strict=True):
        if err is not None:                # a check that raises is reported by name, and the run exits 1
            failed.append(c.id)
            print(f"paper_checks: claim {c.id} raised {err}", file=sys.stderr)
        rows.append((c, res, secs))

    width = max([len(c.id) for c, _, _ in rows] + [5])
    print(COLUMNS_LINE)
    print(f"{'claim':{width}s}  {'verdict':13s}  {'expected':13s}  {'sec':>6s}  summary")
    for c, res, secs in rows:
        verdict = "ERROR" if res is None else res.verdict
        expected = c.expected_at(args.size)
        mark = "" if res is None or res.verdict in ("skipped", expected) else "  <-- differs from expected"
        summary = "" if res is None else res.summary
        print(f"{c.id:{width}s}  {verdict:13s}  {expected:13s}  {secs:6.1f}  {summary}{mark}")
    print("totals: " + totals_line([("ERROR" if res is None else res.verdict, res) for _, res, _ in rows]))
    prov = provenance(seed=args.seed, size=args.size, argv=argv)
    if cluster:                            # the claims ran on the workers: their versions and BLAS
        prov["cluster"] = cluster
    kernels = [f" ({b['architecture']} kernels)" if b.get("architecture") else "" for b in prov["blas"]]
    blas = ", ".join(f"{b.get('internal_api')}{k} {b.get('num_threads')} thread(s)"
                     for b, k in zip(prov["blas"], kernels, strict=True))
    print(f"provenance: refattn {prov['refattn']}, commit {prov['git_commit']}, python {prov['python']}, "
          f"numpy {prov['numpy']}, scipy {prov['scipy']}, {blas}, seed {prov['seed']}, size {prov['size']}")
    try:                                   # each file replaced atomically: a failed write keeps the old one
        if args.json:
            write_json(Path(args.json), rows, prov)
        if args.report:
            write_report(Path(args.report), rows, seed=args.seed, size=args.size, prov=prov)
    except OSError as exc:
        where = exc.filename or args.json or args.report
        print(f"paper_checks: could not write {where} ({exc.strerror or exc}); the previous file, if any, is "
              "unchanged", file=sys.stderr)
        return EXIT_USAGE
    print(evidence_line(args.json, args.report, rows))
    if failed:
        print(f"paper_checks: {len(failed)} claim(s) raised: {', '.join(failed)}", file=sys.stderr)
    differ = [c.id for c, res, _ in rows
              if res is not None and res.verdict not in ("skipped", c.expected_at(args.size))]
    if differ:
        print(f"paper_checks: {len(differ)} verdict(s) differ from expected: {', '.join(differ)}",
              file=sys.stderr)
    return EXIT_DIFFERS if failed or differ else EXIT_OK


def evidence_line(json_path: str | None, report_dir: str | None, rows: list) -> str:
    """The run's last stdout line: what was written (`json_path`, `report_dir`), or, when neither was given,
    that nothing was and which options write the full evidence."""
    if json_path is None and report_dir is None:
        return ("nothing written: the evidence behind each verdict is in --report DIR (report.md with the "
                "rule, evidence, correction and PNG figures per claim) and --json PATH (every record with "
                "its provenance); python -m paper_checks --help explains the verdicts")
    n_fig = sum(len(res.figures) for _, res, _ in rows if res is not None and res.figures)
    written = []
    if json_path is not None:
        written.append(f"{json_path} ({len(rows)} claim record(s) with provenance)")
    if report_dir is not None:
        written.append(f"{Path(report_dir) / 'report.md'} ({len(rows)} claim(s), {n_fig} figure(s) in "
                       f"{report_dir})")
    return "written: " + "; ".join(written)


def _interrupted(claims: list, outcomes: list, args: argparse.Namespace, argv: list[str] | None) -> int:
    """Ctrl-C in a serial run: name the claims that finished and those that did not; with ``--json`` write the
    finished ones (atomically), their provenance marked incomplete; no report. Returns 130."""
    done = [c.id for c in claims[:len(outcomes)]]
    rest = [c.id for c in claims[len(outcomes):]]
    print(f"paper_checks: interrupted (Ctrl-C): {len(done)} of {len(claims)} claim(s) finished"
          + (f": {', '.join(done)}" if done else "") + f"; not finished: {', '.join(rest)}", file=sys.stderr)
    if args.json:
        prov = provenance(seed=args.seed, size=args.size, argv=argv)
        prov["incomplete"] = {"finished": done, "not_finished": rest}
        rows = [(c, res, secs) for c, (res, secs, _) in zip(claims, outcomes, strict=False)]
        write_json(Path(args.json), rows, prov)
        print(f"paper_checks: the finished claims are in {args.json}, marked incomplete "
              "(provenance.incomplete); no report written", file=sys.stderr)
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
