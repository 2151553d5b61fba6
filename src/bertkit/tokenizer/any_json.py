"""Any ``tokenizer.json`` (BPE, Unigram, byte-level...: ModernBERT's, RoBERTa's, XLM-R's), run as the file says.

BERT's WordPiece files keep their own path (``Tokenizer``, rebuilt from the vocabulary with BERT's rules and its
parity guarantees). Every other ``tokenizer.json`` is loaded as it is by the ``tokenizers`` library: its
normalizer, pre-tokenizer, model, post-processor (the special tokens around one text or a pair) and decoder.
The special tokens (``cls``, ``sep``, ``pad``, ``mask``, ``unk``) are named by ``tokenizer_config.json`` or
``special_tokens_map.json`` beside it, as ``transformers`` reads them, else found among the file's added tokens.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as _Backend

from bertkit.errors import TokenizerError
from bertkit.formats import read_text
from bertkit.io import atomic_write_text
from bertkit.tokenizer.files import SPECIAL_TOKENS_MAP_NAME, TOKENIZER_CONFIG_NAME, TOKENIZER_NAME
from bertkit.tokenizer.framing import framing_processor
from bertkit.tokenizer.tokenizer import DEFAULT_MODEL_MAX_LENGTH, OTHER_FORMATS, Tokenizer

ROLES = ("cls", "sep", "pad", "mask", "unk")
"""The special tokens a model's pipelines use, by role."""

_GUESSES: dict[str, tuple[str, ...]] = {
    "cls": ("[CLS]", "<s>", "<cls>", "[BOS]"),
    "sep": ("[SEP]", "</s>", "<sep>", "[EOS]"),
    "pad": ("[PAD]", "<pad>"),
    "mask": ("[MASK]", "<mask>"),
    "unk": ("[UNK]", "<unk>"),
}


def is_wordpiece(path: Path) -> bool:
    """Whether ``path`` (a model directory or a file) holds a BERT WordPiece tokenizer: a ``vocab.txt``, or a
    ``tokenizer.json`` whose model is WordPiece. Anything else is read by ``JsonTokenizer``."""
    json_path = path / TOKENIZER_NAME if path.is_dir() else path
    if (path.is_dir() and (path / "vocab.txt").is_file()) or json_path.suffix != ".json" or not json_path.is_file():
        return True
    head = read_text(json_path, TokenizerError)
    try:
        model = json.loads(head).get("model") or {}
    except (json.JSONDecodeError, AttributeError):
        return True  # the WordPiece reader names what is wrong with the file
    return model.get("type") == "WordPiece"


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(read_text(path, TokenizerError))
    except json.JSONDecodeError as exc:
        raise TokenizerError(f"{path} is not valid JSON: {exc}") from None
    return data if isinstance(data, dict) else {}


def _token_name(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def special_tokens(backend: _Backend, config: dict[str, Any]) -> dict[str, str]:
    """The token of each role: as ``tokenizer_config.json``/``special_tokens_map.json`` name it (``cls_token``...),
    else the first usual spelling the vocabulary has. A role without a token is left out."""
    vocab = backend.get_vocab(with_added_tokens=True)
    found: dict[str, str] = {}
    for role in ROLES:
        named = _token_name(config.get(f"{role}_token"))
        if named is not None:
            if named not in vocab:
                raise TokenizerError(f"the tokenizer files name {role}_token {named!r}, which is not in the vocabulary")
            found[role] = named
            continue
        guess = next((t for t in _GUESSES[role] if t in vocab), None)
        if guess is not None:
            found[role] = guess
    return found


class JsonTokenizer(Tokenizer):
    """A ``Tokenizer`` whose pipeline is a ``tokenizer.json`` as it stands (not WordPiece rebuilt by BERT's
    rules). Encoding, batching, padding, truncation and ``__call__`` are ``Tokenizer``'s; the special tokens are
    the files'."""

    def __init__(
        self, backend: _Backend, specials: dict[str, str], *, model_max_length: int = DEFAULT_MODEL_MAX_LENGTH
    ) -> None:
        # Not Tokenizer.__init__: that one builds BERT's WordPiece pipeline from a vocabulary.
        backend.no_truncation()
        backend.no_padding()
        self._source = backend.to_str()  # the file as read: saved and fingerprinted without the framing below
        if backend.post_processor is None and "cls" in specials and "sep" in specials:
            vocab = backend.get_vocab(with_added_tokens=True)
            cls, sep = specials["cls"], specials["sep"]
            backend.post_processor = framing_processor(cls, vocab[cls], sep, vocab[sep])
        self._backend = backend
        self._vocab = backend.get_vocab(with_added_tokens=True)
        self._specials = dict(specials)
        self._lowercase = False
        self._strip_accents_option = False
        self._tokenize_chinese_chars = False
        self._max_input_chars_per_word = 0
        self.model_max_length = int(model_max_length)
        self._variants: dict[tuple, _Backend] = {}
        self._lock = threading.Lock()
        pre_tokenizer = json.loads(backend.to_str()).get("pre_tokenizer")
        self.spaces_are_tokens = '"ByteLevel"' in json.dumps(pre_tokenizer)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **overrides: Any) -> JsonTokenizer:
        """A model directory with ``tokenizer.json`` (and ``tokenizer_config.json``...), or the file itself.
        ``overrides``: ``model_max_length``."""
        path = Path(path)
        directory = path if path.is_dir() else path.parent
        file = directory / TOKENIZER_NAME if path.is_dir() else path
        if not file.is_file():
            raise TokenizerError(f"{directory} has no {TOKENIZER_NAME}")
        try:
            backend = _Backend.from_str(read_text(file, TokenizerError))
        except Exception as exc:  # tokenizers raises plain Exceptions for files it cannot read
            raise TokenizerError(
                f"{file} is neither BERT's WordPiece nor a tokenizer.json the tokenizers library reads: {exc}"
            ) from None
        config = {**_read_json(directory / SPECIAL_TOKENS_MAP_NAME), **_read_json(directory / TOKENIZER_CONFIG_NAME)}
        unknown = set(overrides) - {"model_max_length"}
        if unknown:
            raise TokenizerError(f"unknown tokenizer option(s) {sorted(unknown)} for a {TOKENIZER_NAME} tokenizer")
        length = overrides.get("model_max_length", config.get("model_max_length"))
        if not isinstance(length, int) or not 2 <= length <= 1_000_000:  # transformers writes 1e30 for "none"
            length = DEFAULT_MODEL_MAX_LENGTH
        return cls(backend, special_tokens(backend, config), model_max_length=length)

    def save_pretrained(self, directory: str | os.PathLike) -> list[Path]:
        """``tokenizer.json`` as it was read, and ``tokenizer_config.json``/``special_tokens_map.json`` naming the
        special tokens, so that ``transformers.AutoTokenizer`` loads the directory with the same ids."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        names = {f"{role}_token": token for role, token in self._specials.items()}
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": self.model_max_length, **names}
        written = []
        for name, text in (
            (TOKENIZER_NAME, _Backend.from_str(self._source).to_str(pretty=True)),
            (TOKENIZER_CONFIG_NAME, json.dumps(config, indent=2, ensure_ascii=False) + "\n"),
            (SPECIAL_TOKENS_MAP_NAME, json.dumps(names, indent=2, ensure_ascii=False) + "\n"),
        ):
            atomic_write_text(directory / name, text)
            written.append(directory / name)
        return written

    def with_vocab(self, tokens: Sequence[str]) -> Tokenizer:
        raise TokenizerError("growing the vocabulary is for WordPiece tokenizers; this one is a tokenizer.json")

    def word_pieces(self, word: str) -> list[str]:
        return [t.value for t in self._backend.model.tokenize(word)]

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Vocabulary ids; a token not in the vocabulary gives the unknown token's id."""
        found = [self._vocab.get(t) for t in ([tokens] if isinstance(tokens, str) else tokens)]
        ids = [self.unk_id if i is None else i for i in found]  # unk_id raises only when it is needed and absent
        return ids[0] if isinstance(tokens, str) else ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The file's decoder on ``ids``."""
        return self._backend.decode([self._check_id(int(i)) for i in ids], skip_special_tokens=skip_special_tokens)

    def _role(self, role: str) -> int:
        token = self._specials.get(role)
        if token is None:
            raise TokenizerError(
                f"this tokenizer has no {role} token (name it as {role}_token in tokenizer_config.json)"
            )
        return self._vocab[token]

    @property
    def pad_id(self) -> int:
        return self._role("pad")

    @property
    def unk_id(self) -> int:
        return self._role("unk")

    @property
    def cls_id(self) -> int:
        return self._role("cls")

    @property
    def sep_id(self) -> int:
        return self._role("sep")

    @property
    def mask_id(self) -> int:
        return self._role("mask")

    @property
    def special_ids(self) -> set[int]:
        return {self._vocab[t] for t in self._specials.values()}

    @property
    def specials(self) -> dict[str, str]:
        """The special token of each role (``cls``, ``sep``, ``pad``, ``mask``, ``unk``) the files name."""
        return dict(self._specials)

    @functools.cached_property
    def _id_to_token(self) -> list[str]:
        tokens = [""] * (max(self._vocab.values()) + 1 if self._vocab else 0)
        for token, i in self._vocab.items():
            tokens[i] = token
        return tokens

    @property
    def vocab_size(self) -> int:
        return len(self._id_to_token)

    def __len__(self) -> int:
        return self.vocab_size

    @functools.cached_property
    def fingerprint(self) -> str:
        """Stable hex digest of the whole ``tokenizer.json`` and the special tokens (16 hex chars)."""
        payload = self._source + json.dumps(self._specials, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    def __repr__(self) -> str:
        kind = json.loads(self._source).get("model", {}).get("type")
        return f"JsonTokenizer(model={kind}, vocab_size={self.vocab_size}, fingerprint={self.fingerprint!r})"


def _read_other(path: Path, overrides: dict[str, Any]) -> Tokenizer | None:
    return None if is_wordpiece(path) else JsonTokenizer.from_pretrained(path, **overrides)


OTHER_FORMATS.append(_read_other)
