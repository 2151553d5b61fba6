"""The ``Task`` interface every fine-tuning task family implements, and what its calls return.

``Task`` joins three sides. The data side (``TaskData``) turns files into examples (``read``), examples into
model features (``featurize``) and features into padded batches whose keys are exactly the head's ``forward``
arguments (``collate``). The output side (``TaskOutput``) turns the head's outputs back into per-feature rows
(``unbatch``), rows into predictions (``postprocess``), predictions into metrics (``evaluate``) and files
(``write_predictions``). The training side (``TaskTraining``) says how the loop trains the model and what is
saved: a head with its own loss takes ``HeadTraining``'s answers, a two-tower task (``embedding``) wraps the
encoder with its loss. A task keeps no per-call state: ``read`` and ``featurize`` return what they counted
(``Read``, ``Featurized``) beside their results.

The helpers tasks build on live in rooms named by their job: ``bertkit.features`` (pairs and truncation,
windows, padding, the runner), ``bertkit.io`` (JSON writers), ``tasks.labels`` (``LabelMap``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from bertkit.data.batch_sources import Ordering
from bertkit.features import Feature
from bertkit.sentence_config import SentenceConfig
from bertkit.tasks.readers import ReadReport

if TYPE_CHECKING:  # tasks also run without torch (bertkit[onnx]): it is needed for training only
    import torch
    from torch import nn

CONFIG_KEY = "bertkit_finetune"
"""Key in a fine-tuned model's ``config.json`` holding the task, its options and ``max_seq_length``, so that
``evaluate``/``predict`` read files the way training did (``transformers`` ignores it); ``tasks.registry``
writes it."""

ExampleT = TypeVar("ExampleT")


@dataclass
class Read(Generic[ExampleT]):
    """What ``Task.read`` returns: the examples of a file and the report of what was read, used and skipped."""

    examples: list[ExampleT]
    report: ReadReport
    dropped: int = 0
    """Training examples left out and counted (SQuAD answers not found at ``answer_start``); 0 for tasks
    that refuse bad input instead."""


@dataclass
class Featurized:
    """What ``Task.featurize`` returns: the features and what featurizing did to the examples."""

    features: list[Feature]
    truncated: int = 0
    """Examples cut to fit ``max_seq_length`` (QA: questions cut at ``max_query_length``)."""
    dropped: int = 0
    """Training examples that gave no feature, counted (SQuAD answers that cover no token)."""


@runtime_checkable
class TaskData(Protocol):
    """The data side of a task family: files into examples (``read``), what the labels are (``fit_labels``,
    restored by ``load_config``), examples into features (``featurize``) and features into the head's padded
    inputs (``collate``)."""

    name: str
    """Short name used on the command line: ``classification``, ``ner``, ``qa``."""
    model_input_names: tuple[str, ...]
    """Keys ``collate`` returns: the keyword arguments of the head's ``forward``."""

    @property
    def batch_by_length(self) -> bool:
        """Whether length-grouped training batches are an unbiased sample (not where the target may follow
        the length, as a regression score may)."""
        ...

    def read(
        self,
        path: str | os.PathLike,
        *,
        labeled: bool = True,
        training: bool = False,
        format: str | None = None,
        header: bool | None = None,
    ) -> Read[Any]:
        """Examples of ``path`` with the report of what was read; ``training`` lets a task check training-only
        constraints; ``format`` and ``header`` choose how a table is read (tasks with one file format refuse
        another)."""
        ...

    def fit_labels(self, examples: Sequence) -> None: ...

    def describe_labels(self, examples: Sequence) -> str | None:
        """One line on what ``fit_labels`` learned from ``examples`` (the classes and their counts, the score
        range, the tags), said once when fine-tuning starts; ``None`` when there are no labels to show."""
        ...

    def config_updates(self) -> dict[str, Any]: ...

    def load_config(self, config: Any) -> None:
        """Restore what ``fit_labels`` learned from a fine-tuned model's ``BertConfig``."""
        ...

    def featurize(
        self, examples: Sequence, tokenizer: Any, max_seq_length: int, *, training: bool = False
    ) -> Featurized:
        """Features of ``examples``, with how many were cut or dropped."""
        ...

    def collate(self, features: Sequence[Feature], pad_id: int = 0) -> dict[str, torch.Tensor]: ...


@runtime_checkable
class TaskOutput(Protocol):
    """The output side of a task family: the head's outputs into per-feature rows (``unbatch``), rows into
    predictions (``postprocess``), predictions into metrics (``evaluate``) and into files (``write_predictions``,
    ``prediction_rows``). The runner (``bertkit.features.runner``) needs only ``unbatch`` and ``postprocess``."""

    main_metric: str
    """Key of ``evaluate``'s result used to pick the best checkpoint (higher is better)."""

    def unbatch(self, outputs: Any, batch: Mapping[str, torch.Tensor]) -> list: ...

    def postprocess(self, examples: Sequence, features: Sequence[Feature], rows: Sequence) -> Any: ...

    def evaluate(self, predictions: Any, examples: Sequence) -> dict[str, float]: ...

    def write_predictions(
        self, predictions: Any, directory: str | os.PathLike, examples: Sequence | None = None
    ) -> list[Path]: ...

    def prediction_rows(
        self, examples: Sequence, features: Sequence[Feature], rows: Sequence, predictions: Any
    ) -> list[dict[str, Any]]:
        """One JSON-ready object per example for ``bertkit predict``, with the prediction and its scores."""
        ...


@runtime_checkable
class TaskTraining(Protocol):
    """How the loop trains a task's model and what it saves (``HeadTraining`` answers for a head that computes
    its own loss)."""

    def loss_normalizer(self, features: Sequence[Feature], micro_batch_size: int) -> float | None:
        """For a per-token loss: the mean count of labelled tokens in a micro-batch of ``features``, by which
        every batch's summed loss is divided, so that length-grouped batches weigh each token alike (see
        ``BertForTokenClassification``); ``None`` for a loss that is one value per sequence."""
        ...

    def training_module(self, model: nn.Module) -> nn.Module:
        """The module the loop trains, whose ``forward(**collate(...))`` returns ``.loss``: the loaded head
        itself, or the encoder wrapped with the task's loss."""
        ...

    def saved_model(self, module: nn.Module) -> nn.Module:
        """The bertkit model inside ``training_module``'s result: what is saved, and what a saved model's
        weights load into."""
        ...

    def sentence_config(self, max_seq_length: int) -> SentenceConfig | None:
        """The sentence-transformers files the output gets (``None``: none)."""
        ...

    def batch_order(self, features: Sequence[Feature]) -> Ordering | None:
        """How training batches are drawn from ``features``; ``None``: random or grouped by length, as
        ``group_by_length`` says."""
        ...


@runtime_checkable
class Task(TaskData, TaskOutput, TaskTraining, Protocol):
    """The uniform interface of a fine-tuning task family: its data side, its output side and its training
    answers. The training loop, the inference pipelines and the CLI only ever talk to this interface."""

    head: str
    """Class name of the model head in ``bertkit.models.bert``."""


class HeadTraining:
    """The training answers of a task whose head computes its own loss: the loop trains the head as loaded,
    batches are random or grouped by length, and the output is the head in Hugging Face layout."""

    def training_module(self, model: nn.Module) -> nn.Module:
        return model

    def saved_model(self, module: nn.Module) -> nn.Module:
        return module

    def sentence_config(self, max_seq_length: int) -> SentenceConfig | None:
        return None

    def batch_order(self, features: Sequence[Feature]) -> Ordering | None:
        return None
