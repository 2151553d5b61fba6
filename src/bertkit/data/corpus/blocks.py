"""Blocks: consecutive documents processed together, the unit of parallelism and of output."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from bertkit.data.corpus.documents import RawDocument
from bertkit.errors import DataError


@dataclass
class Block:
    """Consecutive documents processed together with one RNG: the unit of parallelism and of output.

    Block boundaries depend only on the content order and ``block_bytes``, never on the worker count,
    so output is identical whatever the parallelism.
    """

    index: int
    documents: list[RawDocument]
    nbytes: int


def iter_blocks(documents: Iterable[RawDocument], block_bytes: int) -> Iterator[Block]:
    """Group consecutive documents into blocks of at least ``block_bytes`` of text (the last may be smaller)."""
    if block_bytes < 1:
        raise DataError("block_bytes must be positive")
    current: list[RawDocument] = []
    size = 0
    index = 0
    for document in documents:
        current.append(document)
        size += document.nbytes
        if size >= block_bytes:
            yield Block(index, current, size)
            index += 1
            current, size = [], 0
    if current:
        yield Block(index, current, size)
