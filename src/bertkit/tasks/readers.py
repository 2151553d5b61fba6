"""Reading labelled tables: TSV (GLUE style), CSV and JSONL, with errors that name the file and line.

GLUE's TSV files are not CSV: quotes inside them are literal text (MRPC sentences start with ``"``), so TSV
is split on tabs only, with no quoting. CSV follows RFC 4180 quoting. A UTF-8 byte-order mark (MRPC) is
dropped. The format comes from the file suffix (``.tsv``/``.txt``, ``.csv``, ``.jsonl``/``.json``) unless
given.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from bertkit.errors import DataError

FORMATS = ("tsv", "csv", "jsonl")


@dataclass
class Row:
    """One data row: its fields by column name and where it came from (``file:line``, 1-based)."""

    fields: dict[str, str]
    where: str


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".txt", ".tab"):
        return "tsv"
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    raise DataError(f"{path}: cannot tell the format from the suffix {suffix!r}; pass format='tsv', 'csv' or 'jsonl'")


def read_text_file(path: Path) -> str:
    """A task file's text (a UTF-8 byte-order mark dropped), or a DataError naming the file."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_table(path: str | os.PathLike, format: str | None = None) -> tuple[list[str], list[Row]]:
    """Column names and rows of a TSV/CSV file with a header line, or of a JSONL file (one object per line).

    Every row must have as many fields as the header; blank lines are skipped. JSONL values that are not
    strings are turned into strings (``1`` -> ``"1"``, ``4.5`` -> ``"4.5"``); ``null`` becomes ``""``.
    Raises ``DataError`` naming the file and line for an empty file or a malformed row.
    """
    path = Path(path)
    format = format or detect_format(path)
    if format not in FORMATS:
        raise DataError(f"unknown table format {format!r}; use one of {', '.join(FORMATS)}")
    text = read_text_file(path)
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    if format == "jsonl":
        return _read_jsonl(path, text)

    if format == "tsv":
        reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE, strict=True)
    else:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    rows: list[Row] = []
    try:
        for record in reader:
            line = reader.line_num
            if not record or (len(record) == 1 and not record[0].strip()):
                continue
            if header is None:
                header = [name.strip() for name in record]
                continue
            if len(record) != len(header):
                raise DataError(
                    f"{path}:{line}: expected {len(header)} {format.upper()} fields like the header, got {len(record)}"
                )
            rows.append(Row(dict(zip(header, record)), f"{path}:{line}"))
    except csv.Error as e:
        raise DataError(f"{path}:{reader.line_num}: malformed {format.upper()}: {e}") from None
    if not rows:
        raise DataError(f"{path}: a header line but no data rows")
    return header or [], rows


def _read_jsonl(path: Path, text: str) -> tuple[list[str], list[Row]]:
    columns: dict[str, None] = {}
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{number}: not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{number}: expected a JSON object per line, got {type(obj).__name__}")
        fields = {str(k): "" if v is None else v if isinstance(v, str) else json.dumps(v) for k, v in obj.items()}
        columns.update(dict.fromkeys(fields))
        rows.append(Row(fields, f"{path}:{number}"))
    if not rows:
        raise DataError(f"{path}: the file is empty")
    return list(columns), rows


@overload
def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: Literal[True] = ...,
) -> str: ...


@overload
def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: bool,
) -> str | None: ...


def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: bool = True,
) -> str | None:
    """The column to use for ``role``: the requested one (a name, or a 0-based index), else the first known
    default present. Raises ``DataError`` listing the available columns when it is missing.
    """
    if requested is not None:
        if isinstance(requested, int) or (
            isinstance(requested, str) and requested.isdigit() and requested not in columns
        ):
            index = int(requested)
            if not 0 <= index < len(columns):
                raise DataError(f"{path}: {role} column index {index} is out of range (0..{len(columns) - 1})")
            return columns[index]
        if requested not in columns:
            raise DataError(f"{path}: no {role} column {requested!r}; columns are {', '.join(map(repr, columns))}")
        return requested
    for name in candidates:
        if name in columns:
            return name
    if required:
        raise DataError(
            f"{path}: no {role} column found (looked for {', '.join(map(repr, candidates))}); "
            f"columns are {', '.join(map(repr, columns))}; name it with the {role} column option"
        )
    return None
