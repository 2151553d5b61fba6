"""Extractive question answering on SQuAD JSON (v1.1, and v2.0 with unanswerable questions).

Pre-processing follows Google BERT's ``run_squad.py``, with the tokenizer's character offsets in place of its
whitespace/word alignment:

- The question keeps its first ``max_query_length`` (64) tokens.
- A context longer than ``max_seq_length - len(question) - 3`` tokens is cut into windows (doc spans).
  ``doc_stride`` is the **step between the starts of consecutive windows** (Google's meaning), *not* the
  overlap (Hugging Face ``run_qa`` passes its ``doc_stride`` as the tokenizer's overlap). With 384/128 and a
  64-token question the windows hold 317 tokens and overlap by 189.
- A feature is ``[CLS] question [SEP] window [SEP]``, segments 0 then 1. Each window token remembers its
  character span in the original context and whether this window gives it the most context
  (``min(left, right) + 0.01 * window length``, best over the windows holding it).
- Training target: the tokens that overlap the answer's characters. A window that does not hold the whole
  answer, and every window of an unanswerable (v2) question, points at ``[CLS]`` (0, 0).
- Training questions whose ``answer_start`` does not point at their answer text are skipped and counted
  (the reference convention; ``strict=True`` raises instead). Training uses the first answer.

Post-processing follows Google's ``write_predictions``: the ``n_best_size`` best starts and ends of every
window, pairs kept only inside the window's context, start at a max-context token, ``start <= end`` and at
most ``max_answer_length`` tokens; score = start + end logit. The answer text is the exact slice of the
original context between the first token's start and the last token's end offset. For v2 the null score is
the smallest ``[CLS]`` start + end over the windows; it competes in the n-best, and the prediction is ``""``
when ``null score - best non-null score > null_score_diff_threshold``. When no non-null candidate exists at
all (Google's crash, https://github.com/google-research/bert/issues/476) the prediction is ``""`` and its null odds are ``NO_SPAN_ODDS``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bertkit.errors import ConfigError, DataError
from bertkit.features import Feature
from bertkit.features.padding import pad_and_stack, to_numpy_rows
from bertkit.features.windows import max_context, window_starts
from bertkit.io import write_json
from bertkit.tasks.base import Featurized, HeadTraining, Read
from bertkit.tasks.qa import metrics
from bertkit.tasks.readers import ReadReport, read_text_file
from bertkit.tasks.readers.table import only_format

if TYPE_CHECKING:  # the task's inference side runs without torch (bertkit[onnx])
    import torch

logger = logging.getLogger(__name__)

NO_SPAN_ODDS = 1e6
"""Null odds written for a question without any valid non-null span: it is "no answer" at any threshold."""

_Candidate = tuple[float, float, float, str, tuple[int, int] | None]
"""An answer candidate: (score, start logit, end logit, text, character span in the context)."""


@dataclass
class SquadExample:
    """One question with its context and gold answers (``{"text", "answer_start"}``)."""

    qid: str
    question: str
    context: str
    answers: list[dict[str, Any]]
    is_impossible: bool = False
    title: str = ""

    @property
    def answer_texts(self) -> list[str]:
        return [a["text"] for a in self.answers]


@dataclass
class SquadPredictions:
    """The three official outputs: best text per question, the n-best lists, and v2's null odds."""

    predictions: dict[str, str]
    nbest: dict[str, list[dict[str, Any]]]
    null_odds: dict[str, float] | None = None
    best_non_null: dict[str, str] | None = None
    """v2: the best non-null text per question (``""`` if none), what the official threshold search scores."""


@dataclass
class _Window:
    """One question's tokens and its context's tokens with their character spans, before windowing."""

    example_index: int
    question: list[int]
    ids: list[int]
    offsets: list[tuple[int, int]]


def read_squad(
    path: str | os.PathLike, *, training: bool = False, strict: bool = False
) -> tuple[list[SquadExample], int, bool]:
    """Examples of a SQuAD JSON file, how many training questions were skipped, and whether it is v2.

    ``training=True`` checks the first answer of each answerable question against its context and skips
    (counts) misaligned ones, or raises when ``strict``. Structure errors name the file and the JSON path.
    """
    path = Path(path)
    text = read_text_file(path)
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    try:
        root = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(
            f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno}); --task qa reads SQuAD JSON "
            "(one object with a 'data' list of articles, as SQuAD v1.1/v2.0's train and dev files)"
        ) from None
    if not isinstance(root, dict) or not isinstance(root.get("data"), list):
        raise DataError(f"{path}: not SQuAD JSON (expected an object with a 'data' list of articles)")
    version_2 = str(root.get("version", "")).lstrip("v").startswith("2")
    examples: list[SquadExample] = []
    skipped = 0
    for a, article in enumerate(root["data"]):
        for p, paragraph in enumerate(_get(path, article, "paragraphs", list, f"data[{a}]")):
            where = f"data[{a}].paragraphs[{p}]"
            context = _get(path, paragraph, "context", str, where)
            for q, qa in enumerate(_get(path, paragraph, "qas", list, where)):
                where_q = f"{where}.qas[{q}]"
                qid = str(_get(path, qa, "id", (str, int), where_q))
                question = _get(path, qa, "question", str, where_q)
                answers = _get(path, qa, "answers", list, where_q) if "answers" in qa or training else []
                impossible = bool(qa.get("is_impossible", False))
                version_2 = version_2 or impossible
                for k, answer in enumerate(answers):
                    _get(path, answer, "text", str, f"{where_q}.answers[{k}]")
                    _get(path, answer, "answer_start", int, f"{where_q}.answers[{k}]")
                if training and not impossible:
                    problem = _answer_problem(context, answers)
                    if problem:
                        if strict:
                            raise DataError(f"{path}: question {qid!r} ({where_q}): {problem}")
                        skipped += 1
                        continue
                examples.append(
                    SquadExample(qid, question, context, answers, impossible, str(article.get("title", "")))
                )
    if not examples:
        raise DataError(f"{path}: no usable questions")
    if skipped:
        logger.warning(
            "%s: skipped %d of %d training questions whose answer_start does not match the answer text",
            path,
            skipped,
            skipped + len(examples),
        )
    return examples, skipped, version_2


def _get(path: Path, obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise DataError(f"{path}: {where} has no {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{path}: {where}.{key} has the wrong type ({type(value).__name__})")
    return value


def _answer_problem(context: str, answers: list[dict[str, Any]]) -> str | None:
    if not answers:
        return "an answerable training question has no answer"
    text, start = answers[0]["text"], answers[0]["answer_start"]
    if not text.strip():
        return "the answer text is empty"
    if context[start : start + len(text)] != text:
        return f"answer_start {start} points at {context[start : start + len(text)]!r}, not at {text!r}"
    return None


@dataclass
class QuestionAnsweringTask(HeadTraining):
    """SQuAD v1.1/v2.0 extractive QA; head ``BertForQuestionAnswering``."""

    doc_stride: int = 128
    """Tokens between the starts of consecutive context windows (the step, not the overlap)."""
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    version_2_with_negative: bool | None = None
    """``None``: set by ``read`` when a file says version 2 or has ``is_impossible`` questions."""
    strict: bool = False
    """Raise on a misaligned training answer instead of skipping it."""
    main_metric: str = "f1"

    name: str = field(default="qa", init=False)
    head: str = field(default="BertForQuestionAnswering", init=False)
    batch_by_length: bool = field(default=True, init=False)
    model_input_names: tuple[str, ...] = field(
        default=("input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions"), init=False
    )

    def __post_init__(self) -> None:
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")

    def read(
        self,
        path: str | os.PathLike,
        *,
        labeled: bool = True,
        training: bool = False,
        format: str | None = None,
        header: bool | None = None,
    ) -> Read[SquadExample]:
        """Examples of a SQuAD file; ``training=True`` checks and skips misaligned answers (counted in
        ``dropped``)."""
        only_format(format, "squad", "qa")
        examples, skipped, version_2 = read_squad(path, training=training, strict=self.strict)
        report = ReadReport(str(path), "squad", unit="questions", used=len(examples))
        report.skip("answers not found at answer_start", skipped)
        if self.version_2_with_negative is None and version_2:
            self.version_2_with_negative = True
        return Read(examples, report, dropped=skipped)

    def fit_labels(self, examples: Sequence[SquadExample]) -> None:
        if self.version_2_with_negative is None:
            self.version_2_with_negative = any(e.is_impossible for e in examples)

    def describe_labels(self, examples: Sequence[SquadExample]) -> None:
        """Nothing to say: answers are spans of the context, not labels."""
        return None

    def config_updates(self) -> dict[str, Any]:
        return {"num_labels": 2, "id2label": None, "problem_type": None}

    def load_config(self, config: Any) -> None:
        """Nothing to restore: spans need no label names."""

    # ------------------------------------------------------------------------------------ features

    def featurize(
        self, examples: Sequence[SquadExample], tokenizer: Any, max_seq_length: int, *, training: bool = False
    ) -> Featurized:
        """Windows of every example. ``training=True`` adds ``start_positions``/``end_positions`` and drops
        (counts) a question whose answer covers no token; ``truncated`` counts the questions cut at
        ``max_query_length`` (contexts are split into windows, never cut).

        Bookkeeping keys: ``example_index``, ``context_start`` (position of the first window token),
        ``offsets`` (character span in the context of each window token) and ``max_context`` (per token).
        """
        room = max_seq_length - min(self.max_query_length, max_seq_length) - 3
        if room < 1:
            raise ConfigError(
                f"--max-seq-length {max_seq_length} leaves no room for the context after a "
                f"{self.max_query_length}-token question; raise it, or lower max_query_length in the config file"
            )
        contexts = list(dict.fromkeys(e.context for e in examples))
        encoded = dict(zip(contexts, tokenizer.encode_batch(contexts, add_special_tokens=False)))
        questions = tokenizer.ids_batch([e.question for e in examples])
        features: list[Feature] = []
        uncovered = 0
        for index, (example, question) in enumerate(zip(examples, questions)):
            context = encoded[example.context]
            offsets = [tuple(o) for o in context.offsets]
            target = None
            if training and not example.is_impossible:
                target = _answer_tokens(offsets, example.answers[0])
                if target is None:
                    uncovered += 1
                    continue
            window = _Window(index, question[: self.max_query_length], list(context.ids), offsets)
            features += self._window_features(window, tokenizer, max_seq_length, target, training)
        if uncovered:
            logger.warning("skipped %d training questions whose answer covers no token", uncovered)
        truncated = sum(len(q) > self.max_query_length for q in questions)
        return Featurized(features, truncated, dropped=uncovered)

    def _window_features(
        self,
        window: _Window,
        tokenizer: Any,
        max_seq_length: int,
        target: tuple[int, int] | None,
        training: bool,
    ) -> list[Feature]:
        """``[CLS] question [SEP] window [SEP]`` for each window of one question's context; in training, the
        answer's positions where the window holds the whole answer, else ``[CLS]`` (0, 0)."""
        question, ids = window.question, window.ids
        width = max_seq_length - len(question) - 3
        spans = [(s, min(width, len(ids) - s)) for s in window_starts(len(ids), width, self.doc_stride)]
        best = max_context(len(ids), spans)
        context_start = len(question) + 2
        features: list[Feature] = []
        for number, (start, length) in enumerate(spans):
            input_ids = [tokenizer.cls_id, *question, tokenizer.sep_id, *ids[start : start + length], tokenizer.sep_id]
            feature: Feature = {
                "input_ids": input_ids,
                "token_type_ids": [0] * context_start + [1] * (length + 1),
                "attention_mask": [1] * len(input_ids),
                "example_index": window.example_index,
                "context_start": context_start,
                "offsets": window.offsets[start : start + length],
                "max_context": [best[t] == number for t in range(start, start + length)],
            }
            if training:
                s = e = 0
                if target is not None and start <= target[0] and target[1] < start + length:
                    s, e = target[0] - start + context_start, target[1] - start + context_start
                feature["start_positions"], feature["end_positions"] = s, e
            features.append(feature)
        return features

    def collate(self, features: Sequence[Feature], pad_id: int = 0) -> dict[str, torch.Tensor]:
        names = [n for n in self.model_input_names if n in features[0]]
        return pad_and_stack(features, names, {"input_ids": pad_id})

    def loss_normalizer(self, features: Sequence[Feature], micro_batch_size: int) -> float | None:
        """``None``: the loss is one value per sequence (its answer span), averaged over the batch."""
        return None

    def unbatch(self, outputs: Any, batch: Mapping[str, torch.Tensor]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per-feature ``(start_logits, end_logits)``, padding cut off."""
        get = outputs.__getitem__ if isinstance(outputs, Mapping) else outputs.__getattribute__
        lengths = batch["attention_mask"].sum(1).tolist()
        start, end = to_numpy_rows(get("start_logits"), lengths), to_numpy_rows(get("end_logits"), lengths)
        return list(zip(start, end))

    # ------------------------------------------------------------------------------------ predictions

    def postprocess(
        self,
        examples: Sequence[SquadExample],
        features: Sequence[Feature],
        rows: Sequence[tuple[np.ndarray, np.ndarray]],
    ) -> SquadPredictions:
        if len(features) != len(rows):
            raise ValueError(f"{len(features)} features but {len(rows)} output rows")
        by_example: dict[int, list[int]] = {}
        for i, feature in enumerate(features):
            by_example.setdefault(feature["example_index"], []).append(i)
        version_2 = bool(self.version_2_with_negative)
        out = SquadPredictions({}, {}, {} if version_2 else None, {} if version_2 else None)
        for index, example in enumerate(examples):
            if index not in by_example:
                raise ValueError(f"no features for question {example.qid!r}")
            windows = [(features[i], rows[i]) for i in by_example[index]]
            self._answer(example, windows, version_2, out)
        return out

    def _answer(
        self,
        example: SquadExample,
        windows: Sequence[tuple[Feature, tuple[np.ndarray, np.ndarray]]],
        version_2: bool,
        out: SquadPredictions,
    ) -> None:
        """One question's prediction, n-best list and (v2) null odds, written into ``out``."""
        candidates, null = self._candidates(example.context, windows, version_2)
        nbest = self._nbest(candidates, null)
        probabilities = _softmax([s + e for s, e, _, _ in nbest])
        # Google's entry keys, plus the answer's character span in the context (None for null/"empty")
        out.nbest[example.qid] = [
            {
                "text": text,
                "probability": p,
                "start_logit": s,
                "end_logit": e,
                "start_char": span[0] if span else None,
                "end_char": span[1] if span else None,
            }
            for (s, e, text, span), p in zip(nbest, probabilities)
        ]
        if null is None:
            out.predictions[example.qid] = nbest[0][2]
            return
        assert out.null_odds is not None and out.best_non_null is not None  # a v2 postprocess fills both
        best_non_null = next((entry for entry in nbest if entry[2]), None)
        if best_non_null is None:  # Google's crash (google-research/bert/issues/476): only the null answer is left
            out.null_odds[example.qid] = NO_SPAN_ODDS
            out.best_non_null[example.qid] = out.predictions[example.qid] = ""
            return
        odds = float(null[0] - best_non_null[0] - best_non_null[1])
        out.null_odds[example.qid] = odds
        out.best_non_null[example.qid] = best_non_null[2]
        out.predictions[example.qid] = "" if odds > self.null_score_diff_threshold else best_non_null[2]

    def _candidates(
        self,
        context: str,
        windows: Sequence[tuple[Feature, tuple[np.ndarray, np.ndarray]]],
        version_2: bool,
    ) -> tuple[list[_Candidate], tuple[float, float, float] | None]:
        """Every window's valid spans, best first, with (v2) the null answer: the lowest null score over the
        question's windows, with its start and end logits."""
        candidates: list[_Candidate] = []
        null: tuple[float, float, float] | None = None
        for feature, row in windows:
            start_logits, end_logits = (np.asarray(x, dtype=np.float64) for x in row)
            if version_2:
                score = float(start_logits[0] + end_logits[0])
                if null is None or score < null[0]:
                    null = (score, float(start_logits[0]), float(end_logits[0]))
            candidates += self._spans(context, feature, start_logits, end_logits)
        if null is not None:
            candidates.append((null[0], null[1], null[2], "", None))
        candidates.sort(key=lambda c: c[0], reverse=True)
        return candidates, null

    def _nbest(
        self, candidates: Sequence[_Candidate], null: tuple[float, float, float] | None
    ) -> list[tuple[float, float, str, tuple[int, int] | None]]:
        """The ``n_best_size`` best distinct texts as (start logit, end logit, text, span); v2 always keeps
        the null answer, and an empty list gets Google's placeholder ``"empty"``."""
        nbest: list[tuple[float, float, str, tuple[int, int] | None]] = []
        seen: set[str] = set()
        for _, start_logit, end_logit, text, span in candidates:
            if len(nbest) >= self.n_best_size:
                break
            if text in seen:
                continue
            seen.add(text)
            nbest.append((start_logit, end_logit, text, span))
        if null is not None and "" not in seen:
            nbest.append((null[1], null[2], "", None))
        if not nbest:
            nbest.append((0.0, 0.0, "empty", None))  # Google's placeholder when no span is valid
        return nbest

    def _spans(
        self, context: str, feature: Feature, start_logits: np.ndarray, end_logits: np.ndarray
    ) -> list[tuple[float, float, float, str, tuple[int, int]]]:
        """Valid (score, start logit, end logit, text, character span) spans of one window from its n-best
        starts and ends."""
        first = feature["context_start"]
        length = len(feature["offsets"])
        starts = np.argsort(-start_logits, kind="stable")[: self.n_best_size]
        ends = np.argsort(-end_logits, kind="stable")[: self.n_best_size]
        spans = []
        for s in starts.tolist():
            if not first <= s < first + length or not feature["max_context"][s - first]:
                continue
            for e in ends.tolist():
                if not first <= e < first + length or e < s or e - s + 1 > self.max_answer_length:
                    continue
                char_start, char_end = feature["offsets"][s - first][0], feature["offsets"][e - first][1]
                spans.append(
                    (
                        float(start_logits[s] + end_logits[e]),
                        float(start_logits[s]),
                        float(end_logits[e]),
                        context[char_start:char_end],
                        (char_start, char_end),
                    )
                )
        return spans

    def evaluate(self, predictions: SquadPredictions, examples: Sequence[SquadExample]) -> dict[str, float]:
        """The official SQuAD scores: v1.1 ``exact_match``/``f1``, or v2.0's with the null-odds threshold search."""
        answers = {e.qid: e.answer_texts for e in examples}
        if self.version_2_with_negative:
            if predictions.best_non_null is None or predictions.null_odds is None:
                raise ValueError("SQuAD v2 scoring needs the null odds and best non-null texts of a v2 postprocess")
            # Scoring the best non-null texts with the null odds above the threshold counted as "no answer"
            # gives the same exact/f1 as the thresholded predictions, and lets the official threshold search
            # (best_exact, best_f1 and their thresholds) see the answers the threshold hid.
            return metrics.squad_evaluate(
                predictions.best_non_null,
                answers,
                version="2.0",
                na_probs=predictions.null_odds,
                na_prob_threshold=self.null_score_diff_threshold,
            )
        return metrics.squad_evaluate(predictions.predictions, answers, version="1.1")

    def prediction_rows(
        self,
        examples: Sequence[SquadExample],
        features: Sequence[Feature],
        rows: Sequence[tuple[np.ndarray, np.ndarray]],
        predictions: SquadPredictions,
    ) -> list[dict[str, Any]]:
        """``{index, id, question, answer, score, nbest}`` per question; ``score``: the answer's n-best
        probability, ``nbest``: the five best candidates."""
        out = []
        for i, example in enumerate(examples):
            nbest = predictions.nbest[example.qid]
            answer = predictions.predictions[example.qid]
            score = next((c["probability"] for c in nbest if c["text"] == answer), 0.0)
            out.append(
                {
                    "index": i,
                    "id": example.qid,
                    "question": example.question,
                    "answer": answer,
                    "score": score,
                    "nbest": nbest[:5],
                }
            )
        return out

    def write_predictions(
        self,
        predictions: SquadPredictions,
        directory: str | os.PathLike,
        examples: Sequence[SquadExample] | None = None,
    ) -> list[Path]:
        """``predictions.json`` and ``nbest_predictions.json`` in the official formats, and ``null_odds.json``
        (question id -> null score minus best span score) for v2."""
        directory = Path(directory)
        paths = [
            write_json(predictions.predictions, directory / "predictions.json"),
            write_json(predictions.nbest, directory / "nbest_predictions.json"),
        ]
        if predictions.null_odds is not None:
            paths.append(write_json(predictions.null_odds, directory / "null_odds.json"))
        return paths


def _answer_tokens(offsets: Sequence[tuple[int, int]], answer: Mapping[str, Any]) -> tuple[int, int] | None:
    """First and last context token overlapping the answer's characters, or ``None`` if no token does."""
    char_start = answer["answer_start"]
    char_end = char_start + len(answer["text"])
    covered = [t for t, (s, e) in enumerate(offsets) if s < char_end and e > char_start]
    return (covered[0], covered[-1]) if covered else None


def _softmax(scores: Sequence[float]) -> list[float]:
    array = np.asarray(scores, dtype=np.float64)
    array = np.exp(array - array.max())
    return (array / array.sum()).tolist()
