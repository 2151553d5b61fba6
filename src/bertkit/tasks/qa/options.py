"""The qa family's command-line options (``bertkit finetune`` generates its flags from them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bertkit.option_groups import at_least


@dataclass
class QaTaskOptions:
    """How ``--task qa`` cuts questions and windows contexts."""

    doc_stride: int | None = field(default=None, metadata=at_least(1))
    """qa: tokens between the starts of context windows (default: 128)."""
    max_query_length: int | None = field(default=None, metadata=at_least(1))
    """qa: longest question in tokens; longer ones are cut (default: 64)."""
