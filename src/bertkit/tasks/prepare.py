"""From a file to features, with the lines the user reads about it: ``read_examples`` (what was read, used and
skipped) and ``featurize`` (how many examples were cut, and the option that avoids it).

Fine-tuning, ``bertkit evaluate`` and ``bertkit predict`` read files through these two, so the same file is
read, reported and featurized the same way everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from bertkit.errors import DataError
from bertkit.notices import notice
from bertkit.tasks.base import Featurized, Read, Task
from bertkit.tasks.registry import family


def read_examples(
    task: Task,
    path: str | os.PathLike,
    *,
    training: bool = False,
    labeled: bool = True,
    format: str | None = None,
    header: bool | None = None,
    quiet: bool = False,
) -> Read[Any]:
    """Examples of ``path`` with the task's report; SQuAD training files check (and skip, counted) misaligned
    answers. The report of what was read, used and skipped goes to stderr as one line unless ``quiet``."""
    read = task.read(path, labeled=labeled, training=training, format=format, header=header)
    if not read.examples:
        raise DataError(f"{path}: no examples found (is the file empty?)")
    if not quiet:
        notice(read.report.line())
        for assumption in read.report.assumptions:
            notice(assumption)
    return read


def featurize(
    task: Task,
    examples: Sequence,
    tokenizer: Any,
    max_seq_length: int,
    *,
    training: bool = False,
    report: bool = False,
) -> Featurized:
    """Task features; SQuAD training features carry the answer positions. ``report``: one line on stderr
    when some examples were cut at ``max_seq_length`` (the count is also in ``truncated``)."""
    featurized = task.featurize(examples, tokenizer, max_seq_length, training=training)
    if report and featurized.truncated:
        notice(truncation_line(task, featurized.truncated, len(examples), max_seq_length))
    return featurized


def truncation_line(task: Task, truncated: int, examples: int, max_seq_length: int) -> str:
    """``12 of 872 examples were cut at max_seq_length 128 ...``: what was cut and the option that avoids it
    (the family's ``truncation_fix``, or its own line where it cuts something else)."""
    record = family(task.name)
    if record.truncation_line is not None:
        return record.truncation_line(task, truncated, examples, max_seq_length)
    return f"{truncated} of {examples} examples were cut at max_seq_length {max_seq_length} ({record.truncation_fix})"
