"""The classification family's command-line options (``bertkit finetune`` generates its flags from them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ClassificationTaskOptions:
    """How ``--task classification`` (and ``regression``) reads its table and handles long texts."""

    text_column: str | None = None
    """Classification: column of the text (GLUE names: sentence, sentence1, #1 String...)."""
    text_pair_column: str | None = None
    """Classification: column of the second text ('' = none) (GLUE names: sentence2, #2 String...)."""
    label_column: str | None = None
    """Classification: column of the label (GLUE names: label, score, Quality...)."""
    long_text: str | None = None
    """Classification: truncate (drop tokens past --max-seq-length) or windows (score overlapping windows of a
    long text and average them) (default: truncate)."""
    label_names: str | None = None
    """classification: names of the sorted labels, comma-separated, e.g. negative,positive for 0/1."""
