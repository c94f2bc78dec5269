"""Docstring blocks written once per module and filled into each docstring that needs them.

numpy-groupies' shared-doc idiom: ``@fill_doc(name=block)`` replaces a line ``{name}`` with the block, at
that line's indentation; only the names passed are replaced (LaTeX braces elsewhere are left alone).
"""

from __future__ import annotations

import inspect
import textwrap


def fill_doc(**blocks: str):
    """Return a decorator that replaces each ``{name}`` line of the docstring with ``blocks[name]``.

    Parameters
    ----------
    **blocks : str
        The shared blocks by placeholder name.

    Returns
    -------
    callable
        The decorator, which fills ``__doc__`` and returns the function itself.

    Raises
    ------
    ValueError
        If a placeholder is missing from the docstring (a block filled nowhere is stale).
    """
    def decorate(func):
        lines = inspect.cleandoc(func.__doc__ or "").splitlines()
        for name, block in blocks.items():
            marker = "{" + name + "}"
            hits = [i for i, line in enumerate(lines) if line.strip() == marker]
            if not hits:
                raise ValueError(f"fill_doc: {func.__qualname__}'s docstring has no line {marker!r}")
            body = textwrap.dedent(block).strip("\n").splitlines()
            for i in reversed(hits):
                indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
                lines[i:i + 1] = [indent + b if b.strip() else "" for b in body]
        func.__doc__ = "\n".join(lines)
        return func
    return decorate
