"""TSV and CSV tables, and whether their first line is a header.

GLUE's TSV files are not CSV: quotes inside them are literal text (MRPC sentences start with ``"``), so TSV
is split on tabs only, with no quoting. CSV follows RFC 4180 quoting.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from bertkit.errors import DataError
from bertkit.tasks.readers.report import ReadReport
from bertkit.tasks.readers.rows import Row


def read_delimited(
    path: Path, text: str, format: str, header: bool | None, names: Iterable[str], report: ReadReport
) -> tuple[list[str], list[Row]]:
    """Columns and rows of a TSV or CSV text (see :func:`bertkit.tasks.readers.read_table`)."""
    records = _records(path, text, format, report)
    if header is None:
        header, why = detect_header([r for _, r in records], names)
        report.notes.append(
            f"first line is a header ({why}; --no-header reads it as data)"
            if header
            else f"no header ({why}; --header skips the first line)"
        )
    if header:
        report.skip("header line")
        columns = [name.strip() for name in records[0][1]]
        records = records[1:]
        if not records:
            raise DataError(f"{path}: a header line but no data rows (--no-header if it is data)")
    else:
        columns = [str(i) for i in range(len(records[0][1]))]
    rows: list[Row] = []
    for line, record in records:
        if len(record) != len(columns):
            like = "the header" if header else "the first line"
            raise DataError(
                f"{path}:{line}: expected {len(columns)} {format.upper()} fields like {like}, got {len(record)}"
            )
        rows.append(Row(dict(zip(columns, record)), f"{path}:{line}"))
    report.used = len(rows)
    return columns, rows


def _records(path: Path, text: str, format: str, report: ReadReport) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank record; blank lines are counted in ``report``."""
    if format == "tsv":
        reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE, strict=True)
    else:
        first = text.lstrip("\ufeff").split("\n", 1)[0]
        if ";" in first and "," not in first:
            raise DataError(
                f"{path}: the fields are separated by ';', not ',' (a spreadsheet's European CSV); save it as "
                f"comma-separated CSV or as tab-separated .tsv"
            )
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records: list[tuple[int, list[str]]] = []
    try:
        for record in reader:
            if not record or (len(record) == 1 and not record[0].strip()):
                report.skip("blank lines")
                continue
            records.append((reader.line_num, record))
    except csv.Error as e:
        raise DataError(f"{path}:{reader.line_num}: malformed {format.upper()}: {e}") from None
    return records


def detect_header(records: Sequence[Sequence[str]], names: Iterable[str] = ()) -> tuple[bool, str]:
    """Whether the first record names the columns, and why it looks so.

    A header when it holds a column name the caller looks for, or holds a word where every later value of
    its column is a number. Data when one of its values recurs in its column below (a label, which a column
    name would not) or it has a number where the column has numbers. Otherwise a header, the common case.
    """
    first, rest = list(records[0]), [r for r in records[1:] if len(r) == len(records[0])]
    known = [name for name in names if name in first]
    if known:
        return True, f"it names column {known[0]!r}"
    if not rest:
        return False, "the file has one line"
    for j, value in enumerate(first):
        below = [r[j] for r in rest]
        numbers = all(_is_number(v) for v in below)
        if numbers and not _is_number(value):
            return True, f"{value!r} is not a number like the rest of column {j}"
        if numbers and _is_number(value):
            return False, f"its column {j} value {value!r} is a number like those below"
        if value.strip() and value in below:
            return False, f"its column {j} value {value!r} recurs below"
    return True, "nothing in it looks like data"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
