"""Pipelines on fine-tuned heads: ``classify``, ``tag`` and ``answer``.

Each runs the model's own task (``Loaded.task``: its label names and the options it was fine-tuned with) at the
length it was fine-tuned with (``Loaded.max_length``), through the same runner and post-processing as
``bertkit predict``, so a text gets the same prediction here, from ``predict`` and from the HTTP service.
Keyword arguments left at ``None`` keep the model's saved settings.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertkit.errors import BertkitError
from bertkit.features.runner import run_model
from bertkit.inference.inputs import TextInput, as_list, check_texts, input_length, is_single, paired_texts
from bertkit.inference.loading import Loaded, for_pipeline, with_options
from bertkit.tasks.classification import ClassificationExample
from bertkit.tasks.ner import NerExample, NerTask
from bertkit.tasks.qa import QuestionAnsweringTask, SquadExample, SquadPredictions
from bertkit.tokenizer import Tokenizer


# ------------------------------------------------------------------------------------------ classify
@torch.inference_mode()
def classify(
    texts: TextInput | Sequence[TextInput],
    model: str | os.PathLike | Loaded,
    *,
    batch_size: int = 32,
    max_length: int | None = None,
) -> Any:
    """Label and class probabilities (or a regression score) for each text or ``(text, text_pair)``.

    Returns ``ClassificationPrediction`` (``label``, ``score`` = probability of the label or the regression
    value, ``probabilities`` by label name), one per input. Long inputs are cut (or windowed) as in
    fine-tuning, at the length the model was fine-tuned with unless ``max_length`` says otherwise.
    """
    loaded = for_pipeline("classify", model)
    items = as_list(texts, "texts")
    check_texts(items)
    task = loaded.task
    examples = [
        ClassificationExample(
            t if isinstance(t, str) else t[0], None if isinstance(t, str) else t[1], None, f"input {i}"
        )
        for i, t in enumerate(items)
    ]
    features = task.featurize(examples, loaded.tokenizer, input_length(loaded, max_length)).features
    rows = run_model(loaded.model, task, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id)
    predictions = task.postprocess(examples, features, rows)
    return predictions[0] if is_single(texts) else predictions


# ------------------------------------------------------------------------------------------ rerank
@dataclass
class Ranked:
    """One text of a reranked list: its ``index`` in the caller's list and its relevance ``score``."""

    index: int
    score: float


def can_rerank(loaded: Loaded) -> bool:
    """Whether ``loaded`` is a cross-encoder: a sequence classifier with one output (a relevance score or
    logit) or two labels (the second one: relevant)."""
    return loaded.supports("classify") and loaded.config.num_labels in (1, 2)


@torch.inference_mode()
def pair_scores(
    pairs: Sequence[tuple[str, str]],
    model: str | os.PathLike | Loaded,
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
    loaded = for_pipeline("classify", model)
    if not can_rerank(loaded):
        raise BertkitError(
            f"reranking needs a model with one output (a relevance score) or two labels (the second: relevant); "
            f"this one has {loaded.config.num_labels} labels"
        )
    check_texts(pairs, "pair")
    task = loaded.task
    examples = [ClassificationExample(a, b, None, f"pair {i}") for i, (a, b) in enumerate(pairs)]
    features = task.featurize(examples, loaded.tokenizer, input_length(loaded, max_length)).features
    rows = run_model(loaded.model, task, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id)
    grouped: dict[int, list[Any]] = {}
    for feature, row in zip(features, rows):
        grouped.setdefault(feature["example_index"], []).append(row)
    scores = []
    for index in range(len(examples)):
        logits = torch.from_numpy(np.asarray(grouped[index], dtype=np.float64)).mean(0).reshape(-1)
        margin = logits[0] if len(logits) == 1 else logits[-1] - logits[0]
        scores.append(float(margin if raw_scores else torch.sigmoid(margin)))
    return scores


def rank_scores(scores: Sequence[float], top_n: int | None = None) -> list[Ranked]:
    """``scores`` as ``Ranked`` s, best first (ties keep the caller's order), the first ``top_n`` only."""
    ranked = sorted((Ranked(i, s) for i, s in enumerate(scores)), key=lambda r: -r.score)
    return ranked[:top_n] if top_n is not None else ranked


def rerank(
    query: str,
    texts: Sequence[str],
    model: str | os.PathLike | Loaded,
    *,
    raw_scores: bool = False,
    top_n: int | None = None,
    batch_size: int = 32,
) -> list[Ranked]:
    """``texts`` ordered by a cross-encoder's relevance to ``query`` (``pair_scores``), best first."""
    scores = pair_scores([(query, t) for t in texts], model, raw_scores=raw_scores, batch_size=batch_size)
    return rank_scores(scores, top_n)


# ------------------------------------------------------------------------------------------ tag
@dataclass
class TaggedWord:
    word: str
    start: int
    end: int
    """Character span ``[start, end)`` in the input text."""
    tag: str
    score: float = 1.0
    """Probability of ``tag`` (softmax at the word's first sub-token); 1.0 for a word the model does not see."""


@dataclass
class Entity:
    type: str
    text: str
    """Exactly ``input[start:end]``."""
    start: int
    end: int


@dataclass
class TagResult:
    """Word-level tags and the entities decoded from them, with character offsets into the input."""

    text: str
    words: list[TaggedWord]
    entities: list[Entity]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def word_spans(tokenizer: Tokenizer, text: str) -> list[tuple[int, int]]:
    """Character spans of the words BERT's pre-tokenizer sees (split at whitespace and punctuation)."""
    encoding = tokenizer.encode(text, add_special_tokens=False)
    spans: list[tuple[int, int]] = []
    last = None
    for word, (start, end) in zip(encoding.word_ids, encoding.offsets):
        if word is None:
            continue
        if word == last:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
            last = word
    return [_without_spaces(text, start, end) for start, end in spans]


def _without_spaces(text: str, start: int, end: int) -> tuple[int, int]:
    """A word's span less the whitespace a byte-level token carries (``Ġsmith`` covers `` smith``)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


@torch.inference_mode()
def tag(
    texts: str | Sequence[str],
    model: str | os.PathLike | Loaded,
    *,
    batch_size: int = 32,
    window_stride: int | None = None,
) -> Any:
    """Named entities (or any word-level tags) in raw text, as ``TagResult`` per text.

    Words are what BERT's pre-tokenizer splits (whitespace and punctuation); each word's tag is read at its
    first sub-token; a text longer than the model's length is tagged in overlapping windows
    (``window_stride`` tokens between starts; default the model's, else 128) and every word keeps its
    prediction from the window where it has most context.
    """
    loaded = for_pipeline("tag", model)
    items = as_list(texts, "texts")
    check_texts(items)
    if any(isinstance(t, tuple) for t in items):
        raise BertkitError("tag takes single texts, not pairs")
    task = with_options(loaded.task, window_stride=window_stride)
    assert isinstance(task, NerTask)  # the token-classification head's task
    spans = [word_spans(loaded.tokenizer, text) for text in items]
    tagged = [i for i, s in enumerate(spans) if s]  # a text without words has nothing to tag
    examples = [NerExample([items[i][s:e] for s, e in spans[i]], None, "input", i) for i in tagged]
    features = task.featurize(examples, loaded.tokenizer, loaded.max_length).features if examples else []
    rows = run_model(loaded.model, task, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id)
    predictions = dict(zip(tagged, task.postprocess(examples, features, rows))) if examples else {}
    scores = dict(zip(tagged, task.word_scores(examples, features, rows))) if examples else {}
    results = []
    for i, text in enumerate(items):
        if i not in predictions:
            results.append(TagResult(text, [], []))
            continue
        prediction, word_span = predictions[i], spans[i]
        words = [TaggedWord(text[s:e], s, e, t, p) for (s, e), t, p in zip(word_span, prediction.tags, scores[i])]
        entities = []
        for entity in prediction.entities:
            start, end = word_span[entity["start"]][0], word_span[entity["end"] - 1][1]
            entities.append(Entity(entity["type"], text[start:end], start, end))
        results.append(TagResult(text, words, entities))
    return results[0] if isinstance(texts, str) else results


# ------------------------------------------------------------------------------------------ answer
@dataclass
class Answer:
    """An answer span of the context. ``text == context[start:end]``; empty with ``start`` and ``end`` None
    when the model (trained on SQuAD v2) says the context holds no answer."""

    text: str
    start: int | None
    end: int | None
    score: float
    """Probability among the n-best candidates (softmax of start + end logits), as in SQuAD's n-best file."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@torch.inference_mode()
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
    """Extractive question answering: the best span of ``context`` answering ``question``.

    Long contexts are cut into windows of ``max_length`` tokens whose starts are ``doc_stride`` tokens apart
    (SQuAD's pre- and post-processing, see ``bertkit.tasks.qa``). ``top_k=1`` gives an ``Answer`` per
    question, more a list of the ``top_k`` best. Questions keep their first ``max_query_length`` tokens.
    ``allow_no_answer`` (SQuAD v2 models): an empty answer when the null score beats the best span by more
    than ``null_threshold``. Left at ``None``, the window settings are those the model was fine-tuned with,
    else SQuAD's (384 tokens, stride 128, questions of at most 64 tokens and half the length, answers of at
    most 30 tokens).
    """
    if top_k < 1:
        raise BertkitError(f"--top-k (top_k) must be at least 1, got {top_k}")
    loaded = for_pipeline("answer", model)
    questions, contexts = paired_texts(question, context, "question", "context")
    seq_len = input_length(loaded, max_length)
    task = _answering_task(
        loaded,
        seq_len,
        max_query_length,
        doc_stride=doc_stride,
        n_best_size=top_k,
        max_answer_length=max_answer_length,
        version_2_with_negative=allow_no_answer,
        null_score_diff_threshold=null_threshold,
    )
    examples = [SquadExample(str(i), q, c, []) for i, (q, c) in enumerate(zip(questions, contexts))]
    features = task.featurize(examples, loaded.tokenizer, seq_len).features
    rows = run_model(loaded.model, task, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id)
    predictions = task.postprocess(examples, features, rows)
    results = []
    for example in examples:
        answers = _ranked_answers(predictions, example.qid, allow_no_answer)
        results.append(answers[0] if top_k == 1 else answers[:top_k])
    return results[0] if isinstance(question, str) else results


def _answering_task(
    loaded: Loaded, seq_len: int, max_query_length: int | None, *, n_best_size: int, **options: Any
) -> QuestionAnsweringTask:
    """The model's QA task with the caller's window options; the n-best list holds at least ``n_best_size``."""
    saved = loaded.task
    assert isinstance(saved, QuestionAnsweringTask)
    saved_options = loaded.settings.task_options if loaded.settings is not None else {}
    if max_query_length is not None:  # a short model keeps at least half of its length for the context
        query_length = min(max_query_length, seq_len // 2)
    elif "max_query_length" in saved_options:  # as fine-tuned (and as `bertkit predict` reads)
        query_length = saved.max_query_length
    else:
        query_length = min(saved.max_query_length, seq_len // 2)
    task = with_options(
        saved, max_query_length=query_length, n_best_size=max(saved.n_best_size, n_best_size), **options
    )
    assert isinstance(task, QuestionAnsweringTask)
    return task


def _ranked_answers(predictions: SquadPredictions, qid: str, allow_no_answer: bool) -> list[Answer]:
    """A question's n-best answers, best first: the null answer first when the threshold chose it, else only
    spans; one empty answer when there is none."""
    answers = []
    for entry in predictions.nbest[qid]:
        if entry["text"] == "":  # SQuAD v2's null answer
            answers.append(Answer("", None, None, float(entry["probability"])))
        elif entry["start_char"] is not None:  # None: Google's "empty" placeholder when no span is valid
            answers.append(Answer(entry["text"], entry["start_char"], entry["end_char"], float(entry["probability"])))
    if allow_no_answer and predictions.predictions[qid] == "":
        answers.sort(key=lambda a: a.text != "")  # the thresholded decision comes first
    else:
        answers = [a for a in answers if a.text]
    return answers or [Answer("", None, None, 0.0)]
