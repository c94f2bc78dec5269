"""The package as users get it: ``python -m build`` makes an sdist and a wheel from it, the
wheel installs into a fresh virtual environment, and from a directory outside the checkout
``python -m paper_checks --list``, one fast claim and the README tour run against the installed copy.

This catches a module or data file missing from the sdist/wheel and an import that only works from the
checkout. Building and installing takes about a minute, so those two tests run only when asked (the check of
the file list itself runs by default):

    REFATTN_TEST_PACKAGING=1 python -m pytest -q tests/test_packaging.py

(``.ci/run`` does this once; it needs ``pip install build``). Offline: the build uses the running
environment's setuptools (``--no-isolation``) when it is new enough, and the wheel is installed with
``--no-deps --no-index``; its dependencies come from the running environment, whose site-packages
directories are put on the fresh environment's path after its own (a ``.pth`` file), so the installed refattn
is found first (the test checks where each package was imported from).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("refattn", "validation", "paper_checks", "accel")

#: Tracked non-Python files under the packages that are deliberately not shipped, with the reason.
NOT_SHIPPED = {
    "paper_checks/records/": "experiment records: read from the checkout by the docs build "
                             "(docs/_ext/paperclaims.py), never by the package",
    "validation/records/": "the validator's measured false-alarm rate and findings: read by the tests "
                           "(tests/validation/test_false_alarms.py) and the docs, never by the package",
}

packaging = pytest.mark.skipif(os.environ.get("REFATTN_TEST_PACKAGING") != "1",
                               reason="builds and installs the wheel (~1 min): set REFATTN_TEST_PACKAGING=1")


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    what = " ".join(map(str, cmd))
    assert out.returncode == 0, f"{what} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def _setuptools_is_new_enough() -> bool:
    """pyproject's build-system.requires: setuptools>=77 (the SPDX license string) and wheel."""
    try:
        import setuptools
        import wheel  # noqa: F401
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


def tour_code(readme: Path) -> str:
    """The README tour's Python block (the format docs/_ext/executed.py reads)."""
    m = re.search(r"<!-- section: tour.*?-->.*?```python\n(.*?)```.*?<!-- end section: tour -->",
                  readme.read_text(), re.S)
    assert m is not None, "README.md has no ```python block between '<!-- section: tour' and its end marker"
    return m.group(1)


def must_ship() -> list[str]:
    """Tracked files under the packages that the wheel must contain (git ls-files), modules and data."""
    out = _run(["git", "ls-files", "--", *PACKAGES], cwd=ROOT)
    return [f for f in out.split() if not f.startswith(tuple(NOT_SHIPPED))]


def missing_from(wheel_names: set[str]) -> list[str]:
    """The files of `must_ship` that a wheel with these member names lacks."""
    return [f for f in must_ship() if f not in wheel_names]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout (git ls-files)")
def test_a_file_missing_from_a_wheel_is_reported():
    """The check the built wheel goes through, on member lists made here (no build: runs by default)."""
    full = set(must_ship())
    assert "refattn/__init__.py" in full and "paper_checks/__main__.py" in full
    assert missing_from(full) == []
    assert missing_from(full - {"refattn/rpe/flt.py"}) == ["refattn/rpe/flt.py"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if subprocess.run([sys.executable, "-c", "import build"], capture_output=True).returncode != 0:
        pytest.fail("REFATTN_TEST_PACKAGING=1 but the 'build' package is missing: pip install build")
    dist = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "build", "--outdir", str(dist)]   # sdist, then the wheel from the sdist
    if _setuptools_is_new_enough():
        cmd.append("--no-isolation")
    _run(cmd + [str(ROOT)], cwd=ROOT)
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())
    return wheels[0], sdists[0]


@pytest.mark.slow
@packaging
def test_wheel_has_every_module_and_data_file(built):
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = missing_from(names)
    assert not missing, f"tracked package files missing from {wheel.name}: {missing}"
    assert not [n for n in names if n.startswith("tests/")], "the test suite is not part of the wheel"


@pytest.mark.slow
@packaging
def test_wheel_runs_outside_the_checkout(built, tmp_path):
    wheel, _ = built
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    py = venv / "bin" / "python"
    site_dir = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         cwd=tmp_path).strip())
    # install the wheel alone (pip of the running environment, targeting the fresh one), offline
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site_dir),
          str(wheel)], cwd=tmp_path)
    # dependencies: the running environment's site-packages, after the fresh environment's own
    deps = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    (site_dir / "zz_refattn_test_deps.pth").write_text("\n".join(deps) + "\n")

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    where = _run([str(py), "-c", "import refattn, validation, paper_checks, accel\n"
                  "for m in (refattn, validation, paper_checks, accel): print(m.__file__)"],
                 cwd=work, env=env).split()
    assert len(where) == len(PACKAGES)
    outside = [f for f in where if not Path(f).resolve().is_relative_to(site_dir.resolve())]
    assert not outside, f"imported from outside the installed wheel: {outside}"

    listing = _run([str(py), "-m", "paper_checks", "--list"], cwd=work, env=env)
    assert "kl.eq1-softmax" in listing and "horn.lemma1" in listing and "flt.alg1-favor" in listing

    _run([str(py), "-m", "paper_checks", "--only", "kl.eq1-softmax", "--size", "tiny", "--json",
          str(work / "r.json")], cwd=work, env=env)
    assert [(r["id"], r["verdict"]) for r in json.loads((work / "r.json").read_text())] == [
        ("kl.eq1-softmax", "holds")]

    (work / "tour.py").write_text(tour_code(ROOT / "README.md"))
    printed = _run([str(py), "tour.py"], cwd=work, env=env)
    assert re.fullmatch(r"\s*[0-9.e-]+\s*", printed), f"the tour printed {printed!r}"
