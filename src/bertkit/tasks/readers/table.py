"""Reading a labelled table in any format: the format from the path, then the rows and a report."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bertkit.errors import ConfigError, DataError
from bertkit.formats import (
    ARROW_SUFFIXES,
    JSONL_SUFFIXES,
    PARQUET_SUFFIXES,
    json_lines,
    read_arrow,
    read_parquet,
    read_text,
    split_suffix,
    text_lines,
)
from bertkit.tasks.readers.conllu import looks_like_conllu, what_it_is
from bertkit.tasks.readers.delimited import read_delimited
from bertkit.tasks.readers.hub import HF_PREFIX, load_hub_split
from bertkit.tasks.readers.report import ReadReport
from bertkit.tasks.readers.rows import Row, object_rows

FORMATS = ("tsv", "csv", "jsonl", "json", "parquet", "arrow", "hf")
_BY_SUFFIX = {
    **dict.fromkeys((".tsv", ".txt", ".tab"), "tsv"),
    ".csv": "csv",
    **dict.fromkeys(JSONL_SUFFIXES, "jsonl"),
    ".json": "json",
    **dict.fromkeys(PARQUET_SUFFIXES, "parquet"),
    **dict.fromkeys(ARROW_SUFFIXES, "arrow"),
}


def detect_format(path: str | os.PathLike) -> str:
    """The format of a path: ``hf:`` names, a ``datasets`` directory, else the suffix (the one under a
    compression suffix: ``train.tsv.gz`` is TSV)."""
    if str(path).startswith(HF_PREFIX):
        return "hf"
    path = Path(path)
    if path.is_dir():
        return "arrow"
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    suffix = split_suffix(path)[1]
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix]
    if suffix == ".conllu":
        raise DataError(what_it_is(path))
    raise DataError(
        f"{path}: cannot tell the format from the suffix {suffix!r}; pass --format (format=) "
        f"{', '.join(f for f in FORMATS if f != 'hf')}"
    )


def read_table(
    path: str | os.PathLike,
    format: str | None = None,
    *,
    header: bool | None = None,
    names: Iterable[str] = (),
    report: ReadReport | None = None,
) -> tuple[list[str], list[Row]]:
    """Column names and rows of a table in any of :data:`FORMATS`, compressed or not.

    TSV/CSV: ``header`` says whether the first line names the columns (``None``: detected, with ``names``,
    the column names the caller looks for, as the strongest hint); without one the columns are named
    ``"0"``, ``"1"``... Every row must have as many fields as the first; blank lines are skipped (counted).
    Other formats name their columns themselves. Values that are not strings are turned into strings
    (``1`` -> ``"1"``); ``null`` becomes ``""``. ``report`` (when given) is filled in.
    Raises ``DataError`` naming the file and line for an empty file or a malformed row.
    """
    format = format or detect_format(path)
    if format not in FORMATS:
        raise DataError(f"unknown table format {format!r}; use --format with one of {', '.join(FORMATS)}")
    report = report if report is not None else ReadReport(str(path), format)
    report.format = format
    if format in ("parquet", "arrow", "hf"):
        columns, rows = object_rows(_row_records(str(path), _columnar_table(str(path), format)), path)
        report.used = len(rows)
        return columns, rows
    path = Path(path)
    text = read_text(path)
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    if format == "json" and _is_squad(text):
        raise DataError(
            f"{path} is a SQuAD file (data, paragraphs, qas), not a table: fine-tune question answering with --task "
            f"qa, or make (question, passage) pairs for --task embedding with: bertkit retrieval from-squad"
        )
    if format == "json" and text.lstrip().startswith("["):
        columns, rows = object_rows(_json_array_records(path, text), path)
    elif format in ("jsonl", "json"):
        lines = text.splitlines()
        columns, rows = object_rows(((f"{path}:{n}", obj) for n, obj in json_lines(lines, path)), path)
        report.skip("blank lines", len(lines) - len(rows))
    elif looks_like_conllu(text):
        raise DataError(what_it_is(path))
    elif is_plain_text(path, text, format, header, names):
        lines = text_lines(text)
        columns, rows = (
            [PLAIN_TEXT_COLUMN],
            [Row({PLAIN_TEXT_COLUMN: line}, f"{path}:{n}") for n, line in enumerate(lines, 1)],
        )
        report.format = "text"
        report.assumptions.append(f"{path.name}: plain text, one text per line (a TAB-separated table is read as TSV)")
    else:
        return read_delimited(path, text, format, header, names, report)
    report.used = len(rows)
    return columns, rows


PLAIN_TEXT_COLUMN = "text"
"""The column of a plain text file's lines."""


def is_plain_text(path: Path, text: str, format: str, header: bool | None, names: Iterable[str]) -> bool:
    """Whether a ``.txt`` file is plain text, one input per line, as ``classify`` and ``embed`` read it: no TAB
    anywhere (so no columns), no ``--format``/``--header`` given, and a first line that names no column."""
    if split_suffix(path)[1] != ".txt" or format != "tsv" or header is not None or "\t" in text:
        return False
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first not in set(names)


def _is_squad(text: str) -> bool:
    """Whether a JSON text is SQuAD's ``{"data": [{"paragraphs": [...]}]}``."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        data = json.loads(text).get("data")
    except (json.JSONDecodeError, AttributeError):
        return False
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "paragraphs" in data[0]


def _json_array_records(path: Path, text: str) -> list[tuple[str, Any]]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    return [(f"{path}: item {number}", item) for number, item in enumerate(items, start=1)]


def _columnar_table(source: str, format: str) -> Any:
    """The Arrow table of a Parquet file, an Arrow file or ``datasets`` directory, or an ``hf:`` split."""
    if format == "hf":
        return load_hub_split(source)
    if format == "parquet":
        return read_parquet(source)
    return read_arrow(source)


def _row_records(source: str, table: Any) -> Iterable[tuple[str, Any]]:
    return ((f"{source}: row {number}", obj) for number, obj in enumerate(table.to_pylist(), start=1))


def only_format(format: str | None, own: str, task: str) -> None:
    """Refuse a ``--format`` other than the one format task ``task`` reads."""
    if format is not None and format != own:
        raise ConfigError(f"--format {format}: the {task} task reads {own} files only")
