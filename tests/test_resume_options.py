"""A resume continues the run it was started as: an option that alters the run is refused in one line with its old
and new value, one that may change (a longer run, another logging cadence) is logged
(``bertkit.training.resume_options``, used by pretrain, finetune and distill)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from torch import nn

from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.training.checkpoint import save_checkpoint
from bertkit.training.finetune import FinetuneConfig, finetune
from bertkit.training.resume_options import (
    MAY_CHANGE,
    RUN_OPTIONS,
    check_resumed_options,
    record_options,
    run_options,
)
from training_helpers import make_pretraining_dataset

QUIET = ["--no-progress", "--no-plot", "--report-to", "none"]


def test_a_changed_option_is_refused_with_its_old_and_new_value(tmp_path):
    record_options(tmp_path, {"lr": 1e-4, "recipe": "bert", "max_steps": 10, "masking_rate": None})
    with pytest.raises(ConfigError) as raised:
        check_resumed_options(tmp_path, {"lr": 5e-3, "recipe": "modern", "max_steps": 10, "masking_rate": 0.3})
    message = str(raised.value)
    assert "\n" not in message
    assert "--lr 0.0001 -> 0.005" in message and "--recipe bert -> modern" in message
    assert "--masking-rate (not set) -> 0.3" in message and "--max-steps" not in message


def test_an_option_that_may_change_is_logged(tmp_path, caplog):
    record_options(tmp_path, {"lr": 1e-4, "max_steps": 10, "log_every": 5})
    with caplog.at_level(logging.INFO, logger="bertkit"):
        check_resumed_options(tmp_path, {"lr": 1e-4, "max_steps": 20, "log_every": 1})
    logged = [r.getMessage() for r in caplog.records]
    assert "resuming with --log-every 5 -> 1" in logged and "resuming with --max-steps 10 -> 20" in logged
    assert {"max_steps", "max_time", "epochs", "save_every", "log_every", "report_to"} <= MAY_CHANGE


def test_a_run_without_a_record_resumes_unchecked(tmp_path):
    check_resumed_options(tmp_path, {"lr": 1.0})  # an older run's directory: nothing to compare with


@pytest.fixture(scope="module")
def pretrained_run(tmp_path_factory) -> tuple[Path, list[str]]:
    """A finished 2-step tiny pre-training run and the command that made it."""
    root = tmp_path_factory.mktemp("resume")
    data = make_pretraining_dataset(root / "data", n_train=16, n_eval=4, seq=16, vocab=40)
    output = root / "run"
    args = ["pretrain", "--data", str(data), "--output", str(output), "--model-config", "tiny"]
    args += ["--micro-batch-size", "8", "--max-steps", "2", "--eval-batches", "0", *QUIET]
    assert main(args) == 0
    return output, args


@pytest.mark.parametrize(
    ("extra", "change"),
    [
        (["--lr", "5e-3"], "--lr 0.0001 -> 0.005"),
        (["--recipe", "modern"], "--recipe bert -> modern"),
        (["--model-config", "mini"], "--model-config tiny -> mini"),
        (["--architecture", "modernbert"], "--architecture bert -> modernbert"),
    ],
)
def test_pretrain_resume_refuses_a_change_in_one_line(pretrained_run, capsys, extra, change):
    _, args = pretrained_run
    capsys.readouterr()
    assert main([*args, "--resume", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and change in err, err


def test_pretrain_resume_takes_a_longer_run_and_says_so(pretrained_run, capsys):
    output, args = pretrained_run
    capsys.readouterr()
    longer = [a if a != "2" else "3" for a in args]  # --max-steps 2 -> 3
    assert main([*longer, "--resume"]) == 0
    assert "resuming with --max-steps 2 -> 3" in capsys.readouterr().err
    assert json.loads((output / RUN_OPTIONS).read_text())["max_steps"] == 3  # the next resume compares with 3


def test_finetune_resume_refuses_a_change(encoder_dir, tmp_path):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\ngood\tpos\nbad\tneg\n", encoding="utf-8")
    given: dict[str, Any] = dict(task="classification", model=str(encoder_dir), train_file=str(tmp_path / "train.tsv"))
    first = FinetuneConfig.from_options(**given, output=str(tmp_path / "out"), epochs=1, lr=3e-5)
    record_options(first.partial_dir, run_options(first))
    save_checkpoint(first.partial_dir, 1, nn.Linear(1, 1), {})  # an interrupted run's checkpoint
    resumed = FinetuneConfig.from_options(**given, output=str(tmp_path / "out"), epochs=1, lr=1e-3, resume=True)
    with pytest.raises(ConfigError, match=r"--lr 3e-05 -> 0\.001"):
        finetune(resumed)


def test_a_checkpoint_of_another_architecture_is_named_as_such(tmp_path, capsys):
    """Without the record (a run of an older bertkit), the checkpoint itself says which architecture it holds."""
    data = make_pretraining_dataset(tmp_path / "data", n_train=16, n_eval=4, seq=16, vocab=40, nsp=False)
    args = ["pretrain", "--data", str(data), "--output", str(tmp_path / "run"), "--model-config", "tiny"]
    args += ["--micro-batch-size", "8", "--max-steps", "1", "--eval-batches", "0", *QUIET]
    assert main(args) == 0
    (tmp_path / "run" / RUN_OPTIONS).unlink()
    capsys.readouterr()
    assert main([*args, "--resume", "--architecture", "modernbert"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("bertkit: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert "holds a bert model but this run builds a modernbert model; resume with --architecture bert" in errors[0]
