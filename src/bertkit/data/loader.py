"""Loading prepared shards for training: a map-style dataset, a stateful batch sampler and a resumable loader.

Order: epoch ``e`` visits the instances in a permutation drawn from ``(seed, e)``; consecutive
``batch_size`` slices of it are the global micro-batches, and rank ``r`` of ``world_size`` takes batches
``r, r + w, r + 2w, ...`` (disjoint; every rank gets the same count, the tail is dropped). The sampler
yields ``(epoch, index)`` keys, so a dataset copy inside a DataLoader worker needs no shared epoch
state, and dynamic masks are drawn from ``(seed, epoch, index)``: the batches are the same whatever
``num_workers`` and wherever they are computed.

Resume: :class:`PretrainingLoader` counts the batches it has handed out; ``state_dict()`` gives
``(epoch, position)`` and ``load_state_dict()`` continues with exactly the next batch.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from bertkit.data.masking import MaskingSpec, derive_seed, mask_tokens
from bertkit.data.shards import ShardSplit, load_splits, open_dataset
from bertkit.errors import DataError

IGNORE_INDEX = -100
Key = tuple[int, int]


class PretrainingDataset(Dataset):
    """Instances of one split of a prepared dataset, memory-mapped; item keys are ``(epoch, index)``."""

    def __init__(self, directory: str | Path, split: str = "train", *, seed: int | None = None,
                 allow_incomplete: bool = False):
        self.directory = Path(directory)
        self.meta = open_dataset(self.directory)
        if not self.meta.get("complete") and not allow_incomplete:
            raise DataError(f"{self.directory} holds {len(self.meta['blocks'])} of {self.meta.get('expected_blocks')} "
                            "blocks; finish the preparing jobs, or pass allow_incomplete")
        settings = self.meta["settings"]
        self.split = split
        self.max_seq_length: int = settings["max_seq_length"]
        self.max_predictions: int = settings["max_predictions_per_seq"]
        self.dynamic: bool = settings["masking"] == "dynamic"
        self.seed = settings["seed"] if seed is None else seed
        self.pad_id: int = self.meta["tokenizer"]["pad_id"]
        self.shards: list[ShardSplit] = load_splits(self.directory, self.meta, split)
        self._starts = np.cumsum([0] + [s.num_instances for s in self.shards]).tolist()
        self.spec: MaskingSpec | None = self._masking_spec() if self.dynamic else None

    def _masking_spec(self) -> MaskingSpec:
        tok = self.meta["tokenizer"]
        settings = self.meta["settings"]
        table = None
        if settings["whole_word_mask"]:
            table = np.load(self.directory / self.meta["continuation_file"], allow_pickle=False)
        return MaskingSpec(
            mask_id=tok["mask_id"], vocab_size=tok["vocab_size"],
            special_ids=frozenset({tok["cls_id"], tok["sep_id"], tok["pad_id"]}),
            masked_lm_prob=settings["masked_lm_prob"], max_predictions_per_seq=self.max_predictions,
            whole_word_mask=settings["whole_word_mask"], is_continuation=table,
        )

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, key: int | Key) -> dict[str, Any]:
        """One instance: ``input_ids`` (int64), ``a_length``, ``next_sentence_label``, ``masked_positions``
        and ``masked_labels`` (unpadded). ``key`` is ``(epoch, index)`` or an index (epoch 0)."""
        epoch, index = (0, key) if isinstance(key, (int, np.integer)) else key
        if not 0 <= index < len(self):
            raise IndexError(f"instance {index} out of range for {len(self)} instances")
        s = bisect.bisect_right(self._starts, index) - 1
        arrays = self.shards[s].arrays()
        i = index - self._starts[s]
        start, end = arrays["offsets"][i], arrays["offsets"][i + 1]
        ids = np.asarray(arrays["input_ids"][start:end], dtype=np.int64)
        if self.spec is not None:
            masked = mask_tokens(ids.tolist(), self.spec, random.Random(derive_seed(self.seed, epoch, index)))
            ids = np.asarray(masked.tokens, dtype=np.int64)
            positions = np.asarray(masked.positions, dtype=np.int64)
            labels = np.asarray(masked.labels, dtype=np.int64)
        else:
            count = int(arrays["masked_counts"][i])
            positions = np.asarray(arrays["masked_positions"][i, :count], dtype=np.int64)
            labels = np.asarray(arrays["masked_labels"][i, :count], dtype=np.int64)
        return {
            "input_ids": ids,
            "a_length": int(arrays["a_lengths"][i]),
            "next_sentence_label": int(arrays["next_sentence_label"][i]),
            "masked_positions": positions,
            "masked_labels": labels,
        }


class PretrainingCollator:
    """Pads instances into the batch dict of the contract (``model(**batch)`` on ``BertForPreTraining``)."""

    def __init__(self, *, pad_id: int, max_predictions: int, pad_to: int | None = None):
        """``pad_to``: a fixed length (e.g. ``max_seq_length``) or None for the batch's longest."""
        self.pad_id = pad_id
        self.max_predictions = max_predictions
        self.pad_to = pad_to

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        b = len(items)
        length = self.pad_to or max(len(x["input_ids"]) for x in items)
        input_ids = torch.full((b, length), self.pad_id, dtype=torch.long)
        token_type_ids = torch.zeros((b, length), dtype=torch.long)
        attention_mask = torch.zeros((b, length), dtype=torch.long)
        positions = torch.zeros((b, self.max_predictions), dtype=torch.long)
        labels = torch.full((b, self.max_predictions), IGNORE_INDEX, dtype=torch.long)
        nsp = torch.empty(b, dtype=torch.long)
        for row, item in enumerate(items):
            n = len(item["input_ids"])
            input_ids[row, :n] = torch.from_numpy(item["input_ids"])
            token_type_ids[row, item["a_length"] + 2:n] = 1
            attention_mask[row, :n] = 1
            k = len(item["masked_positions"])
            positions[row, :k] = torch.from_numpy(item["masked_positions"])
            labels[row, :k] = torch.from_numpy(item["masked_labels"])
            nsp[row] = item["next_sentence_label"]
        return {
            "input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
            "masked_positions": positions, "masked_labels": labels, "next_sentence_label": nsp,
        }


class PretrainingBatchSampler(Sampler[list[Key]]):
    """Batches of ``(epoch, index)`` keys for one rank, starting at ``(epoch, start_batch)``."""

    def __init__(self, num_instances: int, batch_size: int, *, seed: int, epoch: int = 0, start_batch: int = 0,
                 shuffle: bool = True, rank: int = 0, world_size: int = 1, drop_last: bool = True):
        if batch_size < 1:
            raise DataError(f"batch_size must be positive, got {batch_size}")
        if not 0 <= rank < world_size:
            raise DataError(f"rank must be in [0, {world_size}), got {rank}")
        self.num_instances = num_instances
        self.batch_size = batch_size
        self.seed, self.epoch, self.start_batch = seed, epoch, start_batch
        self.shuffle, self.rank, self.world_size, self.drop_last = shuffle, rank, world_size, drop_last

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        full, rest = divmod(self.num_instances, self.batch_size)
        total = full + (1 if rest and not self.drop_last else 0)
        return total // self.world_size

    def order(self, epoch: int) -> np.ndarray:
        """The global visiting order of epoch ``epoch``."""
        if not self.shuffle:
            return np.arange(self.num_instances)
        return np.random.default_rng(derive_seed(self.seed, epoch)).permutation(self.num_instances)

    def __iter__(self) -> Iterator[list[Key]]:
        order = self.order(self.epoch)
        for local in range(self.start_batch, len(self)):
            g = local * self.world_size + self.rank
            chunk = order[g * self.batch_size:(g + 1) * self.batch_size]
            yield [(self.epoch, int(i)) for i in chunk]


class PretrainingLoader:
    """Iterates batches of a prepared dataset, one epoch per ``iter()``, resumable at any batch.

    ``state_dict()`` is part of a training checkpoint; after ``load_state_dict`` the next batch is the one
    that would have come next. Works with ``num_workers > 0``: order and masks do not depend on it.
    """

    def __init__(self, directory: str | Path, batch_size: int, *, split: str = "train", seed: int = 0,
                 shuffle: bool = True, rank: int = 0, world_size: int = 1, num_workers: int = 0,
                 pad_to_max_length: bool = False, drop_last: bool = True, pin_memory: bool = False,
                 dataset: PretrainingDataset | None = None):
        self.dataset = dataset or PretrainingDataset(directory, split)
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
        self.rank, self.world_size, self.drop_last = rank, world_size, drop_last
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.collate = PretrainingCollator(
            pad_id=self.dataset.pad_id, max_predictions=self.dataset.max_predictions,
            pad_to=self.dataset.max_seq_length if pad_to_max_length else None,
        )
        self.epoch = 0
        self.position = 0
        """Batches of the current epoch already handed out by this rank."""

    def _sampler(self) -> PretrainingBatchSampler:
        return PretrainingBatchSampler(
            len(self.dataset), self.batch_size, seed=self.seed, epoch=self.epoch, start_batch=self.position,
            shuffle=self.shuffle, rank=self.rank, world_size=self.world_size, drop_last=self.drop_last,
        )

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return len(self._sampler())

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        sampler = self._sampler()
        if self.num_workers > 0:
            batches = DataLoader(self.dataset, batch_sampler=sampler, collate_fn=self.collate,
                                 num_workers=self.num_workers, pin_memory=self.pin_memory)
        else:
            batches = (self.collate([self.dataset[k] for k in keys]) for keys in sampler)
        for batch in batches:
            self.position += 1
            yield batch
        self.epoch += 1
        self.position = 0

    def state_dict(self) -> dict[str, int]:
        """Where the stream stands, plus what must match on resume."""
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed, "batch_size": self.batch_size,
                "world_size": self.world_size, "num_instances": len(self.dataset)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from ``state``; the batch layout (size, ranks, data) must be the one it was saved with."""
        for key in ("seed", "batch_size", "world_size", "num_instances"):
            mine = len(self.dataset) if key == "num_instances" else getattr(self, key)
            if key in state and state[key] != mine:
                raise DataError(f"cannot resume the data stream: {key} was {state[key]}, now {mine}")
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
