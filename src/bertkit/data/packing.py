"""Sequence packing: the sequences of a padded batch laid back to back in rows, so that a step spends its work on
real tokens instead of padding.

``pack_batch`` takes a collated batch (``input_ids [B, L]`` with ``attention_mask``, and per-token keys such as
``token_type_ids`` and dense ``labels``, or MLM's ``masked_positions``/``masked_labels``) and places each
sequence whole in a row of ``row_length`` tokens, longest first into the first row with room (first-fit
decreasing). The packed batch adds ``sequence_ids`` (which sequence of its row a token belongs to), from which
the model keeps attention within each sequence and restarts position ids at 0, and ``cu_seqlens``, where each
sequence starts among the flattened rows (padding runs count as sequences of their own), so varlen attention
finds them without a host sync. Each sequence's tokens, labels and masked positions move with it: a loss that
sums over tokens and divides by their count (MLM, token classification) is the same as on the padded batch.

A sequence-level target (``next_sentence_label``, a class label per sequence) has no row of its own in a packed
batch; such batches are refused with a clear error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from bertkit.errors import ConfigError

PER_TOKEN = ("input_ids", "token_type_ids", "labels")
"""Keys holding one value per token ``[B, L]``, moved with their sequence (padding value 0, -100 for labels)."""


def first_fit_decreasing(lengths: list[int], capacity: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into bins of at most ``capacity``, longest first into the first bin with room."""
    bins: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        length = lengths[index]
        if length > capacity:
            raise ConfigError(
                f"a sequence of {length} tokens does not fit a packed row of {capacity}; raise row_length"
            )
        slot = next((b for b, free in enumerate(room) if free >= length), None)
        if slot is None:
            bins.append([])
            room.append(capacity)
            slot = len(bins) - 1
        bins[slot].append(index)
        room[slot] -= length
    return bins


def pack_batch(batch: Mapping[str, Any], row_length: int, rows: int | None = None) -> dict[str, Any]:
    """The sequences of the padded ``batch`` packed into rows of ``row_length`` tokens (see the module's text).

    ``rows``: pad the packed batch to exactly this many rows (fixed shapes, as CUDA graphs need); an error if
    the sequences need more."""
    _check_keys(batch)
    mask = batch.get("attention_mask")
    ids: Tensor = batch["input_ids"]
    lengths = (mask.sum(1) if mask is not None else torch.full((ids.shape[0],), ids.shape[1])).tolist()
    bins = first_fit_decreasing(lengths, row_length)
    count = len(bins) if rows is None else rows
    if count < len(bins):
        raise ConfigError(f"the batch needs {len(bins)} packed rows of {row_length} tokens; rows={rows} is too few")
    out: dict[str, Any] = {
        key: torch.full((count, row_length), -100 if key == "labels" else 0, dtype=batch[key].dtype)
        for key in PER_TOKEN
        if key in batch
    }
    out["attention_mask"] = torch.zeros(count, row_length, dtype=torch.long)
    out["sequence_ids"] = torch.zeros(count, row_length, dtype=torch.long)
    starts: list[int] = []
    masked: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    for row in range(count):
        offset = 0
        for number, index in enumerate(bins[row] if row < len(bins) else []):
            length = lengths[index]
            for key in PER_TOKEN:
                if key in batch:
                    out[key][row, offset : offset + length] = batch[key][index, :length]
            out["attention_mask"][row, offset : offset + length] = 1
            out["sequence_ids"][row, offset : offset + length] = number
            masked[row] += _masked_of(batch, index, offset)
            starts.append(row * row_length + offset)
            offset += length
        if offset < row_length:  # the row's padding: a sequence of its own
            out["sequence_ids"][row, offset:] = len(bins[row]) if row < len(bins) else 0
            starts.append(row * row_length + offset)
    out["cu_seqlens"] = torch.tensor([*starts, count * row_length], dtype=torch.int32)
    if "masked_positions" in batch:
        out["masked_positions"], out["masked_labels"] = _masked_tensors(masked)
    return out


def _check_keys(batch: Mapping[str, Any]) -> None:
    known = {*PER_TOKEN, "attention_mask", "masked_positions", "masked_labels"}
    unknown = sorted(set(batch) - known)
    if unknown:
        raise ConfigError(
            f"packing moves per-token values only; this batch also has {', '.join(unknown)} (a per-sequence "
            f"target such as next_sentence_label has no row in a packed batch): train it unpacked"
        )


def _masked_of(batch: Mapping[str, Any], index: int, offset: int) -> list[tuple[int, int]]:
    """The (position in the row, label) pairs of sequence ``index``'s masked tokens, placed at ``offset``."""
    if "masked_positions" not in batch:
        return []
    positions, labels = batch["masked_positions"][index].tolist(), batch["masked_labels"][index].tolist()
    return [(offset + p, label) for p, label in zip(positions, labels, strict=True) if label != -100]


def _masked_tensors(masked: list[list[tuple[int, int]]]) -> tuple[Tensor, Tensor]:
    width = max(1, max(len(pairs) for pairs in masked))
    positions = torch.zeros(len(masked), width, dtype=torch.long)
    labels = torch.full((len(masked), width), -100, dtype=torch.long)
    for row, pairs in enumerate(masked):
        if pairs:
            positions[row, : len(pairs)] = torch.tensor([p for p, _ in pairs])
            labels[row, : len(pairs)] = torch.tensor([label for _, label in pairs])
    return positions, labels
