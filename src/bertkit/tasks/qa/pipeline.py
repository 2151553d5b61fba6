"""The question-answering family's inference pipeline: ``answer`` (the best spans of a context answering a
question), with SQuAD's windows and Google BERT's post-processing.

Window settings left at ``None`` are those the model was fine-tuned with; ``bertkit.answer`` loads a model
directory and calls it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bertkit.errors import BertkitError
from bertkit.features.runner import run_model
from bertkit.tasks.pipeline import LoadedModel, input_length, paired_texts, with_options
from bertkit.tasks.qa.task import QuestionAnsweringTask, SquadExample, SquadPredictions


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


def answer(
    question: str | Sequence[str],
    context: str | Sequence[str],
    loaded: LoadedModel,
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
    check_top_k(top_k)
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
    from bertkit.tasks.prepare import featurize  # a floor up: it reads the family registry

    features = featurize(task, examples, loaded.tokenizer, seq_len, report=True).features
    rows = run_model(loaded.model, task, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id)
    predictions = task.postprocess(examples, features, rows)
    results = []
    for example in examples:
        answers = _ranked_answers(predictions, example.qid, allow_no_answer)
        results.append(answers[0] if top_k == 1 else answers[:top_k])
    return results[0] if isinstance(question, str) else results


def check_top_k(top_k: int) -> None:
    """Refuse, with one line, a ``top_k`` below 1."""
    if top_k < 1:
        raise BertkitError(f"--top-k (top_k) must be at least 1, got {top_k}")


def _answering_task(
    loaded: LoadedModel, seq_len: int, max_query_length: int | None, *, n_best_size: int, **options: Any
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
