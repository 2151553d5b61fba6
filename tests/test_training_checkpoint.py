"""Checkpoints: atomic write, manifest validation, fallback on corruption, rotation, exact round trip."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import torch

from bertkit.config import BertConfig
from bertkit.errors import CheckpointError
from bertkit.models.bert import BertForPreTraining
from bertkit.training import latest_valid_checkpoint, list_checkpoints, load_checkpoint, save_checkpoint
from bertkit.training.checkpoint import MANIFEST, TRAINER_STATE, WEIGHTS, validate_checkpoint
from training_helpers import ToyModel

STATE: dict[str, Any] = {"step": 3, "rng": [torch.get_rng_state()], "history": [{"step": 1, "loss": 2.5}], "name": "x"}


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return BertForPreTraining(BertConfig.preset("tiny", vocab_size=120))


def test_round_trip_of_a_bertkit_model_is_bit_exact_and_hugging_face_shaped(tmp_path):
    model = tiny_model(0)
    path = save_checkpoint(tmp_path, 7, model, STATE)
    assert path == tmp_path / "checkpoint-7" and validate_checkpoint(path) is None
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["weights_layout"] == "hf" and (path / "config.json").is_file()
    other = tiny_model(1)
    state = load_checkpoint(path, other)
    for (name, a), b in zip(model.state_dict().items(), other.state_dict().values()):
        assert torch.equal(a, b), name
    assert other.mlm.decoder.weight is other.bert.embeddings.word_embeddings.weight  # tie survives
    assert state["history"] == STATE["history"] and torch.equal(state["rng"][0], STATE["rng"][0])


def test_checkpoint_is_a_model_directory_fine_tuning_can_load(tmp_path):
    from bertkit.weights import load_model

    model = tiny_model(0)
    path = save_checkpoint(tmp_path, 1, model, STATE)
    loaded = load_model(path)
    assert type(loaded).__name__ == "BertForPreTraining"
    assert isinstance(loaded, BertForPreTraining)
    assert torch.equal(loaded.bert.embeddings.word_embeddings.weight, model.bert.embeddings.word_embeddings.weight)


def test_trainer_state_loads_with_weights_only(tmp_path):
    path = save_checkpoint(tmp_path, 1, ToyModel(), STATE)
    assert torch.load(path / TRAINER_STATE, weights_only=True)["step"] == 3


def test_rotation_keeps_the_newest(tmp_path):
    model = ToyModel()
    for step in (10, 20, 30, 40):
        save_checkpoint(tmp_path, step, model, STATE, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-30", "checkpoint-40"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_manifest", "missing_file"])
def test_a_broken_latest_checkpoint_falls_back_to_the_previous_one(tmp_path, damage, caplog):
    model = ToyModel()
    save_checkpoint(tmp_path, 1, model, STATE)
    latest = save_checkpoint(tmp_path, 2, model, STATE)
    weights = latest / WEIGHTS
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:-10])
    elif damage == "flip":
        data = bytearray(weights.read_bytes())
        data[-1] ^= 0xFF
        weights.write_bytes(bytes(data))
    elif damage == "no_manifest":
        (latest / MANIFEST).unlink()
    else:
        (latest / TRAINER_STATE).unlink()
    assert validate_checkpoint(latest) is not None
    with caplog.at_level(logging.WARNING, logger="bertkit"):
        assert latest_valid_checkpoint(tmp_path) == tmp_path / "checkpoint-1"
    assert "skipping checkpoint" in caplog.text and "checkpoint-2" in caplog.text
    with pytest.raises(CheckpointError, match="not usable"):
        load_checkpoint(latest, ToyModel())


def test_a_failed_write_leaves_no_finished_looking_checkpoint(tmp_path):
    def boom(directory):
        (directory / "tokenizer.json").write_text("{")
        raise OSError("disk full")

    with pytest.raises(CheckpointError, match="disk full"):  # an OSError while saving becomes a clear error
        save_checkpoint(tmp_path, 5, ToyModel(), STATE, extra_files=boom)
    assert list_checkpoints(tmp_path) == [] and latest_valid_checkpoint(tmp_path) is None
    save_checkpoint(tmp_path, 6, ToyModel(), STATE, keep_last=3)  # rotation sweeps the stale .tmp
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-6"]


def test_loading_into_another_model_shape_is_a_checkpoint_error(tmp_path):
    path = save_checkpoint(tmp_path, 1, ToyModel(dim=8), STATE)
    with pytest.raises(CheckpointError):
        load_checkpoint(path, ToyModel(dim=4))
    bert = save_checkpoint(tmp_path / "b", 1, tiny_model(), STATE)
    with pytest.raises(CheckpointError):
        load_checkpoint(bert, BertForPreTraining(BertConfig.preset("mini", vocab_size=120)))
