"""Documents from records: a JSONL object's text field, or a Parquet/Arrow table's text column, each one
document read as prose.

A JSONL file whose first record lacks the field, or a table without the column, is an error naming
``--text-field``: the field name is wrong, and every record would be lost. Later bad records are counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bertkit.data.corpus.documents import RawDocument, prose_document
from bertkit.data.corpus.options import CorpusOptions, CorpusStats
from bertkit.errors import DataError
from bertkit.formats import json_object, open_parquet, pyarrow, read_arrow

_TABLE_BATCH_ROWS = 1024


def jsonl_documents(
    lines: Iterable[str | None], path: Path, options: CorpusOptions, stats: CorpusStats
) -> Iterator[RawDocument]:
    """The documents of decoded JSONL lines (``None``: a line that was not UTF-8, already counted)."""
    field_seen = False
    for number, line in enumerate(lines, 1):
        if line is None or not line.strip():
            continue
        text = _record_text(line, path, number, options.text_field, first=not field_seen)
        if text is None:
            stats.bad_jsonl_records += 1
            if stats.bad_jsonl_records <= 3:
                stats.skip(path, f"line {number}: not a JSON object with a string {options.text_field!r}")
            continue
        field_seen = True
        yield from prose_document(text, options, stats)


def _record_text(line: str, path: Path, number: int, name: str, first: bool) -> str | None:
    """The text field of one record, or ``None`` for a bad record; the first good object decides whether
    ``name`` is a wrong field name, which raises."""
    try:
        record = json_object(line, f"{path}:{number}")
    except DataError:
        return None
    if first and name not in record:
        keys = ", ".join(map(repr, list(record)[:8])) or "none"
        raise DataError(
            f"{path} line {number}: no {name!r} field (its keys: {keys}); name the text field with --text-field"
        )
    value = record.get(name)
    return value if isinstance(value, str) else None


def table_documents(path: Path, format: str, options: CorpusOptions, stats: CorpusStats) -> Iterator[RawDocument]:
    """The documents of a Parquet or Arrow file's ``text_field`` column, one per row (null rows counted)."""
    name = options.text_field
    batches: Iterable[Any]
    if format == "arrow":
        table = read_arrow(path)
        _check_text_column(path, table.schema, name)
        batches, nbytes = table.select([name]).to_batches(max_chunksize=_TABLE_BATCH_ROWS), table.nbytes
        stats.arrow_files += 1
    else:
        parquet, nbytes = open_parquet(path)
        _check_text_column(path, parquet.schema_arrow, name)
        batches = parquet.iter_batches(batch_size=_TABLE_BATCH_ROWS, columns=[name])
        stats.parquet_files += 1
    stats.files += 1
    stats.bytes += nbytes
    for batch in batches:
        for value in batch.column(0).to_pylist():
            if value is None:
                stats.missing_texts += 1
                continue
            yield from prose_document(value, options, stats)


def _check_text_column(path: Path, schema: Any, name: str) -> None:
    pa = pyarrow(path)
    if name not in schema.names:
        raise DataError(
            f"{path}: no column {name!r} (its columns: {', '.join(schema.names)}); name the text column with --text-field"
        )
    kind = schema.field(name).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise DataError(f"{path}: column {name!r} holds {kind}, not text; name the text column with --text-field")
