"""Dev scoring of an embedding model, small and pure: anchors retrieve among every dev candidate.

:func:`retrieval_scores`: each query's candidates ranked by cosine; MRR@10, nDCG@10 (binary relevance, the
ideal ranking puts every relevant candidate first, as BEIR/pytrec_eval compute it) and accuracy@1, averaged
over queries. :func:`ranks` gives the rank of each query's first relevant candidate, for the predictions file.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
    ``relevant`` candidate indexes."""
    if len(relevant) != top.shape[0] or not relevant:
        raise ValueError(f"{top.shape[0]} rankings for {len(relevant)} queries")
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    mrr, ndcg, first = [], [], []
    for row, gold in zip(top[:, :k], relevant):
        hits = np.array([int(c) in gold for c in row], dtype=np.float64)
        found = np.flatnonzero(hits)
        mrr.append(1.0 / (found[0] + 1) if found.size else 0.0)
        ideal = discounts[: min(len(gold), k)].sum()
        ndcg.append(float((hits * discounts[: hits.size]).sum() / ideal) if ideal else 0.0)
        first.append(float(hits[0]) if hits.size else 0.0)
    return {f"mrr@{k}": float(np.mean(mrr)), f"ndcg@{k}": float(np.mean(ndcg)), "accuracy@1": float(np.mean(first))}


def first_relevant_rank(top: np.ndarray, relevant: Sequence[set[int]]) -> list[int | None]:
    """1-based rank of each query's first relevant candidate within ``top``; ``None`` when none is there."""
    out: list[int | None] = []
    for row, gold in zip(top, relevant):
        out.append(next((i + 1 for i, c in enumerate(row) if int(c) in gold), None))
    return out
