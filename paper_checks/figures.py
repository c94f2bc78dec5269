"""The figures of the claim checks: matplotlib drawn off-screen, saved as the PNG files a
:class:`~paper_checks._claims.Result` lists in ``figures``.

A check draws only under ``--report`` (``ctx.figure_path(name)`` is None otherwise), so matplotlib is imported
on first use, never by ``import paper_checks``::

    figs = []
    path = ctx.figure_path("bias-vs-m")
    if path is not None:
        fig, ax = new_figure(figsize=(4.5, 3.2))
        ax.plot(...)                                   # what the check shows: its own lines, labels, legend
        figs.append(save_figure(fig, path, dpi=120))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refattn.files import atomic_write

__all__ = ["pyplot", "new_figure", "save_figure"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the off-screen Agg backend (imported here, on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def new_figure(*, figsize: tuple[float, float]) -> tuple[Any, Any]:
    """A new figure with one axes, ``(fig, ax)``, `figsize` in inches."""
    return pyplot().subplots(figsize=figsize)


def save_figure(fig: Any, path: Path, *, dpi: int) -> str:
    """Lay `fig` out tightly, write it to `path` (PNG at `dpi`, atomically: an interrupted write keeps the
    previous file) and close it; returns ``str(path)`` for ``Result.figures``."""
    fig.tight_layout()
    try:
        with atomic_write(path, "wb") as fh:
            fig.savefig(fh, dpi=dpi, format="png")
    finally:
        pyplot().close(fig)
    return str(path)
