"""Resumable batch sources: the one contract the training loop relies on, and the finite-dataset source.

The contract (:class:`BatchSource`): iterating yields this process's micro-batches from where the source
stands; ``epoch`` counts finished passes and is incremented together with an epoch's last batch (so the loop
sees the epoch end with that batch); ``state_dict()``/``load_state_dict()`` save and restore the position, so
a resumed run sees exactly the batches it would have seen.

Order is global, independent of the number of processes: epoch ``e`` draws its order from
``epoch_rng(seed, e)`` (the one seed derivation of every source) and is cut into *global micro-batches*
``0, 1, 2, ...``; process ``r`` of ``W`` takes micro-batches ``r, r + W, r + 2W, ...``. The position counts
global micro-batches, so one process accumulating ``W`` micro-batches sees the same examples per update as
``W`` processes with one each, and a checkpoint resumes on another number of processes. How an epoch is cut
into batches (random, or grouped by length) is an :class:`Ordering` strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bertkit.errors import BertkitError, ConfigError


class Dataset(Protocol):
    """Items by index (a list, or a map-style dataset)."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: Any, /) -> Any: ...


class Stateful(Protocol):
    """Something whose position a checkpoint saves and restores."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class BatchSource(Stateful, Protocol):
    """What the training loop iterates: a stateful source of this process's micro-batches."""

    epoch: int
    """Finished passes over the data; incremented together with an epoch's last batch."""

    def __iter__(self) -> Iterator[Any]: ...


@runtime_checkable
class FollowsRun(Protocol):
    """A source whose batches depend on how far the run has come (a masking-rate decay on a time budget, whose
    length in batches is not known in advance): the loop tells it the share of the run done before each update."""

    def set_run_share(self, share: float) -> None: ...


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """The random stream of epoch ``epoch``: the only place a batch order draws its randomness from."""
    return np.random.default_rng([seed, epoch])


class Ordering(Protocol):
    """How one epoch's items are cut into global micro-batches (lists of item indexes)."""

    def batches(self, num_items: int, batch_size: int, rng: np.random.Generator) -> list[list[int]]: ...


@dataclass(frozen=True)
class RandomOrder:
    """Consecutive slices of a random permutation (of ``range(num_items)`` when ``shuffle`` is off)."""

    shuffle: bool = True

    def batches(self, num_items: int, batch_size: int, rng: np.random.Generator) -> list[list[int]]:
        order = rng.permutation(num_items) if self.shuffle else np.arange(num_items)
        return [order[i : i + batch_size].tolist() for i in range(0, num_items, batch_size)]


class ResumableBatches:
    """Micro-batches of ``batch_size`` items of ``dataset`` collated by ``collate``, for one process.

    One epoch per ``iter()``, from the current position; ``repeat=True`` never stops instead. Every process
    gets as many micro-batches as the others (the tail that does not divide by the world size is dropped);
    ``drop_last`` also drops batches with fewer than ``batch_size`` items.
    """

    error: type[BertkitError] = ConfigError
    """The error raised for a bad layout or a checkpoint that does not fit this source."""

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int,
        collate: Callable[[list[Any]], Any],
        *,
        order: Ordering = RandomOrder(),
        seed: int = 0,
        drop_last: bool = False,
        repeat: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size < 1:
            raise self.error(f"batch_size must be positive, got {batch_size}")
        if not 0 <= rank < world_size:
            raise self.error(f"rank {rank} is outside world size {world_size}")
        self.dataset, self.batch_size, self.collate, self.order = dataset, batch_size, collate, order
        self.seed, self.drop_last, self.repeat = seed, drop_last, repeat
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        self.position = 0
        """Global micro-batches of the current epoch already consumed (by all processes together)."""
        if self.global_batches_per_epoch() == 0:
            raise self.error(self._too_small())

    def _too_small(self) -> str:
        return (
            f"{len(self.dataset)} examples are too few for {self.world_size} process(es) x micro-batch "
            f"{self.batch_size}; use more data or a smaller --micro-batch-size"
        )

    def global_batches_per_epoch(self) -> int:
        n = len(self.dataset)
        batches = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return batches - batches % self.world_size

    def __len__(self) -> int:
        """Micro-batches this process gets per epoch."""
        return self.global_batches_per_epoch() // self.world_size

    @property
    def consumed(self) -> int:
        """Micro-batches this process has taken since the start of training (resumed runs included)."""
        return self.epoch * len(self) + self.position // self.world_size

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """The global micro-batches (item indexes) of ``epoch``, cut to a multiple of the world size."""
        batches = self.order.batches(len(self.dataset), self.batch_size, epoch_rng(self.seed, epoch))
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        return batches[: self.global_batches_per_epoch()]

    def _load(self, epoch: int, batches: list[list[int]]) -> Iterable[Any]:
        """The collated batches of these index lists (a subclass may load them in worker processes)."""
        return (self.collate([self.dataset[i] for i in indexes]) for indexes in batches)

    def __iter__(self) -> Iterator[Any]:
        while True:
            mine = self.epoch_batches(self.epoch)[self.position + self.rank :: self.world_size]
            total = self.global_batches_per_epoch()
            for batch in self._load(self.epoch, mine):
                self.position += self.world_size
                if self.position >= total:  # the state after an epoch's last batch is "start of the next epoch"
                    self.epoch += 1
                    self.position = 0
                yield batch
            if not self.repeat:
                return

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "num_items": len(self.dataset),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state``; the micro-batch size and the data must be those it was saved with."""
        if state.get("batch_size", self.batch_size) != self.batch_size:
            raise self.error(
                f"cannot resume the data stream: batch_size (micro-batch size) was {state['batch_size']}, "
                f"now {self.batch_size}; resume with the same --micro-batch-size"
            )
        saved_items = state.get("num_items", state.get("num_features", state.get("num_instances", len(self.dataset))))
        if saved_items != len(self.dataset):
            raise self.error(
                f"cannot resume the data stream: it was saved over {saved_items} examples, now "
                f"{len(self.dataset)}; resume with the same data and --max-seq-length"
            )
        position = int(state["position"])
        if position % self.world_size:
            raise self.error(
                f"cannot split the saved data position ({position} micro-batches) over "
                f"{self.world_size} processes; keep the global batch a multiple of micro-batch x "
                "processes"
            )
        self.epoch, self.position, self.seed = int(state["epoch"]), position, int(state.get("seed", self.seed))
        if self.position >= self.global_batches_per_epoch():
            self.epoch, self.position = self.epoch + 1, 0
