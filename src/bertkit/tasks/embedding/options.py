"""The embedding family's command-line options (``bertkit finetune`` generates its flags from them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bertkit.option_groups import above, at_least


@dataclass
class EmbeddingTaskOptions:
    """The loss, pooling and batching of ``--task embedding``."""

    negative_columns: str | None = None
    """embedding: hard-negative columns, comma-separated ('' = none) (default: every column whose name starts
    with negative)."""
    loss: str | None = None
    """embedding: mnrl (in-batch negatives on pairs/triplets) or cosent (scored pairs) (default: cosent for a
    file with a score column and no negatives, else mnrl)."""
    scale: float | None = field(default=None, metadata=above(0))
    """embedding: factor on the cosine similarities in the loss (default: 20)."""
    symmetric: bool | None = field(default=None, metadata={"cli_flags": ("--symmetric",)})
    """embedding, mnrl: also rank the anchors for each positive (both directions)."""
    matryoshka_dims: str | None = None
    """embedding: also train the leading widths, e.g. 384,256,128,64 (equal weights)."""
    pooling: str | None = None
    """embedding: mean, cls or max over the token vectors (default: mean)."""
    normalize: bool | None = None
    """embedding: save a Normalize module (default: normalize)."""
    cache_mini_batch_size: int | None = field(default=None, metadata=at_least(1))
    """embedding: gradient cache; embed each batch this many texts at a time, so memory stays bounded whatever
    the batch (same gradients; about 1.3x the compute) (default: off)."""
    score_max: float | None = field(default=None, metadata=above(0))
    """embedding, cosent: top of the score scale; scores are divided by it (default: the largest)."""
