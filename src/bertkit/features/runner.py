"""The one runner: features through a model in length-sorted padded batches, rows back in the features' order.

Every place that runs a model on many inputs uses it: fine-tuning's dev evaluation, ``bertkit predict`` and
``evaluate``, and every pipeline of ``bertkit.inference``. Sorting by length (longest first) keeps the padding
of each batch small; the rows come back in the order of the features, so callers never see the sort.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from bertkit.errors import BertkitError
from bertkit.features import Feature
from bertkit.features.padding import pad_arrays
from bertkit.progress import track

if TYPE_CHECKING:
    import torch

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
"""The keys of a feature the runner feeds to the model; bookkeeping keys (``example_index``...) stay behind."""

Forward = Callable[[dict[str, Any], list[Feature]], Any]
"""``(padded model inputs, the batch's features) -> model output``: the inputs are tensors on the model's device
for a PyTorch model, int64 numpy arrays for an exported graph (``bertkit.inference.exported``)."""
Unbatch = Callable[[Any, Mapping[str, Any]], Sequence[Any]]
"""``(model output, padded inputs) -> one row per feature of the batch``."""


class Unbatching(Protocol):
    """What the runner needs of a task: its rows from a batch's output, and its predictions from the rows (the
    output side of ``bertkit.tasks.base.Task``)."""

    def unbatch(self, outputs: Any, batch: Mapping[str, Any]) -> list: ...

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


def _engine_inputs(model: Any) -> tuple[Callable[[dict[str, Any]], dict[str, Any]], Any]:
    """How a batch's numpy arrays reach ``model``, and the context it runs under: tensors on its device under
    ``torch.inference_mode()`` for a PyTorch model, the arrays as they are for a graph (no ``parameters``)."""
    parameters = getattr(model, "parameters", None)
    if parameters is None:
        return (lambda arrays: arrays), contextlib.nullcontext()
    import torch

    device = next(parameters()).device
    return (lambda arrays: {n: torch.from_numpy(a).to(device) for n, a in arrays.items()}), torch.inference_mode()


def run_batches(
    model: Any,
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
    many padded tokens (``length_sorted_batches``). ``model`` is a PyTorch model, or an exported graph that
    takes and returns numpy arrays (``bertkit.inference.exported.Graph``).

    ``forward`` defaults to ``model(**inputs)``; a pipeline passes its own to ask the model for something else
    (hidden states, the masked positions). ``progress``: a label for a progress display over the batches. The
    caller chooses the mode (``model.eval()``) and the grad context.
    """
    to_engine, context = _engine_inputs(model)
    run = forward or (lambda inputs, chunk: model(**inputs))
    rows: list[Any] = [None] * len(features)
    lengths = [len(f["input_ids"]) for f in features]
    batches: Iterable[list[int]] = list(length_sorted_batches(lengths, batch_size, max_tokens))
    if progress:
        batches = track(batches, desc=progress, unit="batch")
    with context:
        for batch in batches:
            chunk = [features[i] for i in batch]
            inputs = to_engine(pad_arrays(chunk, MODEL_INPUTS, {"input_ids": pad_id}))
            for index, row in zip(batch, unbatch(run(inputs, chunk), inputs)):
                rows[index] = row
    return rows


def run_model(
    model: Any, task: Unbatching, features: Sequence[Feature], *, batch_size: int = 64, pad_id: int = 0
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
        rows = run_model(model, task, features, batch_size=batch_size, pad_id=pad_id)
    finally:
        model.train(was_training)
    return task.postprocess(examples, features, rows), rows
