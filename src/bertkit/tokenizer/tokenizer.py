"""The ``Tokenizer``: BERT WordPiece on the Hugging Face ``tokenizers`` library, faithful to the reference
``transformers.BertTokenizer``. The normalisation rules are ``normalization``'s (steps 1-6 of its list); step 7,
greedy longest-match-first WordPiece with ``##`` continuations, is the ``tokenizers`` WordPiece model: a word
longer than ``max_input_chars_per_word`` = 100 characters (as Hugging Face; Google's code used 200), or one
with a piece missing from the vocabulary, becomes a single ``[UNK]``. Every step keeps the ``tokenizers``
alignment map, so offsets point into the original string.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from tokenizers import Tokenizer as _Backend
from tokenizers import decoders, models

from bertkit.errors import TokenizerError
from bertkit.tokenizer.encoding import BatchEncoding, Encoding, LazyEncoding, batch_encoding
from bertkit.tokenizer.files import read_tokenizer_files, read_vocab_txt, tokenizer_config, write_tokenizer_files
from bertkit.tokenizer.framing import framing_processor
from bertkit.tokenizer.normalization import normalizer, pre_tokenizer
from bertkit.tokenizer.special_tokens import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK, check_vocab, vocab_from_list
from bertkit.tokenizer.training import learn_vocabulary

MAX_INPUT_CHARS_PER_WORD = 100
"""Longer words become one ``[UNK]``: Hugging Face's limit (slow and fast); Google's original used 200."""

DEFAULT_MODEL_MAX_LENGTH = 512

Truncation = bool | Literal["longest_first", "only_first", "only_second"]
Padding = bool | Literal["longest", "max_length"]

OTHER_FORMATS: list[Callable[[Path, dict[str, Any]], Tokenizer | None]] = []
"""Readers of tokenizer files that are not BERT's WordPiece (``any_json``: any other ``tokenizer.json``), asked
first by ``Tokenizer.from_pretrained``; each returns None for a path it does not take."""


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
            vocab = vocab_from_list(list(vocab), "the vocabulary")
        check_vocab(vocab, "the vocabulary")
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
        backend.normalizer = normalizer(self._lowercase, self.strip_accents)
        backend.pre_tokenizer = pre_tokenizer(self._tokenize_chinese_chars)
        backend.post_processor = framing_processor(CLS, self._vocab[CLS], SEP, self._vocab[SEP])
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
        vocab = read_vocab_txt(path)
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
        if cls is Tokenizer:
            for reader in OTHER_FORMATS:
                other = reader(Path(path), overrides)
                if other is not None:
                    return other
        vocab, options = read_tokenizer_files(Path(path))
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
        vocab = learn_vocabulary(seed._backend, files_or_iterator, vocab_size=vocab_size, min_frequency=min_frequency,
                                 limit_alphabet=limit_alphabet, show_progress=show_progress)  # fmt: skip
        return cls(vocab, lowercase=lowercase, strip_accents=strip_accents,
                   tokenize_chinese_chars=tokenize_chinese_chars, **options)  # fmt: skip

    # ------------------------------------------------------------------ saving
    def save_pretrained(self, directory: str | os.PathLike) -> list[Path]:
        """Write ``vocab.txt``, ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.

        The files load in Hugging Face's ``BertTokenizer``/``BertTokenizerFast``/``AutoTokenizer`` and give the
        same ids. Returns the written paths.
        """
        config = tokenizer_config(
            lowercase=self._lowercase, strip_accents=self._strip_accents_option,
            tokenize_chinese_chars=self._tokenize_chinese_chars, model_max_length=self.model_max_length,
            max_input_chars_per_word=self._max_input_chars_per_word, fingerprint=self.fingerprint,
        )  # fmt: skip
        return write_tokenizer_files(directory, self._id_to_token, self._backend.to_str(pretty=True), config)

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
        return LazyEncoding(enc)

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
        return [LazyEncoding(e) for e in encs]

    def __call__(
        self,
        text: str | Sequence[str],
        text_pair: str | Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        padding: Padding = False,
        truncation: Truncation | None = None,
        max_length: int | None = None,
        return_tensors: Literal["pt", "np"] | None = None,
        return_token_type_ids: bool = True,
        return_attention_mask: bool = True,
        return_offsets_mapping: bool = False,
    ) -> BatchEncoding:
        """Encode as Hugging Face's ``tokenizer(texts, ...)`` does: one text (or pair), or a list of them.

        Returns a ``BatchEncoding`` (a dict) of ``input_ids``, ``token_type_ids`` and ``attention_mask``: lists
        for one text, lists of lists for a list, ``[B, L]`` tensors with ``return_tensors="pt"`` or int64 arrays
        with ``"np"``. ``padding`` True/"longest" pads to the longest in the batch, "max_length" to ``max_length``
        (default ``model_max_length``); ``truncation`` as in ``encode``, on by itself when ``max_length`` is
        given (as Hugging Face does).
        """
        if truncation is None:
            truncation = max_length is not None
        single = isinstance(text, str)
        if text_pair is not None and single != isinstance(text_pair, str):
            raise TokenizerError("give text and text_pair both as strings or both as lists of the same length")
        texts = [text] if isinstance(text, str) else list(text)
        pairs = [text_pair] if isinstance(text_pair, str) else text_pair
        if any(not isinstance(t, str) for t in texts):
            raise TokenizerError("text must be a str or a list of str (pre-split words are not taken: join them)")
        encodings = self.encode_batch(texts, pairs, add_special_tokens=add_special_tokens, max_length=max_length,
                                      truncation=truncation, padding=padding)  # fmt: skip
        return batch_encoding(encodings, single=single, return_tensors=return_tensors,
                              return_token_type_ids=return_token_type_ids, return_attention_mask=return_attention_mask,
                              return_offsets_mapping=return_offsets_mapping)  # fmt: skip

    spaces_are_tokens = False
    """Whether a space before a word changes its tokens (byte-level BPE: ``Ġsmith`` is not ``smith``); never
    for WordPiece, whose pre-tokenizer drops whitespace."""

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
