"""paper_checks.figures: a figure is written atomically (an interrupted write keeps the previous file)."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from paper_checks.figures import new_figure, save_figure  # noqa: E402


def test_save_figure_writes_a_png(tmp_path):
    fig, ax = new_figure(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    path = tmp_path / "f.png"
    assert save_figure(fig, path, dpi=50) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.png"]        # no temporary file left behind


def test_a_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "f.png"
    path.write_bytes(b"previous")
    fig, ax = new_figure(figsize=(2, 2))

    def broken(fh, **kw):
        fh.write(b"half a png")
        raise OSError("disk full")

    monkeypatch.setattr(fig, "savefig", broken)
    with pytest.raises(OSError, match="disk full"):
        save_figure(fig, path, dpi=50)
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["f.png"]


def test_the_experiments_figures_go_through_the_atomic_writer(tmp_path, monkeypatch):
    from paper_checks.experiments import harness

    path = tmp_path / "curve.png"
    path.write_bytes(b"previous")
    fig, axes = harness.new_figure(2)

    def broken(fh, **kw):
        fh.write(b"half a png")
        raise OSError("disk full")

    monkeypatch.setattr(fig, "savefig", broken)
    with pytest.raises(OSError, match="disk full"):
        harness.save_figure(fig, path)
    assert path.read_bytes() == b"previous" and [p.name for p in tmp_path.iterdir()] == ["curve.png"]
