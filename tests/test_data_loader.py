"""Shards round trip, checks, and the loader: batch contract, determinism, workers, ranks, resume."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import numpy as np
import pytest
import torch

from bertkit.data.instances import create_instances
from bertkit.data.loader import PretrainingDataset, PretrainingLoader
from bertkit.data.masking import MaskingSpec, static_masker
from bertkit.data.shards import index_dataset, pack_instances, verify, write_block
from bertkit.errors import DataError

PAD, CLS, SEP, MASK, VOCAB = 0, 101, 102, 103, 30522


def build(directory, masking="static", blocks=3, max_seq_length=32, max_predictions=5):
    spec = MaskingSpec(
        mask_id=MASK, vocab_size=VOCAB, special_ids=frozenset({PAD, CLS, SEP}), max_predictions_per_seq=max_predictions
    )
    header: dict[str, Any] = {
        "settings_hash": f"test-{masking}",
        "settings": {
            "max_seq_length": max_seq_length,
            "max_predictions_per_seq": max_predictions,
            "masking": masking,
            "seed": 7,
            "masked_lm_prob": 0.15,
            "whole_word_mask": False,
        },
        "tokenizer": {"vocab_size": VOCAB, "pad_id": PAD, "cls_id": CLS, "sep_id": SEP, "mask_id": MASK},
    }
    all_instances = []
    for b in range(blocks):
        rng = random.Random(b)
        docs = [[[rng.randrange(1000, 2000) for _ in range(rng.randint(2, 9))] for _ in range(10)] for _ in range(5)]
        inst = create_instances(
            docs,
            max_seq_length=max_seq_length,
            short_seq_prob=0.1,
            dupe_factor=1,
            cls_id=CLS,
            sep_id=SEP,
            rng=rng,
            masker=static_masker(spec) if masking == "static" else None,
        )
        all_instances.extend(inst)
        arrays = pack_instances(
            inst, vocab_size=VOCAB, max_predictions=max_predictions if masking == "static" else None
        )
        empty = pack_instances([], vocab_size=VOCAB, max_predictions=max_predictions if masking == "static" else None)
        write_block(directory, b, {"train": arrays, "eval": empty}, settings_hash=header["settings_hash"], stats={})
    index_dataset(directory, header, expected_blocks=blocks)
    return all_instances


def test_round_trip_and_batch_contract(tmp_path):
    instances = build(tmp_path)
    ds = PretrainingDataset(tmp_path)
    assert len(ds) == len(instances)
    for i, inst in enumerate(instances):
        item = ds[i]
        assert item["input_ids"].tolist() == inst.tokens
        assert item["a_length"] == inst.a_length and item["next_sentence_label"] == int(inst.is_random_next)
        assert item["masked_positions"].tolist() == inst.masked_positions
        assert item["masked_labels"].tolist() == inst.masked_labels
    assert ds.meta["splits"]["train"]["num_instances"] == len(instances)
    assert np.load(tmp_path / "block-000000.train.input_ids.npy").dtype == np.uint16

    loader = PretrainingLoader(tmp_path, batch_size=8, shuffle=False)
    batch = next(iter(loader))
    assert set(batch) == {
        "input_ids",
        "token_type_ids",
        "attention_mask",
        "masked_positions",
        "masked_labels",
        "next_sentence_label",
    }
    assert all(t.dtype == torch.long for t in batch.values())
    lengths = [len(x.tokens) for x in instances[:8]]
    assert batch["input_ids"].shape == (8, max(lengths)) and batch["masked_positions"].shape == (8, 5)
    for row, inst in enumerate(instances[:8]):
        n = len(inst.tokens)
        assert batch["attention_mask"][row].tolist() == [1] * n + [0] * (max(lengths) - n)
        assert batch["input_ids"][row, n:].eq(PAD).all()
        assert batch["token_type_ids"][row].tolist() == inst.segment_ids + [0] * (max(lengths) - n)
        k = len(inst.masked_positions)
        assert batch["masked_labels"][row, k:].eq(-100).all() and batch["masked_positions"][row, k:].eq(0).all()
    fixed = next(iter(PretrainingLoader(tmp_path, batch_size=4, pad_to_max_length=True)))
    assert fixed["input_ids"].shape == (4, 32)


def test_modified_or_truncated_shards_are_detected(tmp_path):
    build(tmp_path, blocks=1)
    assert verify(tmp_path) == []
    path = tmp_path / "block-000000.train.input_ids.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert verify(tmp_path) == ["block-000000.train.input_ids.npy: checksum mismatch"]
    path.write_bytes(bytes(data[:-2]))
    with pytest.raises(DataError, match="truncated"):
        PretrainingDataset(tmp_path)[0]


def test_incomplete_dataset_is_refused(tmp_path):
    build(tmp_path, blocks=2)
    meta = json.loads((tmp_path / "dataset.json").read_text())
    meta.pop("settings_hash")
    index_dataset(tmp_path, {**meta, "settings_hash": "test-static"}, expected_blocks=3)
    with pytest.raises(DataError, match="2 of 3 blocks"):
        PretrainingDataset(tmp_path)
    assert len(PretrainingDataset(tmp_path, allow_incomplete=True)) > 0


def stream(loader, n=None):
    return list(itertools.islice(loader, n))


def same(a, b):
    return len(a) == len(b) and all(all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b))


def test_resume_continues_exactly(tmp_path):
    build(tmp_path, masking="dynamic")
    full = PretrainingLoader(tmp_path, batch_size=4, seed=3)
    epoch0, epoch1 = stream(full), stream(full)
    assert not same(epoch0, epoch1)  # new order and new dynamic masks each epoch

    first = PretrainingLoader(tmp_path, batch_size=4, seed=3)
    head = stream(first, n=5)
    state = first.state_dict()
    assert state["epoch"] == 0 and state["position"] == 5
    resumed = PretrainingLoader(tmp_path, batch_size=4, seed=3)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert same(head + stream(resumed), epoch0)
    assert same(stream(resumed), epoch1)
    with pytest.raises(DataError, match="batch_size"):
        PretrainingLoader(tmp_path, batch_size=5, seed=3).load_state_dict(state)


def test_dataloader_workers_do_not_change_the_stream(tmp_path):
    build(tmp_path, masking="dynamic")
    plain = stream(PretrainingLoader(tmp_path, batch_size=6, seed=1))
    workers = stream(PretrainingLoader(tmp_path, batch_size=6, seed=1, num_workers=2))
    assert same(plain, workers)


def test_ranks_take_disjoint_slices_of_the_global_order(tmp_path):
    instances = build(tmp_path)
    seen = []
    lengths = []
    for rank in range(3):
        loader = PretrainingLoader(tmp_path, batch_size=4, seed=5, rank=rank, world_size=3)
        batches = stream(loader)
        lengths.append(len(batches))
        sampler = list(loader._sampler())
        seen.append(
            {
                key[1]
                for keys in PretrainingLoader(tmp_path, batch_size=4, seed=5, rank=rank, world_size=3)._sampler()
                for key in keys
            }
        )
        assert len(sampler) == len(batches)
    assert len(set(lengths)) == 1 and lengths[0] == (len(instances) // 4) // 3
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2]) and not (seen[0] & seen[2])
    assert sum(map(len, seen)) == lengths[0] * 3 * 4


def test_dynamic_masks_follow_seed_epoch_and_index_only(tmp_path):
    build(tmp_path, masking="dynamic")
    ds = PretrainingDataset(tmp_path)
    a, b, c = ds[(0, 3)], ds[(0, 3)], ds[(1, 3)]
    assert a["masked_positions"].tolist() == b["masked_positions"].tolist()
    assert a["input_ids"].tolist() == b["input_ids"].tolist()
    assert len(a["masked_positions"]) > 0
    other_epoch = [ds[(1, i)]["masked_positions"].tolist() for i in range(20)]
    assert other_epoch != [ds[(0, i)]["masked_positions"].tolist() for i in range(20)]
    assert c["masked_labels"].tolist() == [ds[(1, 3)]["masked_labels"].tolist()][0]


def test_epoch_rolls_over_with_its_last_batch_and_old_checkpoint_states_resume(tmp_path):
    """The batch-source contract: the state after an epoch's last batch is the next epoch's start; a state
    saved under the earlier key ``global_position`` continues at the same batch."""
    build(tmp_path, masking="dynamic")
    loader = PretrainingLoader(tmp_path, batch_size=4, seed=3)
    iterator = iter(loader)
    for _ in range(len(loader) - 1):
        next(iterator)
    assert loader.epoch == 0
    next(iterator)
    assert loader.state_dict()["epoch"] == 1 and loader.state_dict()["position"] == 0

    full = PretrainingLoader(tmp_path, batch_size=4, seed=3)
    reference = stream(full)
    old = {"epoch": 0, "global_position": 3, "seed": 3, "batch_size": 4, "num_instances": len(full.dataset)}
    resumed = PretrainingLoader(tmp_path, batch_size=4, seed=3)
    resumed.load_state_dict(old)
    assert same(stream(resumed), reference[3:])
