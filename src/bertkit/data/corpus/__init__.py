"""Reading a raw corpus: input expansion, formats, cleaning, documents, sentence splitting, blocks.

Input formats (``CorpusOptions.format``):

- ``lines``: BERT's own format, one sentence per line and a blank line between documents.
- ``prose``: ordinary text with paragraphs separated by blank lines and possibly hard-wrapped lines (as
  Project Gutenberg books). A paragraph's lines are re-joined and split into sentences by BlingFire. A
  document is a whole file (or one book between Gutenberg markers), cut at a paragraph boundary when it
  exceeds ``max_document_bytes``.
- ``jsonl``: one JSON object per line; its ``text_field`` is one document, treated as prose.
- ``parquet`` / ``arrow``: the ``text_field`` column of a Parquet file, or of an Arrow file or a
  ``datasets.save_to_disk`` directory (needs ``pyarrow``, the ``parquet`` extra); one row is one document,
  treated as prose. A ``.parquet``/``.pq`` or ``.arrow`` file is always read so, whatever ``format`` says.
- ``auto`` (default): ``.jsonl``/``.ndjson`` files are JSONL; otherwise the first 1000 lines are sniffed:
  BERT's line format when at least half of the non-blank lines are followed by another non-blank line
  and at least half of those end like a sentence (``. ! ? " ' ) ...``); else prose (hard-wrapped, or a
  paragraph per line).

Compression (:mod:`bertkit.formats`): a ``.gz``, ``.bz2``, ``.xz``/``.lzma`` or ``.zst`` file is
decompressed as it is read (``zstandard`` for ``.zst``, the ``zstd`` extra); the suffix before it picks
the format (``books.jsonl.gz`` is JSONL). Archives and documents (``.zip``, ``.tar``, ``.pdf`` ...) are refused.

Cleaning (``strip_gutenberg``, on by default): Project Gutenberg license headers and footers are dropped
(see :mod:`bertkit.data.corpus.gutenberg`).

Bad input never crashes the scan and is never silently used: binary files (a NUL byte in the first
8 KiB) and empty files are skipped, undecodable (non-UTF-8) lines and malformed JSONL records are
dropped; each is counted in :class:`CorpusStats` and reported as a warning. A JSONL file whose first
record lacks ``text_field``, or a Parquet/Arrow file without that column, is an error naming the flag: the
field name is wrong, and every record would be lost.

:func:`corpus_texts` is the one way commands read a corpus's text (``prepare-data``, ``tokenizer train``,
``tokenizer extend``), so they agree on formats and cleaning.

The rooms: ``options`` (what a scan is told and counts), ``inputs`` (which files), ``reader`` (a file by
its format), ``text_files`` (lines, prose, JSONL; sniffing), ``records`` (JSONL objects and table rows),
``gutenberg`` (boilerplate), ``documents`` (documents and sentences), ``blocks`` (units of work).
"""

from bertkit.data.corpus.blocks import Block, iter_blocks
from bertkit.data.corpus.documents import (
    PARAGRAPHS,
    SENTENCES,
    RawDocument,
    document_sentences,
    split_sentences,
)
from bertkit.data.corpus.inputs import expand_inputs
from bertkit.data.corpus.options import FORMATS, CorpusOptions, CorpusStats
from bertkit.data.corpus.reader import corpus_texts, read_documents

__all__ = [
    "FORMATS",
    "PARAGRAPHS",
    "SENTENCES",
    "Block",
    "CorpusOptions",
    "CorpusStats",
    "RawDocument",
    "corpus_texts",
    "document_sentences",
    "expand_inputs",
    "iter_blocks",
    "read_documents",
    "split_sentences",
]
