"""The one runner: features through a model in length-sorted padded batches, rows back in the features' order.

Every place that runs a model on many inputs uses it: fine-tuning's dev evaluation, ``bertkit predict`` and
``evaluate``, and every pipeline of ``bertkit.inference``. Sorting by length (longest first) keeps the padding
of each batch small; the rows come back in the order of the features, so callers never see the sort.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import torch

from bertkit.errors import BertkitError
from bertkit.features import Feature
from bertkit.features.padding import pad_and_stack
from bertkit.progress import track

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
"""The keys of a feature the runner feeds to the model; bookkeeping keys (``example_index``...) stay behind."""

Forward = Callable[[dict[str, torch.Tensor], list[Feature]], Any]
"""``(padded model inputs on the device, the batch's features) -> model output``."""
Unbatch = Callable[[Any, Mapping[str, torch.Tensor]], Sequence[Any]]
"""``(model output, padded inputs) -> one row per feature of the batch``."""


class Unbatching(Protocol):
    """What the runner needs of a task: its rows from a batch's output, and its predictions from the rows (the
    output side of ``bertkit.tasks.base.Task``)."""

    def unbatch(self, outputs: Any, batch: Mapping[str, torch.Tensor]) -> list: ...

    def postprocess(self, examples: Sequence, features: Sequence[Feature], rows: Sequence) -> Any: ...


def length_sorted_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int | None = None
) -> Iterator[list[int]]:
    """Indices grouped into batches of similar length (longest first), so padding stays small: at most
    ``batch_size`` each and, with ``max_tokens``, at most that many padded tokens (rows x the longest) unless
    one row alone is longer."""
    if batch_size < 1:
        raise BertkitError(f"batch size must be at least 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batch: list[int] = []
    for index in order:
        full = len(batch) == batch_size
        if batch and (full or (max_tokens is not None and (len(batch) + 1) * lengths[batch[0]] > max_tokens)):
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


def run_batches(
    model: torch.nn.Module,
    features: Sequence[Feature],
    unbatch: Unbatch,
    *,
    batch_size: int = 64,
    pad_id: int = 0,
    forward: Forward | None = None,
    progress: str | None = None,
    max_tokens: int | None = None,
) -> list[Any]:
    """Rows of ``unbatch`` for every feature, in the features' order.

    Features run in length-sorted batches of at most ``batch_size`` and, with ``max_tokens``, of at most that
    many padded tokens (``length_sorted_batches``).

    ``forward`` defaults to ``model(**inputs)``; a pipeline passes its own to ask the model for something else
    (hidden states, the masked positions). ``progress``: a label for a progress display over the batches. The
    caller chooses the mode (``model.eval()``) and the grad context.
    """
    device = next(model.parameters()).device
    run = forward or (lambda inputs, chunk: model(**inputs))
    rows: list[Any] = [None] * len(features)
    lengths = [len(f["input_ids"]) for f in features]
    batches: Iterable[list[int]] = list(length_sorted_batches(lengths, batch_size, max_tokens))
    if progress:
        batches = track(batches, desc=progress, unit="batch")
    for batch in batches:
        chunk = [features[i] for i in batch]
        inputs = pad_and_stack(chunk, MODEL_INPUTS, {"input_ids": pad_id})
        inputs = {name: tensor.to(device) for name, tensor in inputs.items()}
        for index, row in zip(batch, unbatch(run(inputs, chunk), inputs)):
            rows[index] = row
    return rows


def run_model(
    model: torch.nn.Module, task: Unbatching, features: Sequence[Feature], *, batch_size: int = 64, pad_id: int = 0
) -> list[Any]:
    """The task's per-feature output rows (``task.unbatch``) in feature order; labels are not passed."""
    return run_batches(model, features, task.unbatch, batch_size=batch_size, pad_id=pad_id)


def predict_features(
    model: torch.nn.Module,
    task: Unbatching,
    examples: Sequence[Any],
    features: Sequence[Feature],
    *,
    batch_size: int = 64,
    pad_id: int = 0,
) -> tuple[Any, list[Any]]:
    """``(predictions, rows)`` of the model on featurized examples, in eval mode without gradients (the
    model's mode is restored afterwards, so that training can call it between steps)."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            rows = run_model(model, task, features, batch_size=batch_size, pad_id=pad_id)
    finally:
        model.train(was_training)
    return task.postprocess(examples, features, rows), rows
