"""``--report-to``: MLflow (local file store) and W&B (offline) receive the run's parameters and every metric of
``metrics.jsonl``, read back through each library; resume continues the same run without sending a step twice;
a search makes one run per point, grouped; a failing tracker warns once and training finishes; a tracker that
is not installed is a one-line error before anything runs."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from typing import Any

import pytest
import torch

from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.training import ResumableBatches, TrainConfig, list_checkpoints, train
from bertkit.training.tracking import STATE_FILE
from training_helpers import ToyModel, collate, toy_dataset

FAST = {"progress": False, "tensorboard": False, "plot": False, "lr": 1e-2, "warmup_steps": 2, "log_every": 2}


def run(output: Path, **options: Any):
    torch.manual_seed(0)
    batches = ResumableBatches(toy_dataset(), 8, collate, seed=1, repeat=True)
    config = TrainConfig.from_options(output_dir=output, micro_batch_size=8, **{**FAST, **options})
    return train(ToyModel(), batches, config, evaluate=lambda model: {"score": 0.5})


def jsonl(output: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


def expected(output: Path, split: str, key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in jsonl(output) if r["split"] == split and key in r]


def same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    """The same steps with the same values (float32 rounding aside)."""
    return [s for s, _ in got] == [s for s, _ in want] and [v for _, v in got] == pytest.approx([v for _, v in want])


# ------------------------------------------------------------------------------------------ options
def test_report_to_takes_repeated_or_comma_separated_names():
    tracking = TrainConfig.from_options(max_steps=1, report_to=["wandb,MLflow", "tensorboard"], tags=["a=1,b"]).tracking
    assert tracking.report_to == ["wandb", "mlflow", "tensorboard"] and tracking.tags == ["a=1", "b"]
    assert tracking.trackers() == ("tensorboard", "mlflow", "wandb")
    assert TrainConfig.from_options(max_steps=1, report_to="none").tracking.trackers() == ()
    assert TrainConfig.from_options(max_steps=1).tracking.trackers() == ("tensorboard",)
    with pytest.raises(ConfigError, match="unknown --report-to 'neptune'"):
        TrainConfig.from_options(max_steps=1, report_to=["neptune"])
    with pytest.raises(ConfigError, match="none goes alone"):
        TrainConfig.from_options(max_steps=1, report_to=["none", "mlflow"])


def test_a_tracker_that_is_not_installed_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    (tmp_path / "data").mkdir()
    output = tmp_path / "out"
    args = ["pretrain", "--data", str(tmp_path / "data"), "--output", str(output), "--max-steps", "2"]
    assert main([*args, "--report-to", "tensorboard", "--report-to", "wandb"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'bertkit[wandb]'" in err and "--report-to wandb" in err
    assert not output.exists()  # refused before anything ran


# ------------------------------------------------------------------------------------------ MLflow
@pytest.fixture
def mlflow_store(tmp_path, monkeypatch) -> str:
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "mlruns").as_uri()


def mlflow_runs(uri: str, experiment: str = "bertkit") -> list[Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    return client.search_runs([found.experiment_id], order_by=["attributes.start_time ASC"])


def mlflow_history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    return sorted((m.step, m.value) for m in MlflowClient(tracking_uri=uri).get_metric_history(run_id, key))


def test_mlflow_gets_the_options_system_and_every_metric_of_metrics_jsonl(tmp_path, mlflow_store):
    output = tmp_path / "run"
    run(output, max_steps=6, report_to="mlflow", tracking_uri=mlflow_store, run_name="toy", tags=["team=nlp", "smoke"])
    (only,) = mlflow_runs(mlflow_store)
    assert only.info.run_name == "toy" and only.info.status == "FINISHED"
    assert only.data.tags["team"] == "nlp" and "smoke" in only.data.tags
    params = only.data.params
    assert params["lr"] == "0.01" and params["max_steps"] == "6" and params["report_to"] == '["mlflow"]'
    assert params["system.threads"] == str(torch.get_num_threads()) and params["system.torch"] == torch.__version__
    assert params["system.device"] == "cpu" and "system.bertkit" in params
    for split, key in [("train", "loss"), ("train", "lr"), ("eval", "score")]:
        assert same(mlflow_history(mlflow_store, only.info.run_id, f"{split}/{key}"), expected(output, split, key))
    assert json.loads((output / STATE_FILE).read_text())["runs"]["mlflow"]["run_id"] == only.info.run_id


def test_resume_continues_the_same_mlflow_run_without_sending_a_step_twice(tmp_path, mlflow_store):
    output = tmp_path / "run"
    options = {
        "report_to": ["mlflow", "tensorboard"],
        "tracking_uri": mlflow_store,
        "save_every": 4,
        "schedule": "constant",
    }
    options["tensorboard"] = True
    run(output, max_steps=8, **options)
    first = json.loads((output / STATE_FILE).read_text())["runs"]["mlflow"]["run_id"]
    # Interrupted after step 8 was sent but before its checkpoint: resume from checkpoint-4 replays 5..8.
    for checkpoint in list_checkpoints(output)[1:]:
        import shutil

        shutil.rmtree(checkpoint)
    result = run(output, max_steps=10, resume="auto", **options)
    assert result.step == 10
    (only,) = mlflow_runs(mlflow_store)
    assert only.info.run_id == first and only.info.status == "FINISHED"
    history = mlflow_history(mlflow_store, first, "train/loss")
    assert [step for step, _ in history] == [2, 4, 6, 8, 10]  # each step once
    assert same(history, expected(output, "train", "loss"))  # resume replays the same values
    assert (output / "tensorboard").is_dir()


def test_a_failing_tracker_warns_once_and_training_finishes(tmp_path, mlflow_store, monkeypatch, capsys):
    from bertkit.training.tracking.backends import MlflowTracker

    def disk_full(*args: Any) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(MlflowTracker, "log_metrics", disk_full)
    output = tmp_path / "run"
    result = run(output, max_steps=6, report_to="mlflow", tracking_uri=mlflow_store)
    assert result.stop_reason == "max_steps" and result.step == 6
    warnings = [line for line in capsys.readouterr().err.splitlines() if "mlflow failed" in line]
    assert len(warnings) == 1 and "No space left on device" in warnings[0] and "metrics.jsonl" in warnings[0]
    assert [r["step"] for r in jsonl(output) if r["split"] == "train"] == [2, 4, 6]


def test_a_tracker_that_cannot_start_never_stops_training(tmp_path, monkeypatch, capsys):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    result = run(tmp_path / "run", max_steps=4, report_to="mlflow", tracking_uri="http://127.0.0.1:9")  # nothing there
    assert result.step == 4
    assert sum("mlflow failed" in line for line in capsys.readouterr().err.splitlines()) == 1


# ------------------------------------------------------------------------------------------ W&B
def wandb_records(path: Path) -> list[Any]:
    """The records of an offline run's ``.wandb`` file (LevelDB log blocks of protobuf records)."""
    from wandb.proto import wandb_internal_pb2

    data, records, pos, chunk = path.read_bytes(), [], 7, b""  # after the ":W&B" file header
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (length == 0 and kind == 0):
            pos += left
            continue
        chunk = (b"" if kind in (1, 2) else chunk) + data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
            record.ParseFromString(chunk)
            records.append(record)
    return records


def test_wandb_offline_run_holds_metrics_jsonl_and_resumes_the_same_run(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_PROJECT", "toys")
    output = tmp_path / "run"
    options = {"report_to": "wandb", "run_group": "sweep", "save_every": 4}
    run(output, max_steps=4, **options)
    run(output, max_steps=8, resume="auto", **options)
    import wandb

    wandb.teardown()  # its service writes the offline files in the background: flushed, as at process exit
    files = sorted(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 2  # the run, and its resumed part
    run_id = json.loads((output / STATE_FILE).read_text())["runs"]["wandb"]["run_id"]
    history: dict[int, dict[str, float]] = {}
    for path in files:
        for record in wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                assert record.run.run_id == run_id and record.run.project == "toys"
                assert record.run.run_group == "sweep" and record.run.display_name == "run"
            if kind == "config":
                config = {item.key: json.loads(item.value_json) for item in record.config.update}
                assert config.get("lr", 0.01) == 0.01
            if kind == "history":
                row = {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item
                }
                history.setdefault(row["_step"], {}).update(row)
    assert sorted(history) == [2, 4, 6, 8]
    assert same([(s, history[s]["train/loss"]) for s in sorted(history)], expected(output, "train", "loss"))
    assert [history[s]["eval/score"] for s in (4, 8)] == [0.5, 0.5]


# ------------------------------------------------------------------------------------------ fine-tuning
@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    from inference_helpers import polarity_setup

    return polarity_setup(tmp_path_factory.mktemp("tracking"), copies=3)


def test_finetune_sends_its_options_and_sizing_and_logs_the_model_when_asked(setup, tmp_path, mlflow_store, capsys):
    output = tmp_path / "ft"
    args = ["finetune", "--task", "classification", "--model", setup["model"], "--train", setup["train"]]
    args += ["--output", output, "--max-seq-length", "16", "--micro-batch-size", "8", "--no-progress", "--no-plot"]
    args += ["--report-to", "mlflow,tensorboard", "--tracking-uri", mlflow_store, "--experiment", "ft", "--log-model"]
    assert main([str(a) for a in args]) == 0
    (only,) = mlflow_runs(mlflow_store, "ft")
    params = only.data.params
    assert only.info.run_name == "ft" and params["task"] == "classification" and params["max_seq_length"] == "16"
    assert params["sizing.epochs"] == "10.0" and "sizing.reason" in params  # epochs sized to the tiny set
    from mlflow.tracking import MlflowClient

    artifacts = [a.path for a in MlflowClient(tracking_uri=mlflow_store).list_artifacts(only.info.run_id, "model")]
    assert "model/config.json" in artifacts and "model/model.safetensors" in artifacts
    assert (output / STATE_FILE).is_file() and (output / "tensorboard").is_dir()
    losses = mlflow_history(mlflow_store, only.info.run_id, "train/loss")
    assert same(losses, expected(output, "train", "loss"))


def test_search_makes_one_grouped_run_per_point(setup, tmp_path, mlflow_store):
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.hyperparameter_search import SearchConfig, search

    quiet = {"tensorboard": False, "plot": False, "progress": False}
    train_options = {**quiet, "report_to": "mlflow", "tracking_uri": mlflow_store}
    config = FinetuneConfig.from_options(
        "classification",
        str(setup["model"]),
        str(setup["train"]),
        str(tmp_path / "sweep"),
        dev_file=str(setup["train"]),
        epochs=1,
        micro_batch_size=8,
        max_seq_length=16,
        train_options=train_options,
    )
    search(config, SearchConfig(grid={"lr": [1e-5, 5e-3]}))
    runs = mlflow_runs(mlflow_store)
    assert [r.info.run_name for r in runs] == ["sweep run-01", "sweep run-02"]
    assert {r.data.tags["bertkit.group"] for r in runs} == {"sweep"}
    assert [r.data.params["lr"] for r in runs] == ["1e-05", "0.005"]
    assert all(r.data.metrics.get("eval/accuracy") is not None for r in runs)
