"""Embedding models measured and fed: retrieval and similarity evaluation, BEIR folders, hard-negative mining.

- ``beir``: the BEIR folder layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), read with every fault named,
  and written;
- ``squad``: a BEIR folder from SQuAD JSON (each question's paragraph is its one relevant passage);
- ``embedding``: the model loaded once, its sentence-transformers settings honoured, texts embedded in chunks;
- ``vector_search``: exact cosine/dot search over corpus chunks with bounded memory, and an approximate HNSW index
  (faiss, the ``ann`` extra) with its recall against exact search;
- ``evaluate``: ``evaluate_retrieval`` (nDCG@10, MRR@10, recall@k, MAP@100 from ``tasks.embedding.retrieval_metrics``)
  and ``evaluate_sts`` (Spearman and Pearson of cosine similarities);
- ``mining``: ``mine_hard_negatives``, the nearest non-positive passages of each (anchor, positive) pair.

It sits on the inference floor: it embeds with ``bertkit.inference`` and scores with ``bertkit.tasks``.
"""

from __future__ import annotations

from bertkit.retrieval.beir import BeirSet, Passage, read_beir, write_beir
from bertkit.retrieval.embedding import Embedder, EmbeddingOptions
from bertkit.retrieval.evaluate import evaluate_retrieval, evaluate_sts
from bertkit.retrieval.mining import MiningConfig, MiningResult, mine_hard_negatives, read_corpus, read_pairs
from bertkit.retrieval.squad import beir_from_squad, write_squad_beir
from bertkit.retrieval.vector_search import ExactSearch, Hits, HnswIndex, exact_search, overlap_at_k

__all__ = [
    "BeirSet",
    "Embedder",
    "EmbeddingOptions",
    "ExactSearch",
    "Hits",
    "HnswIndex",
    "MiningConfig",
    "MiningResult",
    "Passage",
    "beir_from_squad",
    "evaluate_retrieval",
    "evaluate_sts",
    "exact_search",
    "mine_hard_negatives",
    "overlap_at_k",
    "read_beir",
    "read_corpus",
    "read_pairs",
    "write_beir",
    "write_squad_beir",
]
