"""The ``embedding`` task family: sentence-embedding training on pairs, triplets or scored pairs.

``data`` reads the tables (columns and layouts), ``losses`` holds in-batch negatives, CoSENT and the
Matryoshka wrapper, ``encoder`` the module the loop trains (pooling, length-sorted mini-batches, gradient
cache), ``sampler`` the no-duplicates batch order, ``scoring`` the dev retrieval metrics and ``task`` the
``EmbeddingTask`` that ties them to the fine-tuning pipeline.
"""

from __future__ import annotations

from bertkit.tasks.embedding.data import EmbeddingExample
from bertkit.tasks.embedding.encoder import SentenceEncoder
from bertkit.tasks.embedding.sampler import NoDuplicatesOrder
from bertkit.tasks.embedding.task import EmbeddingPredictions, EmbeddingTask

__all__ = ["EmbeddingExample", "EmbeddingPredictions", "EmbeddingTask", "NoDuplicatesOrder", "SentenceEncoder"]
