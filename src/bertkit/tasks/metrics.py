"""Evaluation metrics, defined as the benchmarks define them.

- GLUE: accuracy, binary F1, Matthews correlation, Pearson and Spearman correlation (numpy only).
- NER: entity-level precision/recall/F1 with the chunk logic of CoNLL's ``conlleval`` script (exact span and
  type; IOB1, IOB2, IOE and BIOES tags all decode through the same start/end-of-chunk rules).
- Tags that are not chunked (parts of speech): token accuracy, per-tag precision/recall/F1 and their macro mean.
- SQuAD: exact match and F1 normalised and scored exactly as the official v1.1 and v2.0 evaluation scripts.

Scores are fractions in [0, 1] except SQuAD's, which are percentages as the official scripts print them.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Iterable, Mapping, Sequence, Sized
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------------------------- GLUE


def accuracy(predictions: Sequence, references: Sequence) -> float:
    """Fraction of predictions equal to their reference."""
    _check_lengths(predictions, references)
    return float(np.mean([p == r for p, r in zip(predictions, references)]))


def f1_binary(predictions: Sequence[Any], references: Sequence[Any], positive: Any = 1) -> float:
    """F1 of the ``positive`` class (GLUE's MRPC/QQP F1). 0.0 when there are no true positives."""
    _check_lengths(predictions, references)
    tp = sum(p == positive and r == positive for p, r in zip(predictions, references))
    fp = sum(p == positive and r != positive for p, r in zip(predictions, references))
    fn = sum(p != positive and r == positive for p, r in zip(predictions, references))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def matthews_corrcoef(predictions: Sequence, references: Sequence) -> float:
    """Matthews correlation coefficient, multi-class form (Gorodkin's R_K); 0.0 when undefined (CoLA's metric)."""
    _check_lengths(predictions, references)
    classes = sorted(set(predictions) | set(references), key=repr)
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    for p, r in zip(predictions, references):
        confusion[index[r], index[p]] += 1
    t = confusion.sum(axis=1)  # true occurrences per class
    p = confusion.sum(axis=0)  # predicted occurrences per class
    c = np.trace(confusion)
    s = confusion.sum()
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return 0.0 if denominator == 0 else float((c * s - t @ p) / denominator)


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Pearson correlation; 0.0 when either side is constant (undefined)."""
    _check_lengths(x, y)
    a = np.asarray(x, dtype=np.float64) - np.mean(x)
    b = np.asarray(y, dtype=np.float64) - np.mean(y)
    denominator = np.sqrt((a @ a) * (b @ b))
    return 0.0 if denominator == 0 else float(a @ b / denominator)


def _average_ranks(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their positions (as scipy's ``rankdata``)."""
    array = np.asarray(values, dtype=np.float64)
    order = np.argsort(array, kind="mergesort")
    ranks = np.empty(len(array), dtype=np.float64)
    sorted_values = array[order]
    start = 0
    while start < len(array):
        end = start
        while end + 1 < len(array) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation: Pearson on average ranks (ties handled as scipy does)."""
    _check_lengths(x, y)
    return pearson(_average_ranks(x), _average_ranks(y))


def _check_lengths(a: Sized, b: Sized) -> None:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} predictions but {len(b)} references")
    if not len(a):
        raise ValueError("no predictions to score")


# ------------------------------------------------------------------------------------ NER (conlleval)

Chunk = tuple[str, int, int]
"""An entity: (type, first word index, last word index + 1)."""


def _split_tag(tag: str) -> tuple[str, str]:
    """``B-PER`` -> (``B``, ``PER``); ``O`` -> (``O``, ``""``). A bare type without prefix counts as ``I``."""
    if tag in ("O", ""):
        return "O", ""
    if len(tag) >= 2 and tag[1] in "-_" and tag[0] in "BIESO[]":
        return tag[0], tag[2:]
    return "I", tag


def _end_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's endOfChunk: does a chunk end between the previous word and this one?"""
    return (
        prev_tag in ("E", "S", "]")
        or (prev_tag == "B" and tag in ("B", "S", "O"))
        or (prev_tag == "I" and tag in ("B", "S", "O"))
        or (prev_tag not in ("O", ".") and prev_type != type_)
    )


def _start_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's startOfChunk: does a chunk start at this word?"""
    return (
        tag in ("B", "S", "[")
        or (prev_tag in ("E", "S", "O") and tag in ("E", "I"))
        or (tag not in ("O", ".") and prev_type != type_)
    )


def get_entities(tags: Sequence[str]) -> list[Chunk]:
    """Entity chunks of one sentence's tags, decoded exactly as ``conlleval`` does.

    Works for IOB1 (``I-X`` starts a chunk unless it continues one of the same type), IOB2 (``B-X`` starts),
    IOE and BIOES (``E-X``/``S-X`` end a chunk). ``["B-PER", "I-PER", "O", "I-LOC"]`` gives
    ``[("PER", 0, 2), ("LOC", 3, 4)]``.
    """
    chunks: list[Chunk] = []
    prev_tag, prev_type = "O", ""
    start: int | None = None
    for i, raw in enumerate([*tags, "O"]):  # the sentinel closes a chunk at the sentence end
        tag, type_ = _split_tag(raw)
        if start is not None and _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, start, i))
            start = None
        if _start_of_chunk(prev_tag, tag, prev_type, type_) and i < len(tags):
            start = i
        prev_tag, prev_type = tag, type_
    return chunks


def entity_scores(predicted: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> dict[str, float]:
    """conlleval's scores over sentences of tags: entity-level precision, recall, F1 and token accuracy.

    An entity counts as correct only if its type, first and last word all match. Per-type figures come as
    ``precision_PER``, ``recall_PER``, ``f1_PER``, ``support_PER`` (gold count).
    """
    correct: collections.Counter[str] = collections.Counter()
    n_pred: collections.Counter[str] = collections.Counter()
    n_gold: collections.Counter[str] = collections.Counter()
    tokens = tokens_correct = 0
    for sentence_pred, sentence_gold in zip(predicted, gold, strict=True):
        if len(sentence_pred) != len(sentence_gold):
            raise ValueError(f"sentence with {len(sentence_gold)} gold tags got {len(sentence_pred)} predictions")
        pred_chunks, gold_chunks = set(get_entities(sentence_pred)), set(get_entities(sentence_gold))
        for chunk in pred_chunks:
            n_pred[chunk[0]] += 1
        for chunk in gold_chunks:
            n_gold[chunk[0]] += 1
        for chunk in pred_chunks & gold_chunks:
            correct[chunk[0]] += 1
        tokens += len(sentence_gold)
        tokens_correct += sum(p == g for p, g in zip(sentence_pred, sentence_gold))

    def prf(c: int, p: int, g: int) -> tuple[float, float, float]:
        precision = c / p if p else 0.0
        recall = c / g if g else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    scores: dict[str, float] = {}
    precision, recall, f1 = prf(sum(correct.values()), sum(n_pred.values()), sum(n_gold.values()))
    scores.update(precision=precision, recall=recall, f1=f1, accuracy=tokens_correct / tokens if tokens else 0.0)
    for type_ in sorted(set(n_pred) | set(n_gold)):
        p, r, f = prf(correct[type_], n_pred[type_], n_gold[type_])
        scores.update(
            {f"precision_{type_}": p, f"recall_{type_}": r, f"f1_{type_}": f, f"support_{type_}": float(n_gold[type_])}
        )
    return scores


_CHUNK_TAG = re.compile(r"[BIESLU]-.+")


def is_chunked(tags: Iterable[str]) -> bool:
    """Whether tags are chunk tags (IOB1, IOB2, IOE, BIOES/BILOU: ``O`` or a ``B-``/``I-``/``E-``/``S-`` prefix
    on a type), so that entities and their F1 mean something; ``NOUN`` or ``VBZ`` are one label per word."""
    return all(tag == "O" or _CHUNK_TAG.fullmatch(tag) for tag in tags)


def token_scores(predicted: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> dict[str, float]:
    """Word-level scores of tags that are not chunked (parts of speech): ``accuracy`` (the headline),
    ``macro_f1`` over the gold tags, and per tag ``precision_NOUN``, ``recall_NOUN``, ``f1_NOUN`` and
    ``support_NOUN`` (gold words), each word counted once, as scikit-learn's ``classification_report`` does."""
    pairs = [
        (p, g)
        for sentence_pred, sentence_gold in zip(predicted, gold, strict=True)
        for p, g in zip(sentence_pred, _same_length(sentence_pred, sentence_gold), strict=True)
    ]
    n_pred = collections.Counter(p for p, _ in pairs)
    n_gold = collections.Counter(g for _, g in pairs)
    correct = collections.Counter(g for p, g in pairs if p == g)
    scores: dict[str, float] = {"accuracy": sum(correct.values()) / len(pairs) if pairs else 0.0}
    per_tag_f1 = []
    for tag in sorted(set(n_pred) | set(n_gold)):
        precision = correct[tag] / n_pred[tag] if n_pred[tag] else 0.0
        recall = correct[tag] / n_gold[tag] if n_gold[tag] else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        if n_gold[tag]:
            per_tag_f1.append(f1)
        scores.update(
            {
                f"precision_{tag}": precision,
                f"recall_{tag}": recall,
                f"f1_{tag}": f1,
                f"support_{tag}": float(n_gold[tag]),
            }
        )
    scores["macro_f1"] = sum(per_tag_f1) / len(per_tag_f1) if per_tag_f1 else 0.0
    return scores


def _same_length(predicted: Sequence[str], gold: Sequence[str]) -> Sequence[str]:
    if len(predicted) != len(gold):
        raise ValueError(f"sentence with {len(gold)} gold tags got {len(predicted)} predictions")
    return gold


# ----------------------------------------------------------------------------------------------- SQuAD

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """The official scripts' normalisation: lowercase, drop ASCII punctuation, drop a/an/the, squeeze spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_exact(prediction: str, truth: str) -> float:
    """1.0 if the normalised strings are equal (same in v1.1 and v2.0)."""
    return float(normalize_answer(prediction) == normalize_answer(truth))


def squad_f1(prediction: str, truth: str, version: str = "2.0") -> float:
    """Bag-of-tokens F1 of the normalised strings.

    v2.0: if either side normalises to no tokens, 1.0 iff both do (scores a correct "no answer").
    v1.1: no such rule, so an empty side always scores 0.0.
    """
    pred_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(truth).split()
    if version.startswith("2") and (not pred_tokens or not truth_tokens):
        return float(pred_tokens == truth_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(truth_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_evaluate(
    predictions: Mapping[str, str],
    answers: Mapping[str, Sequence[str]],
    *,
    version: str = "1.1",
    na_probs: Mapping[str, float] | None = None,
    na_prob_threshold: float = 1.0,
) -> dict[str, float]:
    """Score ``predictions`` (question id -> text) against gold ``answers`` (id -> list of answer texts).

    v1.1 (``evaluate-v1.1.py``): ``exact_match`` and ``f1`` in percent, max over the gold answers; a question
    without a prediction scores 0. v2.0 (``evaluate-v2.0.py``): ``exact``, ``f1``, ``total`` and the
    ``HasAns_*`` / ``NoAns_*`` splits; gold answers that normalise to nothing are dropped and a question with
    none left is unanswerable (its only gold is ``""``). With ``na_probs`` (the null odds), predictions whose
    odds exceed ``na_prob_threshold`` count as "no answer", and ``best_exact``/``best_f1`` with their
    thresholds are added, as the official script's threshold search.
    """
    if version.startswith("1"):
        em = f1 = 0.0
        for qid, truths in answers.items():
            if qid not in predictions:
                continue  # the official script prints a warning and scores 0
            em += max(squad_exact(predictions[qid], t) for t in truths)
            f1 += max(squad_f1(predictions[qid], t, version="1.1") for t in truths)
        total = len(answers)
        return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total}

    exact_raw: dict[str, float] = {}
    f1_raw: dict[str, float] = {}
    has_answer: dict[str, bool] = {}
    for qid, truths in answers.items():
        gold = [t for t in truths if normalize_answer(t)] or [""]
        has_answer[qid] = gold != [""]
        if qid not in predictions:
            continue
        exact_raw[qid] = max(squad_exact(predictions[qid], t) for t in gold)
        f1_raw[qid] = max(squad_f1(predictions[qid], t, version="2.0") for t in gold)

    def thresholded(raw: dict[str, float]) -> dict[str, float]:
        if na_probs is None:
            return raw
        return {
            qid: (float(not has_answer[qid]) if na_probs[qid] > na_prob_threshold else score)
            for qid, score in raw.items()
        }

    exact_scores, f1_scores = thresholded(exact_raw), thresholded(f1_raw)

    def mean(scores: dict[str, float], ids: list[str]) -> float:
        return 100.0 * sum(scores.get(q, 0.0) for q in ids) / len(ids)

    all_ids = list(answers)
    result = {"exact": mean(exact_scores, all_ids), "f1": mean(f1_scores, all_ids), "total": float(len(all_ids))}
    for name, ids in (
        ("HasAns", [q for q in all_ids if has_answer[q]]),
        ("NoAns", [q for q in all_ids if not has_answer[q]]),
    ):
        if ids:
            result.update(
                {
                    f"{name}_exact": mean(exact_scores, ids),
                    f"{name}_f1": mean(f1_scores, ids),
                    f"{name}_total": float(len(ids)),
                }
            )
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, threshold = _best_threshold(predictions, raw, na_probs, has_answer)
            result[f"best_{name}"], result[f"best_{name}_thresh"] = best, threshold
    return result


def _best_threshold(
    predictions: Mapping[str, str],
    raw: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_answer: Mapping[str, bool],
) -> tuple[float, float]:
    """The official ``find_best_thresh``: sweep the null-odds threshold over the sorted odds."""
    score = current = float(sum(not has for has in has_answer.values()))
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in raw:
            continue
        diff = raw[qid] if has_answer[qid] else (-1.0 if predictions[qid] else 0.0)
        current += diff
        if current > score:
            score, best_threshold = current, na_probs[qid]
    return 100.0 * score / len(raw), best_threshold
