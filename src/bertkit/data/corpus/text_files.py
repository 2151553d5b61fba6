"""Documents of a text file: BERT's line format, prose, or JSON lines; the format sniffed when not given.

Bad input is counted, never fatal: an empty file, a UTF-16 one or a binary one (``formats.text.text_kind`` on
its first 8 KiB, the test every reader of user files makes) is skipped with what it is, a line that is not UTF-8 dropped (see :class:`CorpusStats`).
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from bertkit.data.corpus import gutenberg
from bertkit.data.corpus.documents import PARAGRAPHS, SENTENCES, DocumentBuilder, RawDocument
from bertkit.data.corpus.options import CorpusOptions, CorpusStats
from bertkit.data.corpus.records import jsonl_documents
from bertkit.formats import open_decompressed
from bertkit.formats.text import SNIFF_BYTES, UTF16, describe, text_kind

_SNIFF_LINES = 1000
_SENTENCE_END = tuple(".!?\"')]:;…”’»")  # noqa: RUF001 (typographic closing quotes end sentences too)


def text_documents(path: Path, format: str, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    """The documents of a (possibly compressed) text file in ``format``: ``lines``, ``prose``, ``jsonl`` or
    ``auto`` (sniffed)."""
    # Sniffed on a first opening, read on a second: compressed streams cannot seek back cheaply.
    with open_decompressed(path) as handle:
        head = handle.read(SNIFF_BYTES)
    if not head.strip():
        stats.empty_files += 1
        stats.skip(path, "empty")
        return
    kind = text_kind(head)
    if kind is not None:
        if kind == UTF16:
            stats.utf16_files += 1
        else:
            stats.binary_files += 1
        stats.skip(path, describe(kind, head, 0))
        return
    stats.files += 1
    with open_decompressed(path) as handle:
        lines = _counted(handle, stats)
        if format == "jsonl":
            stats.jsonl_files += 1
            yield from jsonl_documents((_decode(raw, stats) for raw in lines), path, options, stats)
        else:
            yield from _line_documents(lines, format, options, stats)


def _counted(handle: IO[bytes], stats: CorpusStats) -> Iterator[bytes]:
    for raw in handle:
        stats.bytes += len(raw)
        yield raw


def _decode(line: bytes, stats: CorpusStats) -> str | None:
    """A line's text; a line that is not UTF-8 is counted and dropped (one bad line does not lose a file)."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        stats.invalid_utf8_lines += 1
        return None


def _line_documents(
    lines: Iterator[bytes], format: str, options: CorpusOptions, stats: CorpusStats
) -> Iterator[RawDocument]:
    probe = list(itertools.islice(lines, _SNIFF_LINES))
    if probe:
        probe[0] = probe[0].removeprefix(codecs.BOM_UTF8)
    books = options.strip_gutenberg and gutenberg.has_start(probe)
    if format == "auto":
        format = sniff_format(gutenberg.after_start(probe) if books else probe)
    if format == "prose":
        stats.prose_files += 1
    else:
        stats.line_files += 1
    builder = DocumentBuilder(PARAGRAPHS if format == "prose" else SENTENCES, options, stats)
    stream = itertools.chain(probe, lines)
    for raw in gutenberg.book_lines(stream, stats) if books else stream:
        if raw is None:  # a book starts or ends
            yield from builder.end_document()
            continue
        text = _decode(raw, stats)
        if text is not None:
            yield from builder.line(text)
    yield from builder.end_document()


def sniff_format(head: list[bytes]) -> str:
    """``lines`` or ``prose`` from a file's first lines.

    BERT's format: most lines are followed by another sentence line, and those end like sentences. Prose:
    either hard-wrapped (inner lines stop mid-sentence) or a paragraph per line (few inner lines).
    """
    lines = [ln.strip() for ln in head]
    nonblank = sum(1 for ln in lines if ln)
    inner = [a for a, b in itertools.pairwise(lines) if a and b]
    if not inner or len(inner) < 0.5 * nonblank:
        return "prose"
    ends = sum(1 for ln in inner if ln.decode("utf-8", "replace").endswith(_SENTENCE_END))
    return "lines" if ends >= 0.5 * len(inner) else "prose"
