"""BERT WordPiece tokenization on the Hugging Face ``tokenizers`` library, faithful to the reference.

The reference is ``transformers.BertTokenizer``, the slow pure-Python algorithm (``bert-algorithms.md``
sections 1-3). ``tokenizers``' stock ``BertNormalizer``/``BertPreTokenizer`` come close but classify
characters with Rust Unicode tables that are older than Python's and skip some of the reference's steps:
unassigned code points (category Cn) are kept instead of deleted, punctuation and combining marks added in
recent Unicode versions are missed, one CJK extension block is not spaced, there is no NFC step, and the
Rust NFD lacks one decomposition. So bertkit assembles the pipeline from ``tokenizers`` building blocks
driven by character classes computed from Python's own ``unicodedata`` (the source the reference uses):

1. delete: NUL, U+FFFD and every category C* character except tab, newline and carriage return;
2. map the remaining whitespace (what ``str.split`` splits on) to a space;
3. NFC (the reference composes before splitting), unless accents are stripped, where NFD follows anyway;
4. lowercase per character (the reference lowercases char by char before its BasicTokenizer runs);
5. strip accents: NFD, then delete category Mn;
6. split on whitespace, isolate punctuation (ASCII symbols + category P*) and CJK ideographs;
7. greedy longest-match-first WordPiece with ``##`` continuations; a word longer than
   ``max_input_chars_per_word`` = 100 characters (as Hugging Face; Google's code used 200), or one with a
   piece missing from the vocabulary, becomes a single ``[UNK]``.

Every step keeps the ``tokenizers`` alignment map, so offsets point into the original string. The full
pipeline is serialised into ``tokenizer.json``, so Hugging Face's ``BertTokenizerFast`` loads it as is.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import logging
import os
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers import Tokenizer as _Backend

from bertkit.errors import BertkitError, TokenizerError
from bertkit.formats import ARROW_SUFFIXES, COMPRESSIONS, JSONL_SUFFIXES, PARQUET_SUFFIXES, read_text
from bertkit.io import atomic_write_text

logger = logging.getLogger("bertkit.tokenizer")

if TYPE_CHECKING:
    import tokenizers
    import torch

__all__ = ["MAX_INPUT_CHARS_PER_WORD", "SPECIAL_TOKENS", "Encoding", "Tokenizer", "collate_encodings"]

VOCAB_NAME = "vocab.txt"
TOKENIZER_NAME = "tokenizer.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_NAME = "special_tokens_map.json"

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
"""Reserved tokens, in the order (and so with the ids 0-4) a freshly trained vocabulary gives them."""

MAX_INPUT_CHARS_PER_WORD = 100
"""Longer words become one ``[UNK]``: Hugging Face's limit (slow and fast); Google's original used 200."""

DEFAULT_MODEL_MAX_LENGTH = 512

# The 8 CJK ideograph blocks BERT puts spaces around; Hangul and kana are deliberately not among them.
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)  # fmt: skip

Truncation = bool | Literal["longest_first", "only_first", "only_second"]
Padding = bool | Literal["longest", "max_length"]


# ------------------------------------------------------------------------------------ character classes
@dataclass(frozen=True)
class _CharClasses:
    delete: str  # regex classes, as Oniguruma source text
    space: str
    punctuation_or_cjk: str
    punctuation: str
    nonspacing_marks: str
    nfd_fixes: tuple[tuple[str, str], ...]  # (char, its NFD) where the Rust NFD disagrees with Python's


def _regex_class(ranges: Iterable[tuple[int, int]]) -> str:
    parts = (f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in sorted(ranges))
    return "[" + "".join(parts) + "]"


@functools.cache
def _char_classes() -> _CharClasses:
    """Classify every code point with Python's ``unicodedata``, as the reference does (a few 0.1 s, once)."""
    cats = list(map(unicodedata.category, map(chr, range(0x110000))))
    names = sorted(set(cats))
    codes = np.array(list(map({n: i for i, n in enumerate(names)}.__getitem__, cats)), dtype=np.int8)
    starts = np.flatnonzero(np.diff(codes)) + 1
    firsts = [0, *starts.tolist()]
    lasts = [*(starts - 1).tolist(), 0x10FFFF]
    runs = [(a, b, names[codes[a]]) for a, b in zip(firsts, lasts)]  # maximal runs of one category

    def where(pred: Callable[[str], bool]) -> list[tuple[int, int]]:
        return [(a, b) for a, b, cat in runs if pred(cat)]

    # Deleted: NUL, U+FFFD and category C* except tab, newline, CR (surrogates cannot occur in a Rust string).
    delete = _subtract(
        _merge_ranges(where(lambda cat: cat[0] == "C"), [(0xFFFD, 0xFFFD)]),
        [(0x09, 0x0A), (0x0D, 0x0D), (0xD800, 0xDFFF)],
    )
    # Mapped to a space: what str.split() splits on and was not deleted; a plain space needs no rewrite.
    space = _merge_ranges((c, c) for a, b in where(lambda cat: cat in ("Zs", "Zl", "Zp", "Cc")) for c in range(a, b + 1)
                          if chr(c).isspace() and (c in (0x09, 0x0A, 0x0D) or unicodedata.category(chr(c))[0] != "C") and c != 0x20)  # fmt: skip
    ascii_symbols = [(33, 47), (58, 64), (91, 96), (123, 126)]
    punct = _merge_ranges(ascii_symbols, where(lambda cat: cat[0] == "P"))
    marks = where(lambda cat: cat == "Mn")
    # Characters whose canonical decomposition the Rust NFD (an older Unicode table) does not know. One C-level
    # normalisation of all candidates per side; usually they agree and nothing needs fixing.
    candidates = (
        chr(c) for a, b in where(lambda cat: cat[0] not in "CZ") for c in range(a, b + 1) if not 0x4E00 <= c <= 0x9FFF
    )
    # Canonical decompositions (Hangul syllables decompose algorithmically, identically on both sides).
    assigned = [ch for ch in candidates if (d := unicodedata.decomposition(ch)) and d[0] != "<"]
    joined = "\n".join(assigned)
    python, rust = unicodedata.normalize("NFD", joined), normalizers.NFD().normalize_str(joined)
    fixes: tuple[tuple[str, str], ...] = ()
    if python != rust:
        fixes = tuple(
            (ch, want)
            for ch, want, got in zip(assigned, python.split("\n"), rust.split("\n"), strict=True)
            if want != got
        )
    return _CharClasses(
        delete=_regex_class(delete),
        space=_regex_class(space),
        punctuation_or_cjk=_regex_class(_merge_ranges(punct, CJK_RANGES)),
        punctuation=_regex_class(punct),
        nonspacing_marks=_regex_class(marks),
        nfd_fixes=fixes,
    )


def _subtract(ranges: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for a, b in ranges:
        pieces = [(a, b)]
        for ha, hb in holes:
            pieces = [p for x, y in pieces for p in ((x, min(y, ha - 1)), (max(x, hb + 1), y)) if p[0] <= p[1]]
        out += pieces
    return out


def _merge_ranges(*range_lists: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of inclusive code-point ranges, as the fewest sorted, non-touching ranges."""
    merged: list[list[int]] = []
    for a, b in sorted(itertools.chain(*range_lists)):
        if merged and merged[-1][1] >= a - 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _normalizer(lowercase: bool, strip_accents: bool) -> normalizers.Normalizer:
    classes = _char_classes()
    steps: list[normalizers.Normalizer] = [
        normalizers.Replace(Regex(classes.delete), ""),
        normalizers.Replace(Regex(classes.space), " "),
    ]
    if not strip_accents:  # with stripping, NFD follows and makes NFC moot
        steps.append(normalizers.NFC())
        steps += [normalizers.Replace(nfd, ch) for ch, nfd in classes.nfd_fixes]
    if lowercase:
        steps.append(normalizers.Lowercase())
    if strip_accents:
        steps.append(normalizers.NFD())
        steps += [normalizers.Replace(ch, nfd) for ch, nfd in classes.nfd_fixes]
        steps.append(normalizers.Replace(Regex(classes.nonspacing_marks), ""))
    return normalizers.Sequence(steps)


def _pre_tokenizer(tokenize_chinese_chars: bool) -> pre_tokenizers.PreTokenizer:
    classes = _char_classes()
    isolate = classes.punctuation_or_cjk if tokenize_chinese_chars else classes.punctuation
    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(isolate), "isolated")])


# ------------------------------------------------------------------------------------------ Encoding
@dataclass(eq=False)
class Encoding:
    """One encoded sequence (or pair). All lists have the same length.

    ``offsets`` are ``(start, end)`` character spans into the original input string (into the second string
    for tokens with ``sequence_ids == 1``); special and padding tokens have ``(0, 0)``. ``word_ids`` number
    the words (whitespace/punctuation-split units) of each sequence and are ``None`` for special tokens.
    Encodings returned by a ``Tokenizer`` read their fields lazily from the ``tokenizers`` result.
    """

    ids: list[int]
    tokens: list[str]
    type_ids: list[int]
    attention_mask: list[int]
    special_tokens_mask: list[int]
    offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    sequence_ids: list[int | None]

    def __len__(self) -> int:
        return len(self.ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Encoding):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)


_FIELDS = tuple(Encoding.__dataclass_fields__)


class _LazyEncoding(Encoding):
    """An ``Encoding`` view of a ``tokenizers.Encoding``: each field is converted on first access, then cached
    in the instance ``__dict__`` (so later reads are plain attribute lookups)."""

    def __init__(self, enc: tokenizers.Encoding) -> None:
        self._enc = enc

    def __len__(self) -> int:
        return len(self._enc)

    def __repr__(self) -> str:
        return f"Encoding(ids={self.ids!r}, tokens={self.tokens!r})"


class _LazyField:
    """Non-data descriptor: reads the field from the ``tokenizers.Encoding`` once, then the instance dict wins."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: _LazyEncoding | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj._enc, self.name)
        setattr(obj, self.name, value)  # plain setattr: no __set__ here, and no __dict__ object is materialised
        return value


for _name in _FIELDS:
    setattr(_LazyEncoding, _name, _LazyField(_name))


def collate_encodings(encodings: Sequence[Encoding], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Stack encodings into ``input_ids``, ``token_type_ids`` and ``attention_mask`` LongTensors ``[B, L]``.

    Shorter rows are padded on the right to the longest one with ``pad_id``, segment 0 and mask 0.
    """
    import torch  # here, not at the top: data preparation workers use the tokenizer and never pay for torch

    if not encodings:
        raise TokenizerError("collate_encodings got no encodings; pass at least one")
    length = max(len(e.ids) for e in encodings)
    out = {
        "input_ids": torch.full((len(encodings), length), pad_id, dtype=torch.long),
        "token_type_ids": torch.zeros((len(encodings), length), dtype=torch.long),
        "attention_mask": torch.zeros((len(encodings), length), dtype=torch.long),
    }
    for row, e in enumerate(encodings):
        n = len(e.ids)
        out["input_ids"][row, :n] = torch.tensor(e.ids, dtype=torch.long)
        out["token_type_ids"][row, :n] = torch.tensor(e.type_ids, dtype=torch.long)
        out["attention_mask"][row, :n] = torch.tensor(e.attention_mask, dtype=torch.long)
    return out


# ------------------------------------------------------------------------------------------ Tokenizer
class Tokenizer:
    """BERT WordPiece tokenizer: normalise, split, WordPiece, ``[CLS] A [SEP] B [SEP]``; offsets and decode.

    Build one with ``from_pretrained`` (a model directory, ``vocab.txt`` or ``tokenizer.json``), ``from_vocab``
    or ``train``. ``backend`` is the underlying ``tokenizers.Tokenizer`` (no truncation or padding set).
    """

    def __init__(
        self,
        vocab: dict[str, int] | Sequence[str],
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
        max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
    ) -> None:
        """``vocab`` maps token -> id (ids must be exactly 0..V-1) or lists tokens in id order."""
        if not isinstance(vocab, dict):
            vocab = _vocab_from_list(list(vocab), "the vocabulary")
        _check_vocab(vocab, "the vocabulary")
        if model_max_length < 2:
            raise TokenizerError(
                f"model_max_length must be at least 2 (room for [CLS] and [SEP]), got {model_max_length}"
            )
        self._vocab = dict(vocab)
        self._lowercase = bool(lowercase)
        self._strip_accents_option = strip_accents
        self._tokenize_chinese_chars = bool(tokenize_chinese_chars)
        self.model_max_length = int(model_max_length)
        self._max_input_chars_per_word = int(max_input_chars_per_word)
        self._backend = self._build_backend()
        self._variants: dict[tuple, _Backend] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ construction
    def _build_backend(self) -> _Backend:
        backend = _Backend(
            models.WordPiece(
                self._vocab, unk_token=UNK, continuing_subword_prefix="##",
                max_input_chars_per_word=self._max_input_chars_per_word,
            )
        )  # fmt: skip
        backend.normalizer = _normalizer(self._lowercase, self.strip_accents)
        backend.pre_tokenizer = _pre_tokenizer(self._tokenize_chinese_chars)
        backend.post_processor = processors.TemplateProcessing(
            single=f"{CLS}:0 $A:0 {SEP}:0",
            pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
            special_tokens=[(CLS, self._vocab[CLS]), (SEP, self._vocab[SEP])],
        )
        backend.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # decode() cleans up as HF
        # Specials written in the input ("Paris is the [MASK] of France.") are matched verbatim, as in HF.
        backend.add_special_tokens(list(SPECIAL_TOKENS))
        return backend

    @classmethod
    def from_vocab(
        cls,
        vocab_file: str | os.PathLike,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        **options: Any,
    ) -> Tokenizer:
        """Load a ``vocab.txt`` (one token per line; the line index is the id)."""
        path = Path(vocab_file)
        vocab = _read_vocab_txt(path)
        return cls(vocab, lowercase=lowercase, strip_accents=strip_accents,
                   tokenize_chinese_chars=tokenize_chinese_chars, **options)  # fmt: skip

    def with_vocab(self, tokens: Sequence[str]) -> Tokenizer:
        """A tokenizer with the same options over another vocabulary (``tokens`` in id order)."""
        return type(self)(list(tokens), lowercase=self._lowercase, strip_accents=self._strip_accents_option,
                          tokenize_chinese_chars=self._tokenize_chinese_chars, model_max_length=self.model_max_length,
                          max_input_chars_per_word=self._max_input_chars_per_word)  # fmt: skip

    def word_pieces(self, word: str) -> list[str]:
        """WordPiece's split of one pre-tokenized, normalised word (``["[UNK]"]`` when it cannot be covered)."""
        return [t.value for t in self._backend.model.tokenize(word)]

    def split_words(self, text: str) -> list[str]:
        """``text`` normalised (case, accents) and split into words as the basic tokenizer does, before WordPiece."""
        normalised = self._backend.normalizer.normalize_str(text)
        return [word for word, _ in self._backend.pre_tokenizer.pre_tokenize_str(normalised)]

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **overrides: Any) -> Tokenizer:
        """Load from a model directory, a ``vocab.txt`` file or a ``tokenizer.json`` file.

        A directory needs ``vocab.txt`` and/or ``tokenizer.json``; ``tokenizer_config.json`` (Hugging Face
        keys ``do_lower_case``, ``strip_accents``, ``tokenize_chinese_chars``, ``model_max_length``) sets the
        options, else they come from ``tokenizer.json``'s normalizer, else BERT-uncased defaults. Keyword
        ``overrides`` (``lowercase``, ``strip_accents``, ``tokenize_chinese_chars``, ``model_max_length``,
        ``max_input_chars_per_word``) win over the files. The pipeline is always rebuilt from the vocabulary
        and these options, so a checkpoint directory fully determines its tokenizer.
        """
        path = Path(path)
        if not path.exists():
            raise TokenizerError(
                f"tokenizer path {path} does not exist; pass a model directory, vocab.txt or tokenizer.json"
            )
        options: dict[str, Any] = {}
        if path.is_dir():
            vocab_path, json_path, config_path = path / VOCAB_NAME, path / TOKENIZER_NAME, path / TOKENIZER_CONFIG_NAME
            if not vocab_path.is_file() and not json_path.is_file():
                raise TokenizerError(
                    f"{path} is not a model directory: it has neither {VOCAB_NAME} nor {TOKENIZER_NAME}"
                )
            if vocab_path.is_file():  # vocab.txt is what BertTokenizer reads, so it defines the ids
                vocab = _read_vocab_txt(vocab_path)
                if not config_path.is_file() and json_path.is_file():
                    options = _read_tokenizer_json(json_path)[1]
                elif not config_path.is_file():
                    options = _casing_from_vocab(vocab, vocab_path)
            else:
                vocab, options = _read_tokenizer_json(json_path)
            if config_path.is_file():
                options.update(_read_tokenizer_config(config_path))
        elif path.suffix == ".json":
            vocab, options = _read_tokenizer_json(path)
        else:
            vocab = _read_vocab_txt(path)
            options = _casing_from_vocab(vocab, path)
        unknown = set(overrides) - _OPTION_NAMES
        if unknown:
            raise TokenizerError(f"unknown tokenizer option(s) {sorted(unknown)}; known: {sorted(_OPTION_NAMES)}")
        options.update(overrides)
        return cls(vocab, **options)

    @classmethod
    def train(
        cls,
        files_or_iterator: str | os.PathLike | Iterable[str | os.PathLike] | Iterable[str],
        vocab_size: int = 30522,
        min_frequency: int = 2,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        *,
        limit_alphabet: int = 1000,
        show_progress: bool = False,
        **options: Any,
    ) -> Tokenizer:
        """Learn a WordPiece vocabulary from raw text with BERT's normalisation and splitting.

        ``files_or_iterator`` is a path, a list of paths (plain UTF-8 text files or directories of ``*.txt``,
        read line by line as they are), or an iterable of text strings (e.g. lines). For a real corpus (JSONL,
        Parquet, compressed files, Gutenberg books) pass ``bertkit.data.corpus_texts(paths, options)``: the
        reader ``bertkit tokenizer train`` and ``prepare-data`` use. ``[PAD] [UNK] [CLS] [SEP] [MASK]`` get ids
        0-4. ``limit_alphabet`` caps the single characters kept (the rarest go to ``[UNK]``).
        """
        if vocab_size <= len(SPECIAL_TOKENS):
            raise TokenizerError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
        seed = cls({tok: i for i, tok in enumerate(SPECIAL_TOKENS)}, lowercase=lowercase, strip_accents=strip_accents,
                   tokenize_chinese_chars=tokenize_chinese_chars, **options)  # fmt: skip
        backend = copy.deepcopy(seed._backend)
        backend.model = models.WordPiece(unk_token=UNK, continuing_subword_prefix="##")
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS),
            limit_alphabet=limit_alphabet, continuing_subword_prefix="##", show_progress=show_progress,
        )  # fmt: skip
        files, texts = _training_inputs(files_or_iterator)
        try:
            if files is not None:
                backend.train(files, trainer=trainer)
            else:
                backend.train_from_iterator(texts, trainer=trainer)
        except BertkitError:  # raised by the text iterator (a corpus reader's one-line error): it stands
            raise
        except Exception as exc:  # the Rust trainer raises plain Exceptions, e.g. on a binary file
            raise TokenizerError(f"cannot learn a vocabulary from the input: {exc}; give UTF-8 text files") from None
        vocab = backend.get_vocab(with_added_tokens=False)
        if len(vocab) <= len(SPECIAL_TOKENS):
            raise TokenizerError("the training text is empty: no WordPieces were learned; pass non-empty text files")
        return cls(vocab, lowercase=lowercase, strip_accents=strip_accents,
                   tokenize_chinese_chars=tokenize_chinese_chars, **options)  # fmt: skip

    # ------------------------------------------------------------------ saving
    def save_pretrained(self, directory: str | os.PathLike) -> list[Path]:
        """Write ``vocab.txt``, ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.

        The files load in Hugging Face's ``BertTokenizer``/``BertTokenizerFast``/``AutoTokenizer`` and give the
        same ids. Returns the written paths.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tokens = self._id_to_token
        config = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self._lowercase,
            "strip_accents": self._strip_accents_option,
            "tokenize_chinese_chars": self._tokenize_chinese_chars,
            "do_basic_tokenize": True,
            "never_split": None,
            "model_max_length": self.model_max_length,
            "max_input_chars_per_word": self._max_input_chars_per_word,
            "clean_up_tokenization_spaces": True,
            "unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK,
            "bertkit_fingerprint": self.fingerprint,
        }  # fmt: skip
        special_map = {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK}
        files = {
            VOCAB_NAME: "".join(t + "\n" for t in tokens),
            TOKENIZER_NAME: self._backend.to_str(pretty=True),
            TOKENIZER_CONFIG_NAME: json.dumps(config, indent=2) + "\n",
            SPECIAL_TOKENS_MAP_NAME: json.dumps(special_map, indent=2) + "\n",
        }
        written = []
        for name, text in files.items():
            atomic_write_text(directory / name, text)
            written.append(directory / name)
        return written

    # ------------------------------------------------------------------ encoding
    def encode(
        self,
        text: str,
        text_pair: str | None = None,
        *,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: Truncation = False,
        padding: Padding = False,
    ) -> Encoding:
        """Encode one text or one pair as ``[CLS] A [SEP] (B [SEP])``, segments 0 for A and 1 for B.

        ``truncation`` (True = ``"longest_first"``: drop tokens from the end of the longer sequence, one at a
        time) applies to ``max_length``, default ``model_max_length``; without ``truncation`` the sequence is
        never cut. ``padding="max_length"`` pads to ``max_length``; ``"longest"`` is a no-op for one input.
        """
        _check_text(text, "text")
        if text_pair is not None:
            _check_text(text_pair, "text_pair")
        backend = self._backend_for(max_length, truncation, padding)
        try:
            enc = backend.encode(text, text_pair, add_special_tokens=add_special_tokens)
        except Exception as exc:  # tokenizers raises plain Exceptions for impossible truncations
            raise TokenizerError(f"cannot encode: {_why_unencodable([text, text_pair]) or exc}") from None
        return _LazyEncoding(enc)

    def encode_batch(
        self,
        texts: Sequence[str],
        text_pairs: Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: Truncation = False,
        padding: Padding = False,
    ) -> list[Encoding]:
        """Encode many texts (or pairs) in parallel in Rust; same keywords as ``encode``.

        ``padding="longest"`` (or True) pads every encoding to the longest in the batch.
        """
        if isinstance(texts, str):
            raise TokenizerError("encode_batch takes a list of texts; use encode() for a single string")
        texts = list(texts)
        if text_pairs is not None:
            text_pairs = list(text_pairs)
            if len(text_pairs) != len(texts):
                raise TokenizerError(f"encode_batch got {len(texts)} texts but {len(text_pairs)} text_pairs")
            inputs: list = list(zip(texts, text_pairs))
        else:
            inputs = texts
        backend = self._backend_for(max_length, truncation, padding)
        try:
            encs = backend.encode_batch(inputs, add_special_tokens=add_special_tokens)
        except Exception as exc:
            bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
            if bad is not None:
                raise TokenizerError(f"encode_batch: item {bad} is {type(texts[bad]).__name__}, not str") from None
            for i, item in enumerate(inputs):
                reason = _why_unencodable(item if isinstance(item, tuple) else [item])
                if reason:
                    raise TokenizerError(f"encode_batch: item {i}: {reason}") from None
            raise TokenizerError(f"cannot encode batch: {exc}") from None
        return [_LazyEncoding(e) for e in encs]

    def ids_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids of each text, without special tokens or truncation: the data-preparation fast path."""
        return [e.ids for e in self._backend.encode_batch(list(texts), add_special_tokens=False)]

    def tokenize(self, text: str) -> list[str]:
        """The WordPieces of ``text``, without special tokens."""
        _check_text(text, "text")
        return self._backend.encode(text, add_special_tokens=False).tokens

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Vocabulary ids; a token not in the vocabulary gives the ``[UNK]`` id (as Hugging Face)."""
        if isinstance(tokens, str):
            return self._vocab.get(tokens, self.unk_id)
        return [self._vocab.get(t, self.unk_id) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """Tokens for ids; an id outside the vocabulary raises ``TokenizerError``."""
        tokens = self._id_to_token
        if isinstance(ids, int) or getattr(ids, "ndim", None) == 0:
            return tokens[self._check_id(_as_id_list(ids)[0])]
        return [tokens[self._check_id(int(i))] for i in _as_id_list(ids)]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Join WordPieces back into text: ``##`` pieces are glued to their word, then HF's space clean-up
        (`` .`` -> ``.``, `` n't`` -> ``n't`` ...). Lowercasing and stripped accents are not undone."""
        id_list = [self._check_id(i) for i in _as_id_list(ids)]
        text = self._backend.decode(id_list, skip_special_tokens=skip_special_tokens)
        for before, after in _DECODE_CLEANUP:
            text = text.replace(before, after)
        return text

    # ------------------------------------------------------------------ properties
    @property
    def vocab(self) -> dict[str, int]:
        """A copy of the token -> id mapping."""
        return dict(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def __len__(self) -> int:
        return len(self._vocab)

    @property
    def pad_id(self) -> int:
        return self._vocab[PAD]

    @property
    def unk_id(self) -> int:
        return self._vocab[UNK]

    @property
    def cls_id(self) -> int:
        return self._vocab[CLS]

    @property
    def sep_id(self) -> int:
        return self._vocab[SEP]

    @property
    def mask_id(self) -> int:
        return self._vocab[MASK]

    @property
    def special_ids(self) -> set[int]:
        return {self._vocab[t] for t in SPECIAL_TOKENS}

    @property
    def lowercase(self) -> bool:
        return self._lowercase

    @property
    def strip_accents(self) -> bool:
        """Whether accents are stripped (``strip_accents=None`` follows ``lowercase``, as in Hugging Face)."""
        return self._lowercase if self._strip_accents_option is None else bool(self._strip_accents_option)

    @property
    def tokenize_chinese_chars(self) -> bool:
        return self._tokenize_chinese_chars

    @property
    def max_input_chars_per_word(self) -> int:
        return self._max_input_chars_per_word

    @property
    def backend(self) -> _Backend:
        """The ``tokenizers.Tokenizer`` doing the work (no truncation or padding; do not mutate it)."""
        return self._backend

    @functools.cached_property
    def fingerprint(self) -> str:
        """Stable hex digest of the vocabulary and the normalisation options (16 hex chars)."""
        payload = {
            "vocab": self._id_to_token,
            "lowercase": self._lowercase,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self._tokenize_chinese_chars,
            "max_input_chars_per_word": self._max_input_chars_per_word,
        }
        return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]

    def __repr__(self) -> str:
        return (
            f"Tokenizer(vocab_size={self.vocab_size}, lowercase={self._lowercase}, strip_accents={self.strip_accents},"
            f" tokenize_chinese_chars={self._tokenize_chinese_chars}, fingerprint={self.fingerprint!r})"
        )

    # ------------------------------------------------------------------ pickling (DataLoader workers)
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_lock", None)
        state["_variants"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ internals
    @functools.cached_property
    def _id_to_token(self) -> list[str]:
        tokens = [""] * len(self._vocab)
        for tok, i in self._vocab.items():
            tokens[i] = tok
        return tokens

    def _check_id(self, i: int) -> int:
        if not 0 <= i < len(self._vocab):
            raise TokenizerError(f"token id {i} is outside the vocabulary (size {len(self._vocab)})")
        return i

    def _backend_for(self, max_length: int | None, truncation: Truncation, padding: Padding) -> _Backend:
        """The backend configured for these options: one immutable copy per setting, so calls stay thread-safe."""
        strategy = _truncation_strategy(truncation)
        pad = _padding_mode(padding)
        if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
            raise TokenizerError(f"max_length must be a positive integer, got {max_length!r}")
        if strategy is None and pad is None:
            return self._backend
        length = self.model_max_length if max_length is None else max_length
        key = (strategy, length if strategy else None, pad, length if pad == "max_length" else None)
        variant = self._variants.get(key)
        if variant is None:
            with self._lock:
                variant = self._variants.get(key)
                if variant is None:
                    variant = copy.deepcopy(self._backend)
                    if strategy is not None:
                        variant.enable_truncation(length, strategy=strategy)
                    if pad is not None:
                        variant.enable_padding(pad_id=self.pad_id, pad_type_id=0, pad_token=PAD,
                                               length=length if pad == "max_length" else None)  # fmt: skip
                    self._variants[key] = variant
        return variant


# ------------------------------------------------------------------------------------------ helpers
# Hugging Face's clean_up_tokenization: re-attach punctuation and English clitics split off by BERT.
_DECODE_CLEANUP = (
    (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
    (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
)  # fmt: skip

_OPTION_NAMES = {"lowercase", "strip_accents", "tokenize_chinese_chars", "model_max_length", "max_input_chars_per_word"}


def _truncation_strategy(truncation: Truncation) -> str | None:
    if truncation is False or truncation is None:
        return None
    if truncation is True:
        return "longest_first"
    if truncation in ("longest_first", "only_first", "only_second"):
        return truncation
    raise TokenizerError(
        f"truncation must be False, True, 'longest_first', 'only_first' or 'only_second', got {truncation!r}"
    )


def _padding_mode(padding: Padding) -> str | None:
    if padding is False or padding is None:
        return None
    if padding is True or padding == "longest":
        return "longest"
    if padding == "max_length":
        return "max_length"
    raise TokenizerError(f"padding must be False, True, 'longest' or 'max_length', got {padding!r}")


def _check_text(text: object, name: str) -> None:
    if not isinstance(text, str):
        raise TokenizerError(f"{name} must be a str, got {type(text).__name__}")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _why_unencodable(texts: Sequence[str | None]) -> str | None:
    """Why ``tokenizers`` refused these strings, where we can tell (its own message names no position)."""
    for text in texts:
        found = _LONE_SURROGATE.search(text) if isinstance(text, str) else None
        if found:
            return (
                f"the text has a lone surrogate U+{ord(found.group()):04X} at character {found.start()}, which is "
                "not Unicode text; read the input with errors='replace' or fix the bytes it came from"
            )
    return None


def _as_id_list(ids: Any) -> list[int]:
    if hasattr(ids, "tolist"):  # torch / numpy
        ids = ids.tolist()
    if isinstance(ids, int):
        return [ids]
    return [int(i) for i in ids]


def _vocab_from_list(tokens: list[str], source: str) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok in vocab:
            raise TokenizerError(
                f"{source}: token {tok!r} appears twice (ids {vocab[tok]} and {i}); remove the duplicate"
            )
        vocab[tok] = i
    return vocab


def _check_vocab(vocab: dict[str, int], source: str) -> None:
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise TokenizerError(
            f"{source} lacks the special token(s) {' '.join(missing)}; a BERT vocabulary needs all of {' '.join(SPECIAL_TOKENS)}"
        )
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise TokenizerError(f"{source}: token ids must be exactly 0..{len(vocab) - 1} without gaps or repeats")


def _read_vocab_txt(path: Path) -> dict[str, int]:
    if not path.is_file():
        raise TokenizerError(f"vocabulary file {path} does not exist")
    text = read_text(path, TokenizerError)
    # HF strips only the newline; a stray '\r' from a Windows editor is dropped too.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab = _vocab_from_list([line.rstrip("\r") for line in lines], str(path))
    _check_vocab(vocab, str(path))
    return vocab


def _casing_from_vocab(vocab: dict[str, int], path: Path) -> dict[str, Any]:
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
    _check_vocab(vocab, str(path))
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


def _training_inputs(source: Any) -> tuple[list[str] | None, Iterable[str] | None]:
    """``Tokenizer.train``'s argument as (files, None) or (None, texts).

    A path or a list/tuple of paths means files (which must exist); any other iterable yields texts.
    """
    if isinstance(source, (str, os.PathLike)):
        source = [source]
    if isinstance(source, (list, tuple)):
        if not all(isinstance(s, (str, os.PathLike)) for s in source):
            raise TokenizerError("Tokenizer.train takes file paths, or an iterator of texts (e.g. iter(lines))")
        for s in source:
            if not Path(s).exists():
                raise TokenizerError(
                    f"training file {str(s)[:80]!r} does not exist (to train on in-memory texts pass an iterator, e.g. iter(texts))"
                )
        return _expand_files(source), None
    return None, source


# Files the Rust trainer would read as raw text, learning their syntax or compressed bytes.
_NOT_PLAIN_TEXT = {".json", *JSONL_SUFFIXES, *PARQUET_SUFFIXES, *ARROW_SUFFIXES, *COMPRESSIONS}


def _expand_files(paths: Sequence[str | os.PathLike]) -> list[str]:
    files: list[str] = []
    for p in map(Path, paths):
        if p.suffix.lower() in _NOT_PLAIN_TEXT:
            raise TokenizerError(
                f"{p} is not plain text; train on bertkit.data.corpus_texts([...]) (JSONL, Parquet, compressed "
                f"corpora), as 'bertkit tokenizer train' does"
            )
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("*.txt"))
            if not found:
                raise TokenizerError(f"training directory {p} has no *.txt files")
            files += found
        elif p.is_file():
            files.append(str(p))
        else:
            raise TokenizerError(f"training file {p} does not exist")
    return files
