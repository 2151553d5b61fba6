"""Fine-tuning task families: reading their files, features, post-processing and metrics.

``get_task(name, **options)`` returns a fresh task object with the uniform ``Task`` interface
(see ``bertkit.tasks.base``): ``classification`` (also regression), ``ner`` and ``qa`` (SQuAD v1.1/v2.0).
"""

from __future__ import annotations

from typing import Any

from bertkit.errors import ConfigError
from bertkit.tasks.base import LabelMap, Task
from bertkit.tasks.batching import LengthGroupedBatchSampler
from bertkit.tasks.classification import ClassificationExample, ClassificationPrediction, ClassificationTask
from bertkit.tasks.ner import NerExample, NerPrediction, NerTask, read_conll
from bertkit.tasks.qa import QuestionAnsweringTask, SquadExample, SquadPredictions, read_squad

TASKS: dict[str, type] = {"classification": ClassificationTask, "ner": NerTask, "qa": QuestionAnsweringTask}
"""Task classes by command-line name."""

HEAD_TO_TASK = {
    cls.head: name
    for name, cls in (("classification", ClassificationTask), ("ner", NerTask), ("qa", QuestionAnsweringTask))
}
"""Task name for a head class name, to pick the task of a fine-tuned model from ``config.architectures``."""


def get_task(name: str, **options: Any) -> Task:
    """A new task of family ``name`` configured with ``options`` (the dataclass fields of its class)."""
    try:
        cls = TASKS[name]
    except KeyError:
        raise ConfigError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}") from None
    try:
        return cls(**options)
    except TypeError as e:
        raise ConfigError(f"bad option for task {name!r}: {e}") from None


__all__ = [
    "HEAD_TO_TASK",
    "TASKS",
    "ClassificationExample",
    "ClassificationPrediction",
    "ClassificationTask",
    "LabelMap",
    "LengthGroupedBatchSampler",
    "NerExample",
    "NerPrediction",
    "NerTask",
    "QuestionAnsweringTask",
    "SquadExample",
    "SquadPredictions",
    "Task",
    "get_task",
    "read_conll",
    "read_squad",
]
