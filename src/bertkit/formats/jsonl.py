"""Reading JSON lines: one JSON object per line, each failure one message naming the file and line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from bertkit.errors import DataError

JSONL_SUFFIXES = (".jsonl", ".ndjson")


def json_object(line: str, where: str) -> dict[str, Any]:
    """The JSON object on one line; anything else is a ``DataError`` naming ``where`` (``file:line``):
    ``c.jsonl:2: not valid JSON (Expecting value)`` or ``c.jsonl:3: expected a JSON object per line, got list``.
    A reader that tolerates bad records catches it and counts them."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:  # nesting deeper than Python's stack
        raise DataError(f"{where}: not valid JSON (nested too deeply)") from None
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a JSON object per line, got {type(value).__name__}")
    return value


def json_lines(lines: Iterable[str], source: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON-lines file; the first bad line raises
    (see :func:`json_object`)."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, json_object(line, f"{source}:{number}")
