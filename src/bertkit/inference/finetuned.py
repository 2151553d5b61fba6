"""The pipelines on fine-tuned heads as the library offers them: ``classify``, ``pair_scores``, ``rerank``,
``tag`` and ``answer`` take a model directory or a ``Loaded`` model, refuse with one line a model without the
head, and run the family's own pipeline (``tasks/<family>/pipeline.py``: ``tasks.classification.pipeline``,
``tasks.ner.pipeline``, ``tasks.qa.pipeline``), whose docstrings say what each returns.

Each runs the model's own task (``Loaded.task``: its label names and the options it was fine-tuned with) at the
length it was fine-tuned with (``Loaded.max_length``), through the same runner and post-processing as
``bertkit predict``, so a text gets the same prediction here, from ``predict`` and from the HTTP service.
Keyword arguments left at ``None`` keep the model's saved settings.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from bertkit.inference.opening import for_pipeline
from bertkit.tasks.classification import pipeline as classification
from bertkit.tasks.classification.pipeline import Ranked
from bertkit.tasks.ner import pipeline as tagging
from bertkit.tasks.pipeline import LoadedModel as Loaded
from bertkit.tasks.pipeline import TextInput
from bertkit.tasks.qa import pipeline as answering


def classify(
    texts: TextInput | Sequence[TextInput],
    model: str | os.PathLike | Loaded,
    *,
    batch_size: int = 32,
    max_length: int | None = None,
    long_text: str | None = None,
    window_stride: int | None = None,
) -> Any:
    """Label and class probabilities (or a regression score) for each text or ``(text, text_pair)``, as
    ``ClassificationPrediction`` s (``tasks.classification.pipeline.classify``: ``long_text`` and
    ``window_stride`` there)."""
    loaded = for_pipeline("classify", model)
    return classification.classify(
        texts, loaded, batch_size=batch_size, max_length=max_length, long_text=long_text, window_stride=window_stride
    )


def pair_scores(
    pairs: Sequence[tuple[str, str]],
    model: str | os.PathLike | Loaded,
    *,
    raw_scores: bool = False,
    batch_size: int = 32,
    max_length: int | None = None,
) -> list[float]:
    """A cross-encoder's score of each ``(query, text)`` pair, in order (``tasks.classification.pipeline.pair_scores``:
    ``sigmoid`` of the logit or of the two labels' margin; ``raw_scores`` the number inside)."""
    loaded = for_pipeline("classify", model)
    return classification.pair_scores(
        pairs, loaded, raw_scores=raw_scores, batch_size=batch_size, max_length=max_length
    )


def rerank(
    query: str,
    texts: Sequence[str],
    model: str | os.PathLike | Loaded,
    *,
    raw_scores: bool = False,
    top_n: int | None = None,
    batch_size: int = 32,
    max_length: int | None = None,
) -> list[Ranked]:
    """``texts`` ordered by a cross-encoder's relevance to ``query`` (``pair_scores``), best first."""
    loaded = for_pipeline("classify", model)
    return classification.rerank(
        query, texts, loaded, raw_scores=raw_scores, top_n=top_n, batch_size=batch_size, max_length=max_length
    )


def tag(
    texts: str | Sequence[str],
    model: str | os.PathLike | Loaded,
    *,
    batch_size: int = 32,
    max_length: int | None = None,
    window_stride: int | None = None,
) -> Any:
    """Named entities (or any word-level tags) in raw text, as ``TagResult`` per text, long texts in
    overlapping windows of ``max_length`` tokens, ``window_stride`` apart (``tasks.ner.pipeline.tag``)."""
    loaded = for_pipeline("tag", model)
    return tagging.tag(texts, loaded, batch_size=batch_size, max_length=max_length, window_stride=window_stride)


def answer(
    question: str | Sequence[str],
    context: str | Sequence[str],
    model: str | os.PathLike | Loaded,
    *,
    top_k: int = 1,
    batch_size: int = 32,
    max_length: int | None = None,
    doc_stride: int | None = None,
    max_query_length: int | None = None,
    max_answer_length: int | None = None,
    allow_no_answer: bool = False,
    null_threshold: float | None = None,
) -> Any:
    """Extractive question answering: the best span of ``context`` answering ``question``, an ``Answer`` per
    question (a list of the ``top_k`` best when ``top_k`` is more than 1), long contexts in SQuAD's windows
    (``tasks.qa.pipeline.answer``)."""
    answering.check_top_k(top_k)  # before the model is loaded
    loaded = for_pipeline("answer", model)
    return answering.answer(
        question,
        context,
        loaded,
        top_k=top_k,
        batch_size=batch_size,
        max_length=max_length,
        doc_stride=doc_stride,
        max_query_length=max_query_length,
        max_answer_length=max_answer_length,
        allow_no_answer=allow_no_answer,
        null_threshold=null_threshold,
    )
