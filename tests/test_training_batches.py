"""ResumableBatches: global order independent of the process count, exact resume, epochs, orderings."""

from __future__ import annotations

from itertools import chain

import pytest

from bertkit.errors import ConfigError
from bertkit.training import ResumableBatches


def ids(batch):
    return list(batch)


def test_one_process_with_accumulation_sees_what_two_processes_see():
    data = list(range(40))
    single = ResumableBatches(data, 4, ids, seed=3)
    ranks = [ResumableBatches(data, 4, ids, seed=3, rank=r, world_size=2) for r in range(2)]
    one = list(single)
    two = list(zip(*(list(r) for r in ranks)))
    assert [b for pair in two for b in pair] == one
    assert sorted(x for b in one for x in b) == data


def test_resume_mid_epoch_continues_exactly():
    data = list(range(30))
    full = ResumableBatches(data, 4, ids, seed=1, repeat=True)
    it = iter(full)
    reference = [next(it) for _ in range(20)]
    part = ResumableBatches(data, 4, ids, seed=1, repeat=True)
    it = iter(part)
    first = [next(it) for _ in range(11)]
    resumed = ResumableBatches(data, 4, ids, seed=1, repeat=True)
    resumed.load_state_dict(part.state_dict())
    it = iter(resumed)
    assert first + [next(it) for _ in range(9)] == reference


def test_epochs_reshuffle_and_roll_over_with_the_last_batch():
    loader = ResumableBatches(list(range(10)), 5, ids, seed=0)
    epoch0 = list(loader)
    assert loader.epoch == 1 and loader.state_dict()["position"] == 0
    epoch1 = list(loader)
    assert sorted(chain.from_iterable(epoch0)) == sorted(chain.from_iterable(epoch1)) and epoch0 != epoch1
    assert len(loader) == 2


def test_uneven_tail_is_dropped_only_across_processes():
    assert len(ResumableBatches(list(range(10)), 4, ids)) == 3  # last batch of 2 kept
    assert len(ResumableBatches(list(range(10)), 4, ids, drop_last=True)) == 2
    assert len(ResumableBatches(list(range(10)), 4, ids, rank=1, world_size=2)) == 1


def test_bad_arguments():
    with pytest.raises(ConfigError):
        ResumableBatches([1], 2, ids, rank=0, world_size=2)
    loader = ResumableBatches(list(range(8)), 2, ids)
    with pytest.raises(ConfigError, match="micro-batch"):
        loader.load_state_dict({"epoch": 0, "position": 0, "batch_size": 4})


def test_position_counts_global_batches_so_a_state_resumes_on_another_world_size():
    data = list(range(48))
    single = ResumableBatches(data, 4, ids, seed=5)
    it = iter(single)
    head = [next(it) for _ in range(4)]
    state = single.state_dict()
    assert state["position"] == 4 and head
    ranks = [ResumableBatches(data, 4, ids, seed=5, rank=r, world_size=2) for r in range(2)]
    for source in ranks:
        source.load_state_dict(state)
    rest = [b for pair in zip(*(list(r) for r in ranks)) for b in pair]
    assert rest == list(it)
    with pytest.raises(ConfigError, match="split"):
        ResumableBatches(data, 4, ids, world_size=3).load_state_dict({**state, "position": 4})


def test_length_grouped_order_draws_from_the_one_epoch_stream():
    """Every ordering draws from ``epoch_rng(seed, epoch)``: the fine-tuning source's length-grouped batches
    are exactly those of ``LengthGroupedBatchSampler`` with that seed and epoch."""
    from bertkit.tasks import LengthGroupedBatchSampler
    from bertkit.tasks.batching import LengthGroupedOrder

    lengths = [(7 * i) % 53 + 1 for i in range(90)]
    source = ResumableBatches(lengths, 8, ids, seed=4, order=LengthGroupedOrder(lengths, chunk_batches=3))
    sampler = LengthGroupedBatchSampler(lengths, 8, seed=4, chunk_batches=3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        assert source.epoch_batches(epoch) == sampler.batches()
    assert source.epoch_batches(0) != source.epoch_batches(1)
