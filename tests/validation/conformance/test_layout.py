"""The layout command: the clone commands at the pinned commits, and the state of the entries present."""

from validation.conformance.layout import REPOSITORIES, commands, main


def test_commands_clone_each_repository_at_its_commit(tmp_path):
    cmds = commands(str(tmp_path))
    assert len(cmds) == len(REPOSITORIES)
    for (name, (url, commit)), cmd in zip(REPOSITORIES.items(), cmds, strict=True):
        assert cmd.startswith(f"git clone --quiet {url} ") and cmd.endswith(f"checkout --quiet {commit}")
        assert str(tmp_path / name) in cmd


def test_main_reports_present_entries_and_prints_the_rest(tmp_path, capsys):
    entry = tmp_path / "xformers"
    entry.mkdir()
    (entry / "REVISION").write_text("0123abc\n")
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "xformers: present at 0123abc (the record used " in out
    assert out.count("git clone") == len(REPOSITORIES) - 1
    assert main([str(tmp_path / "absent")]) == 2
