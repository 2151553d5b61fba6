"""Measuring an embedding model: retrieval on a BEIR folder (nDCG@10, MRR@10, recall, MAP, as MTEB reports them)
and semantic textual similarity on scored pairs (Spearman and Pearson of the cosine similarities, as
sentence-transformers' ``EmbeddingSimilarityEvaluator``). ``bertkit evaluate --task retrieval|sts`` calls them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from bertkit.errors import DataError
from bertkit.inference.loading import Loaded
from bertkit.notices import notice
from bertkit.retrieval.beir import BeirSet, read_beir
from bertkit.retrieval.embedding import Embedder, EmbeddingOptions
from bertkit.retrieval.vector_search import ExactSearch, Hits, HnswIndex, overlap_at_k
from bertkit.tasks import classification
from bertkit.tasks.embedding.retrieval_metrics import (
    DEFAULT_MEASURES,
    parse_measure,
    pearson,
    retrieval_scores,
    spearman,
)
from bertkit.tasks.registry import make_task

ANN_CHECK_QUERIES = 1000
"""Queries on which an approximate search is checked against exact search."""


def evaluate_retrieval(
    model: str | os.PathLike | Loaded,
    data: str | os.PathLike | BeirSet,
    *,
    split: str | None = None,
    options: EmbeddingOptions | None = None,
    measures: Iterable[str] = DEFAULT_MEASURES,
    ann: bool = False,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> dict[str, float]:
    """The retrieval measures (``{"ndcg@10": ..., "mrr@10": ..., ...}``) of an embedding model on a BEIR folder
    (``split``: which ``qrels/<split>.tsv``, see :func:`read_beir`). Every passage (``title text``) is embedded
    once; each judged query's best passages (as many as the deepest measure needs) are found by exact search,
    or with ``ann`` by an HNSW index, whose recall against exact search is reported as ``ann_recall@K``.
    What was read and the embedding settings go to stderr, one line each."""
    options = options or EmbeddingOptions()
    measures = list(measures)
    depth = max(parse_measure(m)[1] for m in measures)
    beir = data if isinstance(data, BeirSet) else read_beir(data, split)
    notice(f"{beir.describe()}")
    embedder = Embedder(model, options, device)
    query_ids = [q for q, grades in beir.qrels.items() if any(g > 0 for g in grades.values())]
    if not query_ids:
        raise DataError(f"split {beir.split} judges no document relevant (every score is 0 or less)")
    doc_ids = list(beir.corpus)
    queries = embedder([beir.queries[q] for q in query_ids], options.query_prefix, progress)
    passages = [beir.corpus[d].joined() for d in doc_ids]
    hits, extra = _search(embedder, queries, passages, min(depth, len(doc_ids)), ann, progress)
    embedder.tell()
    run = {query: {doc_ids[i]: score for i, score in hits.row(row)} for row, query in enumerate(query_ids)}
    return {**retrieval_scores(beir.qrels, run, measures), **extra}


def _search(
    embedder: Embedder, queries: np.ndarray, passages: list[str], k: int, ann: bool, progress: bool
) -> tuple[Hits, dict[str, float]]:
    """Hits of every query over the passages, embedded chunk by chunk; with ``ann`` also the index's recall
    against exact search on up to :data:`ANN_CHECK_QUERIES` queries."""
    score_function = embedder.options.score_function
    exact = ExactSearch(queries[:ANN_CHECK_QUERIES] if ann else queries, k, score_function)
    index = HnswIndex(queries.shape[1], score_function) if ann else None
    for chunk in embedder.chunks(passages, embedder.options.passage_prefix, progress):
        exact.add(chunk)
        if index is not None:
            index.add(chunk)
    if index is None:
        return exact.hits(), {}
    hits = index.search(queries, k)
    checked = exact.hits()
    recall = overlap_at_k(Hits(hits.scores[: len(checked.scores)], hits.indices[: len(checked.indices)]), checked, k)
    return hits, {f"ann_recall@{k}": recall}


def evaluate_sts(
    model: str | os.PathLike | Loaded,
    data: str | os.PathLike,
    *,
    task_options: Mapping[str, Any] | None = None,
    format: str | None = None,
    header: bool | None = None,
    options: EmbeddingOptions | None = None,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> dict[str, float]:
    """``{"spearman": ..., "pearson": ...}`` between the gold scores of sentence pairs and the cosine similarity of
    their embeddings. ``data`` is any table the task readers take (STS-B's GLUE TSV: ``sentence1``,
    ``sentence2``, ``score``); ``task_options`` name its columns (``text_column``, ``text_pair_column``,
    ``label_column``) as for ``bertkit evaluate --task regression``."""
    options = options or EmbeddingOptions()
    scored = {**(task_options or {}), "regression": True}  # the classification family's scored pairs
    read = make_task(classification.FAMILY.name, scored).read(data, format=format, header=header)
    notice(read.report.line())
    pairs, gold = [], []
    for example in read.examples:
        if example.text_pair is None:
            raise DataError(f"{data}: no second sentence column; name it with --text-pair-column")
        try:
            gold.append(float(example.label))
        except (TypeError, ValueError):
            raise DataError(f"{example.where}: score {example.label!r} is not a number (--label-column)") from None
        pairs.append((example.text, example.text_pair))
    embedder = Embedder(model, options, device)
    texts = sorted({text for pair in pairs for text in pair})  # each distinct sentence embedded once
    vectors = torch.nn.functional.normalize(torch.as_tensor(embedder(texts, progress=progress)), dim=-1)
    embedder.tell()
    row = {text: i for i, text in enumerate(texts)}
    first = vectors[[row[a] for a, _ in pairs]]
    second = vectors[[row[b] for _, b in pairs]]
    similarity = (first * second).sum(-1).double().numpy()
    return {"spearman": spearman(similarity, gold), "pearson": pearson(similarity, gold)}
