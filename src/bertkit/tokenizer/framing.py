"""How one text or a pair becomes one model input, the same on every path: ``cls A sep`` and ``cls A sep B sep``,
segment 0 up to the first ``sep`` and 1 after.

Pre-training data, fine-tuning features, ``bertkit.embed`` and ``tok(...)`` all frame through here: the
feature builders call :func:`framed`, and a tokenizer's ``encode`` runs :func:`framing_processor` (a
``tokenizers`` post-processor that gives the same ids). A ``tokenizer.json`` without a post-processor of
its own gets this one, so that its texts are framed as bertkit's data and training frame them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import processors


def framed(ids_a: Sequence[int], ids_b: Sequence[int] | None, cls_id: int, sep_id: int) -> tuple[list[int], list[int]]:
    """(input ids, segment ids) of ``cls A sep`` or ``cls A sep B sep``."""
    input_ids = [cls_id, *ids_a, sep_id]
    token_type_ids = [0] * len(input_ids)
    if ids_b is not None:
        input_ids += [*ids_b, sep_id]
        token_type_ids += [1] * (len(ids_b) + 1)
    return input_ids, token_type_ids


def framing_processor(cls: str, cls_id: int, sep: str, sep_id: int) -> processors.TemplateProcessing:
    """The ``tokenizers`` post-processor that frames as :func:`framed` does."""
    return processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, cls_id), (sep, sep_id)],
    )
