"""Batches with no text twice: in-batch negatives are only negatives when no other row shares a text.

SQuAD-style pairs share passages heavily (several questions per paragraph): two rows with the same positive in
one batch would each count the other's positive, their own, as a negative. :class:`NoDuplicatesOrder` is the
batch order of :class:`bertkit.data.batch_sources.ResumableBatches` that rules this out, as sentence-transformers'
``NoDuplicatesBatchSampler`` does: rows are taken in a random order (the epoch's, from the seed) and each goes
into the first batch that has room and holds none of its texts (anchor, positive or negative). An epoch has the
usual ``ceil(rows / batch)`` batches, so the step count is known ahead; a row that fits in no batch of the epoch
(all the batches with room already hold one of its texts: a handful at the end of an epoch at most) sits that
epoch out and is counted in :attr:`NoDuplicatesOrder.left_out`. Deterministic from the seed and epoch, so a
resumed run sees the same batches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bertkit.errors import DataError


class NoDuplicatesOrder:
    """The no-duplicates batch order of one epoch; ``texts[i]`` are the text ids (any hashable) of row ``i``."""

    name = "no-duplicates"

    def __init__(self, texts: Sequence[Sequence[int]]):
        self.texts = [frozenset(t) for t in texts]
        self.left_out = 0
        """Rows that fitted in no batch in the last epoch ordered."""

    def batches(self, num_items: int, batch_size: int, rng: np.random.Generator) -> list[list[int]]:
        """``ceil(num_items / batch_size)`` batches of at most ``batch_size`` rows, no text twice in a batch."""
        count = -(-num_items // batch_size)
        batches: list[list[int]] = [[] for _ in range(count)]
        seen: list[set[int]] = [set() for _ in range(count)]
        first_open = 0  # batches before it are full
        left_out = 0
        for item in rng.permutation(num_items).tolist():
            texts = self.texts[item]
            placed = False
            for b in range(first_open, count):
                if len(batches[b]) < batch_size and not texts & seen[b]:
                    batches[b].append(item)
                    seen[b].update(texts)
                    placed = True
                    break
            left_out += not placed
            while first_open < count and len(batches[first_open]) >= batch_size:
                first_open += 1
        self.left_out = left_out
        if not batches[-1]:
            raise DataError(
                f"{left_out} of {num_items} rows share texts with every batch of {batch_size}: too few distinct texts "
                "for batches without duplicates; lower --micro-batch-size"
            )
        return batches
