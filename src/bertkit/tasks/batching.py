"""Length-grouped batching for fine-tuning: batches of similar lengths, so little compute goes to padding.

Every epoch the feature indexes are shuffled, cut into chunks of ``batch_size * chunk_batches`` features, each
chunk is sorted by length and cut into batches, and the batches of all chunks are shuffled together. Batches
thus stay random in order and content (up to the chunk), but each pads only to its own longest feature.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from bertkit.data.batch_sources import epoch_rng


class LengthGroupedOrder:
    """The length-grouped batch order of one epoch, as an ordering strategy of a resumable batch source."""

    def __init__(self, lengths: Sequence[int] | np.ndarray, chunk_batches: int = 50, drop_last: bool = False):
        if chunk_batches < 1:
            raise ValueError(f"chunk_batches must be positive, got {chunk_batches}")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.chunk_batches = chunk_batches
        self.drop_last = drop_last

    def batches(self, num_items: int, batch_size: int, rng: np.random.Generator) -> list[list[int]]:
        """Shuffle, sort each chunk of ``batch_size * chunk_batches`` by length, cut, shuffle the batches."""
        order = rng.permutation(num_items)
        chunk = batch_size * self.chunk_batches
        batches: list[list[int]] = []
        for c in range(0, num_items, chunk):
            part = order[c : c + chunk]
            part = part[np.argsort(-self.lengths[part], kind="stable")]
            batches += [part[i : i + batch_size].tolist() for i in range(0, len(part), batch_size)]
        if self.drop_last:
            batches = [b for b in batches if len(b) == batch_size]
        return [batches[i] for i in rng.permutation(len(batches))]


class LengthGroupedBatchSampler:
    """A ``torch.utils.data.DataLoader`` ``batch_sampler`` yielding lists of indexes of similar lengths.

    Deterministic for a given ``seed`` and epoch (``set_epoch``); with ``shuffle=False`` it yields plain
    consecutive batches (for evaluation, where the order of outputs must match the features), unless
    ``sort_when_not_shuffled`` is set, in which case batches are formed from length-sorted indexes.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        chunk_batches: int = 50,
        drop_last: bool = False,
        sort_when_not_shuffled: bool = False,
    ):
        if batch_size < 1 or chunk_batches < 1:
            raise ValueError(f"batch_size and chunk_batches must be positive, got {batch_size}, {chunk_batches}")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.chunk_batches = chunk_batches
        self.drop_last = drop_last
        self.sort_when_not_shuffled = sort_when_not_shuffled
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order ``__iter__`` yields (a different shuffle per epoch)."""
        self.epoch = epoch

    def batches(self) -> list[list[int]]:
        """All batches of the current epoch, in order."""
        n = len(self.lengths)
        if not self.shuffle:
            order = np.argsort(-self.lengths, kind="stable") if self.sort_when_not_shuffled else np.arange(n)
            batches = [order[i : i + self.batch_size].tolist() for i in range(0, n, self.batch_size)]
        else:
            grouping = LengthGroupedOrder(self.lengths, self.chunk_batches, self.drop_last)
            return grouping.batches(n, self.batch_size, epoch_rng(self.seed, self.epoch))
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        return (
            len(self.batches())
            if self.drop_last and self.shuffle
            else (len(self.lengths) // self.batch_size if self.drop_last else -(-len(self.lengths) // self.batch_size))
        )


def padding_fraction(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Share of the padded batch tensors' cells that are padding (0 = no waste)."""
    array = np.asarray(lengths)
    cells = sum(len(b) * array[list(b)].max() for b in batches)
    real = sum(array[list(b)].sum() for b in batches)
    return float(1 - real / cells) if cells else 0.0
