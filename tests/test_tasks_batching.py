"""Length-grouped batch sampler: a permutation per epoch, reproducible, and far less padding than random."""

from typing import cast

import numpy as np
import pytest
import torch

from bertkit.tasks.batching import LengthGroupedBatchSampler, padding_fraction


def lengths(n=1000, seed=0):
    return np.random.default_rng(seed).integers(5, 128, n).tolist()


def test_every_index_once_per_epoch_and_reproducible():
    sizes = lengths(1003)
    sampler = LengthGroupedBatchSampler(sizes, 32, seed=7, chunk_batches=4)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(1003))
    assert len(batches) == len(sampler) == 32  # ceil(1003 / 32)
    assert list(LengthGroupedBatchSampler(sizes, 32, seed=7, chunk_batches=4)) == batches
    sampler.set_epoch(1)
    assert list(sampler) != batches
    assert list(LengthGroupedBatchSampler(sizes, 32, seed=8, chunk_batches=4)) != batches


def test_batches_are_length_sorted_within_chunks_and_reduce_padding():
    sizes = lengths(4000)
    sampler = LengthGroupedBatchSampler(sizes, 32, seed=0, chunk_batches=50)
    grouped = padding_fraction(sizes, list(sampler))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(sizes)).tolist()
    random_batches = [order[i : i + 32] for i in range(0, len(order), 32)]
    plain = padding_fraction(sizes, random_batches)
    assert plain > 0.4 and grouped < 0.05, (plain, grouped)
    for b in sampler:
        assert [sizes[i] for i in b] == sorted((sizes[i] for i in b), reverse=True)


def test_drop_last_and_no_shuffle():
    sizes = [3, 1, 2, 5, 4]
    assert list(LengthGroupedBatchSampler(sizes, 2, shuffle=False)) == [[0, 1], [2, 3], [4]]
    assert list(LengthGroupedBatchSampler(sizes, 2, shuffle=False, drop_last=True)) == [[0, 1], [2, 3]]
    assert list(LengthGroupedBatchSampler(sizes, 2, shuffle=False, sort_when_not_shuffled=True)) == [
        [3, 4],
        [0, 2],
        [1],
    ]
    sampler = LengthGroupedBatchSampler(lengths(100), 8, drop_last=True, chunk_batches=3)
    assert all(len(b) == 8 for b in sampler) and len(list(sampler)) == len(sampler)
    with pytest.raises(ValueError):
        LengthGroupedBatchSampler(sizes, 0)


def test_works_as_a_dataloader_batch_sampler():
    data = [torch.full((n,), i) for i, n in enumerate([4, 1, 3, 2])]
    # A list is a map-style dataset at run time (``__getitem__`` and ``__len__``); the stubs ask for the class.
    dataset = cast(torch.utils.data.Dataset[torch.Tensor], data)
    loader: torch.utils.data.DataLoader[torch.Tensor] = torch.utils.data.DataLoader(
        dataset,
        batch_sampler=LengthGroupedBatchSampler([4, 1, 3, 2], 2, seed=1),
        collate_fn=lambda items: torch.nn.utils.rnn.pad_sequence(items, True),
    )
    shapes = sorted(tuple(b.shape) for b in loader)
    assert shapes == [(2, 2), (2, 4)]
