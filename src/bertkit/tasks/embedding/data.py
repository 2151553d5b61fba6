"""Reading sentence-embedding training data from any table the readers take (TSV, CSV, JSONL, Parquet, hf:...).

Two layouts:

* **pairs or triplets** for in-batch negatives: an anchor column (``anchor``, or ``query``/``question``), a
  positive column (``positive``, or ``passage``/``document``/``answer``), and any number of hard-negative
  columns, those whose names start with ``negative`` in order (``negative``, ``negative_1``, ``negative_2``...,
  as the mining command writes them);
* **scored pairs** for CoSENT: ``sentence1``, ``sentence2`` and ``score`` (STS-B's layout). Scores are divided
  by the largest score of the scale (``score_max``; by default the largest training score, 5 for STS-B), so
  they run 0..1; the report says by what.

``--text-column``, ``--text-pair-column`` and ``--label-column`` name the anchor (sentence1), the positive
(sentence2) and the score; ``--negative-columns`` the negatives (comma-separated; ``''`` for none). A missing
column is one line naming every column found and the flag that names it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bertkit.errors import DataError
from bertkit.tasks.readers import ReadReport, read_table

ANCHOR_COLUMNS = ("anchor", "query", "question", "sentence1", "text", "sentence_a")
POSITIVE_COLUMNS = ("positive", "passage", "document", "answer", "pos", "sentence2", "text_pair", "sentence_b")
FIRST_COLUMNS = ("sentence1", "sentence_a", "text", "anchor", "query")
SECOND_COLUMNS = ("sentence2", "sentence_b", "text_pair", "positive")
SCORE_COLUMNS = ("score", "label", "similarity", "labels")


@dataclass
class EmbeddingExample:
    """One row: its texts in column order (anchor, positive, negatives...; or sentence1, sentence2), the raw
    score of a scored pair, and ``file:line``."""

    texts: tuple[str, ...]
    score: float | None
    where: str


@dataclass
class Columns:
    """The columns a file's examples come from."""

    texts: list[str]
    score: str | None


def negative_columns(columns: Sequence[str]) -> list[str]:
    """Columns whose names start with ``negative``, in order: ``negative``, ``negative_1``, ``negative_2``..."""

    def key(name: str) -> tuple[int, str]:
        digits = re.findall(r"\d+", name)
        return (int(digits[-1]) if digits else 0, name)

    return sorted((c for c in columns if c.lower().startswith("negative")), key=key)


def _pick(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | None,
    candidates: Sequence[str],
    role: str,
    flag: str,
) -> str:
    """The requested column, else the first of ``candidates`` present; one line naming the columns found and
    the flag otherwise."""
    if requested is not None:
        if requested in columns:
            return requested
        raise DataError(f"{path}: no {role} column {requested!r}; columns are {', '.join(map(repr, columns))}")
    found = next((name for name in candidates if name in columns), None)
    if found is None:
        raise DataError(
            f"{path}: no {role} column (looked for {', '.join(map(repr, candidates))}); columns are "
            f"{', '.join(map(repr, columns))}; name it with {flag}"
        )
    return found


def choose_columns(
    path: str | os.PathLike,
    columns: Sequence[str],
    *,
    scored: bool,
    first: str | None,
    second: str | None,
    score: str | None,
    negatives: str | None,
) -> Columns:
    """The columns of a pairs/triplets file (``scored=False``) or of a scored-pairs file."""
    if scored:
        texts = [
            _pick(path, columns, first, FIRST_COLUMNS, "sentence1", "--text-column"),
            _pick(path, columns, second, SECOND_COLUMNS, "sentence2", "--text-pair-column"),
        ]
        return Columns(texts, _pick(path, columns, score, SCORE_COLUMNS, "score", "--label-column"))
    texts = [
        _pick(path, columns, first, ANCHOR_COLUMNS, "anchor", "--text-column"),
        _pick(path, columns, second, POSITIVE_COLUMNS, "positive", "--text-pair-column"),
    ]
    if negatives is None:
        texts += negative_columns(columns)
    elif negatives:
        texts += [
            _pick(path, columns, name.strip(), (), "negative", "--negative-columns") for name in negatives.split(",")
        ]
    return Columns(texts, None)


def looks_scored(columns: Sequence[str], score: str | None, negatives: str | None) -> bool:
    """Whether a file holds scored pairs: a score column (named or known) and no negatives."""
    if negatives or negative_columns(columns):
        return False
    return score is not None or any(name in columns for name in SCORE_COLUMNS)


def read_examples(
    path: str | os.PathLike,
    *,
    format: str | None,
    header: bool | None,
    scored: bool | None,
    first: str | None,
    second: str | None,
    score: str | None,
    negatives: str | None,
    labeled: bool = True,
) -> tuple[list[EmbeddingExample], ReadReport, bool]:
    """The examples of a table, its report, and whether it held scored pairs (decided here when ``scored`` is
    ``None``). Empty texts and unreadable scores are one-line errors naming ``file:line``."""
    report = ReadReport(str(path), "")
    wanted = [c for c in (first, second, score) if c] + [*ANCHOR_COLUMNS, *POSITIVE_COLUMNS, *SCORE_COLUMNS]
    columns, rows = read_table(path, format, header=header, names=wanted, report=report)
    if scored is None:
        scored = looks_scored(columns, score, negatives)
    chosen = choose_columns(path, columns, scored=scored, first=first, second=second, score=score, negatives=negatives)
    examples = []
    for row in rows:
        values = row.fields
        texts = []
        for column in chosen.texts:
            text = values.get(column, "")
            if not text.strip():
                raise DataError(f"{row.where}: empty or missing {column!r}; every row needs every text column")
            texts.append(text)
        value = None
        if chosen.score is not None and labeled:
            value = _score(values.get(chosen.score, ""), row.where)
        examples.append(EmbeddingExample(tuple(texts), value, row.where))
    report.used = len(examples)
    return examples, report, scored


def _score(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{where}: score {text!r} is not a number") from None
    if not value >= 0:
        raise DataError(f"{where}: score {text!r} must be a number of 0 or more")
    return value
