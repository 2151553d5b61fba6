"""The tokenizer's files: ``vocab.txt``, ``tokenizer.json``, ``tokenizer_config.json`` and
``special_tokens_map.json``, read (ours, Hugging Face's, Google's bare ``vocab.txt``) and written so that Hugging
Face's ``BertTokenizer``/``BertTokenizerFast`` load them as they are."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from bertkit.errors import TokenizerError
from bertkit.formats import read_text
from bertkit.io import atomic_write_text
from bertkit.tokenizer.special_tokens import CLS, MASK, PAD, SEP, UNK, check_vocab, vocab_from_list

logger = logging.getLogger("bertkit.tokenizer")

VOCAB_NAME = "vocab.txt"
TOKENIZER_NAME = "tokenizer.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_NAME = "special_tokens_map.json"


def read_tokenizer_files(path: Path) -> tuple[dict[str, int], dict[str, Any]]:
    """The vocabulary and the options (``Tokenizer`` keywords) of a model directory, a ``vocab.txt`` or a
    ``tokenizer.json``; see ``Tokenizer.from_pretrained`` for which file wins."""
    if not path.exists():
        raise TokenizerError(
            f"tokenizer path {path} does not exist; pass a model directory, vocab.txt or tokenizer.json"
        )
    if path.suffix == ".json" and not path.is_dir():
        return _read_tokenizer_json(path)
    if not path.is_dir():
        vocab = read_vocab_txt(path)
        return vocab, casing_from_vocab(vocab, path)
    vocab_path, json_path, config_path = path / VOCAB_NAME, path / TOKENIZER_NAME, path / TOKENIZER_CONFIG_NAME
    if not vocab_path.is_file() and not json_path.is_file():
        raise TokenizerError(f"{path} is not a model directory: it has neither {VOCAB_NAME} nor {TOKENIZER_NAME}")
    options: dict[str, Any] = {}
    if vocab_path.is_file():  # vocab.txt is what BertTokenizer reads, so it defines the ids
        vocab = read_vocab_txt(vocab_path)
        if not config_path.is_file() and json_path.is_file():
            options = _read_tokenizer_json(json_path)[1]
        elif not config_path.is_file():
            options = casing_from_vocab(vocab, vocab_path)
    else:
        vocab, options = _read_tokenizer_json(json_path)
    if config_path.is_file():
        options.update(_read_tokenizer_config(config_path))
    return vocab, options


def tokenizer_config(
    *,
    lowercase: bool,
    strip_accents: bool | None,
    tokenize_chinese_chars: bool,
    model_max_length: int,
    max_input_chars_per_word: int,
    fingerprint: str,
) -> dict[str, Any]:
    """``tokenizer_config.json``: Hugging Face's keys for these options, and bertkit's fingerprint."""
    return {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": lowercase,
        "strip_accents": strip_accents,
        "tokenize_chinese_chars": tokenize_chinese_chars,
        "do_basic_tokenize": True,
        "never_split": None,
        "model_max_length": model_max_length,
        "max_input_chars_per_word": max_input_chars_per_word,
        "clean_up_tokenization_spaces": True,
        "unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK,
        "bertkit_fingerprint": fingerprint,
    }  # fmt: skip


def write_tokenizer_files(
    directory: str | os.PathLike, tokens: list[str], pipeline: str, config: dict[str, Any]
) -> list[Path]:
    """Write the four files, each atomically: ``tokens`` in id order, the ``tokenizers`` pipeline as JSON text,
    the ``tokenizer_config`` dict. Returns the written paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    special_map = {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK}
    files = {
        VOCAB_NAME: "".join(t + "\n" for t in tokens),
        TOKENIZER_NAME: pipeline,
        TOKENIZER_CONFIG_NAME: json.dumps(config, indent=2) + "\n",
        SPECIAL_TOKENS_MAP_NAME: json.dumps(special_map, indent=2) + "\n",
    }
    written = []
    for name, text in files.items():
        atomic_write_text(directory / name, text)
        written.append(directory / name)
    return written


def read_vocab_txt(path: Path) -> dict[str, int]:
    if not path.is_file():
        raise TokenizerError(f"vocabulary file {path} does not exist")
    text = read_text(path, TokenizerError)
    # HF strips only the newline; a stray '\r' from a Windows editor is dropped too.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab = vocab_from_list([line.rstrip("\r") for line in lines], str(path))
    check_vocab(vocab, str(path))
    return vocab


def casing_from_vocab(vocab: dict[str, int], path: Path) -> dict[str, Any]:
    """Casing for a bare ``vocab.txt`` (Google's releases have no tokenizer config): a vocabulary with many
    upper-case pieces was built without lowercasing, and a lowercasing tokenizer could never produce them.
    Google's uncased vocabulary has 2 such pieces in 30,522; its cased one has thousands."""
    upper = sum(1 for token in vocab if not token.startswith("[") and any(ch.isupper() for ch in token))
    if upper > 0.01 * len(vocab):
        logger.info(
            "%s: %d pieces have upper-case letters, so the tokenizer keeps case (no tokenizer_config.json "
            "says otherwise)",
            path,
            upper,
        )
        return {"lowercase": False}
    return {}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_text(path, TokenizerError))
    except json.JSONDecodeError as exc:
        raise TokenizerError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise TokenizerError(f"{path} must hold a JSON object")
    return data


def _read_tokenizer_config(path: Path) -> dict[str, Any]:
    data = _read_json(path)
    options: dict[str, Any] = {}
    if "do_lower_case" in data:
        options["lowercase"] = bool(data["do_lower_case"])
    if "strip_accents" in data:
        options["strip_accents"] = data["strip_accents"]
    if "tokenize_chinese_chars" in data:
        options["tokenize_chinese_chars"] = bool(data["tokenize_chinese_chars"])
    if isinstance(data.get("max_input_chars_per_word"), int):
        options["max_input_chars_per_word"] = data["max_input_chars_per_word"]
    # HF writes a huge sentinel (1e30) when the length is unknown; keep BERT's 512 then.
    if isinstance(data.get("model_max_length"), int) and 2 <= data["model_max_length"] <= 1_000_000:
        options["model_max_length"] = data["model_max_length"]
    for key, expected in (
        ("unk_token", UNK),
        ("sep_token", SEP),
        ("pad_token", PAD),
        ("cls_token", CLS),
        ("mask_token", MASK),
    ):
        value = data.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None and value != expected:
            raise TokenizerError(
                f"{path}: {key} is {value!r}; bertkit supports BERT's standard special tokens only ({expected})"
            )
    return options


def _read_tokenizer_json(path: Path) -> tuple[dict[str, int], dict[str, Any]]:
    """The WordPiece vocabulary and BERT options of a ``tokenizer.json`` (ours or Hugging Face's)."""
    data = _read_json(path)
    model = data.get("model") or {}
    if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        raise TokenizerError(
            f"{path} is not a WordPiece tokenizer (model type {model.get('type')!r}); BERT needs WordPiece"
        )
    if model.get("continuing_subword_prefix", "##") != "##":
        raise TokenizerError(
            f"{path}: continuing_subword_prefix is {model['continuing_subword_prefix']!r}, BERT uses '##'"
        )
    vocab = {str(k): int(v) for k, v in model["vocab"].items()}
    check_vocab(vocab, str(path))
    outside = [t["content"] for t in data.get("added_tokens") or [] if vocab.get(t.get("content")) != t.get("id")]
    if outside:
        raise TokenizerError(
            f"{path} has added tokens outside the WordPiece vocabulary ({outside[:3]}); add them to the vocab instead"
        )
    options: dict[str, Any] = {}
    if isinstance(model.get("max_input_chars_per_word"), int):
        options["max_input_chars_per_word"] = model["max_input_chars_per_word"]
    options.update(_options_from_pipeline(data.get("normalizer"), data.get("pre_tokenizer")))
    return vocab, options


def _options_from_pipeline(normalizer: dict | None, pre_tokenizer: dict | None) -> dict[str, Any]:
    if normalizer is None:
        return {"lowercase": False, "strip_accents": False}
    if normalizer.get("type") == "BertNormalizer":
        return {
            "lowercase": bool(normalizer.get("lowercase", True)),
            "strip_accents": normalizer.get("strip_accents"),
            "tokenize_chinese_chars": bool(normalizer.get("handle_chinese_chars", True)),
        }
    if normalizer.get("type") == "Sequence":  # the pipeline bertkit writes
        kinds = [step.get("type") for step in normalizer.get("normalizers", [])]
        lowercase, strip = "Lowercase" in kinds, "NFD" in kinds
        isolate = json.dumps((pre_tokenizer or {}).get("pretokenizers", []))
        return {
            "lowercase": lowercase,
            "strip_accents": None if strip == lowercase else strip,
            "tokenize_chinese_chars": "x{4E00}" in isolate,
        }
    raise TokenizerError(
        f"unsupported normalizer {normalizer.get('type')!r} in tokenizer.json; expected a BERT tokenizer"
    )
