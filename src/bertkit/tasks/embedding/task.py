"""The ``embedding`` task family: train a sentence encoder on pairs, triplets or scored pairs.

Reading is ``data`` (layouts, columns); the training module is ``encoder.SentenceEncoder`` with a loss from
``losses``; batches come from ``sampler.NoDuplicatesOrder``; dev scoring is ``scoring``. The output is a
sentence-transformers directory (``modules.json``, ``1_Pooling/``, ``2_Normalize/`` when normalised).

Each distinct text is tokenized once, when the data is read, and each batch embeds each of its texts once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bertkit.data.batch_sources import Ordering
from bertkit.errors import ConfigError, DataError
from bertkit.features import Feature
from bertkit.features.padding import to_numpy_rows
from bertkit.io import write_jsonl
from bertkit.sentence_config import POOLINGS, SentenceConfig
from bertkit.tasks import metrics
from bertkit.tasks.base import CONFIG_KEY, Featurized, Read
from bertkit.tasks.embedding import scoring
from bertkit.tasks.embedding.data import EmbeddingExample, read_examples
from bertkit.tasks.embedding.sampler import NoDuplicatesOrder

if TYPE_CHECKING:  # torch is for training: the task's inference side runs without it (bertkit[onnx])
    import torch
    from torch import nn

    from bertkit.tasks.embedding import losses

LOSSES = ("mnrl", "cosent")
ENCODE_MINI_BATCH = 32
"""Texts per length-sorted forward pass when the gradient cache is off (see ``SentenceEncoder``)."""


@dataclass
class EmbeddingPredictions:
    """Dev predictions: per query the rank of its first relevant candidate (pairs), or per pair its cosine."""

    queries: list[str] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)
    top: np.ndarray | None = None
    relevant: list[set[int]] = field(default_factory=list)
    cosines: list[float] = field(default_factory=list)


@dataclass
class EmbeddingTask:
    """Sentence-embedding training; the model is the encoder (``BertModel``) with pooling, no head."""

    text_column: str | None = None
    """The anchor (pairs) or sentence1 (scored pairs) column."""
    text_pair_column: str | None = None
    """The positive (pairs) or sentence2 (scored pairs) column."""
    label_column: str | None = None
    """The score column of scored pairs."""
    negative_columns: str | None = None
    """Hard-negative columns, comma-separated; ``None``: every column whose name starts with ``negative``."""
    format: str | None = None
    header: bool | None = None
    loss: str | None = None
    """``mnrl`` (in-batch negatives) or ``cosent`` (scored pairs); ``None``: ``cosent`` for a file with a score
    column and no negatives, else ``mnrl``."""
    scale: float = 20.0
    """Cosine similarities are multiplied by this before the softmax (mnrl) or the log-sum-exp (cosent)."""
    symmetric: bool = False
    """mnrl: also rank the anchors for each positive and average both directions."""
    matryoshka_dims: str | Sequence[int] | None = None
    """Apply the loss at each of these leading widths too (``384,256,128,64``), weights 1."""
    pooling: str = "mean"
    normalize: bool = True
    """Write a ``Normalize`` module: served vectors are unit length."""
    cache_mini_batch_size: int | None = None
    """Gradient cache: embed a batch in mini-batches of this many texts, so memory does not grow with the batch."""
    score_max: float | None = None
    """Scored pairs are divided by this (the top of the scale); default the largest training score."""
    main_metric: str | None = None
    """Default ``ndcg@10`` (pairs) or ``spearman`` (scored pairs); also ``mrr@10``, ``accuracy@1``."""

    name: str = field(default="embedding", init=False)
    head: str = field(default="BertModel", init=False)
    model_input_names: tuple[str, ...] = field(default=("input_ids", "attention_mask", "columns", "scores"), init=False)

    def __post_init__(self) -> None:
        if self.loss is not None and self.loss not in LOSSES:
            raise ConfigError(f"--loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"--pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if not self.scale > 0:
            raise ConfigError(f"--scale must be positive, got {self.scale}")
        if self.cache_mini_batch_size is not None and self.cache_mini_batch_size < 1:
            raise ConfigError(f"--cache-mini-batch-size must be positive, got {self.cache_mini_batch_size}")
        self.dims = _widths(self.matryoshka_dims)
        self._set_main_metric()

    def _set_main_metric(self) -> None:
        if self.main_metric is None or self.main_metric in ("ndcg@10", "spearman"):
            self.main_metric = "spearman" if self.loss == "cosent" else "ndcg@10"

    @property
    def scored(self) -> bool:
        return self.loss == "cosent"

    @property
    def batch_by_length(self) -> bool:
        return False

    # ------------------------------------------------------------------------------------ reading
    def read(
        self,
        path: str | os.PathLike,
        *,
        labeled: bool = True,
        training: bool = False,
        format: str | None = None,
        header: bool | None = None,
    ) -> Read[EmbeddingExample]:
        examples, report, scored = read_examples(
            path,
            format=format or self.format,
            header=self.header if header is None else header,
            scored=None if self.loss is None else self.scored,
            first=self.text_column,
            second=self.text_pair_column,
            score=self.label_column,
            negatives=self.negative_columns,
            labeled=labeled,
        )
        if self.loss is None:
            self.loss = "cosent" if scored else "mnrl"
            self._set_main_metric()
        widths = {len(e.texts) for e in examples}
        if len(widths) > 1:
            raise DataError(f"{path}: rows have {sorted(widths)} texts; every row needs the same columns")
        return Read(examples, report)

    def fit_labels(self, examples: Sequence[EmbeddingExample]) -> None:
        """Scored pairs: the top of the score scale (``score_max``), said once."""
        if not self.scored:
            return
        if self.score_max is None:
            self.score_max = max((e.score or 0.0) for e in examples) or 1.0

    def describe_labels(self, examples: Sequence[EmbeddingExample]) -> str:
        """One line on what the rows hold: the score range and its scale (scored pairs), or how many texts
        each row gives (an anchor, its positive and its hard negatives)."""
        if self.scored:
            scores = [e.score or 0.0 for e in examples]
            return (
                f"labels: similarity scores {min(scores):g} to {max(scores):g}, normalised to 0..1 by dividing "
                f"by {self.score_max:g} (--score-max sets it)"
            )
        negatives = len(examples[0].texts) - 2 if examples else 0
        return f"labels: none; each row is an anchor, its positive and {negatives} hard negative(s)"

    def config_updates(self) -> dict[str, Any]:
        return {}

    def load_config(self, config: Any) -> None:
        return None

    # ------------------------------------------------------------------------------------ features
    def featurize(
        self, examples: Sequence[EmbeddingExample], tokenizer: Any, max_seq_length: int, *, training: bool = False
    ) -> Featurized:
        """Training: one feature per row, ``texts`` (token ids of each column, shared between rows with the same
        text), ``text_ids`` and ``score``. Otherwise one feature per distinct text (``input_ids``...,
        ``text``), for dev scoring. Every distinct text is tokenized once."""
        if max_seq_length < 3:
            raise ConfigError(f"--max-seq-length {max_seq_length} leaves no room for text; raise it")
        distinct = list(dict.fromkeys(text for e in examples for text in e.texts))
        index = {text: i for i, text in enumerate(distinct)}
        room = max_seq_length - 2
        pieces = tokenizer.ids_batch(distinct)
        truncated = {i for i, ids in enumerate(pieces) if len(ids) > room}
        encoded = [[tokenizer.cls_id, *ids[:room], tokenizer.sep_id] for ids in pieces]
        cut = sum(any(index[t] in truncated for t in e.texts) for e in examples)
        if not training:
            features = [
                {"input_ids": ids, "token_type_ids": [0] * len(ids), "attention_mask": [1] * len(ids), "text": text}
                for text, ids in zip(distinct, encoded)
            ]
            return Featurized(features, cut)
        scale = self.score_max or 1.0
        features = []
        for e in examples:
            ids = [index[t] for t in e.texts]
            feature: Feature = {"texts": [encoded[i] for i in ids], "text_ids": ids}
            if e.score is not None:
                feature["score"] = e.score / scale
            features.append(feature)
        return Featurized(features, cut)

    def collate(self, features: Sequence[Feature], pad_id: int = 0) -> dict[str, torch.Tensor]:
        """Each distinct text of the batch once (``input_ids``, ``attention_mask``), ``columns [B, C]`` (the
        text of each row and column) and ``scores [B]`` for scored pairs."""
        import torch

        slots: dict[int, int] = {}
        texts: list[list[int]] = []
        columns = []
        for f in features:
            row = []
            for text_id, ids in zip(f["text_ids"], f["texts"]):
                if text_id not in slots:
                    slots[text_id] = len(texts)
                    texts.append(ids)
                row.append(slots[text_id])
            columns.append(row)
        width = max(len(t) for t in texts)
        input_ids = torch.full((len(texts), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(texts), width), dtype=torch.long)
        for i, ids in enumerate(texts):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            attention_mask[i, : len(ids)] = 1
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "columns": torch.tensor(columns)}
        if "score" in features[0]:
            batch["scores"] = torch.tensor([f["score"] for f in features], dtype=torch.float32)
        return batch

    def loss_normalizer(self, features: Sequence[Feature], micro_batch_size: int) -> float | None:
        return None

    def unbatch(self, outputs: Any, batch: Mapping[str, torch.Tensor]) -> list[np.ndarray]:
        embeddings = outputs["embeddings"] if isinstance(outputs, Mapping) else outputs.embeddings
        return to_numpy_rows(embeddings)

    # ------------------------------------------------------------------------------------ training
    def loss_function(self) -> losses.PairLoss:
        """The loss the options describe: in-batch negatives or CoSENT, in a Matryoshka wrapper when asked."""
        from bertkit.tasks.embedding import losses

        scale, symmetric = self.scale, self.symmetric

        def base(embeddings: torch.Tensor, scores: torch.Tensor | None) -> torch.Tensor:
            if scores is not None:
                return losses.cosent_loss(embeddings, scores, scale)
            return losses.in_batch_negatives_loss(embeddings, scale, symmetric=symmetric)

        if self.dims:
            return losses.matryoshka_loss(base, self.dims)
        return base

    def training_module(self, model: nn.Module) -> nn.Module:
        from bertkit.models import registry
        from bertkit.tasks.embedding.encoder import SentenceEncoder

        if registry.role_of(model) != "BertModel":
            raise ConfigError(f"the embedding task trains an encoder (BertModel), not a {type(model).__name__}")
        config = registry.config_of(model)
        config.extra.pop(CONFIG_KEY, None)  # served by its sentence-transformers files, as any encoder
        width = config.hidden_size
        if self.dims and max(self.dims) > width:
            raise ConfigError(f"--matryoshka-dims {max(self.dims)} exceeds the model's width {width}")
        return SentenceEncoder(
            model,
            self.loss_function(),
            pooling=self.pooling,
            mini_batch_size=self.cache_mini_batch_size or ENCODE_MINI_BATCH,
            cache=self.cache_mini_batch_size is not None,
        )

    def saved_model(self, module: nn.Module) -> nn.Module:
        from bertkit.tasks.embedding.encoder import SentenceEncoder

        return module.bert if isinstance(module, SentenceEncoder) else module

    def sentence_config(self, max_seq_length: int) -> SentenceConfig | None:
        return SentenceConfig(self.pooling, self.normalize, max_seq_length)

    def batch_order(self, features: Sequence[Feature]) -> Ordering | None:
        return NoDuplicatesOrder([f["text_ids"] for f in features])

    # ------------------------------------------------------------------------------------ dev scoring
    def postprocess(
        self, examples: Sequence[EmbeddingExample], features: Sequence[Feature], rows: Sequence[np.ndarray]
    ) -> EmbeddingPredictions:
        """Pairs: every distinct anchor ranks every distinct positive and negative of the set by cosine (its
        positives are relevant). Scored pairs: the cosine of each pair."""
        vectors = {f["text"]: np.asarray(row, dtype=np.float32) for f, row in zip(features, rows)}
        if self.scored:
            cosines = []
            for e in examples:
                a, b = vectors[e.texts[0]], vectors[e.texts[1]]
                cosines.append(float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)))
            return EmbeddingPredictions(cosines=cosines)
        candidates = list(dict.fromkeys(t for e in examples for t in e.texts[1:]))
        where = {t: i for i, t in enumerate(candidates)}
        relevant: dict[str, set[int]] = {}
        for e in examples:
            relevant.setdefault(e.texts[0], set()).add(where[e.texts[1]])
        queries = list(relevant)
        top = scoring.ranked(np.stack([vectors[q] for q in queries]), np.stack([vectors[c] for c in candidates]))
        gold = [relevant[q] for q in queries]
        return EmbeddingPredictions(queries, scoring.first_relevant_rank(top, gold), top, gold)

    def evaluate(self, predictions: EmbeddingPredictions, examples: Sequence[EmbeddingExample]) -> dict[str, float]:
        """``ndcg@10``, ``mrr@10``, ``accuracy@1`` (pairs) or ``spearman``, ``pearson`` of cosines (scored)."""
        if self.scored:
            gold = [e.score for e in examples]
            if any(g is None for g in gold):
                raise DataError("no scores to evaluate against (the file was read unlabelled)")
            scores = [float(g or 0.0) for g in gold]
            return {
                "spearman": metrics.spearman(predictions.cosines, scores),
                "pearson": metrics.pearson(predictions.cosines, scores),
            }
        assert predictions.top is not None
        return scoring.retrieval_scores(predictions.top, predictions.relevant)

    def prediction_rows(
        self,
        examples: Sequence[EmbeddingExample],
        features: Sequence[Feature],
        rows: Sequence[np.ndarray],
        predictions: EmbeddingPredictions,
    ) -> list[dict[str, Any]]:
        if self.scored:
            return [
                {"index": i, "texts": list(e.texts), "cosine": c}
                for i, (e, c) in enumerate(zip(examples, predictions.cosines))
            ]
        return [
            {"index": i, "query": q, "rank": r} for i, (q, r) in enumerate(zip(predictions.queries, predictions.ranks))
        ]

    def write_predictions(
        self,
        predictions: EmbeddingPredictions,
        directory: str | os.PathLike,
        examples: Sequence[EmbeddingExample] | None = None,
    ) -> list[Path]:
        """``predictions.jsonl``: per query the rank (1..10, or null) of its first relevant candidate, or per
        scored pair its cosine."""
        rows = (
            ({"index": i, "cosine": c} for i, c in enumerate(predictions.cosines))
            if self.scored
            else (
                {"index": i, "query": q, "rank": r}
                for i, (q, r) in enumerate(zip(predictions.queries, predictions.ranks))
            )
        )
        return [write_jsonl(rows, Path(directory) / "predictions.jsonl")]


def _widths(dims: str | Sequence[int] | None) -> list[int]:
    """``--matryoshka-dims`` as a list of positive widths (``[]`` when not given)."""
    if dims is None:
        return []
    try:
        widths = [int(d) for d in dims.split(",") if d.strip()] if isinstance(dims, str) else [int(d) for d in dims]
    except ValueError:
        raise ConfigError(f"--matryoshka-dims takes widths like 384,256,128, got {dims!r}") from None
    if not widths or min(widths) < 1:
        raise ConfigError(f"--matryoshka-dims must be positive widths, got {dims!r}")
    return widths


__all__ = ["EmbeddingPredictions", "EmbeddingTask"]
