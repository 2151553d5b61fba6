"""What a family's inference pipeline (``tasks/<family>/pipeline.py``) runs on and takes: a loaded model, seen
through :class:`LoadedModel`, and the user's inputs, checked once with a one-line error naming the bad one.

``bertkit.inference.Loaded`` (the loader's model, tokenizer, task and settings) is a ``LoadedModel``; the loader
lives a floor above the tasks, so a family's pipeline asks only for what this protocol names. The public
functions (``bertkit.classify``, ``tag``, ``answer``...) load a model directory and hand it to the family's
pipeline; the pre-training and encoder pipelines in ``bertkit.inference`` take their inputs through the same
checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

from bertkit.config import BertConfig
from bertkit.errors import BertkitError
from bertkit.notices import notice
from bertkit.tasks.base import CONFIG_KEY, Task
from bertkit.tokenizer import Tokenizer

TextInput = str | tuple[str, str]


class SavedOptions(Protocol):
    """The options a model was fine-tuned with, as its config saved them."""

    @property
    def task_options(self) -> Mapping[str, Any]: ...


class LoadedModel(Protocol):
    """A model ready for inference with what a pipeline reads of it (``bertkit.inference.Loaded`` is one)."""

    @property
    def model(self) -> Any:
        """What the runner runs (``bertkit.features.runner``): a PyTorch model, or an exported graph."""

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def config(self) -> BertConfig: ...

    @property
    def settings(self) -> SavedOptions | None:
        """What fine-tuning saved with the model (``None``: nothing)."""

    @property
    def task(self) -> Task:
        """The task of the model's head, with its label names and saved options."""

    @property
    def max_length(self) -> int:
        """The length inputs are cut (or windowed) to."""

    @property
    def max_positions(self) -> int:
        """The longest input the model can take at all."""

    def supports(self, pipeline: str) -> bool:
        """Whether the model has a trained head for ``pipeline``."""


def is_single(inputs: Any) -> bool:
    """Whether ``inputs`` is one input (a result comes back alone) rather than a list (a list comes back)."""
    return isinstance(inputs, (str, tuple))


def as_list(inputs: Any, what: str) -> list[Any]:
    if is_single(inputs):
        return [inputs]
    if not isinstance(inputs, Sequence):
        raise BertkitError(f"{what} must be a string or a list of strings, got {type(inputs).__name__}")
    return list(inputs)


def check_texts(texts: Sequence[Any], what: str = "text") -> None:
    for i, text in enumerate(texts):
        parts = text if isinstance(text, tuple) else (text,)
        if len(parts) > 2 or not all(isinstance(p, str) for p in parts):
            raise BertkitError(f"{what} {i} must be a string or a pair of strings, got {text!r:.60}")


def paired_texts(first: Any, second: Any, first_name: str, second_name: str) -> tuple[list[Any], list[Any]]:
    """Two inputs that go together (strings, or lists of equal length) as two checked lists of strings."""
    firsts, seconds = as_list(first, first_name), as_list(second, second_name)
    if len(firsts) != len(seconds):
        raise BertkitError(
            f"got {len(firsts)} {first_name}s but {len(seconds)} {second_name}s; give one of each per pair"
        )
    check_texts(firsts, first_name)
    check_texts(seconds, second_name)
    return firsts, seconds


def input_length(loaded: LoadedModel, max_length: int | None) -> int:
    """The caller's ``max_length``, else the model's (``LoadedModel.max_length``); never more than its positions.
    A model run at the length it was fine-tuned with, shorter than it can read, says so once."""
    length = min(max_length or loaded.max_length, loaded.max_positions)
    if max_length is None:
        _state_fine_tuned_length(loaded, length)
    return length


def _state_fine_tuned_length(loaded: LoadedModel, length: int) -> None:
    """One line, the first time ``loaded`` runs: it was fine-tuned at ``length`` tokens but takes longer inputs,
    so longer inputs are cut (or windowed) at ``length`` unless the caller asks for more. A ModernBERT model
    fine-tuned at 128 tokens takes 8,192, and would otherwise cut long texts to 128 without a word."""
    cache = getattr(loaded, "cache", None)
    if not isinstance(cache, dict) or cache.get("length stated"):
        return
    cache["length stated"] = True
    extra = getattr(loaded.config, "extra", None) or {}
    fine_tuned = (extra.get(CONFIG_KEY) or {}).get("max_seq_length")
    if fine_tuned and int(fine_tuned) == length < loaded.max_positions:
        notice(
            f"the model was fine-tuned at {length:,} tokens and takes up to {loaded.max_positions:,}: inputs "
            f"are read at {length:,} tokens (longer ones cut, or windowed where the task windows); "
            f"--max-seq-length (max_length=) changes that"
        )


def with_options(task: Task, **options: Any) -> Task:
    """A copy of ``task`` (a task dataclass) with the options that are not ``None`` replaced."""
    chosen = {name: value for name, value in options.items() if value is not None}
    if not chosen:
        return task
    copy: Task = dataclasses.replace(cast(Any, task), **chosen)  # every task class is a dataclass
    return copy
