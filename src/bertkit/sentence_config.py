"""The sentence-transformers files of a model directory: how its sentence vectors are made.

A sentence-transformers checkpoint says in ``modules.json`` which modules follow the encoder (``Pooling``,
``Normalize``), in ``1_Pooling/config.json`` how token vectors are pooled, and in ``sentence_bert_config.json``
how long inputs may be. ``embed`` uses them as its defaults, so a checkpoint gives the vectors it was trained to
give; ``write_sentence_config`` writes them, so a bertkit model loads in sentence-transformers as it is.
Both the classic layout (``pooling_mode_mean_tokens: true``) and that of sentence-transformers 5
(``pooling_mode: "mean"``, the length in ``tokenizer_config.json``) are read; the classic one is written,
because every version reads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertkit.errors import CheckpointError
from bertkit.io import atomic_write_text

POOLINGS = ("cls", "mean", "max")
"""Pooling modes bertkit runs (sentence-transformers' ``cls_token``, ``mean_tokens``, ``max_tokens``)."""

MODULES_NAME = "modules.json"
SENTENCE_CONFIG_NAME = "sentence_bert_config.json"
POOLING_DIR = "1_Pooling"


@dataclass(frozen=True)
class SentenceConfig:
    """What a sentence-transformers checkpoint says about its sentence vectors."""

    pooling: str
    """``cls``, ``mean`` or ``max``."""
    normalize: bool
    """Whether vectors are L2-normalised (a ``Normalize`` module)."""
    max_seq_length: int | None = None
    """Longest input in tokens, specials included; ``None``: the model's length."""
    unsupported: tuple[str, ...] = ()
    """Modules bertkit does not run (``Dense``...): its vectors are then not the checkpoint's."""

    def describe(self) -> str:
        length = f", max length {self.max_seq_length}" if self.max_seq_length else ""
        return f"pooling {self.pooling}, {'normalized' if self.normalize else 'not normalized'}{length}"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} is not readable JSON ({exc})") from None


def _pooling_mode(path: Path) -> str:
    """``cls``, ``mean``, ``max``, or what else the file asks for (``mean_sqrt_len``, ``mean+max``...)."""
    config = _read_json(path)
    if not isinstance(config, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    if isinstance(config.get("pooling_mode"), str):  # sentence-transformers 5
        modes = [config["pooling_mode"].removesuffix("_token").removesuffix("_tokens")]
    else:
        modes = [
            key.removeprefix("pooling_mode_").removesuffix("_token").removesuffix("_tokens")
            for key, value in config.items()
            if key.startswith("pooling_mode_") and value is True
        ]
    return "+".join(modes) or "none"


def read_sentence_config(directory: str | os.PathLike) -> SentenceConfig | None:
    """The sentence-transformers settings of a model directory; ``None`` when it has no ``modules.json``."""
    directory = Path(directory)
    modules_path = directory / MODULES_NAME
    if not modules_path.is_file():
        return None
    modules = _read_json(modules_path)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise CheckpointError(f"{modules_path} is not a list of modules")
    pooling, normalize, length, unsupported = "cls", False, None, []
    for module in modules:
        kind = str(module.get("type", "")).rpartition(".")[2]
        where = directory / str(module.get("path", ""))
        if kind == "Transformer":
            settings = where / SENTENCE_CONFIG_NAME
            saved = _read_json(settings) if settings.is_file() else {}
            if saved.get("max_seq_length") is None and (where / "tokenizer_config.json").is_file():
                saved = {"max_seq_length": _read_json(where / "tokenizer_config.json").get("model_max_length")}
            length = saved.get("max_seq_length")
        elif kind == "Pooling":
            pooling = _pooling_mode(where / "config.json")
            if pooling not in POOLINGS:
                unsupported.append(f"{pooling} pooling")
        elif kind == "Normalize":
            normalize = True
        else:
            unsupported.append(kind or "nameless")
    valid = isinstance(length, int) and 0 < length < 1_000_000  # tokenizers save "no limit" as 1e30
    return SentenceConfig(pooling, normalize, length if valid else None, tuple(unsupported))


def write_sentence_config(directory: str | os.PathLike, config: SentenceConfig, hidden_size: int) -> None:
    """Write ``modules.json``, ``1_Pooling/config.json`` and ``sentence_bert_config.json`` (the classic layout,
    read by every sentence-transformers version) next to a saved model."""
    if config.pooling not in POOLINGS:
        raise CheckpointError(f"sentence-transformers pooling must be cls, mean or max, got {config.pooling!r}")
    directory = Path(directory)
    modules: list[dict[str, Any]] = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_transformers.models.Pooling"},
    ]
    if config.normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (directory / "2_Normalize").mkdir(exist_ok=True)
    pooling: dict[str, Any] = {"word_embedding_dimension": hidden_size}
    names = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens"}
    pooling.update({key: config.pooling == mode for mode, key in names.items()})
    pooling["pooling_mode_mean_sqrt_len_tokens"] = False
    (directory / POOLING_DIR).mkdir(exist_ok=True)
    atomic_write_text(directory / POOLING_DIR / "config.json", json.dumps(pooling, indent=2) + "\n")
    # bertkit's tokenizer lowercases by itself when the model is uncased; do_lower_case would do it twice
    settings = {"max_seq_length": config.max_seq_length, "do_lower_case": False}
    atomic_write_text(directory / SENTENCE_CONFIG_NAME, json.dumps(settings, indent=2) + "\n")
    atomic_write_text(directory / MODULES_NAME, json.dumps(modules, indent=2) + "\n")
