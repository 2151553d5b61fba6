"""What a corpus scan is told (:class:`CorpusOptions`) and what it counts (:class:`CorpusStats`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from bertkit.errors import DataError

FORMATS = ("auto", "lines", "prose", "jsonl", "parquet", "arrow")


@dataclass
class CorpusOptions:
    """How raw files become documents."""

    format: str = "auto"
    """``auto``, ``lines`` (BERT: a sentence per line, blank line between documents), ``prose``, ``jsonl``,
    ``parquet`` or ``arrow``."""
    text_field: str = "text"
    """JSONL key or Parquet/Arrow column holding a document's text."""
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
    utf16_files: int = 0
    empty_files: int = 0
    invalid_utf8_lines: int = 0
    bad_jsonl_records: int = 0
    missing_texts: int = 0
    """Parquet or Arrow rows whose text is null."""
    parquet_files: int = 0
    arrow_files: int = 0
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

    def skipped_summary(self) -> str:
        """The first skipped file with why, and how many more: ``a.bin: NUL bytes from byte 0 ... (and 2 more)``."""
        if not self.skipped:
            return "no file was skipped"
        more = f" (and {len(self.skipped) - 1} more)" if len(self.skipped) > 1 else ""
        return f"skipped {self.skipped[0]}{more}"

    def warnings(self) -> list[str]:
        """One line per kind of problem met, for the user."""
        out = []
        if self.binary_files:
            out.append(f"skipped {self.binary_files} binary file(s)")
        if self.utf16_files:
            out.append(f"skipped {self.utf16_files} UTF-16 file(s): convert them to UTF-8 (iconv -f utf-16 -t utf-8)")
        if self.empty_files:
            out.append(f"skipped {self.empty_files} empty file(s)")
        if self.invalid_utf8_lines:
            out.append(f"dropped {self.invalid_utf8_lines} line(s) that are not valid UTF-8")
        if self.bad_jsonl_records:
            out.append(f"dropped {self.bad_jsonl_records} malformed JSONL record(s)")
        if self.missing_texts:
            out.append(f"dropped {self.missing_texts} Parquet/Arrow row(s) with a null text")
        return out

    def to_dict(self) -> dict:
        return asdict(self)
