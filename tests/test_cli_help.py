"""Every command's ``--help`` reads well in an 80-column terminal and ends with an example to copy."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

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


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9](?![\w-])")


def _all_options() -> set[str]:
    """Every option of every command, generated ones included (their commands are built on first use)."""
    found: set[str] = set()
    root = typer.main.get_command(app)

    def walk(command: Any, context: Any) -> None:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                walk(sub, type(context)(sub, parent=context, info_name=name))
        else:
            for param in command.get_params(context):
                found.update([*param.opts, *param.secondary_opts])

    walk(root, root.make_context("bertkit", ["--help"], resilient_parsing=True))
    return found


def _messages(path: Path) -> list[str]:
    """The string literals of ``path`` that are not docstrings: messages, hints and help texts."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_every_flag_a_message_names_exists():
    """A hint that names a flag sends the user to an option some command takes (``--long-text``, not the
    ``long_text`` of a config table), so no message can point at ``No such option``."""
    known = _all_options()
    assert {"--long-text", "--max-query-length", "--max-seq-length", "--resume"} <= known
    package = Path(__file__).resolve().parents[1] / "src" / "bertkit"
    unknown = {
        f"{path.relative_to(package)}: {flag}"
        for path in sorted(package.rglob("*.py"))
        for message in _messages(path)
        for flag in FLAG.findall(message)
        if flag not in known
    }
    assert not unknown, sorted(unknown)


def test_finetune_help_describes_the_sizing_rule(capsys, monkeypatch):
    """A small set trains with batch 16 for up to 10 epochs; the help must not promise a flat 32 and 3."""
    text = " ".join(_help(["finetune"], capsys, monkeypatch).split())
    assert (
        "(default: 32; qa 12; embedding 64; at most 16 below 10,000 training examples; never resized for --task embedding)"
        in text
    )
    assert "raised, up to 10, until the run makes 1,000 updates" in text
