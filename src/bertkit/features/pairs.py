"""One or two token sequences as one BERT input: building the pair and truncating it to fit."""

from __future__ import annotations

from collections.abc import Sequence

from bertkit.features import Feature
from bertkit.tokenizer.framing import framed


def build_pair(ids_a: Sequence[int], ids_b: Sequence[int] | None, cls_id: int, sep_id: int) -> Feature:
    """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` (``bertkit.tokenizer.framing``, as every path frames)."""
    input_ids, token_type_ids = framed(ids_a, ids_b, cls_id, sep_id)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": [1] * len(input_ids)}


def truncate_pair(ids_a: list[int], ids_b: list[int] | None, max_tokens: int) -> tuple[list[int], list[int] | None]:
    """Google BERT's ``_truncate_seq_pair``: drop the last token of the longer side (B on ties) until it fits."""
    a = list(ids_a)
    b = None if ids_b is None else list(ids_b)
    while len(a) + (len(b) if b is not None else 0) > max_tokens:
        if b is None or len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b
