"""Fine-tuning's defaults sized to the training set: the rule on small and large sets, what the user sets wins,
and a run prints and records the choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.training.finetune import FinetuneConfig, finetune
from bertkit.training.finetune_defaults import MAX_EPOCHS, MIN_UPDATES, SMALL_SET, size_to_data, task_defaults
from inference_helpers import polarity_setup

QUIET = {"tensorboard": False, "plot": False, "progress": False}


def sizing(examples: int, task: str = "classification", **given):
    """The rule for ``examples`` examples (one feature each) with ``given`` options set by the user."""
    config = FinetuneConfig.from_options(task, "model", "train.tsv", "out", **given)
    return size_to_data(
        examples,
        examples,
        sized=config.sized,
        batch_size=config.train.batch.micro_batch_size,
        epochs=config.train.duration.epochs,
    )


@pytest.mark.parametrize(
    ("examples", "batch", "epochs"),
    [
        (1_000, 16, MAX_EPOCHS),  # 63 updates an epoch: as many epochs as the rule allows
        (2_490, 16, 7),  # RTE: 156 an epoch, 7 epochs for 1,000 updates
        (3_394, 16, 5),  # the small NER set that underfit with batch 32
        (5_749, 16, 3),  # STS-B: 360 an epoch, 3 epochs already make 1,000
        (14_041, 32, 3),  # CoNLL-2003: the paper's recipe as it is
        (67_349, 32, 3),  # SST-2
        (400_000, 32, 3),
    ],
)
def test_the_rule_on_small_and_large_sets(examples, batch, epochs):
    chosen = sizing(examples)
    assert (chosen.batch_size, chosen.epochs) == (batch, epochs)
    per_epoch = -(-examples // batch)
    assert chosen.updates == per_epoch * epochs
    assert chosen.updates >= MIN_UPDATES or chosen.epochs == MAX_EPOCHS
    assert f"{examples:,} training examples" in chosen.reason
    if examples >= SMALL_SET:
        assert (batch, epochs) == (task_defaults("classification")["micro_batch_size"], 3)


def test_qa_keeps_its_smaller_batch_and_sizes_epochs():
    chosen = sizing(2_000, task="qa")
    assert chosen.batch_size == 12 and chosen.epochs == 6  # 167 updates an epoch
    assert sizing(88_000, task="qa").epochs == 2


def test_what_the_user_sets_wins():
    assert sizing(1_000, micro_batch_size=32, epochs=3) is None
    by_epochs = sizing(1_000, micro_batch_size=32)
    assert by_epochs.batch_size == 32 and by_epochs.epochs == MAX_EPOCHS and "--epochs sets it" in by_epochs.reason
    assert sizing(1_000, epochs=2).epochs == 2 and sizing(1_000, epochs=2).batch_size == 16
    # another option that decides the batch or the end of the run counts as setting it
    assert sizing(1_000, global_batch_size=64).batch_size == 32
    assert sizing(1_000, grad_accum_steps=2).batch_size == 32
    limited = sizing(1_000, max_steps=50)
    assert limited.epochs is None and limited.batch_size == 16
    assert sizing(1_000, max_time="10m").epochs is None


def test_sized_survives_a_replace_and_is_not_an_option():
    import dataclasses

    config = FinetuneConfig.from_options("ner", "model", "train.txt", "out", lr=3e-5)
    assert config.sized == ("micro_batch_size", "epochs")
    assert dataclasses.replace(config, output="other").sized == config.sized
    assert FinetuneConfig.from_options("ner", "m", "t", "o", micro_batch_size=8, epochs=1).sized == ()
    assert FinetuneConfig.from_options("ner", "m", "t", "o", max_steps=9).sized == ("micro_batch_size",)


@pytest.fixture(scope="module")
def small_set(tmp_path_factory) -> dict[str, Path]:
    return polarity_setup(tmp_path_factory.mktemp("sized"), copies=10)


def test_a_run_sizes_prints_and_records_the_choice(small_set, tmp_path, capsys):
    output = tmp_path / "out"
    result = finetune(
        FinetuneConfig.from_options(
            "classification",
            str(small_set["model"]),
            str(small_set["train"]),
            str(output),
            max_seq_length=16,
            train_options=QUIET,
        )
    )
    err = capsys.readouterr().err
    # 40 examples: batch 16, 3 updates an epoch, so the epochs rise to the most the rule allows
    assert "40 training examples: batch 16" in err and f"{MAX_EPOCHS} epochs" in err
    assert result.train.step == 3 * MAX_EPOCHS
    recorded = json.loads((output / "metrics.json").read_text())["sizing"]
    assert recorded["batch_size"] == 16 and recorded["epochs"] == MAX_EPOCHS and recorded["updates"] == 30
    saved = json.loads((output / "finetune_config.json").read_text())
    assert saved["train"]["micro_batch_size"] == 16 and saved["train"]["epochs"] == MAX_EPOCHS


def test_cli_flags_override_the_rule(small_set, tmp_path, capsys):
    output = tmp_path / "cli"
    args = ["finetune", "--task", "classification", "--model", small_set["model"], "--train", small_set["train"]]
    args += ["--output", output, "--max-seq-length", "16", "--no-progress", "--no-plot", "--report-to", "none"]
    assert main([str(a) for a in [*args, "--micro-batch-size", "8", "--epochs", "1"]]) == 0
    err = capsys.readouterr().err
    assert "training examples:" not in err and "5 updates" in err
    assert json.loads((output / "metrics.json").read_text())["sizing"] is None
