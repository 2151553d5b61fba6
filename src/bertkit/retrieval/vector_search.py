"""Nearest passages of each query: exact search over corpus chunks with bounded memory, or an approximate index.

Exact search keeps, for every query, its best ``k`` so far and merges each corpus chunk in with ``torch.topk``
(queries taken in blocks), so memory is ``queries x k`` plus one ``block x chunk`` score matrix, never the whole
``queries x corpus``. The approximate index (``faiss`` HNSW, the ``ann`` extra) is for corpora of millions;
:func:`overlap_at_k` is its recall@k against exact search.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from bertkit.errors import ConfigError, MissingExtraError

SCORE_FUNCTIONS = ("cos", "dot")


@dataclass
class Hits:
    """The best ``k`` passages of each query, best first."""

    scores: np.ndarray
    """``[queries, k]`` float32."""
    indices: np.ndarray
    """``[queries, k]`` int64 positions in the corpus; fewer than k found: the rest is -1 (score -inf)."""

    def row(self, query: int) -> list[tuple[int, float]]:
        """``(corpus position, score)`` of one query's hits, best first."""
        return [(int(i), float(s)) for i, s in zip(self.indices[query], self.scores[query]) if i >= 0]


def check_score_function(name: str) -> None:
    if name not in SCORE_FUNCTIONS:
        raise ConfigError(f"--score-function must be cos or dot, got {name!r}")


def _prepared(vectors: np.ndarray | torch.Tensor, score_function: str) -> torch.Tensor:
    tensor = torch.as_tensor(np.asarray(vectors, dtype=np.float32))
    return torch.nn.functional.normalize(tensor, dim=-1) if score_function == "cos" else tensor


class ExactSearch:
    """Running top-``k`` of ``queries`` over the corpus chunks given to :meth:`add`, in corpus order."""

    def __init__(self, queries: np.ndarray, k: int, score_function: str = "cos", query_block: int = 1024):
        check_score_function(score_function)
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}")
        self.queries = _prepared(queries, score_function)
        self.k, self.score_function, self.query_block = k, score_function, query_block
        self.scores = torch.full((len(self.queries), 0), float("-inf"))
        self.indices = torch.zeros((len(self.queries), 0), dtype=torch.long)
        self.seen = 0

    def add(self, chunk: np.ndarray) -> None:
        """Merge the next corpus chunk (``[passages, width]``) into every query's best ``k``."""
        passages = _prepared(chunk, self.score_function)
        positions = torch.arange(self.seen, self.seen + len(passages))
        self.seen += len(passages)
        if not len(passages) or not len(self.queries):
            return
        blocks_scores, blocks_indices = [], []
        for start in range(0, len(self.queries), self.query_block):
            scores = self.queries[start : start + self.query_block] @ passages.T
            best = torch.topk(scores, min(self.k, len(passages)), dim=1)  # the chunk's best, then merged
            merged_scores = torch.cat([self.scores[start : start + self.query_block], best.values], dim=1)
            merged_indices = torch.cat([self.indices[start : start + self.query_block], positions[best.indices]], dim=1)
            # stable: among equal scores an earlier chunk's passage stays first
            order = torch.sort(merged_scores, dim=1, descending=True, stable=True).indices[:, : self.k]
            blocks_scores.append(torch.gather(merged_scores, 1, order))
            blocks_indices.append(torch.gather(merged_indices, 1, order))
        self.scores, self.indices = torch.cat(blocks_scores), torch.cat(blocks_indices)

    def hits(self) -> Hits:
        scores, indices = self.scores.numpy(), self.indices.numpy()
        pad = self.k - scores.shape[1]
        if pad > 0:
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
            indices = np.pad(indices, ((0, 0), (0, pad)), constant_values=-1)
        return Hits(scores.astype(np.float32), indices.astype(np.int64))


def exact_search(queries: np.ndarray, corpus_chunks: Iterable[np.ndarray], k: int, score_function: str = "cos") -> Hits:
    """The best ``k`` passages of each query over the corpus, given in chunks (see :class:`ExactSearch`)."""
    search = ExactSearch(queries, k, score_function)
    for chunk in corpus_chunks:
        search.add(chunk)
    return search.hits()


def faiss_module() -> ModuleType:
    """``faiss``, or one line that names the extra that installs it."""
    try:
        return importlib.import_module("faiss")
    except ImportError:
        raise MissingExtraError("--ann needs faiss: pip install 'bertkit[ann]'") from None


class HnswIndex:
    """An approximate inner-product index (faiss HNSW) filled chunk by chunk; cosine normalises first."""

    def __init__(self, width: int, score_function: str = "cos", neighbours: int = 32, ef_search: int = 256):
        check_score_function(score_function)
        faiss = faiss_module()
        self.score_function, self.ef_search = score_function, ef_search
        self.index: Any = faiss.IndexHNSWFlat(width, neighbours, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = max(40, 2 * neighbours)

    def add(self, chunk: np.ndarray) -> None:
        self.index.add(np.ascontiguousarray(_prepared(chunk, self.score_function).numpy()))

    def search(self, queries: np.ndarray, k: int) -> Hits:
        self.index.hnsw.efSearch = max(self.ef_search, k)
        scores, indices = self.index.search(np.ascontiguousarray(_prepared(queries, self.score_function).numpy()), k)
        scores = np.where(indices >= 0, scores, -np.inf)
        return Hits(scores.astype(np.float32), indices.astype(np.int64))


def overlap_at_k(approximate: Hits, exact: Hits, k: int) -> float:
    """Mean over queries of the share of exact search's top ``k`` that the approximate top ``k`` found."""
    shares = []
    for a, e in zip(approximate.indices[:, :k], exact.indices[:, :k]):
        wanted = {int(i) for i in e if i >= 0}
        if wanted:
            shares.append(len(wanted & {int(i) for i in a}) / len(wanted))
    return float(np.mean(shares)) if shares else 1.0
