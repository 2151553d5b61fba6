"""Vocabulary training: learn a WordPiece vocabulary from raw text through a tokenizer's own normalisation and
splitting (``Tokenizer.train``), from files or from an iterator of texts."""

from __future__ import annotations

import copy
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as Backend
from tokenizers import models, trainers

from bertkit.errors import TokenizerError
from bertkit.formats import ARROW_SUFFIXES, COMPRESSIONS, JSONL_SUFFIXES, PARQUET_SUFFIXES
from bertkit.tokenizer.special_tokens import SPECIAL_TOKENS, UNK


def learn_vocabulary(
    pipeline: Backend,
    source: Any,
    *,
    vocab_size: int,
    min_frequency: int,
    limit_alphabet: int,
    show_progress: bool,
) -> dict[str, int]:
    """The WordPiece vocabulary (token -> id, the special tokens first) learned from ``source`` (a path, a list
    of paths or an iterable of texts) through ``pipeline``'s normaliser and pre-tokenizer.

    The same text and options give the same vocabulary, byte for byte, in any process and with any number of
    threads. The Rust trainer alone does not: it numbers the ``##`` pieces in its hash map's order, and those
    numbers break ties between merges of equal count. So a first pass over the text settles the alphabet (the
    ``limit_alphabet`` most frequent characters, ties by code point) and the ``##`` pieces, and the trainer is
    handed both in that order.
    """
    files, texts = _training_inputs(source)
    with tempfile.TemporaryDirectory(prefix="bertkit-vocab-") as scratch:
        if files is None:  # an iterator is read once: keep its texts for the trainer's pass
            assert texts is not None
            files = [_spill(texts, Path(scratch) / "texts.txt")]
        alphabet, continuing = _alphabet(pipeline, files, limit_alphabet)
        backend = copy.deepcopy(pipeline)
        backend.model = models.WordPiece(unk_token=UNK, continuing_subword_prefix="##")
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, show_progress=show_progress,
            special_tokens=[*SPECIAL_TOKENS, *("##" + c for c in continuing)],
            initial_alphabet=alphabet, limit_alphabet=len(alphabet), continuing_subword_prefix="##",
        )  # fmt: skip
        try:
            backend.train(files, trainer=trainer)
        except Exception as exc:  # the Rust trainer raises plain Exceptions, e.g. on a binary file
            raise TokenizerError(f"cannot learn a vocabulary from the input: {exc}; give UTF-8 text files") from None
    vocab = backend.get_vocab(with_added_tokens=False)
    if len(vocab) <= len(SPECIAL_TOKENS):
        raise TokenizerError("the training text is empty: no WordPieces were learned; pass non-empty text files")
    if not any(len(token.removeprefix("##")) > 1 for token in vocab if token not in SPECIAL_TOKENS):
        raise TokenizerError(
            f"a vocabulary of {vocab_size} leaves no room for words: the special tokens and the corpus's single "
            f"characters (with their ## forms) already take {len(vocab)}; ask for more (--vocab-size, vocab_size=): "
            f"a few thousand for a small corpus, BERT's is 30522"
        )
    return vocab


def _spill(texts: Iterable[str], path: Path) -> str:
    """``texts`` written to ``path``, one after another, so that both passes can read them."""
    with path.open("w", encoding="utf-8") as out:
        for text in texts:
            out.write(text)
            out.write("\n")
    return str(path)


def _alphabet(pipeline: Backend, files: Sequence[str], limit: int) -> tuple[list[str], list[str]]:
    """The characters the trainer keeps (the ``limit`` most frequent words' characters, ties by code point), and
    those of them that occur after a word's first character (each becomes a ``##`` piece), both sorted; counted
    as the trainer counts, through ``pipeline``'s normaliser and pre-tokenizer."""
    normalize = pipeline.normalizer.normalize_str if pipeline.normalizer is not None else str
    split = pipeline.pre_tokenizer.pre_tokenize_str if pipeline.pre_tokenizer is not None else _whole
    counts: Counter[str] = Counter()
    inner: set[str] = set()
    for path in files:
        try:
            with open(path, encoding="utf-8") as lines:
                for line in lines:
                    words = [word for word, _ in split(normalize(line))]
                    counts.update("".join(words))
                    inner.update("".join(word[1:] for word in words))
        except UnicodeDecodeError as exc:
            raise TokenizerError(f"cannot learn a vocabulary from {path}: not UTF-8 text ({exc.reason})") from None
    kept = sorted(counts, key=lambda c: (-counts[c], c))[:limit] if limit else list(counts)
    return sorted(kept), sorted(inner.intersection(kept))


def _whole(text: str) -> list[tuple[str, tuple[int, int]]]:
    return [(text, (0, len(text)))]


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
