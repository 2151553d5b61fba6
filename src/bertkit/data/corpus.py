"""Reading a raw corpus: input expansion, decoding, cleaning, documents, sentence splitting, blocks.

Input formats (``CorpusOptions.format``):

- ``lines``: BERT's own format, one sentence per line and a blank line between documents.
- ``prose``: ordinary text with paragraphs separated by blank lines and possibly hard-wrapped lines (as
  Project Gutenberg books). A paragraph's lines are re-joined and split into sentences by BlingFire. A
  document is a whole file (or one book between Gutenberg markers), cut at a paragraph boundary when it
  exceeds ``max_document_bytes``.
- ``jsonl``: one JSON object per line; its ``text_field`` is one document, treated as prose.
- ``auto`` (default): ``.jsonl``/``.ndjson`` files are JSONL; otherwise the first 1000 lines are sniffed:
  BERT's line format when at least half of the non-blank lines are followed by another non-blank line
  and at least half of those end like a sentence (``. ! ? " ' ) ...``); else prose (hard-wrapped, or a
  paragraph per line).

Cleaning (``strip_gutenberg``, on by default): when a ``*** START OF THE PROJECT GUTENBERG ...`` line
appears in a file's first lines, everything up to it is the license header and is dropped, and
everything from an end marker (``*** END OF THE PROJECT GUTENBERG``, ``End of (the) Project
Gutenberg ...`` or an old ``***START**THE SMALL PRINT`` block) up to the next start marker is dropped,
so concatenated books work too. Files without a start marker are untouched.

Bad input never crashes the scan and is never silently used: binary files (a NUL byte in the first
8 KiB) and empty files are skipped, undecodable (non-UTF-8) lines and malformed JSONL records are
dropped; each is counted in :class:`CorpusStats` and reported as a warning.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO

from blingfire import text_to_sentences

from bertkit.errors import DataError

FORMATS = ("auto", "lines", "prose", "jsonl")
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
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
    """``auto``, ``lines`` (BERT: a sentence per line, blank line between documents), ``prose`` or ``jsonl``."""
    text_field: str = "text"
    """JSONL key holding a document's text."""
    strip_gutenberg: bool = True
    """Drop Project Gutenberg license headers and footers (only where the start marker is present)."""
    max_document_bytes: int = 4 << 20
    """Longer documents are cut at a line/paragraph boundary, so memory stays bounded per document."""

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise DataError(f"unknown corpus format {self.format!r}; choose one of {', '.join(FORMATS)}")
        if self.max_document_bytes < 1:
            raise DataError("max_document_bytes must be positive")


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


def _open_input(path: Path) -> BinaryIO:
    """``path`` opened for reading; an unreadable file is a ``DataError`` naming it."""
    try:
        return path.open("rb")
    except OSError as exc:
        raise DataError(f"cannot read input {path}: {exc.strerror}") from exc


def _read_file(path: Path, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    with _open_input(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(_BINARY_SNIFF)
        if not head.strip():
            stats.empty_files += 1
            stats.skip(path, "empty")
            return
        if b"\x00" in head:
            stats.binary_files += 1
            stats.skip(path, "binary (NUL bytes)")
            return
        handle.seek(0)
        stats.files += 1
        stats.bytes += size
        fmt = options.format
        if fmt == "auto" and path.suffix.lower() in _JSONL_SUFFIXES:
            fmt = "jsonl"
        if fmt == "jsonl":
            stats.jsonl_files += 1
            yield from _read_jsonl(handle, path, options, stats)
            return
        lines = iter(handle)
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


def _read_jsonl(handle: BinaryIO, path: Path, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    for number, raw in enumerate(handle, 1):
        if not raw.strip():
            continue
        text = _decode(raw, stats)
        if text is None:
            continue
        try:
            value = json.loads(text)[options.text_field]
            if not isinstance(value, str):
                raise TypeError
        except (ValueError, KeyError, TypeError, IndexError):
            stats.bad_jsonl_records += 1
            if stats.bad_jsonl_records <= 3:
                stats.skip(path, f"line {number}: not a JSON object with a string {options.text_field!r}")
            continue
        builder = _DocumentBuilder(PARAGRAPHS, options, stats)
        for line in value.splitlines():
            yield from builder.line(line)
        yield from builder.end_document()


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
