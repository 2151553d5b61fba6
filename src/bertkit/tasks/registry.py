"""The task families by name: the one table that names them, and what a fine-tuned model keeps of its task.

``FAMILIES`` lists each family's record (``tasks/<family>/``'s ``FAMILY``, a :class:`~bertkit.tasks.family.Family`);
adding a family is its folder and one line here (or :func:`register` from outside the package). Everything
else asks this table: ``family`` by a command-line name, ``head_family`` by a saved model's head class,
``task_names`` for the names a user may give. ``get_task``/``make_task`` build a task from its name;
``CONFIG_KEY`` is where a fine-tuned model's ``config.json`` keeps its task, options and ``max_seq_length``
(``saved_settings`` writes that record), so that every way of running the model reads files the way
training did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bertkit.errors import ConfigError
from bertkit.option_groups import check_numbers
from bertkit.tasks import classification, embedding, ner, qa
from bertkit.tasks.base import CONFIG_KEY, Task
from bertkit.tasks.family import CommonTaskOptions, Family

__all__ = [
    "CONFIG_KEY",
    "FAMILIES",
    "Family",
    "encoder_family",
    "family",
    "get_task",
    "given_task_options",
    "head_family",
    "make_task",
    "name_of",
    "named",
    "option_classes",
    "register",
    "saved_settings",
    "task_names",
    "task_option_names",
]

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        classification.FAMILY,
        ner.FAMILY,
        qa.FAMILY,
        embedding.FAMILY,
    )
}
"""Every task family by its name, in the order ``--help`` lists them."""


def register(record: Family) -> None:
    """Add a family defined outside this package (a plugin, a test); its name must be new."""
    if record.name in FAMILIES or record.name in task_names():
        raise ConfigError(f"task family {record.name!r} is already registered")
    FAMILIES[record.name] = record


def task_names() -> tuple[str, ...]:
    """The task names a user may give (``regression`` is classification with one output and MSE)."""
    return tuple(name for f in FAMILIES.values() for name in f.all_names())


def family(name: str) -> Family:
    """The family a command-line task name belongs to; a ``ConfigError`` naming the choices otherwise."""
    for record in FAMILIES.values():
        if name in record.all_names():
            return record
    raise ConfigError(f"unknown task {name!r}; choose one of {', '.join(task_names())}")


def head_family(head: str | None) -> Family | None:
    """The family a saved model of class ``head`` is restored as when its config names no task."""
    return next((f for f in FAMILIES.values() if f.restores_from_head and f.head == head), None)


def encoder_family() -> Family:
    """The family that fine-tunes the bare encoder (a sentence encoder): what a model that saved no task record (a
    sentence-transformers folder) is taken for when it teaches."""
    return next(f for f in FAMILIES.values() if f.trains_encoder)


def name_of(task: Task) -> str:
    """The command-line name that says what ``task`` is: of its family's names, the one whose options the task
    holds (a classification task fitted to scores is ``regression``), else the family's own (the task's name
    when its family is not registered)."""
    record = FAMILIES.get(task.name)
    if record is None:
        return task.name
    others = (name for name in record.all_names()[1:] if record.names[name])
    return next(
        (n for n in others if all(getattr(task, k, None) == v for k, v in record.names[n].items())), record.name
    )


def named(name: str | None) -> Family | None:
    """The family a task name belongs to, ``None`` for no name or one no registered family answers to."""
    return next((f for f in FAMILIES.values() if name in f.all_names()), None) if name else None


def get_task(name: str, **options: Any) -> Task:
    """A new task of family ``name`` configured with ``options`` (the dataclass fields of its class)."""
    record = FAMILIES.get(name)
    if record is None:
        raise ConfigError(f"unknown task {name!r}; choose one of {', '.join(FAMILIES)}")
    try:
        task: Task = record.task(**options)
    except TypeError as e:
        raise ConfigError(f"bad option for task {name!r}: {e}") from None
    return task


def make_task(name: str, options: Mapping[str, Any] | None = None) -> Task:
    """The task object for a command-line task name: the family's own name sets its ``names`` options as
    defaults, another name sets them always (``regression`` is classification with MSE; named
    ``classification`` is classification, so that scores are refused rather than taken for regression)."""
    record = family(name)
    named = dict(record.names.get(name, {}))
    given = dict(options or {})
    chosen = {**named, **given} if name == record.name else {**given, **named}
    return get_task(record.name, **chosen)


def option_classes() -> tuple[type, ...]:
    """The dataclasses of the task options ``bertkit finetune`` takes: the common ones, then each family's."""
    return (CommonTaskOptions, *(f.options for f in FAMILIES.values() if f.options is not None))


def task_option_names() -> list[str]:
    """The names of the task options ``bertkit finetune`` takes as flags (the fields of ``option_classes``)."""
    return [f.name for cls in option_classes() for f in dataclasses.fields(cls)]


def given_task_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """The task options among ``values`` (flat, by field name) that were given (not ``None``), each read through
    its family's options dataclass (which may normalise it: ``--tag-column 7`` is column 7)."""
    given: dict[str, Any] = {}
    for cls in option_classes():
        names = [f.name for f in dataclasses.fields(cls) if values.get(f.name) is not None]
        if names:
            parsed = cls(**{name: values[name] for name in names})
            check_numbers(parsed)
            given.update({name: getattr(parsed, name) for name in names})
    return given


def saved_settings(task: str, max_seq_length: int, task_options: Mapping[str, Any]) -> dict[str, Any]:
    """The record a fine-tuned model keeps under ``CONFIG_KEY``: the task name, ``max_seq_length`` and the
    task options that JSON can hold."""
    options = {k: v for k, v in task_options.items() if isinstance(v, (str, int, float, bool)) or v is None}
    return {"task": task, "max_seq_length": max_seq_length, "task_options": options}
