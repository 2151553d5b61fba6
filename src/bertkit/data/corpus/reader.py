"""Reading a corpus: each file to documents by its format, and the texts commands train on."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from bertkit.data.corpus.documents import RawDocument
from bertkit.data.corpus.inputs import expand_inputs, refuse_containers
from bertkit.data.corpus.options import CorpusOptions, CorpusStats
from bertkit.data.corpus.records import table_documents
from bertkit.data.corpus.text_files import text_documents
from bertkit.formats import ARROW_SUFFIXES, JSONL_SUFFIXES, PARQUET_SUFFIXES, reading, split_suffix


def read_documents(paths: Iterable[Path], options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    """Stream the documents of all files in order (see :mod:`bertkit.data.corpus` for formats and cleaning)."""
    for path in paths:
        yield from read_file(path, options, stats)


def corpus_texts(
    inputs: Sequence[str | os.PathLike], options: CorpusOptions | None = None, stats: CorpusStats | None = None
) -> Iterator[str]:
    """The cleaned texts of a corpus (files, directories, globs): sentences of BERT-format files, re-joined
    paragraphs of prose, JSONL records and Parquet/Arrow rows, for vocabulary learning and word counts."""
    documents = read_documents(expand_inputs(inputs), options or CorpusOptions(), stats or CorpusStats())
    for document in documents:
        yield from document.texts


def file_format(path: Path, options: CorpusOptions) -> str:
    """The format ``path`` is read in: a table suffix always decides, ``auto`` takes the JSONL suffixes too."""
    suffix = split_suffix(path)[1]
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in ARROW_SUFFIXES:
        return "arrow"
    if options.format == "auto" and suffix in JSONL_SUFFIXES:
        return "jsonl"
    return options.format


def read_file(path: Path, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    """The documents of one file; an unreadable or corrupt one is a ``DataError`` naming it."""
    refuse_containers(path)
    format = file_format(path, options)
    with reading(path):
        if format in ("parquet", "arrow"):
            yield from table_documents(path, format, options, stats)
        else:
            yield from text_documents(path, format, options, stats)
