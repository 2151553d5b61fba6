"""Raw documents: lines gathered into documents (cut when oversized), and their sentences."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from bertkit.data.corpus.options import CorpusOptions, CorpusStats
from bertkit.errors import BertkitError

SENTENCES = "sentences"
PARAGRAPHS = "paragraphs"


@dataclass
class RawDocument:
    """A document before tokenization: sentences (line format) or paragraphs still to be split."""

    kind: str
    """``sentences`` or ``paragraphs``."""
    texts: list[str]
    nbytes: int


def split_sentences(paragraphs: Iterable[str]) -> list[str]:
    """Split re-joined paragraphs into sentences with BlingFire (a compiled, maintained segmenter)."""
    try:
        from blingfire import text_to_sentences  # the train extra: an inference install has no prose to split
    except ImportError:
        raise BertkitError("splitting prose into sentences needs blingfire; pip install 'bertkit[train]'") from None
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


class DocumentBuilder:
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


def prose_document(text: str, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    """One record's text (a JSONL field, a table cell) as a prose document, cut when oversized."""
    builder = DocumentBuilder(PARAGRAPHS, options, stats)
    for line in text.splitlines():
        yield from builder.line(line)
    yield from builder.end_document()
