"""The task families by name, and what a fine-tuned model keeps of its task.

``get_task``/``make_task`` build a task from its command-line name; ``HEAD_TO_TASK`` finds the task of a head
class; ``CONFIG_KEY`` is where a fine-tuned model's ``config.json`` keeps its task, options and
``max_seq_length`` (``saved_settings`` writes that record), so that every way of running the model reads
files the way training did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertkit.errors import ConfigError
from bertkit.tasks.base import CONFIG_KEY, Task
from bertkit.tasks.classification import ClassificationTask
from bertkit.tasks.embedding import EmbeddingTask
from bertkit.tasks.ner import NerTask
from bertkit.tasks.qa import QuestionAnsweringTask

__all__ = ["CONFIG_KEY", "HEAD_TO_TASK", "TASKS", "TASK_NAMES", "get_task", "make_task", "saved_settings"]

TASKS: dict[str, type] = {
    "classification": ClassificationTask,
    "ner": NerTask,
    "qa": QuestionAnsweringTask,
    "embedding": EmbeddingTask,
}
"""Task classes by command-line name."""

TASK_NAMES = ("classification", "regression", "ner", "qa", "embedding")
"""Task names a user may give; ``regression`` is classification with one output and MSE."""

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
        task: Task = cls(**options)
    except TypeError as e:
        raise ConfigError(f"bad option for task {name!r}: {e}") from None
    return task


def make_task(name: str, options: Mapping[str, Any] | None = None) -> Task:
    """The task object for a command-line task name (``regression`` is classification with MSE; named
    ``classification`` is classification, so that scores are refused rather than taken for regression)."""
    options = dict(options or {})
    if name == "regression":
        options["regression"] = True
        name = "classification"
    elif name == "classification":
        options.setdefault("regression", False)
    return get_task(name, **options)


def saved_settings(task: str, max_seq_length: int, task_options: Mapping[str, Any]) -> dict[str, Any]:
    """The record a fine-tuned model keeps under ``CONFIG_KEY``: the task name, ``max_seq_length`` and the
    task options that JSON can hold."""
    options = {k: v for k, v in task_options.items() if isinstance(v, (str, int, float, bool)) or v is None}
    return {"task": task, "max_seq_length": max_seq_length, "task_options": options}
