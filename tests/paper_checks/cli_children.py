"""Child processes of ``tests/paper_checks/test_cli_inputs.py``, each run in a fresh interpreter under a
memory limit (RLIMIT_AS) and a timeout; each prints one JSON line per result.

    python tests/paper_checks/cli_children.py read IDX_MODULE PATH    # read_idx(PATH), the reader alone
    python tests/paper_checks/cli_children.py ranges CASES_JSON       # paper_checks' main per [args, needle]
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import tracemalloc
from pathlib import Path


def read(module_file: str, path: str) -> None:
    """Load the IDX reader from its file (NumPy only, not the whole package) and read `path`."""
    spec = importlib.util.spec_from_file_location("idx", module_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        a = mod.read_idx(path)
    except Exception as exc:  # noqa: BLE001 -- the parent judges the exception's type and message
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
    else:
        print(json.dumps({"shape": list(a.shape)}))


def ranges(cases_json: str) -> None:
    """``main(["--only", "kl.eq1-softmax"] + args)`` per case, nothing allowed to run: exit status, stderr
    lines and the peak of traced memory."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from paper_checks import __main__ as cli

    def boom(*a, **k):
        raise AssertionError("a claim ran")

    cli.run_by_id = cli._seeds = cli._power = boom
    for args, needle in json.loads(cases_json):
        err = io.StringIO()
        tracemalloc.start()
        try:
            with contextlib.redirect_stderr(err):
                code = cli.main(["--only", "kl.eq1-softmax"] + args)
        except BaseException as exc:  # noqa: BLE001 -- MemoryError included: reported, not raised
            code = f"{type(exc).__name__}: {str(exc)[:200]}"
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        print(json.dumps({"args": " ".join(args)[:60], "needle": needle, "code": code, "peak": peak,
                          "lines": lines}), flush=True)


if __name__ == "__main__":
    {"read": read, "ranges": ranges}[sys.argv[1]](*sys.argv[2:])
