"""Storage faults: disk full and read-only output while saving, shards damaged after preparation.

A full disk or a read-only directory is simulated by patching the write that hits it (a real small tmpfs
needs mount privileges CI does not have): the save must fail with a ``CheckpointError`` that says what
to do, leave no half-written directory behind, and keep the previous checkpoint valid. Shards that are
truncated or modified after ``prepare-data`` must be refused with a ``DataError`` before the first step.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest
import torch

from bertkit.checkpoint_files import weight_files
from bertkit.cli import main
from bertkit.errors import CheckpointError, DataError
from bertkit.training import checkpoint as ck
from bertkit.training.checkpoint import (
    latest_valid_checkpoint,
    list_checkpoints,
    save_checkpoint,
    validate_checkpoint,
)
from bertkit.training.pretrain import build_config, pretrain
from training_helpers import ToyModel, make_pretraining_dataset

QUIET = dict(progress=False, tensorboard=False, plot=False, peak_flops=1e12)


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def read_only(*args, **kwargs):
    raise OSError(errno.EROFS, "Read-only file system")


# ------------------------------------------------------------------------------------------ checkpoints
@pytest.mark.parametrize("fault", [full_disk, read_only], ids=["disk-full", "read-only"])
@pytest.mark.parametrize("where", ["weights", "trainer_state", "manifest", "mkdir"])
def test_failed_save_is_a_clear_error_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch, fault, where):
    model = ToyModel()
    previous = save_checkpoint(tmp_path, 1, model, {"step": 1})
    before = (previous / "model.safetensors").read_bytes()
    target = {
        "weights": (weight_files, "save_model"),
        "trainer_state": (ck.torch, "save"),
        "manifest": (ck, "atomic_write_text"),
        "mkdir": (Path, "mkdir"),
    }[where]
    monkeypatch.setattr(*target, fault)
    with pytest.raises(CheckpointError) as caught:
        save_checkpoint(tmp_path, 2, model, {"step": 2})
    message = str(caught.value)
    assert "\n" not in message and "checkpoint-2" in message and str(previous) in message
    assert ("No space left" in message) == (fault is full_disk)
    monkeypatch.undo()
    assert list_checkpoints(tmp_path) == [previous] and not list(tmp_path.glob("*.tmp"))
    assert validate_checkpoint(previous) is None and (previous / "model.safetensors").read_bytes() == before


def quiet_config(tmp_path: Path) -> Path:
    path = tmp_path / "quiet.toml"
    path.write_text("peak_flops = 1e12\ntensorboard = false\nplot = false\n", encoding="utf-8")
    return path


def test_disk_full_during_training_stops_with_one_line_and_resume_works(tmp_path, monkeypatch, capsys):
    data = make_pretraining_dataset(tmp_path / "data", n_train=32, n_eval=0, seq=16, vocab=40)
    args = [
        "pretrain",
        "--config",
        str(quiet_config(tmp_path)),
        "--data",
        str(data),
        "--output",
        str(tmp_path / "run"),
        "--model-config",
        "tiny",
        "--micro-batch-size",
        "4",
        "--max-steps",
        "4",
        "--save-every",
        "2",
        "--eval-batches",
        "0",
        "--no-progress",
    ]
    real_save = torch.save
    calls = {"n": 0}

    def save_then_fill_up(obj, path, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:  # the second checkpoint meets a full disk
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, path, *a, **k)

    monkeypatch.setattr(ck.torch, "save", save_then_fill_up)
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("bertkit: error:") and "No space left" in err[-1] and "Traceback" not in "".join(err)
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["checkpoint-2"]
    monkeypatch.undo()
    assert main([*args, "--resume"]) == 0
    assert [p.name for p in list_checkpoints(tmp_path / "run")][-1] == "checkpoint-4"


def test_checkpoint_tampered_after_saving_is_never_loaded_silently(tmp_path, caplog):
    model = ToyModel()
    save_checkpoint(tmp_path, 1, model, {"step": 1})
    newer = save_checkpoint(tmp_path, 2, model, {"step": 2})
    weights = newer / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, one bit pattern changed
    weights.write_bytes(bytes(data))
    reason = validate_checkpoint(newer)
    assert reason is not None and "SHA-256" in reason
    with caplog.at_level(logging.WARNING, logger="bertkit"):
        latest = latest_valid_checkpoint(tmp_path)
        assert latest is not None and latest.name == "checkpoint-1"
    assert "skipping checkpoint" in caplog.text
    with pytest.raises(CheckpointError, match="not usable"):
        ck.load_checkpoint(newer, ToyModel())


# ------------------------------------------------------------------------------------------ data shards
def damage(directory: Path, how: str) -> Path:
    shard = sorted(directory.glob("block-*.train.input_ids.npy"))[-1]
    raw = bytearray(shard.read_bytes())
    if how == "truncated":
        raw = raw[: len(raw) - 7]
    elif how == "modified":
        raw[-3:] = b"\xff\xff\xff"  # ids far outside the vocabulary: an IndexError hours later otherwise
    elif how == "missing":
        shard.unlink()
        return shard
    shard.write_bytes(bytes(raw))
    return shard


@pytest.mark.parametrize("how", ["truncated", "modified", "missing"])
def test_damaged_shard_is_refused_before_training_starts(tmp_path, how):
    data = make_pretraining_dataset(tmp_path / "data", n_train=32, n_eval=4, seq=16, vocab=40)
    shard = damage(data, how)
    run = tmp_path / "run"
    config = build_config(
        dict(
            data=str(data),
            output=str(run),
            model_config="tiny",
            micro_batch_size=4,
            max_steps=2,
            eval_batches=0,
            **QUIET,
        )
    )
    with pytest.raises(DataError) as caught:
        pretrain(config)
    assert shard.name in str(caught.value) and "\n" not in str(caught.value)
    assert not (run / "metrics.jsonl").exists() and not list_checkpoints(run)


def test_damaged_shard_is_one_line_exit_2_from_the_cli(tmp_path, capsys):
    data = make_pretraining_dataset(tmp_path / "data", n_train=32, n_eval=4, seq=16, vocab=40)
    damage(data, "modified")
    code = main(
        [
            "pretrain",
            "--config",
            str(quiet_config(tmp_path)),
            "--data",
            str(data),
            "--output",
            str(tmp_path / "run"),
            "--model-config",
            "tiny",
            "--micro-batch-size",
            "4",
            "--max-steps",
            "2",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("bertkit: error:") and "checksum" in err[-1]


def test_a_resumed_run_hashes_the_shards_again_only_when_one_changed(tmp_path, monkeypatch):
    from bertkit.data import shards

    data = make_pretraining_dataset(tmp_path / "data", n_train=32, n_eval=4, seq=16, vocab=40)
    calls = []
    real_verify = shards.verify

    def counting_verify(directory):
        calls.append(directory)
        return real_verify(directory)

    monkeypatch.setattr(shards, "verify", counting_verify)
    run = tmp_path / "run"

    def start(steps: int) -> None:
        pretrain(
            build_config(
                dict(
                    data=str(data),
                    output=str(run),
                    model_config="tiny",
                    micro_batch_size=4,
                    max_steps=steps,
                    eval_batches=0,
                    resume="auto",
                    **QUIET,
                )
            )
        )

    start(2)
    assert len(calls) == 1 and (run / "data-verified.json").is_file()
    start(3)  # resumed, shards untouched: no second pass over every byte
    assert len(calls) == 1
    damage(data, "modified")  # a rewrite changes the modification time, so the full check runs and refuses
    with pytest.raises(DataError, match="checksum mismatch"):
        start(4)
    assert len(calls) == 2
