"""Dev scoring of an embedding model: anchors retrieve among every dev candidate.

:func:`retrieval_scores`: each query's candidates ranked by cosine; MRR@10, nDCG@10 and accuracy@1 as
``tasks.embedding.retrieval_metrics`` computes them for ``evaluate --task retrieval``, averaged over queries. :func:`ranks` gives the rank of each query's first relevant candidate, for the predictions file.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bertkit.tasks.embedding import retrieval_metrics

TOP_K = 10


def _normalized(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def ranked(queries: np.ndarray, candidates: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """``[Q, k]`` indexes of each query's ``k`` candidates of highest cosine, best first (ties: lower index)."""
    scores = _normalized(queries) @ _normalized(candidates).T
    k = min(k, candidates.shape[0])
    order = np.argsort(-scores, axis=1, kind="stable")
    return order[:, :k]


def retrieval_scores(top: np.ndarray, relevant: Sequence[set[int]], k: int = TOP_K) -> dict[str, float]:
    """``mrr@k``, ``ndcg@k`` and ``accuracy@1`` of ranked lists ``top [Q, >= k]`` against each query's
    ``relevant`` candidate indexes, computed by :mod:`bertkit.tasks.embedding.retrieval_metrics` (trec_eval's rules)."""
    if len(relevant) != top.shape[0] or not relevant:
        raise ValueError(f"{top.shape[0]} rankings for {len(relevant)} queries")
    run = {str(q): {str(int(c)): float(-rank) for rank, c in enumerate(row[:k])} for q, row in enumerate(top)}
    qrels = {str(q): {str(c): 1 for c in gold} for q, gold in enumerate(relevant)}
    scores = retrieval_metrics.retrieval_scores(qrels, run, [f"mrr@{k}", f"ndcg@{k}", "precision@1"])
    return {f"mrr@{k}": scores[f"mrr@{k}"], f"ndcg@{k}": scores[f"ndcg@{k}"], "accuracy@1": scores["precision@1"]}


def first_relevant_rank(top: np.ndarray, relevant: Sequence[set[int]]) -> list[int | None]:
    """1-based rank of each query's first relevant candidate within ``top``; ``None`` when none is there."""
    out: list[int | None] = []
    for row, gold in zip(top, relevant):
        out.append(next((i + 1 for i, c in enumerate(row) if int(c) in gold), None))
    return out
