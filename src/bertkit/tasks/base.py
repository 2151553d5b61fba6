"""What every fine-tuning task family shares: the ``Task`` interface, label maps, padding and writers.

A task turns files into examples (``read``), examples into model features (``featurize``), features into
padded batches whose keys are exactly the head's ``forward`` arguments (``collate``), the head's outputs
back into per-feature rows (``unbatch``), rows into predictions (``postprocess``) and predictions into
metrics (``evaluate``). How the loop trains the model and how it is saved is the task's too (``training_module``,
``saved_model``, ``sentence_config``, ``batch_order``): a head with its own loss takes ``HeadTraining``'s
answers, a two-tower task (``embedding``) wraps the encoder with its loss. The training loop and the CLI only
ever talk to this interface. A task keeps no
per-call state: ``read`` and ``featurize`` return what they counted (``Read``, ``Featurized``) beside their
results.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import torch
from torch import nn

from bertkit.data.batches import Ordering
from bertkit.errors import ConfigError, DataError
from bertkit.io import atomic_open
from bertkit.sentence_config import SentenceConfig
from bertkit.tasks.readers import ReadReport

CONFIG_KEY = "bertkit_finetune"
"""Key in a fine-tuned model's ``config.json`` holding the task, its options and ``max_seq_length``, so that
``evaluate``/``predict`` read files the way training did (``transformers`` ignores it); ``tasks.registry``
writes it."""

Feature = dict[str, Any]
"""One model input: the head's keyword arguments as lists of ints, plus bookkeeping keys (``example_index``...)."""

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
class Task(Protocol):
    """The uniform interface of a fine-tuning task family (classification, NER, SQuAD)."""

    name: str
    """Short name used on the command line: ``classification``, ``ner``, ``qa``."""
    head: str
    """Class name of the model head in ``bertkit.model``."""
    main_metric: str
    """Key of ``evaluate``'s result used to pick the best checkpoint (higher is better)."""
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

    def loss_normalizer(self, features: Sequence[Feature], micro_batch_size: int) -> float | None:
        """For a per-token loss: the mean count of labelled tokens in a micro-batch of ``features``, by which
        every batch's summed loss is divided, so that length-grouped batches weigh each token alike (see
        ``BertForTokenClassification``); ``None`` for a loss that is one value per sequence."""
        ...

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


def only_format(format: str | None, own: str, task: str) -> None:
    """Refuse a ``--format`` other than the one format task ``task`` reads."""
    if format is not None and format != own:
        raise ConfigError(f"--format {format}: the {task} task reads {own} files only")


class LabelMap:
    """Label names <-> contiguous ids. Built from the training examples and saved as ``config.id2label``."""

    def __init__(self, labels: Sequence[str]):
        if len(set(labels)) != len(labels):
            raise DataError(f"duplicate label names in {list(labels)}")
        self.labels = list(labels)
        self.index = {label: i for i, label in enumerate(self.labels)}

    @classmethod
    def fit(cls, labels: Iterable[str]) -> LabelMap:
        """Sorted distinct labels; numbers sort numerically so that GLUE's ``0``/``1`` keep their ids."""
        distinct = set(labels)
        if not distinct:
            raise DataError("no labels found in the training data")

        def key(label: str) -> tuple[int, float, str]:
            try:
                return 0, float(label), label
            except ValueError:
                return 1, 0.0, label

        return cls(sorted(distinct, key=key))

    @classmethod
    def from_id2label(cls, id2label: Mapping[int | str, str]) -> LabelMap:
        """Rebuild from a ``config.json`` ``id2label`` (JSON turns its keys into strings)."""
        items = sorted((int(k), v) for k, v in id2label.items())
        if [k for k, _ in items] != list(range(len(items))):
            raise DataError(f"id2label ids must be 0..{len(items) - 1}, got {[k for k, _ in items]}")
        return cls([v for _, v in items])

    def encode(self, label: str, where: str) -> int:
        """Id of ``label``; ``where`` (``file:line``) names the offending input when it was never seen in train."""
        try:
            return self.index[label]
        except KeyError:
            raise DataError(
                f"{where}: label {label!r} does not occur in the training data (known: "
                f"{', '.join(map(repr, self.labels[:20]))}{' ...' if len(self.labels) > 20 else ''})"
            ) from None

    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.labels))

    def __len__(self) -> int:
        return len(self.labels)


def pad_and_stack(
    features: Sequence[Feature],
    names: Sequence[str],
    pad_values: Mapping[str, int | float],
    dtypes: Mapping[str, torch.dtype] | None = None,
) -> dict[str, torch.Tensor]:
    """Tensors for ``names``: list-valued features right-padded to the longest in the batch, scalars stacked."""
    if not features:
        raise ValueError("cannot collate an empty batch")
    dtypes = dtypes or {}
    batch: dict[str, torch.Tensor] = {}
    for name in names:
        values = [f[name] for f in features]
        dtype = dtypes.get(name, torch.long)
        if isinstance(values[0], (list, tuple)):
            width = max(len(v) for v in values)
            pad = pad_values.get(name, 0)
            batch[name] = torch.tensor([list(v) + [pad] * (width - len(v)) for v in values], dtype=dtype)
        else:
            batch[name] = torch.tensor(values, dtype=dtype)
    return batch


def build_pair(ids_a: Sequence[int], ids_b: Sequence[int] | None, cls_id: int, sep_id: int) -> Feature:
    """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` with segment 0 up to the first ``[SEP]`` and 1 after."""
    input_ids = [cls_id, *ids_a, sep_id]
    token_type_ids = [0] * len(input_ids)
    if ids_b is not None:
        input_ids += [*ids_b, sep_id]
        token_type_ids += [1] * (len(ids_b) + 1)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": [1] * len(input_ids)}


def truncate_pair(ids_a: list[int], ids_b: list[int] | None, max_tokens: int) -> tuple[list[int], list[int] | None]:
    """Google BERT's ``_truncate_seq_pair``: drop the last token of the longer side (B on ties) until it fits."""
    a = list(ids_a)
    b = None if ids_b is None else list(ids_b)
    while len(a) + (len(b) if b is not None else 0) > max_tokens:
        if b is None or len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def window_starts(length: int, width: int, stride: int) -> list[int]:
    """Starts of windows of ``width`` items covering ``length`` items, ``stride`` apart.

    Google BERT's doc-span loop: the stride is the step between window starts (not the overlap), and the
    last window ends exactly where the items end. ``window_starts(10, 4, 3) == [0, 3, 6]``.
    """
    if width < 1 or stride < 1:
        raise ValueError(f"window width and stride must be positive, got {width} and {stride}")
    starts, start = [], 0
    while True:
        starts.append(start)
        if start + width >= length:
            return starts
        start += min(width, stride)


def max_context(n_tokens: int, spans: Sequence[tuple[int, int]]) -> list[int]:
    """For each of ``n_tokens`` tokens, the window (index into ``spans`` of ``(start, length)``) where
    ``min(left, right) + 0.01 * length`` is largest; ties go to the earlier window, as in Google's
    ``_check_is_max_context``."""
    best = [0] * n_tokens
    best_score = [-math.inf] * n_tokens
    for number, (start, length) in enumerate(spans):
        for t in range(start, start + length):
            score = min(t - start, start + length - 1 - t) + 0.01 * length
            if score > best_score[t]:
                best[t], best_score[t] = number, score
    return best


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """One JSON object per line, written atomically."""
    path = Path(path)
    with atomic_open(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_json(obj: Any, path: str | os.PathLike) -> Path:
    """Indented JSON, written atomically."""
    path = Path(path)
    with atomic_open(path) as handle:
        json.dump(obj, handle, ensure_ascii=False, indent=2)
        handle.write("\n")
    return path


def to_numpy_rows(tensor: torch.Tensor, lengths: Sequence[int] | None = None) -> list:
    """Split a batch tensor into per-example float32 numpy arrays, cut to ``lengths`` when given."""
    array = tensor.detach().float().cpu().numpy()
    if lengths is None:
        return list(array)
    return [row[:n] for row, n in zip(array, lengths)]
