"""Write the tracked ``.py`` files of a git revision, outside tests/ and docs/, with every docstring removed.

For counting duplicated *code* with a clone detector: numpydoc Parameters/Returns
sections repeat by design between a forward, its backward and the plain call, and would dominate the count.
Both revisions are normalised the same way (``ast.unparse``), so their counts compare.

    python docs/_tools/strip_docstrings.py REV OUT_DIR && duplicates --repo OUT_DIR --seconds 150 --most 200
"""

import ast
import pathlib
import subprocess
import sys

DOC_OWNERS = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def strip(src: str) -> str:
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, DOC_OWNERS) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def main(rev: str, out: pathlib.Path) -> None:
    git = ["git", "-C", str(pathlib.Path(__file__).resolve().parents[2])]
    files = subprocess.run(git + ["ls-tree", "-r", "--name-only", rev], capture_output=True, text=True,
                           check=True).stdout.split()
    for f in files:
        if not f.endswith(".py") or f.startswith(("tests/", "docs/")):
            continue
        src = subprocess.run(git + ["show", f"{rev}:{f}"], capture_output=True, text=True, check=True).stdout
        p = out / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(strip(src))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python docs/_tools/strip_docstrings.py REV OUT_DIR")
    main(sys.argv[1], pathlib.Path(sys.argv[2]))
