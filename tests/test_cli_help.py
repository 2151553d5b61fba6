"""Every command's ``--help`` reads well in an 80-column terminal and ends with an example to copy."""

from __future__ import annotations

import pytest
import typer
from typer.core import TyperGroup

from bertkit.cli import app, main


def _command_paths() -> list[tuple[str, ...]]:
    def walk(group: TyperGroup, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        paths = []
        for name, command in group.commands.items():
            if isinstance(command, TyperGroup):
                paths += walk(command, (*prefix, name))
            else:
                paths.append((*prefix, name))
        return paths

    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    return walk(root, ())


def _help(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*args, "--help"]) == 0
    return capsys.readouterr().out


def test_every_command_is_listed_with_a_whole_summary(capsys, monkeypatch):
    paths = _command_paths()
    assert len(paths) > 15
    for group in {path[:-1] for path in paths}:
        out = _help(list(group), capsys, monkeypatch)
        listing = out.split("Commands:")[1]
        assert "..." not in listing and "…" not in listing, listing


@pytest.mark.parametrize("path", _command_paths(), ids=" ".join)
def test_help_fits_80_columns_and_ends_with_an_example(path, capsys, monkeypatch):
    out = _help(list(path), capsys, monkeypatch)
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    for param in command.get_params(typer.Context(command)):
        if getattr(param, "hidden", False):  # aliases kept for old scripts are not advertised
            continue
        for flag in param.opts:
            if flag.startswith("--"):
                assert flag in out, f"{flag} is missing or cut in the help of {' '.join(path)}"
    blocks = out.rstrip().split("\n\n")
    example = blocks[-1].strip().splitlines()
    assert example[0] == "Example:", out
    assert example[1].strip().startswith(" ".join(("bertkit", *path))), example
