"""The fine-tuning search: it keeps the best run on dev and only that model, resumes after a crash with the
same winner, honours a time budget, samples with optuna, and refuses what it cannot do with one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import bertkit.training.hyperparameter_search as search_module
from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.inference import evaluate_model
from bertkit.training.finetune import FinetuneConfig
from bertkit.training.hyperparameter_search import PAPER_GRID, SearchConfig, grid_points, search
from inference_helpers import polarity_setup

QUIET = {"tensorboard": False, "plot": False, "progress": False}
GRID = {"lr": [1e-5, 5e-3]}  # a rate too small to learn anything in a few updates, and one that learns


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    return polarity_setup(tmp_path_factory.mktemp("search"), copies=6)


def config(setup, output: Path, **options) -> FinetuneConfig:
    options = {"epochs": 4, "micro_batch_size": 4, "max_seq_length": 16, "seed": 3, "train_options": QUIET, **options}
    return FinetuneConfig.from_options(
        "classification", str(setup["model"]), str(setup["train"]), str(output), dev_file=str(setup["train"]), **options
    )


def test_the_paper_grid_has_its_eighteen_runs():
    points = grid_points(PAPER_GRID)
    assert len(points) == 18 and points[0] == {"micro_batch_size": 16, "lr": 5e-5, "epochs": 2}
    assert len({tuple(p.values()) for p in points}) == 18


def test_a_two_point_grid_keeps_the_better_run_on_dev(setup, tmp_path):
    output = tmp_path / "best"
    result = search(config(setup, output), SearchConfig(grid=GRID))
    assert [run.params for run in result.runs] == [{"lr": 1e-5}, {"lr": 5e-3}]
    metrics = [run.metric for run in result.runs]
    assert metrics[0] is not None and metrics[1] is not None
    assert metrics[1] > metrics[0]  # the grid really differs on dev
    assert result.winner is not None and result.winner.name == "run-02"
    # only the winner's model is kept, with the table of all runs; no work directory is left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]
    table = json.loads((output / "search.json").read_text())
    assert table["winner"] == "run-02" and [r["metric"] for r in table["runs"]] == metrics
    assert all(len(r["per_epoch"]) == 4 and r["updates"] == 24 and r["seconds"] > 0 for r in table["runs"])
    assert "| run-02 | 0.005 |" in (output / "search.md").read_text()
    # the model in the output is the winner: evaluating it again gives its dev metric
    assert evaluate_model(output, setup["train"])["accuracy"] == pytest.approx(metrics[1])


def test_a_crashed_search_resumes_with_the_same_winner(setup, tmp_path, monkeypatch):
    whole = search(config(setup, tmp_path / "whole"), SearchConfig(grid={"lr": [1e-5, 5e-3, 1e-3]}))

    real = search_module.finetune
    calls: list[str] = []
    crash = [True]

    def crash_on_the_second_run(run_config):
        calls.append(Path(run_config.output).name)
        if crash[0] and len(calls) == 2:
            raise RuntimeError("killed")
        return real(run_config)

    monkeypatch.setattr(search_module, "finetune", crash_on_the_second_run)
    output = tmp_path / "resumed"
    settings = SearchConfig(grid={"lr": [1e-5, 5e-3, 1e-3]})
    with pytest.raises(RuntimeError):
        search(config(setup, output), settings)
    assert not output.exists() and (tmp_path / "resumed.search" / "journal.jsonl").is_file()
    with pytest.raises(ConfigError, match="--resume"):
        search(config(setup, output), settings)
    calls.clear()
    crash[0] = False
    resumed = search(config(setup, output, resume=True), settings)
    assert calls == ["run-02", "run-03"]  # the finished first run is not run again
    assert resumed.winner is not None and whole.winner is not None
    assert resumed.winner.name == whole.winner.name
    assert [r.metric for r in resumed.runs] == pytest.approx([r.metric for r in whole.runs])
    assert not (tmp_path / "resumed.search").exists()


def test_a_resumed_search_needs_the_same_grid(setup, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "finetune", lambda c: (_ for _ in ()).throw(RuntimeError("killed")))
    with pytest.raises(RuntimeError):
        search(config(setup, tmp_path / "out"), SearchConfig(grid=GRID))
    with pytest.raises(ConfigError, match="another grid"):
        search(config(setup, tmp_path / "out", resume=True), SearchConfig(grid={"lr": [1e-4]}))


def test_the_budget_stops_the_search_with_the_best_run_so_far(setup, tmp_path):
    result = search(config(setup, tmp_path / "out"), SearchConfig(grid={"lr": [5e-3, 1e-3, 1e-4]}, budget=0.001))
    # the first run is cut at once, and no other starts after the budget
    assert result.stop_reason == "budget" and len(result.runs) == 1
    assert result.runs[0].status == "cut" and result.winner is result.runs[0]
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_optuna_samples_the_given_number_of_trials(setup, tmp_path):
    pytest.importorskip("optuna")
    grid = {"lr": {"low": 1e-4, "high": 1e-2, "log": True}, "micro_batch_size": [4, 6]}
    result = search(config(setup, tmp_path / "out"), SearchConfig(grid=grid, trials=3))
    assert [run.name for run in result.runs] == ["trial-01", "trial-02", "trial-03"]
    assert all(1e-4 <= run.params["lr"] <= 1e-2 and run.params["micro_batch_size"] in (4, 6) for run in result.runs)
    assert result.winner is not None and result.winner.metric == max(r.metric for r in result.runs if r.metric)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"grid": {"dropout": [0.1]}}, "cannot vary 'dropout'"),
        ({"grid": {"lr": 5e-5}}, "give a list of values"),
        ({"grid": {"lr": {"low": 1e-5, "high": 1e-4}}}, "needs --search-trials"),
        ({"grid": {}}, "grid is empty"),
        ({"budget": "soon"}, "cannot read duration"),
        ({"trials": 0}, "--search-trials must be a positive integer"),
    ],
)
def test_bad_search_settings_are_one_line_errors(settings, message):
    with pytest.raises(ConfigError, match=message):
        SearchConfig(**settings)


def test_search_needs_a_dev_set(setup, tmp_path):
    no_dev = FinetuneConfig.from_options(
        "classification", str(setup["model"]), str(setup["train"]), str(tmp_path / "o")
    )
    with pytest.raises(ConfigError, match="give --dev"):
        search(no_dev)


def test_cli_search_with_a_grid_from_the_config_file(setup, tmp_path, capsys):
    grid_file = tmp_path / "search.toml"
    grid_file.write_text("epochs = 1\n\n[search]\nlr = [1e-5, 5e-3]\n", encoding="utf-8")
    output = tmp_path / "cli"
    args = ["finetune", "--task", "classification", "--model", setup["model"], "--train", setup["train"]]
    args += ["--dev", setup["train"], "--output", output, "--config", grid_file, "--micro-batch-size", "8"]
    args += ["--max-seq-length", "16", "--no-progress", "--no-plot", "--report-to", "none", "--search"]
    assert main([str(a) for a in args]) == 0
    out, err = capsys.readouterr()
    assert "search: a grid of 2 runs over lr" in err and "| run-01 | 1e-05 |" in out
    assert json.loads((output / "search.json").read_text())["winner"] in ("run-01", "run-02")
    assert main([str(a) for a in [*args[:-1], "--search-budget", "1h"]]) == 2
    assert "--search-trials and --search-budget go with --search" in capsys.readouterr().err


def test_the_search_table_names_every_column_once(setup, tmp_path, capsys):
    """A grid over epochs and the batch: search.md (and the table printed) names each column once."""
    grid_file = tmp_path / "search.toml"
    grid_file.write_text("[search]\nepochs = [1, 2]\nmicro_batch_size = [8]\n", encoding="utf-8")
    output = tmp_path / "cli"
    args = ["finetune", "--task", "classification", "--model", setup["model"], "--train", setup["train"]]
    args += ["--dev", setup["train"], "--output", output, "--config", grid_file, "--max-seq-length", "16"]
    assert main([str(a) for a in [*args, "--no-progress", "--no-plot", "--report-to", "none", "--search"]]) == 0
    out = capsys.readouterr().out
    table = (output / "search.md").read_text()
    assert table == out
    header = [cell.strip() for cell in table.splitlines()[0].strip("|").split("|")]
    assert all(header) and len(set(header)) == len(header), header
    assert header == [
        "run", "epochs", "micro_batch_size", "batch", "updates", "dev accuracy per epoch", "best", "seconds", "status"
    ]  # fmt: skip
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert [row[1] for row in rows] == ["1", "2"] and {row[-1] for row in rows} <= {"winner", "done"}
    assert sum(row[-1] == "winner" for row in rows) == 1


def test_a_search_killed_by_a_signal_resumes_from_the_command_line(setup, tmp_path):
    """SIGTERM while the second run trains (or between runs): exit, then --resume finishes the grid."""
    output = tmp_path / "killed"
    args = [sys.executable, "-m", "bertkit", "finetune", "--task", "classification", "--model", setup["model"]]
    args += ["--train", setup["train"], "--dev", setup["train"], "--output", output, "--micro-batch-size", "4"]
    args += ["--epochs", "4", "--max-seq-length", "16", "--seed", "3", "--no-progress", "--no-plot"]
    args += ["--report-to", "none", "--search", "--config", tmp_path / "grid.toml"]
    (tmp_path / "grid.toml").write_text("[search]\nlr = [1e-5, 5e-3, 1e-3]\n", encoding="utf-8")
    process = subprocess.Popen([str(a) for a in args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if "search: run-02 of 3" in line:
            process.send_signal(signal.SIGTERM)
            break
    process.communicate(timeout=300)
    assert process.returncode in (128 + signal.SIGTERM, -signal.SIGTERM) and not output.exists()
    done = subprocess.run([str(a) for a in [*args, "--resume"]], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    table = json.loads((output / "search.json").read_text())
    assert [run["name"] for run in table["runs"]] == ["run-01", "run-02", "run-03"]
    whole = search(config(setup, tmp_path / "whole"), SearchConfig(grid={"lr": [1e-5, 5e-3, 1e-3]}))
    assert whole.winner is not None and table["winner"] == whole.winner.name
