"""The ``embedding`` task family: sentence-embedding training on pairs, triplets or scored pairs.

``data`` reads the tables (columns and layouts), ``losses`` holds in-batch negatives, CoSENT and the
Matryoshka wrapper, ``encoder`` the module the loop trains (pooling, length-sorted mini-batches, gradient
cache), ``sampler`` the no-duplicates batch order, ``scoring`` the dev retrieval metrics and ``task`` the
``EmbeddingTask`` that ties them to the fine-tuning pipeline.
"""

from __future__ import annotations

from typing import Any

from bertkit.tasks.embedding.data import EmbeddingExample
from bertkit.tasks.embedding.options import EmbeddingTaskOptions
from bertkit.tasks.embedding.sampler import NoDuplicatesOrder
from bertkit.tasks.embedding.task import EmbeddingPredictions, EmbeddingTask
from bertkit.tasks.family import Family

FAMILY = Family(
    name="embedding",
    task=EmbeddingTask,
    head="BertModel",
    pipeline="embed",
    restores_from_head=False,  # every encoder is a BertModel; a sentence-transformers directory says its own
    # sentence-transformers' recipe for in-batch negatives: a pretrained sentence encoder, a large batch (more
    # negatives), one epoch, all-MiniLM-L6-v2's 256 tokens. In-batch negatives lose by a small batch, and a
    # pretrained sentence encoder needs no minimum of updates for a fresh head: never sized to the data.
    defaults={"lr": 2e-5, "epochs": 1.0, "max_seq_length": 256, "micro_batch_size": 64},
    fixed_recipe=True,
    options=EmbeddingTaskOptions,
)


def __getattr__(name: str) -> Any:
    """``SentenceEncoder``, the training module (a torch module), imported on first use."""
    if name == "SentenceEncoder":
        from bertkit.tasks.embedding.encoder import SentenceEncoder

        return SentenceEncoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FAMILY",
    "EmbeddingExample",
    "EmbeddingPredictions",
    "EmbeddingTask",
    "NoDuplicatesOrder",
    "SentenceEncoder",
]
