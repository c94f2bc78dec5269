"""Package rules: import isolation, top-level packages resolve to this project, NumPy only at the edges."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Modules of refattn/ allowed to import NumPy directly (each says "NumPy-only edge" in its docstring).
EDGE_PREFIXES = ("refattn/random/",)


def test_import_refattn_loads_no_optional_dependency():
    """Nor SciPy (a dependency): only the NumPy path of the Toeplitz RPE uses it, and imports it there; at
    import time it was about 40 % of the start-up of every process that imports refattn."""
    code = (
        "import sys, refattn, refattn.random\n"
        "bad = [m for m in ('cupy', 'numba', 'torch', 'matplotlib', 'sklearn', 'tqdm', 'accel', 'validation',"
        " 'paper_checks', 'array_api_strict', 'scipy') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "", f"import refattn imported optional modules: {out.stdout.strip()}"


@pytest.mark.parametrize("pkg", ["refattn", "validation", "paper_checks", "accel"])
def test_top_level_packages_are_this_projects(pkg):
    """Generic names (validation, accel) could be shadowed by another installed package."""
    if pkg == "accel" and not (ROOT / "accel").exists():
        pytest.skip("accel/ is not part of this checkout yet")
    mod = __import__(pkg)
    assert pathlib.Path(mod.__file__).resolve().is_relative_to(ROOT), f"{pkg} resolves to {mod.__file__}"


def test_core_imports_numpy_only_at_the_edges():
    offenders = []
    for path in sorted((ROOT / "refattn").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        imports_numpy = any(
            (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "numpy" for a in n.names))
            or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "numpy")
            for n in ast.walk(tree)
        )
        if imports_numpy:
            doc = ast.get_docstring(tree) or ""
            if not (rel.startswith(EDGE_PREFIXES) or "NumPy-only edge" in doc.split("\n")[0]):
                offenders.append(rel)
    assert not offenders, f"core modules importing numpy outside the edges: {offenders}"


def test_core_does_not_import_upward():
    bad = []
    for path in sorted((ROOT / "refattn").rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            mods = [a.name for a in n.names] if isinstance(n, ast.Import) else (
                [n.module or ""] if isinstance(n, ast.ImportFrom) and n.level == 0 else [])
            bad += [f"{path.relative_to(ROOT)}: {m}" for m in mods
                    if m.split(".")[0] in ("accel", "validation", "paper_checks")]
    assert not bad, bad
