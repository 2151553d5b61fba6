"""A table's rows: fields by column name and where each came from, and how records become rows."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bertkit.errors import DataError


@dataclass
class Row:
    """One data row: its fields by column name and where it came from (``file:line``, 1-based)."""

    fields: dict[str, str]
    where: str


def stringify(obj: dict[Any, Any]) -> dict[str, str]:
    """A record's values as strings: ``1`` -> ``"1"``, ``null`` -> ``""``, lists and objects as JSON."""
    return {str(k): "" if v is None else v if isinstance(v, str) else json.dumps(v) for k, v in obj.items()}


def object_rows(records: Iterable[tuple[str, Any]], source: object) -> tuple[list[str], list[Row]]:
    """Columns (every key, in first-seen order) and rows of ``(where, object)`` records. A record that is
    not an object, or no record at all, is a ``DataError``."""
    columns: dict[str, None] = {}
    rows: list[Row] = []
    for where, obj in records:
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        fields = stringify(obj)
        columns.update(dict.fromkeys(fields))
        rows.append(Row(fields, where))
    if not rows:
        raise DataError(f"{source}: no rows")
    return list(columns), rows
