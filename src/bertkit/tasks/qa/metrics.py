"""The question-answering family's scores: SQuAD's exact match and F1, normalised and scored exactly as the
official v1.1 and v2.0 evaluation scripts, in percent as those scripts print them.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

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
