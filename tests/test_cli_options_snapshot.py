"""Every documented flag and config-file key still parses to the same value (tests/fixtures/option_snapshot.json,
written by ``python tests/option_snapshot.py`` before the training options were grouped)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from option_snapshot import BASE, FIXTURE, build, difference, documented_files, flag_args

SNAPSHOT = json.loads(FIXTURE.read_text(encoding="utf-8"))
FLAGS = [(name, flag) for name, command in SNAPSHOT["commands"].items() for flag in command["flags"]]
KEYS = [(name, key) for name, command in SNAPSHOT["commands"].items() for key in command["keys"]]


@pytest.mark.parametrize("name", list(BASE))
def test_every_flag_is_in_the_snapshot(name: str) -> None:
    assert {flag for flag, _ in flag_args(name)} == set(SNAPSHOT["commands"][name]["flags"])


@pytest.mark.parametrize("name", list(BASE))
def test_base_config(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    assert build(monkeypatch, name, BASE[name], tmp_path) == SNAPSHOT["commands"][name]["base"]


@pytest.mark.parametrize(("name", "flag"), FLAGS)
def test_flag_parses_to_the_same_values(name: str, flag: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    recorded = SNAPSHOT["commands"][name]
    args = recorded["flags"][flag]["args"]
    values = build(monkeypatch, name, BASE[name] + args, tmp_path)
    assert difference(values, recorded["base"]) == recorded["flags"][flag]["changes"]


@pytest.mark.parametrize(("name", "key"), KEYS)
def test_file_key_parses_to_the_same_values(
    name: str, key: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "d").mkdir()
    recorded = SNAPSHOT["commands"][name]
    entry = recorded["keys"][key]
    (tmp_path / "key.toml").write_text(entry["line"] + "\n", encoding="utf-8")
    values = build(monkeypatch, name, [*BASE[name], *entry["needs"], "--config", "key.toml"], tmp_path)
    assert difference(values, recorded["base"]) == entry["changes"]


@pytest.mark.parametrize("label", list(SNAPSHOT["files"]))
def test_documented_config_file_parses_to_the_same_values(
    label: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "d").mkdir()
    name, text = documented_files()[label]
    path = tmp_path / ("file.yaml" if label.endswith((".yaml", ".yml")) else "file.toml")
    path.write_text(text, encoding="utf-8")
    assert build(monkeypatch, name, [*BASE[name], "--config", path.name], tmp_path) == SNAPSHOT["files"][label]


def test_every_documented_file_is_in_the_snapshot() -> None:
    assert set(documented_files()) == set(SNAPSHOT["files"])
