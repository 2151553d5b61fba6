"""``--report-to`` is the one tracker switch: ``--no-tensorboard`` is no flag, and a ``tensorboard`` key left in a
config file or in saved run options reads as ``report_to`` without tensorboard, said in one line."""

from __future__ import annotations

import logging

import pytest

from bertkit.cli import main
from bertkit.training.pretrain import PretrainConfig, build_config
from bertkit.training.train_config import TrainConfig, read_config_file


def test_tensorboard_false_leaves_tensorboard_out_of_report_to(caplog):
    with caplog.at_level(logging.INFO, logger="bertkit"):
        alone = TrainConfig.from_options(max_steps=1, tensorboard=False)
        beside = TrainConfig.from_options(max_steps=1, tensorboard=False, report_to=["mlflow", "tensorboard"])
    assert alone.tracking.report_to == ["none"] and alone.tracking.trackers() == ()
    assert beside.tracking.report_to == ["mlflow"] and beside.tracking.trackers() == ("mlflow",)
    lines = [r.getMessage() for r in caplog.records if "tensorboard = false" in r.getMessage()]
    assert len(lines) == 2 and "report_to" in lines[0]


def test_tensorboard_false_with_all_keeps_the_other_installed_trackers():
    config = TrainConfig.from_options(max_steps=1, tensorboard=False, report_to="all")
    assert "tensorboard" not in config.tracking.trackers()
    assert config.tracking.report_to and "all" not in config.tracking.report_to


def test_tensorboard_true_changes_nothing(caplog):
    with caplog.at_level(logging.INFO, logger="bertkit"):
        config = TrainConfig.from_options(max_steps=1, tensorboard=True)
    assert config.tracking.report_to is None and config.tracking.trackers() == ("tensorboard",)
    assert not [r for r in caplog.records if "tensorboard" in r.getMessage()]


def test_saved_run_options_with_the_old_key_load(caplog):
    saved = TrainConfig.from_options(max_steps=3).to_dict()
    assert "tensorboard" not in saved
    with caplog.at_level(logging.INFO, logger="bertkit"):
        loaded = TrainConfig.from_dict({**saved, "tensorboard": False})
    assert loaded.tracking.trackers() == () and loaded.duration.max_steps == 3
    assert sum("tensorboard = false" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("run.toml", "max_steps = 2\ntensorboard = false\n"),
        ("run.yaml", "max_steps: 2\ntrain:\n  tensorboard: false\n"),
    ],
)
def test_a_config_file_with_the_old_key_reads_as_report_to(tmp_path, caplog, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="bertkit"):
        flat = read_config_file(path, PretrainConfig)
        config = build_config({**flat, "data": str(tmp_path), "output": str(tmp_path / "o")})
    assert "tensorboard" not in flat and flat["report_to"] == ["none"]
    assert config.train.tracking.trackers() == ()
    assert sum("tensorboard = false" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_no_tensorboard_flag_is_a_usage_error(command, capsys):
    assert main([command, "--no-tensorboard"]) == 2
    assert "No such option: --no-tensorboard" in capsys.readouterr().err
