"""A resumable, rank-aware batch iterator over an in-memory dataset (fine-tuning sets, tests).

The loop needs batch sources with ``state_dict()``/``load_state_dict()`` so that a resumed run sees exactly
the batches it would have seen. Pre-training shards have their own loader in :mod:`bertkit.data`; this one
serves any indexable dataset with a collate function.

Order is defined globally, independent of the number of processes: epoch ``e`` shuffles the examples with
seed ``(seed, e)`` and cuts them into *global micro-batches* ``0, 1, 2, ...``; process ``r`` of ``W`` takes
micro-batches ``r, r + W, r + 2W, ...``. One process accumulating ``W`` micro-batches therefore sees the same
examples per update as ``W`` processes with one each, and the position (global micro-batches consumed)
carries over to another world size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from bertkit.errors import ConfigError


class ResumableBatches:
    """Batches of ``batch_size`` examples of ``dataset`` collated by ``collate``; one pass per ``iter()``.

    Iterating resumes from the current position; after the epoch's last batch ``epoch`` is incremented
    (so the training loop sees the epoch end with that batch) and the iterator stops; the next ``iter()``
    runs the following epoch (``repeat=True`` never stops instead).
    """

    def __init__(self, dataset: Sequence[Any], batch_size: int, collate: Callable[[list[Any]], Any], *,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False, repeat: bool = False,
                 rank: int = 0, world_size: int = 1) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} is outside world size {world_size}")
        self.dataset, self.batch_size, self.collate = dataset, batch_size, collate
        self.shuffle, self.seed, self.drop_last, self.repeat = shuffle, seed, drop_last, repeat
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        self.position = 0  # global micro-batches consumed in this epoch
        if self.global_batches_per_epoch() == 0:
            raise ConfigError(
                f"dataset of {len(dataset)} examples is too small for {world_size} process(es) x batch {batch_size}"
            )

    def global_batches_per_epoch(self) -> int:
        n = len(self.dataset)
        batches = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return batches - batches % self.world_size  # every process gets as many batches as the others

    def __len__(self) -> int:
        """Micro-batches this process gets per epoch."""
        return self.global_batches_per_epoch() // self.world_size

    def _order(self) -> list[int]:
        if not self.shuffle:
            return list(range(len(self.dataset)))
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return torch.randperm(len(self.dataset), generator=generator).tolist()

    def __iter__(self) -> Iterator[Any]:
        while True:
            order = self._order()
            total = self.global_batches_per_epoch()
            last = False
            while not last:
                start = (self.position + self.rank) * self.batch_size
                batch = self.collate([self.dataset[i] for i in order[start:start + self.batch_size]])
                self.position += self.world_size
                last = self.position >= total
                if last:  # roll over before yielding: the state after the epoch's last batch is "next epoch"
                    self.epoch += 1
                    self.position = 0
                yield batch
            if not self.repeat:
                return

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed,
                "batch_size": self.batch_size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("batch_size", self.batch_size) != self.batch_size:
            raise ConfigError(
                f"the checkpoint's loader used micro-batch size {state['batch_size']}, this run {self.batch_size}; "
                "resume with the same --micro-batch-size"
            )
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
        self.seed = int(state.get("seed", self.seed))
