"""Lay out the sources directory of ``python -m validation conformance --sources DIR``.

    python -m validation.conformance.layout DIR [--clone] [--build]

Prints, for each outside repository, the commands that put its checkout at ``DIR/<name>`` at the commit the
committed record was measured on (``--clone`` runs them: needs network access), and the state of each
entry already there (its commit). ``--build`` compiles fast-transformers' CPU extension ``causal_product_cpu``
into ``DIR/build/causal_product_cpu`` with ``torch.utils.cpp_extension.load`` (a C++ compiler; about two
minutes), which its causal attention needs. A tree exported without ``.git`` (``git archive``) records its
commit in a ``REVISION`` file at its top. performer-pytorch and scikit-learn are installed packages
(``pip install 'refattn[crosscheck]'``), not entries of DIR.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from .base import source_revision

__all__ = ["REPOSITORIES", "commands", "main"]

#: directory name -> (git URL, the commit the record was measured on)
REPOSITORIES = {
    "fast-transformers": ("https://github.com/idiap/fast-transformers",
                          "2ad36b97e64cb93862937bd21fcc9568d989561f"),
    "OnLearningTheKernel": ("https://github.com/cs1160701/OnLearningTheKernel",
                            "a8e3d3bb80bd866c52a9d9ef5e4f8f5a771c65e6"),
    "Translational-Equivariant-Performers": ("https://github.com/ExpectationMax/Translational-Equivariant-"
                                             "Performers", "c7a55af3b581426512eb4a57d3a13eb20e93fbd6"),
    # xformers/components (favor) was removed after this commit
    "xformers": ("https://github.com/facebookresearch/xformers", "279e083384ea26b5359ac65d116fd12b15b32643"),
}


def commands(sources: str) -> list[str]:
    """The shell commands that lay out `sources` (clone and check out each pinned commit)."""
    out = []
    for name, (url, commit) in REPOSITORIES.items():
        path = shlex.quote(os.path.join(sources, name))
        out.append(f"git clone --quiet {url} {path} && git -C {path} checkout --quiet {commit}")
    return out


def build_extension(sources: str) -> str:
    """Compile fast-transformers' ``causal_product_cpu.cpp``; the path of the built module."""
    from torch.utils.cpp_extension import load
    build = os.path.join(sources, "build", "causal_product_cpu")
    os.makedirs(build, exist_ok=True)
    src = os.path.join(sources, "fast-transformers", "fast_transformers", "causal_product",
                       "causal_product_cpu.cpp")
    mod = load(name="causal_product_cpu", sources=[src], build_directory=build, extra_cflags=["-O2"])
    return mod.__file__


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.conformance.layout",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("sources", metavar="DIR")
    p.add_argument("--clone", action="store_true",
                   help="run the clone commands for the entries that are absent")
    p.add_argument("--build", action="store_true", help="compile fast-transformers' causal_product_cpu")
    args = p.parse_args(argv)
    if not os.path.isdir(args.sources):
        print(f"error: DIR {args.sources}: not a directory (create it first)", file=sys.stderr)
        return 2
    for name, cmd in zip(REPOSITORIES, commands(args.sources), strict=True):
        path = os.path.join(args.sources, name)
        if os.path.isdir(path):
            rev = source_revision(path)
            pinned = REPOSITORIES[name][1]
            print(f"{name}: present at {rev}" + ("" if rev == pinned else f" (the record used {pinned})"))
        elif args.clone:
            print(f"{name}: {cmd}", flush=True)
            r = subprocess.run(cmd, shell=True)
            if r.returncode:
                return r.returncode
        else:
            print(cmd)
    if args.build:
        print(f"built {build_extension(args.sources)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
