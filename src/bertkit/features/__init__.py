"""Model inputs, below both training and inference: what a feature is, how pairs are built and cut, how long
texts are windowed, how features are padded into batches, and the one runner that feeds them to a model.

``pairs`` builds ``[CLS] A [SEP] B [SEP]`` and truncates pairs as Google BERT does; ``windows`` places
overlapping windows over a long text and says which window sees each token best; ``padding`` pads features
into tensors; ``runner`` runs features through a model in length-sorted batches. Tasks (``bertkit.tasks``),
fine-tuning and the inference pipelines all build on them.
"""

from __future__ import annotations

from typing import Any

Feature = dict[str, Any]
"""One model input: the head's keyword arguments as lists of ints, plus bookkeeping keys (``example_index``...)."""

__all__ = ["Feature"]
