"""Retrieval metrics computed as ``trec_eval`` (through ``pytrec_eval``) and MTEB compute them, so that a figure
compares with published ones.

A run maps each query id to ``{doc id: score}`` (the documents a search returned); qrels map each query id to
``{doc id: grade}`` (judged documents; a grade above 0 is relevant). The rules, all trec_eval's:

- A query's documents are ranked by score, highest first; ties go to the larger doc id (``trec_eval`` sorts by
  score, then by doc id, both descending).
- nDCG@k uses the grade itself as the gain (``ndcg_cut``: graded, not ``2**grade - 1``) with discount
  ``log2(rank + 1)``; the ideal ranking is every relevant judged document, best grade first, cut at k.
- recall@k is relevant documents in the top k over all relevant documents of the query; MAP@k (``map_cut``)
  sums the precision at each relevant document in the top k and divides by all relevant documents; MRR@k is
  one over the rank of the first relevant document in the top k (0 when none), as MTEB computes it.
- The mean is over the queries of the qrels that have at least one relevant document (MTEB skips the others);
  such a query that the run lacks scores 0 (it retrieved nothing).

Names are ``ndcg@10``, ``mrr@10``, ``recall@100``, ``map@100``, ``precision@5``: any ``name@k``.
Correlations for similarity scores (STS) are :func:`bertkit.tasks.metrics.spearman` and ``pearson``, re-exported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from bertkit.errors import ConfigError
from bertkit.tasks.metrics import pearson, spearman

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]

DEFAULT_MEASURES = ("ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100", "map@100")
"""What ``bertkit evaluate --task retrieval`` reports."""


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Doc ids by score, highest first, ties by doc id, larger first (trec_eval's order)."""
    return sorted(scores, key=lambda doc: (scores[doc], doc), reverse=True)


def ndcg_at(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """nDCG@k of one ranking with trec_eval's linear gains; 0.0 when nothing is relevant."""
    gains = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    if ideal == 0:
        return 0.0
    dcg = sum(max(grades.get(doc, 0), 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    return dcg / ideal


def recall_at(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Relevant documents in the top k over all relevant documents."""
    relevant = _relevant(grades)
    return sum(doc in relevant for doc in ranking[:k]) / len(relevant) if relevant else 0.0


def precision_at(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Relevant documents in the top k over k (trec_eval's ``P_k``, which divides by k however few were found)."""
    relevant = _relevant(grades)
    return sum(doc in relevant for doc in ranking[:k]) / k


def average_precision_at(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """trec_eval's ``map_cut_k`` of one query: precision at each relevant rank up to k, over all relevant."""
    relevant = _relevant(grades)
    if not relevant:
        return 0.0
    found, total = 0, 0.0
    for rank, doc in enumerate(ranking[:k], start=1):
        if doc in relevant:
            found += 1
            total += found / rank
    return total / len(relevant)


def reciprocal_rank_at(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """One over the rank of the first relevant document in the top k; 0.0 when there is none."""
    relevant = _relevant(grades)
    return next((1 / rank for rank, doc in enumerate(ranking[:k], start=1) if doc in relevant), 0.0)


MEASURES: dict[str, Callable[[Sequence[str], Mapping[str, int], int], float]] = {
    "ndcg": ndcg_at,
    "mrr": reciprocal_rank_at,
    "recall": recall_at,
    "map": average_precision_at,
    "precision": precision_at,
}


def parse_measure(name: str) -> tuple[str, int]:
    """``"ndcg@10"`` -> ``("ndcg", 10)``; a ``ConfigError`` names the measures known."""
    kind, _, cut = name.partition("@")
    if kind not in MEASURES or not cut.isdigit() or int(cut) < 1:
        raise ConfigError(f"unknown retrieval measure {name!r}; use NAME@K with NAME one of {', '.join(MEASURES)}")
    return kind, int(cut)


def per_query(qrels: Qrels, run: Run, measures: Iterable[str] = DEFAULT_MEASURES) -> dict[str, dict[str, float]]:
    """Each measure of each query that has a relevant document (the others are skipped, as MTEB does)."""
    parsed = {name: parse_measure(name) for name in measures}
    out: dict[str, dict[str, float]] = {}
    for query, grades in qrels.items():
        if not _relevant(grades):
            continue
        ranking = ranked(run.get(query, {}))
        out[query] = {name: MEASURES[kind](ranking, grades, k) for name, (kind, k) in parsed.items()}
    return out


def retrieval_scores(qrels: Qrels, run: Run, measures: Iterable[str] = DEFAULT_MEASURES) -> dict[str, float]:
    """The mean of each measure over the queries that have a relevant document (``{"ndcg@10": 0.71, ...}``);
    0.0 for each when no query has one."""
    measures = list(measures)
    scores = per_query(qrels, run, measures)
    return {name: sum(s[name] for s in scores.values()) / len(scores) if scores else 0.0 for name in measures}


def _relevant(grades: Mapping[str, int]) -> set[str]:
    return {doc for doc, grade in grades.items() if grade > 0}


__all__ = [
    "DEFAULT_MEASURES",
    "MEASURES",
    "Qrels",
    "Run",
    "average_precision_at",
    "ndcg_at",
    "parse_measure",
    "pearson",
    "per_query",
    "precision_at",
    "ranked",
    "recall_at",
    "reciprocal_rank_at",
    "retrieval_scores",
    "spearman",
]
