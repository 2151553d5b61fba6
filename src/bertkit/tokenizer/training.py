"""Vocabulary training: learn a WordPiece vocabulary from raw text through a tokenizer's own normalisation and
splitting (``Tokenizer.train``), from files or from an iterator of texts."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as Backend
from tokenizers import models, trainers

from bertkit.errors import BertkitError, TokenizerError
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
    of paths or an iterable of texts) through ``pipeline``'s normaliser and pre-tokenizer."""
    backend = copy.deepcopy(pipeline)
    backend.model = models.WordPiece(unk_token=UNK, continuing_subword_prefix="##")
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS),
        limit_alphabet=limit_alphabet, continuing_subword_prefix="##", show_progress=show_progress,
    )  # fmt: skip
    files, texts = _training_inputs(source)
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
    return vocab


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
