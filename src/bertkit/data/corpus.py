"""Reading a raw corpus: input expansion, decoding, cleaning, documents, sentence splitting, blocks.

Input formats (``CorpusOptions.format``):

- ``lines``: BERT's own format, one sentence per line and a blank line between documents.
- ``prose``: ordinary text with paragraphs separated by blank lines and possibly hard-wrapped lines (as
  Project Gutenberg books). A paragraph's lines are re-joined and split into sentences by BlingFire. A
  document is a whole file (or one book between Gutenberg markers), cut at a paragraph boundary when it
  exceeds ``max_document_bytes``.
- ``jsonl``: one JSON object per line; its ``text_field`` is one document, treated as prose.
- ``parquet``: the ``text_field`` column of a Parquet file (needs ``pyarrow``, the ``parquet`` extra); one
  row is one document, treated as prose. A ``.parquet`` file is always read so, whatever ``format`` says.
- ``auto`` (default): ``.jsonl``/``.ndjson`` files are JSONL; otherwise the first 1000 lines are sniffed:
  BERT's line format when at least half of the non-blank lines are followed by another non-blank line
  and at least half of those end like a sentence (``. ! ? " ' ) ...``); else prose (hard-wrapped, or a
  paragraph per line).

Compression: a ``.gz``, ``.bz2``, ``.xz``/``.lzma`` or ``.zst`` file is decompressed as it is read (the
standard library, and ``zstandard`` for ``.zst``, the ``zstd`` extra); the suffix before it picks the
format (``books.jsonl.gz`` is JSONL). Archives and documents (``.zip``, ``.tar``, ``.pdf`` ...) are refused.

Cleaning (``strip_gutenberg``, on by default): when a ``*** START OF THE PROJECT GUTENBERG ...`` line
appears in a file's first lines, everything up to it is the license header and is dropped, and
everything from an end marker (``*** END OF THE PROJECT GUTENBERG``, ``End of (the) Project
Gutenberg ...`` or an old ``***START**THE SMALL PRINT`` block) up to the next start marker is dropped,
so concatenated books work too. Files without a start marker are untouched.

Bad input never crashes the scan and is never silently used: binary files (a NUL byte in the first
8 KiB) and empty files are skipped, undecodable (non-UTF-8) lines and malformed JSONL records are
dropped; each is counted in :class:`CorpusStats` and reported as a warning. A JSONL file whose first
record lacks ``text_field``, or a Parquet file without that column, is an error naming the flag: the
field name is wrong, and every record would be lost.

:func:`corpus_texts` is the one way commands read a corpus's text (``prepare-data``, ``tokenizer train``,
``tokenizer extend``), so they agree on formats and cleaning.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import io
import itertools
import json
import lzma
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from blingfire import text_to_sentences

from bertkit.errors import DataError

FORMATS = ("auto", "lines", "prose", "jsonl", "parquet")
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_COMPRESSED_SUFFIXES = {".gz", ".bz2", ".xz", ".lzma", ".zst"}
# Containers whose text the reader cannot reach: refused by name rather than skipped as binary.
_REFUSED_SUFFIXES = {
    ".zip", ".tar", ".tgz", ".tbz2", ".txz", ".7z", ".rar", ".lz4", ".z", ".br",
    ".pdf", ".doc", ".docx", ".odt", ".rtf", ".epub", ".xls", ".xlsx",
}  # fmt: skip
_PARQUET_BATCH_ROWS = 1024
_SNIFF_LINES = 1000
_BINARY_SNIFF = 8192
_SENTENCE_END = tuple(".!?\"')]:;…”’»")  # noqa: RUF001 (typographic closing quotes end sentences too)

_GUTENBERG_START = re.compile(rb"^\W{0,3}\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
_GUTENBERG_END = re.compile(
    rb"^\W{0,3}(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg"
    rb"|\*+\s*START\*+\s*THE SMALL PRINT)",
    re.IGNORECASE,
)

SENTENCES = "sentences"
PARAGRAPHS = "paragraphs"


@dataclass
class CorpusOptions:
    """How raw files become documents."""

    format: str = "auto"
    """``auto``, ``lines`` (BERT: a sentence per line, blank line between documents), ``prose``, ``jsonl`` or
    ``parquet``."""
    text_field: str = "text"
    """JSONL key or Parquet column holding a document's text."""
    strip_gutenberg: bool = True
    """Drop Project Gutenberg license headers and footers (only where the start marker is present)."""
    max_document_bytes: int = 4 << 20
    """Longer documents are cut at a line/paragraph boundary, so memory stays bounded per document."""

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise DataError(f"unknown corpus format {self.format!r}; choose one of {', '.join(FORMATS)}")
        if self.max_document_bytes < 1:
            raise DataError("--max-document-bytes must be positive")


@dataclass
class CorpusStats:
    """Counters of what the scan read, skipped and cleaned (reported in the dataset metadata)."""

    files: int = 0
    bytes: int = 0
    documents: int = 0
    binary_files: int = 0
    empty_files: int = 0
    invalid_utf8_lines: int = 0
    bad_jsonl_records: int = 0
    missing_texts: int = 0
    """Parquet rows whose text is null."""
    parquet_files: int = 0
    gutenberg_books: int = 0
    split_documents: int = 0
    prose_files: int = 0
    line_files: int = 0
    jsonl_files: int = 0
    skipped: list[str] = field(default_factory=list)
    """Paths of skipped files with the reason (first 100)."""

    def skip(self, path: Path, reason: str) -> None:
        if len(self.skipped) < 100:
            self.skipped.append(f"{path}: {reason}")

    def warnings(self) -> list[str]:
        """One line per kind of problem met, for the user."""
        out = []
        if self.binary_files:
            out.append(f"skipped {self.binary_files} binary file(s)")
        if self.empty_files:
            out.append(f"skipped {self.empty_files} empty file(s)")
        if self.invalid_utf8_lines:
            out.append(f"dropped {self.invalid_utf8_lines} line(s) that are not valid UTF-8")
        if self.bad_jsonl_records:
            out.append(f"dropped {self.bad_jsonl_records} malformed JSONL record(s)")
        if self.missing_texts:
            out.append(f"dropped {self.missing_texts} Parquet row(s) with a null text")
        return out

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RawDocument:
    """A document before tokenization: sentences (line format) or paragraphs still to be split."""

    kind: str
    """``sentences`` or ``paragraphs``."""
    texts: list[str]
    nbytes: int


@dataclass
class Block:
    """Consecutive documents processed together with one RNG: the unit of parallelism and of output.

    Block boundaries depend only on the content order and ``block_bytes``, never on the worker count,
    so output is identical whatever the parallelism.
    """

    index: int
    documents: list[RawDocument]
    nbytes: int


def expand_inputs(inputs: Sequence[str | os.PathLike]) -> list[Path]:
    """Files, directories (recursively, hidden files excluded) and globs, as a sorted de-duplicated list."""
    if not inputs:
        raise DataError("no input given; pass files, directories or globs with --input")
    found: list[Path] = []
    for item in inputs:
        text = str(item)
        path = Path(text)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.is_file() and not _hidden(p.relative_to(path))))
        elif path.is_file():
            found.append(path)
        elif glob.has_magic(text):
            matches = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
            if not matches:
                raise DataError(f"input pattern {text!r} matches no file")
            found.extend(matches)
        else:
            raise DataError(f"input {text!r} does not exist")
    unique = sorted(set(found))
    if not unique:
        raise DataError("the inputs contain no files")
    return unique


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def split_sentences(paragraphs: Iterable[str]) -> list[str]:
    """Split re-joined paragraphs into sentences with BlingFire (a compiled, maintained segmenter)."""
    sentences: list[str] = []
    for paragraph in paragraphs:
        if paragraph:
            sentences.extend(s for s in text_to_sentences(paragraph).split("\n") if s.strip())
    return sentences


def document_sentences(document: RawDocument) -> list[str]:
    """The sentences of a raw document (line format: its lines; otherwise the segmented paragraphs)."""
    if document.kind == SENTENCES:
        return document.texts
    return split_sentences(document.texts)


def _decode(line: bytes, stats: CorpusStats) -> str | None:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        stats.invalid_utf8_lines += 1
        return None


def _sniff_format(head: list[bytes]) -> str:
    # BERT's format: most lines are followed by another sentence line, and those end like sentences.
    # Prose: either hard-wrapped (inner lines stop mid-sentence) or a paragraph per line (few inner lines).
    lines = [ln.strip() for ln in head]
    nonblank = sum(1 for ln in lines if ln)
    inner = [a for a, b in itertools.pairwise(lines) if a and b]
    if not inner or len(inner) < 0.5 * nonblank:
        return "prose"
    ends = sum(1 for ln in inner if ln.decode("utf-8", "replace").endswith(_SENTENCE_END))
    return "lines" if ends >= 0.5 * len(inner) else "prose"


class _DocumentBuilder:
    """Accumulates lines into documents of one kind and emits them, cutting oversized ones."""

    def __init__(self, kind: str, options: CorpusOptions, stats: CorpusStats):
        self.kind = kind
        self.options = options
        self.stats = stats
        self.texts: list[str] = []
        self.paragraph: list[str] = []
        self.nbytes = 0

    def line(self, text: str) -> Iterator[RawDocument]:
        text = text.strip()
        if self.kind == SENTENCES:
            if not text:
                yield from self.end_document()
                return
            self.texts.append(text)
        else:
            if not text:
                self._close_paragraph()
            else:
                self.paragraph.append(text)
        self.nbytes += len(text) + 1
        # Cut at a sentence line or paragraph end; a paragraph that never ends is cut at twice the limit.
        limit = self.options.max_document_bytes
        if self.nbytes >= limit and (self.kind == SENTENCES or not text or self.nbytes >= 2 * limit):
            self.stats.split_documents += 1
            yield from self.end_document()

    def _close_paragraph(self) -> None:
        if self.paragraph:
            # Re-join hard-wrapped lines; collapse whitespace (tabs, stray carriage returns).
            self.texts.append(" ".join(" ".join(self.paragraph).split()))
            self.paragraph = []

    def end_document(self) -> Iterator[RawDocument]:
        self._close_paragraph()
        if self.texts:
            self.stats.documents += 1
            yield RawDocument(self.kind, self.texts, self.nbytes)
        self.texts = []
        self.nbytes = 0


def read_documents(paths: Iterable[Path], options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    """Stream the documents of all files in order (see module doc for formats and cleaning)."""
    for path in paths:
        yield from _read_file(path, options, stats)


def corpus_texts(
    inputs: Sequence[str | os.PathLike], options: CorpusOptions | None = None, stats: CorpusStats | None = None
) -> Iterator[str]:
    """The cleaned texts of a corpus (files, directories, globs): sentences of BERT-format files, re-joined
    paragraphs of prose, JSONL records and Parquet rows, for vocabulary learning and word counts."""
    documents = read_documents(expand_inputs(inputs), options or CorpusOptions(), stats or CorpusStats())
    for document in documents:
        yield from document.texts


def _suffixes(path: Path) -> tuple[str, str]:
    """(compression suffix or ``""``, the format suffix before it), lower-cased."""
    suffix = path.suffix.lower()
    if suffix in _COMPRESSED_SUFFIXES:
        return suffix, Path(path.stem).suffix.lower()
    return "", suffix


def _zstd_open(path: Path) -> IO[bytes]:
    try:
        import zstandard
    except ImportError:
        raise DataError(f"reading {path} needs zstandard: pip install 'bertkit[zstd]'") from None
    reader = zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True)
    return io.BufferedReader(reader)


_DECOMPRESSING_OPEN: dict[str, Callable[..., Any]] = {
    ".gz": gzip.open,
    ".bz2": bz2.open,
    ".xz": lzma.open,
    ".lzma": lzma.open,
}


def _open_input(path: Path) -> IO[bytes]:
    """``path`` opened for reading its (decompressed) bytes; an unreadable file is a ``DataError`` naming it."""
    compression = _suffixes(path)[0]
    try:
        if compression == ".zst":
            return _zstd_open(path)
        if compression:
            return cast(IO[bytes], _DECOMPRESSING_OPEN[compression](path, "rb"))
        return path.open("rb")
    except OSError as exc:
        raise DataError(f"cannot read input {path}: {exc.strerror or exc}") from exc


def _read_errors() -> tuple[type[BaseException], ...]:
    """What a corrupt compressed stream raises while being read."""
    errors: list[type[BaseException]] = [OSError, EOFError, lzma.LZMAError]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def _read_file(path: Path, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    compression, suffix = _suffixes(path)
    if suffix in _REFUSED_SUFFIXES or (not compression and path.suffix.lower() in _REFUSED_SUFFIXES):
        raise DataError(
            f"cannot read input {path}: {suffix} files are not a corpus format (read are plain text, .jsonl and "
            f".parquet, optionally .gz/.bz2/.xz/.zst compressed); unpack or convert it, or leave it out"
        )
    try:
        if suffix in _PARQUET_SUFFIXES or options.format == "parquet":
            yield from _read_parquet(path, compression, options, stats)
        else:
            yield from _read_text_file(path, suffix, options, stats)
    except DataError:
        raise
    except _read_errors() as exc:
        raise DataError(f"cannot read input {path}: {exc}") from None


def _read_text_file(path: Path, suffix: str, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    # Sniffed on a first opening, read on a second: compressed streams cannot seek back cheaply.
    with _open_input(path) as handle:
        head = handle.read(_BINARY_SNIFF)
    if not head.strip():
        stats.empty_files += 1
        stats.skip(path, "empty")
        return
    if b"\x00" in head:
        stats.binary_files += 1
        stats.skip(path, "binary (NUL bytes)")
        return
    stats.files += 1
    fmt = options.format
    if fmt == "auto" and suffix in _JSONL_SUFFIXES:
        fmt = "jsonl"
    with _open_input(path) as handle:
        lines = _counted(handle, stats)
        if fmt == "jsonl":
            stats.jsonl_files += 1
            yield from _read_jsonl(lines, path, options, stats)
            return
        yield from _read_lines(lines, fmt, options, stats)


def _counted(handle: IO[bytes], stats: CorpusStats) -> Iterator[bytes]:
    for raw in handle:
        stats.bytes += len(raw)
        yield raw


def _read_lines(lines: Iterator[bytes], fmt: str, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    probe: list[bytes] = []
    for raw in lines:
        probe.append(raw)
        if len(probe) >= _SNIFF_LINES:
            break
    if probe:
        probe[0] = probe[0].removeprefix(b"\xef\xbb\xbf")
    gutenberg = options.strip_gutenberg and any(_GUTENBERG_START.match(ln) for ln in probe)
    if fmt == "auto":
        fmt = _sniff_format(_after_start(probe) if gutenberg else probe)
    if fmt == "prose":
        stats.prose_files += 1
    else:
        stats.line_files += 1
    builder = _DocumentBuilder(PARAGRAPHS if fmt == "prose" else SENTENCES, options, stats)
    inside = not gutenberg
    for raw in _chain(probe, lines):
        if gutenberg:
            if _GUTENBERG_START.match(raw):
                yield from builder.end_document()
                inside = True
                stats.gutenberg_books += 1
                continue
            if inside and _GUTENBERG_END.match(raw):
                yield from builder.end_document()
                inside = False
                continue
        if not inside:
            continue
        text = _decode(raw, stats)
        if text is not None:
            yield from builder.line(text)
    yield from builder.end_document()


def _after_start(probe: list[bytes]) -> list[bytes]:
    for i, line in enumerate(probe):
        if _GUTENBERG_START.match(line):
            return probe[i + 1 :]
    return probe


def _chain(first: list[bytes], rest: Iterator[bytes]) -> Iterator[bytes]:
    yield from first
    yield from rest


def _prose_document(text: str, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    builder = _DocumentBuilder(PARAGRAPHS, options, stats)
    for line in text.splitlines():
        yield from builder.line(line)
    yield from builder.end_document()


def _read_jsonl(
    lines: Iterator[bytes], path: Path, options: CorpusOptions, stats: CorpusStats
) -> Iterator[RawDocument]:
    field_seen = False
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        text = _decode(raw, stats)
        if text is None:
            continue
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if isinstance(record, dict) and not field_seen and options.text_field not in record:
            # The first record decides: a field name it lacks is a wrong --text-field, not one bad row.
            keys = ", ".join(map(repr, list(record)[:8])) or "none"
            raise DataError(
                f"{path} line {number}: no {options.text_field!r} field (its keys: {keys}); "
                f"name the text field with --text-field"
            )
        value = record.get(options.text_field) if isinstance(record, dict) else None
        if not isinstance(value, str):
            stats.bad_jsonl_records += 1
            if stats.bad_jsonl_records <= 3:
                stats.skip(path, f"line {number}: not a JSON object with a string {options.text_field!r}")
            continue
        field_seen = True
        yield from _prose_document(value, options, stats)


def _read_parquet(path: Path, compression: str, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"reading {path} needs pyarrow: pip install 'bertkit[parquet]'") from None
    source: Any = path
    nbytes = 0
    if compression:  # Parquet needs random access: a compressed file is unpacked into memory
        with _open_input(path) as handle:
            data = handle.read()
        source, nbytes = pa.BufferReader(data), len(data)
    try:
        parquet = pq.ParquetFile(source)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"cannot read input {path} as Parquet: {exc}") from None
    schema = parquet.schema_arrow
    name = options.text_field
    if name not in schema.names:
        raise DataError(
            f"{path}: no column {name!r} (its columns: {', '.join(schema.names)}); name the text column with --text-field"
        )
    kind = schema.field(name).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise DataError(f"{path}: column {name!r} holds {kind}, not text; name the text column with --text-field")
    stats.files += 1
    stats.parquet_files += 1
    stats.bytes += nbytes or path.stat().st_size
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=[name]):
        for value in batch.column(0).to_pylist():
            if value is None:
                stats.missing_texts += 1
                continue
            yield from _prose_document(value, options, stats)


def iter_blocks(documents: Iterable[RawDocument], block_bytes: int) -> Iterator[Block]:
    """Group consecutive documents into blocks of at least ``block_bytes`` of text (the last may be smaller)."""
    if block_bytes < 1:
        raise DataError("block_bytes must be positive")
    current: list[RawDocument] = []
    size = 0
    index = 0
    for document in documents:
        current.append(document)
        size += document.nbytes
        if size >= block_bytes:
            yield Block(index, current, size)
            index += 1
            current, size = [], 0
    if current:
        yield Block(index, current, size)
