"""The ``qa`` task family: extractive question answering on SQuAD v1.1 and v2.0 files.

``FAMILY`` is what the registry knows of it (SQuAD's recipe: 384 tokens, context windows); ``task`` holds
the reader, the windowed features and Google BERT's answer post-processing; ``metrics`` the official SQuAD
v1.1 and v2.0 scores; ``pipeline`` answers questions in their contexts (``answer``).
"""

from __future__ import annotations

from typing import Any

from bertkit.tasks.base import Task
from bertkit.tasks.family import Family
from bertkit.tasks.qa.options import QaTaskOptions
from bertkit.tasks.qa.task import QuestionAnsweringTask, SquadExample, SquadPredictions, read_squad


def questions_cut(task: Task, truncated: int, examples: int, max_seq_length: int) -> str:
    """The line for questions cut at ``max_query_length`` (contexts are windowed, never cut)."""
    limit: Any = getattr(task, "max_query_length", "?")
    return f"{truncated} of {examples} questions were cut at max_query_length {limit} (raise --max-query-length)"


FAMILY = Family(
    name="qa",
    task=QuestionAnsweringTask,
    head="BertForQuestionAnswering",
    pipeline="answer",
    # Google BERT's SQuAD recipe (bert-algorithms.md section 8); longer contexts are windowed
    defaults={"lr": 3e-5, "epochs": 2.0, "max_seq_length": 384, "micro_batch_size": 12},
    default_length=384,
    truncation_line=questions_cut,
    options=QaTaskOptions,
)

__all__ = ["FAMILY", "QuestionAnsweringTask", "SquadExample", "SquadPredictions", "read_squad"]
