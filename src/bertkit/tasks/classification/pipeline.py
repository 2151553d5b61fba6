"""The classification family's inference pipeline: ``classify`` (labels and probabilities, or a regression score)
and a cross-encoder's ``pair_scores`` and ``rerank``.

They run the model's own task (its label names and the options it was fine-tuned with) at the length it was
fine-tuned with, through the same runner and post-processing as ``bertkit predict``, so a text gets the same
prediction here, from ``predict`` and from the HTTP service. ``bertkit.classify``/``rerank``/``pair_scores``
load a model directory and call these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertkit.errors import BertkitError
from bertkit.features.outputs import sigmoid
from bertkit.features.runner import run_model
from bertkit.tasks.classification.task import ClassificationExample
from bertkit.tasks.pipeline import (
    LoadedModel,
    TextInput,
    as_list,
    check_texts,
    input_length,
    is_single,
    with_options,
)


# ------------------------------------------------------------------------------------------ classify
def classify(
    texts: TextInput | Sequence[TextInput],
    loaded: LoadedModel,
    *,
    batch_size: int = 32,
    max_length: int | None = None,
    long_text: str | None = None,
    window_stride: int | None = None,
) -> Any:
    """Label and class probabilities (or a regression score) for each text or ``(text, text_pair)``.

    ``long_text`` (``truncate`` or ``windows``) and ``window_stride`` override what the model was fine-tuned
    with: ``windows`` scores a single text longer than the length in overlapping windows and averages them.

    Returns ``ClassificationPrediction`` (``label``, ``score`` = probability of the label or the regression
    value, ``probabilities`` by label name), one per input. Long inputs are cut (or windowed) as in
    fine-tuning, at the length the model was fine-tuned with unless ``max_length`` says otherwise.
    """
    items = as_list(texts, "texts")
    check_texts(items)
    if long_text not in (None, "truncate", "windows"):
        raise BertkitError(f"long_text must be truncate or windows, got {long_text!r} (--long-text)")
    task = with_options(loaded.task, long_text=long_text, window_stride=window_stride)
    examples = [
        ClassificationExample(
            t if isinstance(t, str) else t[0], None if isinstance(t, str) else t[1], None, f"input {i}"
        )
        for i, t in enumerate(items)
    ]
    from bertkit.tasks.prepare import featurize  # a floor up: it reads the family registry

    features = featurize(task, examples, loaded.tokenizer, input_length(loaded, max_length), report=True).features
    rows = run_model(loaded.model, task, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id)
    predictions = task.postprocess(examples, features, rows)
    return predictions[0] if is_single(texts) else predictions


# ------------------------------------------------------------------------------------------ rerank
@dataclass
class Ranked:
    """One text of a reranked list: its ``index`` in the caller's list and its relevance ``score``."""

    index: int
    score: float


def can_rerank(loaded: LoadedModel) -> bool:
    """Whether ``loaded`` is a cross-encoder: a sequence classifier with one output (a relevance score or
    logit) or two labels (the second one: relevant)."""
    return loaded.supports("classify") and loaded.config.num_labels in (1, 2)


def pair_scores(
    pairs: Sequence[tuple[str, str]],
    loaded: LoadedModel,
    *,
    raw_scores: bool = False,
    batch_size: int = 32,
    max_length: int | None = None,
) -> list[float]:
    """A cross-encoder's score of each ``(query, text)`` pair, in order.

    With one output (a regression or ranking head) the score is ``sigmoid(logit)``, as sentence-transformers'
    ``CrossEncoder`` and text-embeddings-inference give; with two labels it is the softmax probability of the
    second (relevant) label, which is ``sigmoid(logit_1 - logit_0)``. ``raw_scores`` gives the number inside
    the sigmoid (the logit, or ``logit_1 - logit_0``): the same order, unbounded. Pairs longer than the model's
    length are cut (or windowed, their logits averaged) as ``classify`` does.
    """
    if not can_rerank(loaded):
        raise BertkitError(
            f"reranking needs a model with one output (a relevance score) or two labels (the second: relevant); "
            f"this one has {loaded.config.num_labels} labels"
        )
    check_texts(pairs, "pair")
    task = loaded.task
    examples = [ClassificationExample(a, b, None, f"pair {i}") for i, (a, b) in enumerate(pairs)]
    from bertkit.tasks.prepare import featurize  # a floor up: it reads the family registry

    features = featurize(task, examples, loaded.tokenizer, input_length(loaded, max_length), report=True).features
    rows = run_model(loaded.model, task, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id)
    grouped: dict[int, list[Any]] = {}
    for feature, row in zip(features, rows):
        grouped.setdefault(feature["example_index"], []).append(row)
    scores = []
    for index in range(len(examples)):
        logits = np.asarray(grouped[index], dtype=np.float64).mean(0).reshape(-1)
        margin = logits[0] if len(logits) == 1 else logits[-1] - logits[0]
        scores.append(float(margin if raw_scores else sigmoid(margin)))
    return scores


def rank_scores(scores: Sequence[float], top_n: int | None = None) -> list[Ranked]:
    """``scores`` as ``Ranked`` s, best first (ties keep the caller's order), the first ``top_n`` only."""
    ranked = sorted((Ranked(i, s) for i, s in enumerate(scores)), key=lambda r: -r.score)
    return ranked[:top_n] if top_n is not None else ranked


def rerank(
    query: str,
    texts: Sequence[str],
    loaded: LoadedModel,
    *,
    raw_scores: bool = False,
    top_n: int | None = None,
    batch_size: int = 32,
    max_length: int | None = None,
) -> list[Ranked]:
    """``texts`` ordered by a cross-encoder's relevance to ``query`` (``pair_scores``), best first."""
    pairs = [(query, t) for t in texts]
    scores = pair_scores(pairs, loaded, raw_scores=raw_scores, batch_size=batch_size, max_length=max_length)
    return rank_scores(scores, top_n)
