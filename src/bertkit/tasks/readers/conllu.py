"""Universal Dependencies CoNLL-U: ten tab-separated columns per word (``ID FORM LEMMA UPOS XPOS FEATS HEAD
DEPREL DEPS MISC``), ``#`` comment lines (``# sent_id``, ``# text``), a blank line after each sentence.

The words are the syntactic words (integer IDs) with their FORM; a multiword token's range line (``1-2``,
Spanish ``del`` = ``de el``) and empty nodes (``1.1``, enhanced graphs) carry no tag of their own and are
skipped, counted in the report. The tag is one column chosen by name (``upos``, ``xpos``, ``deprel``...) or by
its 0-based number; ``_`` (no value) in that column is an error, never a tag, except in FEATS where it means
"no features".
"""

from __future__ import annotations

import re
from pathlib import Path

from bertkit.errors import DataError
from bertkit.tasks.readers.report import ReadReport

COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
"""The CoNLL-U columns in order, by the lowercase names ``--tag-column`` takes."""
DEFAULT_COLUMN = "upos"

_ID = re.compile(r"\d+(?:-\d+|\.\d+)?")
_UNSET_MEANS_NOTHING = {"feats"}  # "_" is a value there (no features); elsewhere it means "not annotated"


def is_conllu_line(line: str) -> bool:
    """Whether ``line`` is a CoNLL-U word line: ten tab-separated fields, an ID (``3``, ``1-2``, ``8.1``) first."""
    fields = line.split("\t")
    return len(fields) == len(COLUMNS) and _ID.fullmatch(fields[0]) is not None


def looks_like_conllu(text: str) -> bool:
    """Whether a file's text is CoNLL-U: its first line that is neither blank nor a ``#`` comment is a word line."""
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            return is_conllu_line(line.rstrip("\r\n"))
    return False


def what_it_is(path: str | Path) -> str:
    """The one-line description the readers give when a CoNLL-U file reaches the wrong one."""
    return (
        f"{path} is a Universal Dependencies CoNLL-U file (a word per line, 10 tab-separated columns, # comments): "
        f"tag its words with --task ner and --tag-column upos (or xpos, deprel...)"
    )


def column_index(column: int | str | None) -> int:
    """The 0-based column of the tag: a name of :data:`COLUMNS`, a number from 2 (LEMMA) up, ``None``: UPOS."""
    if column is None:
        column = DEFAULT_COLUMN
    if isinstance(column, str):
        name = column.strip().lower()
        if name.isdigit():
            return column_index(int(name))
        if name not in COLUMNS[2:]:
            raise DataError(f"--tag-column {column!r}: a CoNLL-U file has the columns {', '.join(COLUMNS[2:])}")
        return COLUMNS.index(name)
    if not 2 <= column < len(COLUMNS):
        raise DataError(f"--tag-column {column}: a CoNLL-U tag is in columns 2..9 ({', '.join(COLUMNS[2:])})")
    return column


def read_conllu(
    path: str | Path, text: str, *, labeled: bool, column: int | str | None, report: ReadReport
) -> list[tuple[list[str], list[str] | None, int]]:
    """Sentences of CoNLL-U ``text`` as ``(words, tags or None, line of the first word)``."""
    index = column_index(column)
    name = COLUMNS[index]
    report.format, report.unit = "conllu", "lines"
    sentences: list[tuple[list[str], list[str] | None, int]] = []
    words: list[str] = []
    tags: list[str] = []
    first = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if line.startswith("#"):
            report.skip("comment lines")
            continue
        if not line.strip():
            if words:
                sentences.append((list(words), list(tags) if labeled else None, first))
            words.clear()
            tags.clear()
            continue
        fields = line.split("\t")
        if not is_conllu_line(line):
            raise DataError(
                f"{path}:{number}: {len(fields)} tab-separated fields starting {fields[0][:20]!r}; a CoNLL-U word line "
                f"has 10 ({' '.join(c.upper() for c in COLUMNS)}) and an ID first"
            )
        if "-" in fields[0] or "." in fields[0]:
            report.skip("multiword token lines" if "-" in fields[0] else "empty nodes")
            continue
        tag = fields[index]
        if labeled and tag == "_" and name not in _UNSET_MEANS_NOTHING:
            raise DataError(
                f"{path}:{number}: the {name.upper()} of {fields[1]!r} is '_' (not annotated), which is no tag; "
                f"choose a column this file fills with --tag-column ({', '.join(c for c in COLUMNS[3:5] if c != name)}"
                f"{', deprel' if name != 'deprel' else ''})"
            )
        if not words:
            first = number
        words.append(fields[1])
        tags.append(tag)
        report.used += 1
    if words:
        sentences.append((words, tags if labeled else None, first))
    if not sentences:
        raise DataError(f"{path}: no sentences found (only comments or blank lines)")
    report.notes.append(f"{len(sentences)} sentences, tags from {name.upper()}")
    return sentences
