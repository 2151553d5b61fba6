"""Every flag of ``pretrain``, ``finetune`` and ``prepare-data`` and every config-file key, with a sample value
and the flat field values of the config the command builds from it.

``python tests/option_snapshot.py`` writes ``tests/fixtures/option_snapshot.json``; ``tests/test_cli_options_snapshot.py``
replays it, so that regrouping the config dataclasses cannot change what a documented flag or key means.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "option_snapshot.json"

BASE = {
    "pretrain": ["--data", "d", "--output", "o", "--max-steps", "3"],
    "finetune": ["--task", "classification", "--model", "m", "--train", "t.tsv", "--output", "o"],
    "prepare-data": ["--input", "in.txt", "--tokenizer", "tok", "--output", "o"],
}
"""The options each command needs to build its config at all."""

SAMPLES = {
    "--optimizer": "lamb",
    "--schedule": "cosine",
    "--precision": "bf16",
    "--resume": "auto",
    "--resume-from": "ckpt",
    "--device": "cpu",
    "--max-time": "90m",
    "--search-budget": "30m",
    "--task": "qa",
    "-t": "qa",
    "--model-config": "mini",
    "--masking": "dynamic",
    "--attn-implementation": "eager",
    "--layer-norm-position": "pre",
    "--format": "jsonl",
    "--best-metric": "f1",
    "--best-mode": "min",
    "--warmup-ratio": "0.25",
    "--init-from": "d",
    "--long-text": "windows",
    "--loss": "cosent",
    "--tag-column": "7",
    "--pooling": "cls",
    "--matryoshka-dims": "64,32",
    "--negative-columns": "negative_1,negative_2",
    "--report-to": "tensorboard",
    "--threads": "1",
}
"""Sample values where a type's sample would not be a valid choice."""

NEEDS = {"--search-trials": ["--search"], "--search-budget": ["--search"], "--early-stopping-patience": ["--dev", "d"]}
NEEDS["--shard-index"] = ["--num-shards", "8"]
"""Flags that only go with another one."""

NOT_KEYS = {"resume_from", "text_column", "text_pair_column", "label_column", "label_names", "main_metric"}
NOT_KEYS |= {"doc_stride", "tag_column", "long_text", "max_query_length"}
NOT_KEYS |= {"negative_columns", "loss", "scale", "symmetric", "matryoshka_dims", "pooling", "normalize"}
NOT_KEYS |= {"cache_mini_batch_size", "score_max", "threads"}
"""Flags that are no config-file key (task options sit in a ``[task_options]`` table)."""

TYPE_SAMPLES: dict[Any, str] = {int: "7", float: "0.25"}


def params(name: str) -> list[Any]:
    """The parameters of command ``name``, as its ``--help`` lists them."""
    from bertkit.cli import app

    lazy = get_command(app).commands[name]  # type: ignore[attr-defined]
    return list(lazy.make_context(name, [], resilient_parsing=True).command.params)


def flag_args(name: str) -> Iterator[tuple[str, list[str]]]:
    """``(flag, arguments)`` for every flag of command ``name``: each form of a switch, each option with a sample."""
    base = set(BASE[name])
    for param in params(name):
        if param.param_type_name != "option" or param.name in ("help", "config"):
            continue
        if param.is_flag:
            for flag in [*param.opts, *param.secondary_opts]:
                yield flag, [flag]
            continue
        flag = max(param.opts, key=len)
        if flag in base:
            continue
        sample = SAMPLES.get(flag) or TYPE_SAMPLES.get(param.type_descriptor.annotation, "sample")
        yield flag, [*NEEDS.get(flag, []), flag, sample]


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """The flat field values of a config: nested configs as ``outer.field``, the training options by their
    flat option names (``train.lr``), whatever the grouping of ``TrainConfig``."""
    from bertkit.training.train_config import TrainConfig

    if isinstance(obj, TrainConfig):
        return {f"{prefix}{k}": _plain(v) for k, v in obj.to_dict().items()}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(flatten(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = _plain(value)
    return out


class _Built(Exception):
    """Raised by the stand-ins for the commands' work, once the config is built."""

    def __init__(self, *configs: Any) -> None:
        self.configs = configs


def build(monkeypatch: pytest.MonkeyPatch, name: str, args: list[str], cwd: Path) -> dict[str, Any]:
    """The flat values of the config(s) ``bertkit NAME ARGS`` builds, or ``{"error": message}``."""
    import bertkit.data
    import bertkit.training.finetune
    import bertkit.training.hyperparameter_search
    import bertkit.training.pretrain
    from bertkit.cli import app

    def stop(*configs: Any, **_: Any) -> None:
        raise _Built(*configs)

    monkeypatch.setattr(bertkit.training.pretrain, "pretrain", stop)
    monkeypatch.setattr(bertkit.training.finetune, "finetune", stop)
    monkeypatch.setattr(bertkit.training.hyperparameter_search, "search", stop)
    monkeypatch.setattr(bertkit.data, "prepare_dataset", stop)
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, [name, *args], catch_exceptions=True)
    if isinstance(result.exception, _Built):
        out: dict[str, Any] = {}
        for i, config in enumerate(result.exception.configs):
            out.update(flatten(config, "" if i == 0 else f"{type(config).__name__}."))
        return out
    return {"error": re.sub(r"\s+", " ", (result.output or repr(result.exception)).strip())[-300:]}


def toml_value(sample: str) -> str:
    """A sample as a TOML value: numbers bare, text quoted."""
    try:
        float(sample)
    except ValueError:
        return json.dumps(sample)
    return sample


def difference(values: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The values that differ from the base config's (a key the base lacks counts as changed)."""
    return {k: v for k, v in values.items() if k not in base or base[k] != v}


def documented_files() -> dict[str, tuple[str, str]]:
    """Config files the project documents: ``configs/*`` and the TOML/YAML blocks of ``docs/*.md``, as
    name -> (command, text)."""
    files = {}
    for path in sorted((ROOT / "configs").iterdir()):
        command_name = "finetune" if path.name.startswith("finetune") else "pretrain"
        files[f"configs/{path.name}"] = (command_name, path.read_text(encoding="utf-8"))
    for doc in sorted((ROOT / "docs").glob("*.md")):
        blocks = re.findall(r"```(toml|yaml)\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)
        for i, (kind, text) in enumerate(blocks):
            text = "\n".join(line.strip() for line in text.splitlines())
            if "[search]" in text:
                continue  # a search grid, read by SearchConfig, not a command's options
            files[f"docs/{doc.name}#{i}.{kind}"] = ("finetune" if "task" in text else "pretrain", text)
    return files


def snapshot(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> dict[str, Any]:
    """The whole snapshot: per command its base config, each flag's and each file key's changes, and each
    documented config file's values."""
    out: dict[str, Any] = {"commands": {}, "files": {}}
    (tmp / "d").mkdir(exist_ok=True)
    for name in BASE:
        base = build(monkeypatch, name, BASE[name], tmp)
        flags = {}
        for flag, args in flag_args(name):
            flags[flag] = {"args": args, "changes": difference(build(monkeypatch, name, BASE[name] + args, tmp), base)}
        keys = {}
        if name != "prepare-data":
            for flag, args in flag_args(name):
                key = flag[2:].replace("-", "_")
                if len(args) < 2 or key in NOT_KEYS or key.startswith("search") or not flag.startswith("--"):
                    continue
                value = toml_value(args[-1])
                needs = NEEDS.get(flag, [])
                (tmp / "key.toml").write_text(f"{key} = {value}\n", encoding="utf-8")
                values = build(monkeypatch, name, [*BASE[name], *needs, "--config", "key.toml"], tmp)
                keys[key] = {"line": f"{key} = {value}", "needs": needs, "changes": difference(values, base)}
        out["commands"][name] = {"base": base, "flags": flags, "keys": keys}
    for label, (name, text) in documented_files().items():
        suffix = ".yaml" if label.endswith((".yaml", ".yml")) else ".toml"
        (tmp / f"file{suffix}").write_text(text, encoding="utf-8")
        out["files"][label] = build(monkeypatch, name, [*BASE[name], "--config", f"file{suffix}"], tmp)
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        FIXTURE.write_text(json.dumps(snapshot(mp, Path(tmp)), indent=1, sort_keys=True) + "\n", encoding="utf-8")
