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


class BatchEncoding(dict):
    """What calling a ``Tokenizer`` returns, shaped like Hugging Face's ``BatchEncoding``: a dict of
    ``input_ids``, ``token_type_ids`` and ``attention_mask`` (and ``offset_mapping`` when asked), each a list (one
    text), a list of lists, a ``torch`` tensor or a ``numpy`` array; keys also read as attributes
    (``batch.input_ids``). ``encodings`` holds the ``Encoding`` of every row (tokens, offsets, word ids)."""

    def __init__(self, data: dict[str, Any], encodings: list[Encoding]) -> None:
        super().__init__(data)
        self.encodings = encodings

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"BatchEncoding has no key {name!r}; it has {sorted(self)}") from None

    def to(self, device: Any) -> BatchEncoding:
        """The tensors moved to ``device`` (``"cuda"``, a ``torch.device``), as ``BatchEncoding.to`` in HF."""
        moved = {key: value.to(device) if hasattr(value, "to") else value for key, value in self.items()}
        return BatchEncoding(moved, self.encodings)

    def tokens(self, batch_index: int = 0) -> list[str]:
        """The tokens of row ``batch_index``."""
        return self.encodings[batch_index].tokens

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        """The word number of each token of row ``batch_index`` (``None`` for special and padding tokens)."""
        return self.encodings[batch_index].word_ids


def batch_encoding(
    encodings: list[Encoding],
    *,
    single: bool,
    return_tensors: str | None,
    return_token_type_ids: bool = True,
    return_attention_mask: bool = True,
    return_offsets_mapping: bool = False,
) -> BatchEncoding:
    """The fields of ``encodings`` as lists (one list when ``single``), or as ``[B, L]`` arrays or tensors."""
    fields = {"input_ids": "ids"}
    if return_token_type_ids:
        fields["token_type_ids"] = "type_ids"
    if return_attention_mask:
        fields["attention_mask"] = "attention_mask"
    if return_offsets_mapping:
        fields["offset_mapping"] = "offsets"
    if return_tensors is None:
        data: dict[str, Any] = {key: [getattr(e, name) for e in encodings] for key, name in fields.items()}
        if single:
            data = {key: rows[0] for key, rows in data.items()}
        return BatchEncoding(data, encodings)
    if return_tensors not in ("pt", "np"):
        raise TokenizerError(f"return_tensors must be 'pt', 'np' or None, got {return_tensors!r}")
    lengths = {len(e.ids) for e in encodings}
    if len(lengths) > 1:
        raise TokenizerError(
            f"the texts encode to different lengths ({min(lengths)} to {max(lengths)} tokens), so they cannot be "
            "one tensor: pass padding=True (or padding='max_length' with max_length=...)"
        )
    import numpy as np

    arrays = {key: np.asarray([getattr(e, name) for e in encodings], dtype=np.int64) for key, name in fields.items()}
    if return_tensors == "pt":
        import torch

        return BatchEncoding({key: torch.from_numpy(a) for key, a in arrays.items()}, encodings)
    return BatchEncoding(dict(arrays), encodings)
