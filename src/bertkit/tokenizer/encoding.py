"""The encoding type: one encoded sequence (or pair) with its ids, offsets and word ids, and the collation of
many into the tensors a model takes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bertkit.errors import TokenizerError

if TYPE_CHECKING:
    import tokenizers
    import torch


@dataclass(eq=False)
class Encoding:
    """One encoded sequence (or pair). All lists have the same length.

    ``offsets`` are ``(start, end)`` character spans into the original input string (into the second string
    for tokens with ``sequence_ids == 1``); special and padding tokens have ``(0, 0)``. ``word_ids`` number
    the words (whitespace/punctuation-split units) of each sequence and are ``None`` for special tokens.
    Encodings returned by a ``Tokenizer`` read their fields lazily from the ``tokenizers`` result.
    """

    ids: list[int]
    tokens: list[str]
    type_ids: list[int]
    attention_mask: list[int]
    special_tokens_mask: list[int]
    offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    sequence_ids: list[int | None]

    def __len__(self) -> int:
        return len(self.ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Encoding):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)


_FIELDS = tuple(Encoding.__dataclass_fields__)


class LazyEncoding(Encoding):
    """An ``Encoding`` view of a ``tokenizers.Encoding``: each field is converted on first access, then cached
    in the instance ``__dict__`` (so later reads are plain attribute lookups)."""

    def __init__(self, enc: tokenizers.Encoding) -> None:
        self._enc = enc

    def __len__(self) -> int:
        return len(self._enc)

    def __repr__(self) -> str:
        return f"Encoding(ids={self.ids!r}, tokens={self.tokens!r})"


class _LazyField:
    """Non-data descriptor: reads the field from the ``tokenizers.Encoding`` once, then the instance dict wins."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: LazyEncoding | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj._enc, self.name)
        setattr(obj, self.name, value)  # plain setattr: no __set__ here, and no __dict__ object is materialised
        return value


for _name in _FIELDS:
    setattr(LazyEncoding, _name, _LazyField(_name))


def collate_encodings(encodings: Sequence[Encoding], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Stack encodings into ``input_ids``, ``token_type_ids`` and ``attention_mask`` LongTensors ``[B, L]``.

    Shorter rows are padded on the right to the longest one with ``pad_id``, segment 0 and mask 0.
    """
    import torch  # here, not at the top: data preparation workers use the tokenizer and never pay for torch

    if not encodings:
        raise TokenizerError("collate_encodings got no encodings; pass at least one")
    length = max(len(e.ids) for e in encodings)
    out = {
        "input_ids": torch.full((len(encodings), length), pad_id, dtype=torch.long),
        "token_type_ids": torch.zeros((len(encodings), length), dtype=torch.long),
        "attention_mask": torch.zeros((len(encodings), length), dtype=torch.long),
    }
    for row, e in enumerate(encodings):
        n = len(e.ids)
        out["input_ids"][row, :n] = torch.tensor(e.ids, dtype=torch.long)
        out["token_type_ids"][row, :n] = torch.tensor(e.type_ids, dtype=torch.long)
        out["attention_mask"][row, :n] = torch.tensor(e.attention_mask, dtype=torch.long)
    return out
