"""A fine-tuned model on a whole file in its task's format: ``evaluate_model`` (metrics on labelled data) and
``predict`` (one JSON line per input, with scores); ``bertkit evaluate`` and ``bertkit predict`` call them.

They load the model with ``load`` (a checkpoint, or an export folder without torch) and run it with the one runner, so a file gives the predictions the
pipelines and the HTTP service give for the same texts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertkit.errors import CheckpointError
from bertkit.features.runner import predict_features
from bertkit.hub import resolve_model
from bertkit.inference.opening import load
from bertkit.io import check_output_file, write_jsonl
from bertkit.tasks.pipeline import input_length
from bertkit.tasks.prepare import featurize, read_examples
from bertkit.tasks.registry import head_family

if TYPE_CHECKING:  # an export folder (bertkit.inference.exported) predicts without torch
    import torch

    from bertkit.inference.loading import Loaded


def load_finetuned(
    path: str | os.PathLike,
    *,
    task: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    max_seq_length: int | None = None,
    device: str | torch.device = "cpu",
    quantize: str | None = None,
    compile: bool | None = None,
    backend: str | None = None,
) -> Loaded:
    """Load a fine-tuned model directory; the task, its options and ``max_seq_length`` default to those it was
    trained with (``config.json``'s ``bertkit_finetune``), else to the task of its head. ``quantize``,
    ``compile`` and ``backend`` as for ``load``.

    Raises ``CheckpointError`` when the directory holds no task head or its head was never trained.
    """
    path = resolve_model(path)
    if not path.is_dir():
        raise CheckpointError(f"--model {path} is not a directory; give a fine-tuned model directory")
    architectures, heads = _heads(path)
    own = next((f for f in map(head_family, heads) if f is not None), None)
    if own is None:
        raise CheckpointError(
            f"{path} is not a fine-tuned model (architectures {architectures}); "
            f"fine-tune it first with `bertkit finetune`"
        )
    loaded = load(
        path,
        head=own.head,
        device=device,
        task=task,
        task_options=task_options,
        max_seq_length=max_seq_length,
        quantize=quantize,
        compile=compile,
        backend=backend,
    )
    if own.pipeline is not None and not loaded.supports(own.pipeline):
        raise CheckpointError(f"{path} has no trained {own.head} weights; fine-tune it first with `bertkit finetune`")
    _ = loaded.task  # restored now, so that a wrong --task is refused before any data is read
    return loaded


def _heads(path: Path) -> tuple[list[str], list[str]]:
    """The classes ``config.json`` names and the BERT head role of each: an export folder records its head
    (read without torch); a checkpoint asks the architecture registry, as loading it will."""
    from bertkit.inference.exported import is_export_folder, read_runtime

    if is_export_folder(path):
        runtime = read_runtime(path)
        return [runtime["class"]], [runtime["head"]]
    from bertkit.models import registry

    config = registry.of_directory(path).config_class.load(path)
    return list(config.architectures or []), [registry.role_named(n) or n for n in config.architectures or []]


def evaluate_model(
    model: str | os.PathLike | Loaded,
    data: str | os.PathLike,
    *,
    task: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    max_seq_length: int | None = None,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    predictions_dir: str | os.PathLike | None = None,
    format: str | None = None,
    header: bool | None = None,
    quantize: str | None = None,
    compile: bool | None = None,
    backend: str | None = None,
) -> dict[str, float]:
    """Metrics of a fine-tuned model on a labelled file (the task's ``evaluate``); optionally also write the
    task's prediction files into ``predictions_dir``. ``format``/``header``: how to read ``data`` (default:
    from its path; the header detected). What was read and how many examples were cut at the model's
    ``max_seq_length`` go to stderr, one line each. ``quantize``/``compile``/``backend``: see ``load``."""
    loaded = (
        model
        if not isinstance(model, (str, os.PathLike))
        else load_finetuned(
            model,
            task=task,
            task_options=task_options,
            max_seq_length=max_seq_length,
            device=device,
            quantize=quantize,
            compile=compile,
            backend=backend,
        )
    )
    examples = read_examples(loaded.task, data, format=format, header=header).examples
    features = featurize(
        loaded.task, examples, loaded.tokenizer, input_length(loaded, max_seq_length), report=True
    ).features
    predictions, _ = predict_features(
        loaded.model, loaded.task, examples, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id
    )
    scores = {
        k: float(v) for k, v in loaded.task.evaluate(predictions, examples).items() if isinstance(v, (int, float))
    }
    if predictions_dir is not None:
        loaded.task.write_predictions(predictions, predictions_dir, examples)
    return scores


def predict(
    model: str | os.PathLike | Loaded,
    input: str | os.PathLike,
    output: str | os.PathLike,
    *,
    task: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    max_seq_length: int | None = None,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    format: str | None = None,
    header: bool | None = None,
    quantize: str | None = None,
    compile: bool | None = None,
    backend: str | None = None,
) -> int:
    """Write one JSON line per input example of ``input`` (in the task's format; labels are ignored) to
    ``output``, atomically; return the number of lines.

    Rows (the task's ``prediction_rows``): classification ``{index, text[, text_pair], label, score,
    probabilities}`` (regression: ``score``); NER ``{index, words, tags, scores, entities}`` (``scores``:
    probability of each word's tag); QA ``{index, id, question, answer, score, nbest}``. ``format`` and
    ``header`` as for :func:`evaluate_model`; the same two report lines go to stderr.
    """
    check_output_file(output, example="predictions.jsonl")
    loaded = (
        model
        if not isinstance(model, (str, os.PathLike))
        else load_finetuned(
            model,
            task=task,
            task_options=task_options,
            max_seq_length=max_seq_length,
            device=device,
            quantize=quantize,
            compile=compile,
            backend=backend,
        )
    )
    examples = read_examples(loaded.task, input, labeled=False, format=format, header=header).examples
    features = featurize(
        loaded.task, examples, loaded.tokenizer, input_length(loaded, max_seq_length), report=True
    ).features
    predictions, rows = predict_features(
        loaded.model, loaded.task, examples, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id
    )
    lines = loaded.task.prediction_rows(examples, features, rows, predictions)
    write_jsonl(lines, output)
    return len(lines)
