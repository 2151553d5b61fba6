"""Loading prepared shards for training: a map-style dataset, its collator and the resumable loader.

Order and resume follow the one batch-source contract of :mod:`bertkit.data.batch_sources`: epoch ``e`` visits the
instances in a permutation drawn from ``epoch_rng(seed, e)``, cut into global micro-batches of which rank
``r`` of ``world_size`` takes ``r, r + w, ...``, and the state counts global micro-batches. Instances are
fetched by ``(epoch, index)`` keys, so a dataset copy inside a DataLoader worker needs no shared epoch state,
and dynamic masks are drawn from ``(seed, epoch, index)``: the batches are the same whatever ``num_workers``
and wherever they are computed. A masking-rate schedule (:class:`~bertkit.data.masking.MaskingRate`) adds the
rate of the item's micro-batch to its key, ``(epoch, index, rate)``, computed from the micro-batch's place in
the run, so a resumed run draws the same masks too.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from bertkit.data.batch_sources import RandomOrder, ResumableBatches
from bertkit.data.masking import MaskingRate, MaskingSpec, derive_seed, mask_tokens
from bertkit.data.shards import ShardSplit, load_splits, open_dataset
from bertkit.errors import DataError

IGNORE_INDEX = -100
Key = tuple[int, int] | tuple[int, int, float]


class PretrainingDataset(Dataset):
    """Instances of one split of a prepared dataset, memory-mapped; item keys are ``(epoch, index)``."""

    def __init__(
        self,
        directory: str | Path,
        split: str = "train",
        *,
        seed: int | None = None,
        allow_incomplete: bool = False,
        masking_rate: MaskingRate | None = None,
    ):
        """``masking_rate``: the rate schedule of dynamic masking (default: the dataset's ``masked_lm_prob``);
        the prediction slots widen to its highest rate."""
        self.directory = Path(directory)
        self.meta = open_dataset(self.directory)
        if not self.meta.get("complete") and not allow_incomplete:
            raise DataError(
                f"{self.directory} holds {len(self.meta['blocks'])} of {self.meta.get('expected_blocks')} "
                "blocks; finish the preparing jobs, or pass allow_incomplete"
            )
        settings = self.meta["settings"]
        self.split = split
        self.max_seq_length: int = settings["max_seq_length"]
        self.max_predictions: int = settings["max_predictions_per_seq"]
        self.dynamic: bool = settings["masking"] == "dynamic"
        self.nsp: bool = settings.get("nsp", True)
        """Next-sentence pairs (BERT); False: full-sentence blocks, trained without the next-sentence task."""
        if masking_rate is not None and not self.dynamic:
            raise DataError(
                f"a masking rate other than the prepared one needs dynamic masking, but {self.directory} holds "
                "static masks; prepare the data with --masking dynamic (or --recipe modern)"
            )
        self.masking_rate = masking_rate
        self.seed = settings["seed"] if seed is None else seed
        self.pad_id: int = self.meta["tokenizer"]["pad_id"]
        if masking_rate is not None:
            self.max_predictions = max(self.max_predictions, math.ceil(self.max_seq_length * masking_rate.highest))
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
            mask_id=tok["mask_id"],
            vocab_size=tok["vocab_size"],
            special_ids=frozenset({tok["cls_id"], tok["sep_id"], tok["pad_id"]}),
            masked_lm_prob=settings["masked_lm_prob"],
            max_predictions_per_seq=self.max_predictions,
            whole_word_mask=settings["whole_word_mask"],
            is_continuation=table,
        )

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, key: int | Key) -> dict[str, Any]:
        """One instance: ``input_ids`` (int64), ``a_length``, ``next_sentence_label``, ``masked_positions``
        and ``masked_labels`` (unpadded). ``key`` is ``(epoch, index)``, ``(epoch, index, masking rate)`` or an index (epoch 0)."""
        epoch, index, rate = _key(key)
        if not 0 <= index < len(self):
            raise IndexError(f"instance {index} out of range for {len(self)} instances")
        s = bisect.bisect_right(self._starts, index) - 1
        arrays = self.shards[s].arrays()
        i = index - self._starts[s]
        start, end = arrays["offsets"][i], arrays["offsets"][i + 1]
        ids = np.asarray(arrays["input_ids"][start:end], dtype=np.int64)
        if self.spec is not None:
            spec = self.spec if rate is None else dataclasses.replace(self.spec, masked_lm_prob=rate)
            masked = mask_tokens(ids.tolist(), spec, random.Random(derive_seed(self.seed, epoch, index)))
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


def _key(key: int | Key) -> tuple[int, int, float | None]:
    """``(epoch, index, rate or None)`` of an item key."""
    if isinstance(key, (int, np.integer)):
        return 0, int(key), None
    if len(key) == 3:
        return int(key[0]), int(key[1]), float(key[2])
    return int(key[0]), int(key[1]), None


class PretrainingCollator:
    """Pads instances into the batch dict of the contract (``model(**batch)`` on ``BertForPreTraining``)."""

    def __init__(self, *, pad_id: int, max_predictions: int, pad_to: int | None = None, nsp: bool = True):
        """``pad_to``: a fixed length (e.g. ``max_seq_length``) or None for the batch's longest; ``nsp`` False
        leaves ``next_sentence_label`` out (full-sentence data, no next-sentence task)."""
        self.nsp = nsp
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
            token_type_ids[row, item["a_length"] + 2 : n] = 1
            attention_mask[row, :n] = 1
            k = len(item["masked_positions"])
            positions[row, :k] = torch.from_numpy(item["masked_positions"])
            labels[row, :k] = torch.from_numpy(item["masked_labels"])
            nsp[row] = item["next_sentence_label"]
        batch = {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "attention_mask": attention_mask,
            "masked_positions": positions,
            "masked_labels": labels,
        }
        if self.nsp:
            batch["next_sentence_label"] = nsp
        return batch


class PretrainingLoader(ResumableBatches):
    """Micro-batches of a prepared dataset for one process, one epoch per ``iter()``, resumable at any batch.

    Items are fetched by ``(epoch, index)`` keys, so dynamic masks are drawn per epoch; the tail that does
    not fill a micro-batch is dropped unless ``drop_last=False``. Works with ``num_workers > 0``: order and
    masks do not depend on it.
    """

    error = DataError
    dataset: PretrainingDataset

    def __init__(
        self,
        directory: str | Path,
        batch_size: int,
        *,
        split: str = "train",
        seed: int = 0,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        num_workers: int = 0,
        pad_to_max_length: bool = False,
        drop_last: bool = True,
        pin_memory: bool = False,
        dataset: PretrainingDataset | None = None,
        masking_rate: MaskingRate | None = None,
    ):
        """``masking_rate``: the dynamic masking rate over the run (when ``dataset`` is not given; a given
        dataset brings its own)."""
        dataset = dataset or PretrainingDataset(directory, split, masking_rate=masking_rate)
        collate = PretrainingCollator(
            pad_id=dataset.pad_id,
            max_predictions=dataset.max_predictions,
            pad_to=dataset.max_seq_length if pad_to_max_length else None,
            nsp=dataset.nsp,
        )
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.follows_run = False
        """Whether the masking rate follows the share of the run done (a run on a time budget) rather than the
        micro-batch's place; the loop tells the share (:class:`~bertkit.data.batch_sources.FollowsRun`)."""
        self.run_share = 0.0
        super().__init__(
            dataset,
            batch_size,
            collate,
            order=RandomOrder(shuffle),
            seed=seed,
            drop_last=drop_last,
            rank=rank,
            world_size=world_size,
        )

    def _too_small(self) -> str:
        return (
            f"the {self.dataset.split} split has {len(self.dataset)} instances, fewer than one micro-batch of "
            f"{self.batch_size} per process x {self.world_size} process(es); prepare more data or lower "
            "--micro-batch-size"
        )

    def _sampler(self) -> Iterable[list[Key]]:
        """The ``(epoch, index)`` keys of this process's remaining micro-batches of the current epoch."""
        mine = self.epoch_batches(self.epoch)[self.position + self.rank :: self.world_size]
        return self._keys(self.epoch, mine)

    def _keys(self, epoch: int, batches: list[list[int]]) -> Iterable[list[Key]]:
        """The item keys of this process's ``batches`` of ``epoch``, which start at the current position; with
        a masking-rate schedule each carries the rate of its micro-batch's place in the run, or on a time budget
        the rate of the share of the run done when the batch is drawn."""
        schedule = self.dataset.masking_rate
        if schedule is None:
            return [[(epoch, i) for i in indexes] for indexes in batches]
        if self.follows_run:  # read as each batch is drawn (a few ahead with worker processes)
            return ([(epoch, i, schedule.at_share(self.run_share)) for i in indexes] for indexes in batches)
        first = epoch * self.global_batches_per_epoch() + self.position + self.rank
        rates = [schedule.at(first + k * self.world_size) for k in range(len(batches))]
        return [[(epoch, i, rate) for i in indexes] for indexes, rate in zip(batches, rates, strict=True)]

    def follow_run_share(self) -> None:
        """Draw the masking rate from the share of the run done (told by :meth:`set_run_share`), not from the
        micro-batch's place: for a run whose length is a time budget."""
        self.follows_run = True

    def set_run_share(self, share: float) -> None:
        self.run_share = share

    def _load(self, epoch: int, batches: list[list[int]]) -> Iterable[dict[str, torch.Tensor]]:
        keys = self._keys(epoch, batches)
        if self.num_workers > 0:
            return DataLoader(
                self.dataset,
                batch_sampler=keys,
                collate_fn=self.collate,
                num_workers=self.num_workers,
                pin_memory=self.pin_memory,
            )
        return (self.collate([self.dataset[k] for k in chunk]) for chunk in keys)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if "global_position" in state:  # the key checkpoints of earlier versions used
            state = {**state, "position": state["global_position"]}
        super().load_state_dict(state)
