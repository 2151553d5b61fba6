"""Fine-tuning, evaluation and prediction end to end on a tiny random model (no ../shared needed).

Every task family through the Python API and the CLI; the output loads in bertkit and in transformers with
equal outputs; a tiny model overfits a tiny set (the loop really learns); bad input exits 2 with one line
and leaves no output behind; the resumable length-grouped batches.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bertkit.cli import main
from bertkit.errors import BertkitError, ConfigError
from bertkit.inference import evaluate_model, load_finetuned, predict
from bertkit.tasks import make_task
from bertkit.training.finetune import (
    FinetuneConfig,
    _training_collate,
    finetune,
    groups_by_length,
    training_batches,
)
from inference_helpers import write_squad

QUIET = {"tensorboard": False, "plot": False}

POSITIVE = ["good movie", "great film", "a good story", "very good", "great great movie", "good film"]
NEGATIVE = ["bad movie", "bad film", "a bad story", "very bad", "bad bad movie", "the lazy film was bad"]


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def base(encoder_dir: Path) -> Path:
    """A tiny random-init encoder saved with its tokenizer: the starting model (no task head)."""
    return encoder_dir


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("data")
    rows = [(t, "pos") for t in POSITIVE] + [(t, "neg") for t in NEGATIVE]
    table = "sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows * 2)
    (root / "cls.tsv").write_text(table, encoding="utf-8")
    scores = [
        ("good movie", "great film", "4.5"),
        ("bad movie", "great film", "0.5"),
        ("a good story", "good film", "4.2"),
        ("very bad", "very good", "1.0"),
        ("the cat sat", "the cat sat", "5.0"),
        ("bad film", "good film", "0.8"),
    ]
    (root / "reg.tsv").write_text(
        "sentence1\tsentence2\tscore\n" + "".join("\t".join(r) + "\n" for r in scores * 3), encoding="utf-8"
    )
    sentences = [
        [("george", "B-PER"), ("washington", "I-PER"), ("lived", "O"), ("in", "O"), ("virginia", "B-LOC")],
        [("john", "B-PER"), ("smith", "I-PER"), ("went", "O"), ("to", "O"), ("paris", "B-LOC")],
        [("the", "O"), ("cat", "O"), ("sat", "O"), ("in", "O"), ("france", "B-LOC")],
    ]
    conll = "-DOCSTART- -X- -X- O\n\n" + "".join("".join(f"{w} NN O {t}\n" for w, t in s) + "\n" for s in sentences * 3)
    (root / "ner.txt").write_text(conll, encoding="utf-8")
    contexts = [
        (
            "john smith lived in paris . he was the king of france .",
            [("who lived in paris ?", "john smith"), ("where did john smith live ?", "paris")],
        ),
        (
            "george washington led the continental army . he lived in virginia .",
            [("who led the continental army ?", "george washington"), ("where did he live ?", "virginia")],
        ),
    ]
    write_squad(root / "qa.json", contexts)
    return {"cls": root / "cls.tsv", "reg": root / "reg.tsv", "ner": root / "ner.txt", "qa": root / "qa.json"}


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(output: Path) -> list[Path]:
    """Anything a run left next to (or as) its output directory."""
    return sorted(output.parent.glob(output.name + "*"))


# ------------------------------------------------------------------------------------------ Python API
def test_classification_end_to_end(base, data, tmp_path):
    output = tmp_path / "cls"
    result = finetune(
        FinetuneConfig.from_options(
            task="classification",
            model=str(base),
            train_file=str(data["cls"]),
            dev_file=str(data["cls"]),
            output=str(output),
            epochs=3,
            lr=5e-3,
            micro_batch_size=8,
            progress=False,
            train_options=QUIET,
        )
    )
    assert result.output == output and leftovers(output) == [output]  # no .partial, no .tmp
    files = {p.name for p in output.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "tokenizer.json",
        "metrics.json",
        "metrics.jsonl",
        "finetune_config.json",
        "dev_predictions",
    } <= files
    config = json.loads((output / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "neg", "1": "pos"} and config["label2id"] == {"neg": 0, "pos": 1}
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["main_metric"] == "accuracy" and metrics["dev"] == result.metrics
    assert len(metrics["evaluations"]) == 3 and len(result.epoch_seconds) == 3  # one dev evaluation per epoch
    best = max(e["accuracy"] for e in metrics["evaluations"])
    assert result.metrics["accuracy"] == best
    # the saved model is the best one: evaluating it again gives the recorded dev metrics
    assert evaluate_model(output, data["cls"]) == pytest.approx(result.metrics)
    lines = (output / "dev_predictions" / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 2 * (len(POSITIVE) + len(NEGATIVE))


def test_tiny_model_overfits_tiny_set(base, data, tmp_path):
    result = finetune(
        FinetuneConfig.from_options(
            task="classification",
            model=str(base),
            train_file=str(data["cls"]),
            dev_file=str(data["cls"]),
            output=str(tmp_path / "fit"),
            epochs=12,
            lr=3e-3,
            micro_batch_size=8,
            warmup_ratio=0.0,
            progress=False,
            log_every=1,
            train_options=QUIET,
        )
    )
    losses = [r["loss"] for r in result.train.history if r["split"] == "train"]
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3])
    assert result.metrics["accuracy"] == 1.0


def test_regression_end_to_end(base, data, tmp_path):
    output = tmp_path / "reg"
    result = finetune(
        FinetuneConfig.from_options(
            task="regression",
            model=str(base),
            train_file=str(data["reg"]),
            dev_file=str(data["reg"]),
            output=str(output),
            epochs=2,
            lr=1e-3,
            micro_batch_size=6,
            progress=False,
            train_options=QUIET,
        )
    )
    config = json.loads((output / "config.json").read_text())
    assert config["num_labels"] == 1 and config["problem_type"] == "regression" and "id2label" not in config
    assert {"pearson", "spearman", "mse"} <= set(result.metrics)
    n = predict(output, data["reg"], tmp_path / "p.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert n == len(rows) == 18 and all(set(r) == {"index", "text", "text_pair", "score"} for r in rows)


def test_early_stopping(base, data, tmp_path):
    # A learning rate too small to change any prediction: the metric never improves after the first epoch.
    result = finetune(
        FinetuneConfig.from_options(
            task="classification",
            model=str(base),
            train_file=str(data["cls"]),
            dev_file=str(data["cls"]),
            output=str(tmp_path / "es"),
            epochs=6,
            lr=1e-12,
            micro_batch_size=8,
            early_stopping_patience=2,
            progress=False,
            train_options=QUIET,
        )
    )
    assert len(result.evaluations) == 3 and result.train.step == 3 * 3  # 24 features / 8 = 3 updates per epoch
    assert result.best_step == 3
    assert result.train.stop_reason == "early_stopping"
    assert json.loads((tmp_path / "es" / "metrics.json").read_text())["train"]["stop_reason"] == "early_stopping"


# ------------------------------------------------------------------------------------------ CLI and HF parity
def _transformers_logits(directory: Path, cls_name: str, batch: dict) -> Any:
    """The output of transformers' class ``cls_name`` (a ``ModelOutput`` subclass picked by name) on ``batch``."""
    transformers = pytest.importorskip("transformers")
    model = getattr(transformers, cls_name).from_pretrained(directory).eval()
    with torch.no_grad():
        out = model(**batch)
    return out


def _batch(directory: Path, texts: list[str]) -> dict:
    from bertkit.tokenizer import Tokenizer, collate_encodings

    tokenizer = Tokenizer.from_pretrained(directory)
    return collate_encodings(tokenizer.encode_batch(texts))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_run_stopped_by_a_signal_exits_as_shells_do_and_resumes(
    base, data, tmp_path, capsys, caplog, monkeypatch, signum
):
    """SIGINT exits 130 and SIGTERM 143 (128 + the signal), never 0: a script must not take it for a finished
    run. The checkpoint is written first, so --resume finishes the run. The resumed run says its head comes
    from the checkpoint (not "newly initialised"), and the finished run names no checkpoint it deletes."""
    from bertkit.models.bert import BertForSequenceClassification

    forward = BertForSequenceClassification.forward
    calls = []

    def interrupted_forward(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signum)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(BertForSequenceClassification, "forward", interrupted_forward)
    output = tmp_path / "run"
    args = ["finetune", "--task", "classification", "--model", base, "--train", data["cls"], "--output", output]
    args += ["--no-progress", "--max-steps", "6", "--micro-batch-size", "4"]
    code, _, err = run_cli(args, capsys)
    assert code == 128 + signum and "stopped by a signal" in err and "--resume" in err
    assert not output.exists()
    assert f"checkpoint {output}.partial/checkpoint-" in err  # kept for --resume: named
    monkeypatch.setattr(BertForSequenceClassification, "forward", forward)
    caplog.clear()
    code, _, err = run_cli([*args, "--resume"], capsys)
    assert code == 0 and (output / "model.safetensors").is_file(), err
    assert "the task head's too, is restored from the checkpoint" in err
    assert "newly initialised" not in caplog.text + err
    assert "checkpoint-" not in err.split("stopped (max_steps)")[1]  # deleted with the work directory


def test_schedule_flag_reaches_the_training_loop(base, data, tmp_path, capsys):
    def lrs(schedule):
        output = tmp_path / (schedule or "default")
        flag = ["--schedule", schedule] if schedule else []
        code, _, err = run_cli(
            [
                "finetune",
                "--task",
                "classification",
                "--model",
                base,
                "--train",
                data["cls"],
                "--output",
                output,
                "--no-progress",
                "--lr",
                "1e-3",
                "--max-steps",
                "4",
                "--micro-batch-size",
                "4",
                "--warmup-ratio",
                "0.5",
                *flag,
            ],
            capsys,
        )
        assert code == 0, err
        records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
        return [r["lr"] for r in records if r.get("split") == "train"]

    # warmup 2 of 4 updates; the lr logged is the one of the last update of each logging window
    assert lrs("constant")[-1] == pytest.approx(1e-3)
    assert lrs("poly")[-1] == pytest.approx(1e-3 * (4 - 3) / (4 - 2))
    assert lrs("linear")[-1] == pytest.approx(1e-3 * (1 - 3 / 4))
    assert lrs(None)[-1] == pytest.approx(1e-3 * (4 - 3) / (4 - 2))  # fine-tuning's default: transformers' decay


def test_classification_output_loads_in_transformers(base, data, tmp_path, capsys):
    output = tmp_path / "cls"
    config = tmp_path / "ft.toml"
    config.write_text(
        f'task = "classification"\nmodel = "{base}"\ntrain_file = "{data["cls"]}"\n'
        f"micro_batch_size = 8\nepochs = 1\n[train]\ntensorboard = false\nplot = false\n"
    )
    code, out, err = run_cli(
        ["finetune", "--config", config, "--dev", data["cls"], "--output", output, "--no-progress", "--lr", "1e-3"],
        capsys,
    )
    assert code == 0, err
    assert "accuracy" in json.loads(out.strip().splitlines()[-1])
    finetuned = load_finetuned(output)
    batch = _batch(output, ["good movie", "a bad story about the king"])
    with torch.no_grad():
        ours = finetuned.model(**batch).logits
    theirs = _transformers_logits(output, "BertForSequenceClassification", batch)
    torch.testing.assert_close(theirs.logits, ours, atol=1e-5, rtol=1e-4)
    transformers = pytest.importorskip("transformers")
    hf_config = transformers.AutoConfig.from_pretrained(output)
    assert hf_config.id2label == {0: "neg", 1: "pos"}

    code, out, err = run_cli(["evaluate", "--model", output, "--input", data["cls"]], capsys)
    assert code == 0, err
    assert set(json.loads(out)) >= {"accuracy", "mcc", "f1"}
    code, _, err = run_cli(
        ["predict", "--model", output, "--input", data["cls"], "--output", tmp_path / "p.jsonl"], capsys
    )
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert code == 0 and len(rows) == 24
    assert rows[0]["label"] in ("neg", "pos") and sum(rows[0]["probabilities"].values()) == pytest.approx(1.0)


def test_ner_cli_end_to_end(base, data, tmp_path, capsys):
    output = tmp_path / "ner"
    config = tmp_path / "ner.toml"
    config.write_text("[train]\ntensorboard = false\nplot = false\n")
    code, out, err = run_cli(
        [
            "finetune",
            "--config",
            config,
            "--task",
            "ner",
            "--model",
            base,
            "--train",
            data["ner"],
            "--dev",
            data["ner"],
            "--output",
            output,
            "--epochs",
            "2",
            "--lr",
            "5e-3",
            "--micro-batch-size",
            "3",
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0, err
    saved = json.loads((output / "config.json").read_text())
    assert set(saved["id2label"].values()) == {"B-LOC", "B-PER", "I-PER", "O"}
    code, out, err = run_cli(["evaluate", "--model", output, "--input", data["ner"]], capsys)
    assert code == 0 and {"precision", "recall", "f1"} <= set(json.loads(out))
    code, _, err = run_cli(
        ["predict", "--model", output, "--input", data["ner"], "--output", tmp_path / "n.jsonl"], capsys
    )
    rows = [json.loads(line) for line in (tmp_path / "n.jsonl").read_text().splitlines()]
    assert code == 0 and len(rows) == 9  # one line per sentence
    assert len(rows[0]["tags"]) == len(rows[0]["scores"]) == 5 and all(0 < s <= 1 for s in rows[0]["scores"])

    finetuned = load_finetuned(output)
    batch = _batch(output, ["george washington lived in paris"])
    with torch.no_grad():
        ours = finetuned.model(**batch).logits
    theirs = _transformers_logits(output, "BertForTokenClassification", batch)
    torch.testing.assert_close(theirs.logits, ours, atol=1e-5, rtol=1e-4)


def test_qa_cli_end_to_end(base, data, tmp_path, capsys):
    output = tmp_path / "qa"
    config = tmp_path / "qa.toml"
    config.write_text(
        "max_seq_length = 32\n[task_options]\ndoc_stride = 8\nmax_query_length = 12\n[train]\ntensorboard = false\nplot = false\n"
    )
    code, out, err = run_cli(
        [
            "finetune",
            "--config",
            config,
            "--task",
            "qa",
            "--model",
            base,
            "--train",
            data["qa"],
            "--dev",
            data["qa"],
            "--output",
            output,
            "--epochs",
            "2",
            "--lr",
            "5e-3",
            "--micro-batch-size",
            "4",
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0, err
    assert {"exact_match", "f1"} <= set(json.loads(out.strip().splitlines()[-1]))
    saved = json.loads((output / "config.json").read_text())
    assert saved["bertkit_finetune"]["max_seq_length"] == 32 and saved["bertkit_finetune"]["task_options"] == {
        "doc_stride": 8,
        "max_query_length": 12,
    }
    assert (output / "dev_predictions" / "predictions.json").is_file()
    code, _, err = run_cli(
        ["predict", "--model", output, "--input", data["qa"], "--output", tmp_path / "q.jsonl"], capsys
    )
    rows = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert code == 0 and [r["id"] for r in rows] == ["q00", "q01", "q10", "q11"]
    assert all(isinstance(r["answer"], str) and 0 <= r["score"] <= 1 for r in rows)

    finetuned = load_finetuned(output)
    batch = _batch(output, ["who led the army ? george washington led the army ."])
    with torch.no_grad():
        ours = finetuned.model(**batch)
    theirs = _transformers_logits(output, "BertForQuestionAnswering", batch)
    torch.testing.assert_close(theirs.start_logits, ours.start_logits, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(theirs.end_logits, ours.end_logits, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------------------ bad input
def _bad_inputs(base: Path, data: dict[str, Path], root: Path) -> dict[str, tuple[list, str]]:
    root.mkdir(parents=True, exist_ok=True)
    unseen = root / "unseen.tsv"
    unseen.write_text("sentence\tlabel\ngood movie\tpos\nbad movie\tneutral\n")
    no_label = root / "nolabel.tsv"
    no_label.write_text("sentence\tgrade\ngood movie\tpos\n")
    empty = root / "empty.tsv"
    empty.write_text("")
    conll = root / "bad.txt"
    conll.write_text("george NN B-PER\nwashington I-PER\n\n")
    squad = json.loads(data["qa"].read_text())
    squad["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 1
    misaligned = root / "misaligned.json"
    misaligned.write_text(json.dumps(squad))
    strict = root / "strict.toml"
    strict.write_text("[task_options]\nstrict = true\n")
    no_tokenizer = root / "notok"
    no_tokenizer.mkdir(exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        (no_tokenizer / name).write_bytes((base / name).read_bytes())
    cls = ["--task", "classification", "--model", base, "--train", data["cls"]]
    return {
        "unseen dev label": ([*cls, "--dev", unseen], "unseen.tsv:3"),
        "missing column": (["--task", "classification", "--model", base, "--train", no_label], "nolabel.tsv"),
        "empty file": (["--task", "classification", "--model", base, "--train", empty], "empty.tsv"),
        "conll columns": (["--task", "ner", "--model", base, "--train", conll], "bad.txt:2"),
        "squad answer_start": (
            ["--config", strict, "--task", "qa", "--model", base, "--train", misaligned],
            "misaligned.json",
        ),
        "no tokenizer": (["--task", "classification", "--model", no_tokenizer, "--train", data["cls"]], "notok"),
    }


@pytest.mark.parametrize(
    "case", ["unseen dev label", "missing column", "empty file", "conll columns", "squad answer_start", "no tokenizer"]
)
def test_bad_input_exits_2_with_one_line_and_no_output(base, data, tmp_path, capsys, case):
    args, where = _bad_inputs(base, data, tmp_path / "inputs")[case]
    output = tmp_path / "out"
    code, _, err = run_cli(["finetune", *args, "--output", output, "--no-progress"], capsys)
    lines = [line for line in err.splitlines() if line.startswith("bertkit: error:")]
    assert code == 2 and len(lines) == 1, err
    assert where in lines[0]
    assert leftovers(output) == []


def test_misaligned_squad_training_answer_is_skipped_and_counted(base, data, tmp_path):
    squad = json.loads(data["qa"].read_text())
    squad["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 1
    train = tmp_path / "train.json"
    train.write_text(json.dumps(squad))
    result = finetune(
        FinetuneConfig.from_options(
            task="qa",
            model=str(base),
            train_file=str(train),
            output=str(tmp_path / "o"),
            max_seq_length=32,
            task_options={"doc_stride": 8, "max_query_length": 12},
            max_steps=1,
            micro_batch_size=4,
            progress=False,
            train_options=QUIET,
        )
    )
    assert result.skipped_train_examples == 1 and result.num_train_examples == 3
    assert json.loads((tmp_path / "o" / "metrics.json").read_text())["train"]["skipped_examples"] == 1


def test_existing_output_is_refused(base, data, tmp_path):
    output = tmp_path / "taken"
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="already exists"):
        finetune(
            FinetuneConfig.from_options(
                task="classification", model=str(base), train_file=str(data["cls"]), output=str(output), progress=False
            )
        )
    assert (output / "keep.txt").read_text() == "mine"


def test_evaluate_refuses_a_model_without_a_trained_head(base, data):
    with pytest.raises(BertkitError, match="not a fine-tuned model"):
        evaluate_model(base, data["cls"])


def test_config_validation():
    with pytest.raises(ConfigError, match="unknown task"):
        FinetuneConfig.from_options(task="summarize", model="m", train_file="t", output="o")
    with pytest.raises(ConfigError, match="early stopping needs a dev set"):
        FinetuneConfig.from_options(task="ner", model="m", train_file="t", output="o", early_stopping_patience=2)
    qa = FinetuneConfig.from_options(task="qa", model="m", train_file="t", output="o")
    assert (qa.train.optimizer.lr, qa.train.duration.epochs, qa.max_seq_length, qa.train.batch.micro_batch_size) == (
        3e-5,
        2.0,
        384,
        12,
    )
    given = FinetuneConfig.from_options(task="qa", model="m", train_file="t", output="o", micro_batch_size=24, lr=5e-5)
    assert (given.train.optimizer.lr, given.train.batch.micro_batch_size) == (
        5e-5,
        24,
    )  # a default never overrides a given value
    cls = FinetuneConfig.from_options(task="classification", model="m", train_file="t", output="o")
    assert (
        cls.train.optimizer.lr,
        cls.train.duration.epochs,
        cls.max_seq_length,
        cls.train.batch.micro_batch_size,
    ) == (5e-5, 3.0, 128, 32)


# ------------------------------------------------------------------------------------------ batches
def _features(lengths: list[int]) -> list[dict]:
    return [{"input_ids": [1] * n, "i": i} for i, n in enumerate(lengths)]


def test_grouped_batches_cover_each_epoch_once_and_pad_little():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 120, size=500).tolist()
    features = _features(lengths)
    batches = training_batches(features, 16, lambda chunk: [f["i"] for f in chunk], seed=3, chunk_batches=8)
    epoch0 = list(batches)
    assert batches.epoch == 1 and len(epoch0) == len(batches) == 32
    assert sorted(i for b in epoch0 for i in b) == list(range(500))
    epoch1 = list(batches)
    assert epoch1 != epoch0 and sorted(i for b in epoch1 for i in b) == list(range(500))

    def padding(bs):
        return 1 - sum(lengths[i] for b in bs for i in b) / sum(len(b) * max(lengths[i] for i in b) for b in bs)

    random_batches = training_batches(
        features, 16, lambda chunk: [f["i"] for f in chunk], seed=3, group_by_length=False
    )
    assert padding(epoch0) < 0.1 < padding(list(random_batches))


def test_batching_default_is_random_for_regression_only():
    """A regression score that follows length (STS-B's does) makes length-grouped batches a biased sample."""
    from bertkit.tasks.classification import ClassificationExample

    def grouped(task, labels=("a", "b"), **kwargs):
        config = FinetuneConfig.from_options(task=task, model="m", train_file="t", output="o", **kwargs)
        fitted = make_task(task, {})
        if task in ("classification", "regression"):
            fitted.fit_labels([ClassificationExample("x", None, label, "t:1") for label in labels])
        return groups_by_length(config, fitted)

    assert grouped("regression", labels=("1", "2")) is False
    with pytest.raises(ConfigError, match="use --task regression"):  # scores named classification are refused
        grouped("classification", labels=("0.5", "3.8"))
    assert grouped("classification") is True and grouped("ner") is True and grouped("qa") is True
    assert grouped("regression", labels=("1", "2"), group_by_length=True) is True
    assert grouped("classification", group_by_length=False) is False


def test_grouped_batches_resume_exactly():
    features = _features(list(range(3, 103)))
    collate = lambda chunk: [f["i"] for f in chunk]  # noqa: E731
    full = training_batches(features, 8, collate, seed=1)
    expected = list(full) + list(full)
    first = training_batches(features, 8, collate, seed=1)
    iterator = iter(first)
    seen = [next(iterator) for _ in range(5)]
    resumed = training_batches(features, 8, collate, seed=1)
    resumed.load_state_dict(first.state_dict())
    assert resumed.consumed == 5
    rest = list(resumed)
    assert seen + rest + list(resumed) == expected
    with pytest.raises(ConfigError, match="micro-batch"):
        training_batches(features, 4, collate, seed=1).load_state_dict(first.state_dict())


def test_grouped_batches_split_over_processes():
    features = _features(list(range(3, 103)))
    collate = lambda chunk: [f["i"] for f in chunk]  # noqa: E731
    one = list(training_batches(features, 10, collate, seed=2))
    ranks = [list(training_batches(features, 10, collate, seed=2, rank=r, world_size=2)) for r in range(2)]
    assert [b for pair in zip(*ranks) for b in pair] == one


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).resolve().parents[1] / "configs").glob("finetune-*.toml")), ids=lambda p: p.name
)
def test_example_configs_are_valid(path):
    from bertkit.training.train_config import read_config_file

    options = read_config_file(path, FinetuneConfig)
    config = FinetuneConfig.from_options(model="some/model", **options)
    assert config.task in ("classification", "regression", "ner", "qa") and Path(config.train_file).name
    assert config.dev_file is not None


def test_interrupted_run_resumes_to_the_same_model(base, data, tmp_path, monkeypatch):
    import bertkit.training.finetune_selection as ft  # where dev evaluation runs the model

    def config(output: Path, **more) -> FinetuneConfig:
        return FinetuneConfig.from_options(
            task="classification",
            model=str(base),
            train_file=str(data["cls"]),
            dev_file=str(data["cls"]),
            output=str(output),
            epochs=3,
            lr=3e-3,
            micro_batch_size=8,
            save_every=3,
            progress=False,
            train_options=QUIET,
            **more,
        )

    straight = finetune(config(tmp_path / "straight"))
    calls = {"n": 0}
    real_run_model = ft.run_model

    def crash_on_second_evaluation(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real_run_model(*args, **kwargs)

    monkeypatch.setattr(ft, "run_model", crash_on_second_evaluation)
    output = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        finetune(config(output))
    assert not output.exists() and (tmp_path / "resumed.partial" / "checkpoint-3").is_dir()
    monkeypatch.setattr(ft, "run_model", real_run_model)
    with pytest.raises(BertkitError, match="--resume"):
        finetune(config(output))
    resumed = finetune(config(output, resume=True))
    assert leftovers(output) == [output]
    assert [e["step"] for e in resumed.evaluations] == [3, 6, 9]
    assert resumed.metrics == straight.metrics and resumed.best_step == straight.best_step
    assert (output / "model.safetensors").read_bytes() == (tmp_path / "straight" / "model.safetensors").read_bytes()
    assert (output / "dev_predictions" / "predictions.jsonl").is_file()


def test_a_work_dir_left_by_a_finished_run_is_removed(base, data, tmp_path):
    """A stop between renaming the output into place and deleting ``.partial`` must not block the user."""
    output = tmp_path / "done"
    output.mkdir()
    (output / "metrics.json").write_text("{}")
    (tmp_path / "done.partial" / "checkpoint-3").mkdir(parents=True)
    config = FinetuneConfig.from_options(
        task="classification", model=str(base), train_file=str(data["cls"]), output=str(output), resume=True
    )
    with pytest.raises(ConfigError, match="that run finished"):
        finetune(config)
    assert leftovers(output) == [output] and (output / "metrics.json").is_file()


def test_token_tasks_weigh_every_labeled_token_alike_across_length_grouped_batches():
    from bertkit.tasks.ner import NerTask

    # 4 features with 1, 1, 6 and 8 labeled tokens: 16 in all, 8 per micro-batch of 2 on average.
    features = [
        {
            "input_ids": [1] * (n + 2),
            "token_type_ids": [0] * (n + 2),
            "attention_mask": [1] * (n + 2),
            "labels": [-100] + [0] * n + [-100],
        }
        for n in (1, 1, 6, 8)
    ]
    config = FinetuneConfig.from_options(
        task="ner", model="unused", train_file="unused", output="unused", micro_batch_size=2
    )
    ner = NerTask()
    batch = _training_collate(ner, features, config, pad_id=0)(features[:2])
    assert float(batch["label_normalizer"]) == 8.0 and batch["labels"].shape == (2, 3)
    assert "label_normalizer" not in _training_collate(
        ner, features, dataclasses.replace(config, group_by_length=False), pad_id=0
    )(features[:2])


def test_epochs_and_max_steps_end_the_run_at_whichever_comes_first(base, data, tmp_path, capsys):
    """24 features / micro-batch 8 = 3 updates per epoch: --epochs 1 --max-steps 25 stops after 3, saying why."""
    common = [
        "finetune",
        "--task",
        "classification",
        "--model",
        base,
        "--train",
        data["cls"],
        "--no-progress",
        "--micro-batch-size",
        "8",
        "--report-to",
        "none",
        "--no-plot",
    ]
    code, _, err = run_cli([*common, "--output", tmp_path / "epochs", "--epochs", "1", "--max-steps", "25"], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "epochs" / "metrics.json").read_text())["train"]
    assert (summary["steps"], summary["stop_reason"]) == (3, "epochs")
    assert "stopped (epochs) at step 3" in err
    code, _, err = run_cli([*common, "--output", tmp_path / "steps", "--epochs", "2", "--max-steps", "4"], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "steps" / "metrics.json").read_text())["train"]
    assert (summary["steps"], summary["stop_reason"]) == (4, "max_steps")
    # --max-steps alone is not capped by the default epochs (3 epochs would be 9 updates)
    result = finetune(
        FinetuneConfig.from_options(
            task="classification",
            model=str(base),
            train_file=str(data["cls"]),
            output=str(tmp_path / "alone"),
            max_steps=12,
            micro_batch_size=8,
            progress=False,
            train_options=QUIET,
        )
    )
    assert (result.train.step, result.train.stop_reason) == (12, "max_steps")


def test_finetune_records_the_resolved_precision(base, data, tmp_path):
    finetune(
        FinetuneConfig.from_options(
            task="classification",
            model=str(base),
            train_file=str(data["cls"]),
            output=str(tmp_path / "o"),
            max_steps=1,
            micro_batch_size=8,
            progress=False,
            train_options=QUIET,
        )
    )
    saved = json.loads((tmp_path / "o" / "finetune_config.json").read_text())
    assert saved["train"]["precision"] == "fp32"  # auto, resolved on this CPU


def test_a_config_file_is_overridden_by_the_given_options(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'task = "classification"\nmodel = "m"\ntrain = "t.tsv"\nlr = 1e-3\nepochs = 2\n'
        '[task_options]\ntext_column = "a"\nlabel_column = "y"\n',
        encoding="utf-8",
    )
    config = FinetuneConfig.from_file(path, task_options={"label_column": "z"}, output="o", lr=None, epochs=4)
    assert (config.task, config.train_file, config.output) == ("classification", "t.tsv", "o")
    assert (config.train.optimizer.lr, config.train.duration.epochs) == (1e-3, 4.0)  # None is "not given"
    assert config.task_options == {"text_column": "a", "label_column": "z"}
    with pytest.raises(ConfigError, match=r"^--output is required \(on the command line or in the config file\)$"):
        FinetuneConfig.from_file(path)
    with pytest.raises(ConfigError, match=r"^--task is required"):
        FinetuneConfig.from_file(None, model="m", train_file="t", output="o")


def test_flat_options_fill_the_nested_train_config():
    config = FinetuneConfig.from_options(
        task="ner",
        model="m",
        train_file="t",
        output="runs/x",
        lr=1e-3,
        warmup_steps=5,
        train_options={"optimizer": "lamb"},
    )
    assert (config.train.optimizer.lr, config.train.schedule.warmup_steps, config.train.schedule.warmup_ratio) == (
        1e-3,
        5,
        None,
    )
    assert config.train.optimizer.name == "lamb" and config.train.schedule.name == "poly"
    assert config.train.output_dir == Path("runs/x.partial")
    with pytest.raises(ConfigError, match=r"'micro_bach_size' .*did you mean 'micro_batch_size'"):
        FinetuneConfig.from_options(task="ner", model="m", train_file="t", output="o", micro_bach_size=4)
    with pytest.raises(ConfigError, match="'max_seq_length'"):  # a fine-tuning field is no training option
        FinetuneConfig.from_options(
            task="ner", model="m", train_file="t", output="o", train_options={"max_seq_length": 64}
        )


def test_none_means_the_task_default_for_every_keyword():
    # Python callers (benchmarks, notebooks) pass their own unset options straight through as None.
    config = FinetuneConfig.from_options(
        task="qa", model="m", train_file="t", output="o", max_seq_length=None, lr=None, micro_batch_size=None
    )
    assert (config.max_seq_length, config.train.optimizer.lr, config.train.batch.micro_batch_size) == (384, 3e-5, 12)
    assert config.eval_batch_size == 64 and config.group_by_length is None
    given = FinetuneConfig.from_options(
        task="qa", model="m", train_file="t", output="o", max_seq_length=256, eval_batch_size=8
    )
    assert (given.max_seq_length, given.eval_batch_size) == (256, 8)


# ------------------------------------------------------------------------------------------ data formats and reports
def test_headerless_training_file_keeps_every_row_and_reports_it(base, tmp_path, capsys):
    rows = [(t, "pos") for t in POSITIVE] + [(t, "neg") for t in NEGATIVE]
    train = tmp_path / "headerless.tsv"
    train.write_text("".join(f"{t}\t{label}\n" for t, label in rows * 2), encoding="utf-8")
    dev = tmp_path / "dev.parquet"
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"0": [t for t, _ in rows], "1": [label for _, label in rows]}), dev)
    output = tmp_path / "out"
    args = ["finetune", "--task", "classification", "--model", base, "--train", train, "--dev", dev]
    args += ["--text-column", "0", "--label-column", "1", "--output", output, "--max-steps", "1"]
    args += ["--no-progress", "--report-to", "none", "--no-plot"]
    code, _, err = run_cli([*args, "--max-seq-length", "5"], capsys)
    assert code == 0, err
    assert f"{train} (tsv): read 24 rows, used 24, skipped 0; no header" in err
    assert f"{dev} (parquet): read 12 rows, used 12, skipped 0" in err
    assert "of 24 examples were cut at max_seq_length 5" in err
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["data"]["train"]["used"] == 24 and metrics["data"]["train"]["skipped"] == {}
    assert metrics["data"]["train"]["truncated"] > 0 and metrics["data"]["dev"]["format"] == "parquet"

    code, _, err = run_cli([*args, "--header", "--overwrite"], capsys)
    assert code == 0, err
    train_data = json.loads((output / "metrics.json").read_text())["data"]["train"]
    assert train_data["used"] == 23 and train_data["skipped"] == {"header line": 1}


def test_predict_and_evaluate_report_rows_and_truncation(base, data, tmp_path, capsys):
    output = tmp_path / "cls"
    result = finetune(
        FinetuneConfig.from_options(
            task="classification",
            model=str(base),
            train_file=str(data["cls"]),
            output=str(output),
            max_steps=1,
            max_seq_length=5,
            max_train_examples=20,
            progress=False,
            train_options=QUIET,
        )
    )
    assert result.data["train"]["used"] == 20 and result.data["train"]["read"] == 25
    assert result.data["train"]["skipped"] == {"header line": 1, "beyond --max-train-examples": 4}
    capsys.readouterr()
    jsonl = tmp_path / "in.json"  # a JSON array, read by its content
    jsonl.write_text(
        json.dumps([{"sentence": "the lazy film was bad", "label": "neg"}, {"sentence": "good", "label": "pos"}])
    )
    code, out, err = run_cli(["evaluate", "--model", output, "--input", jsonl], capsys)
    assert code == 0 and "accuracy" in json.loads(out), err
    assert f"{jsonl} (json): read 2 rows, used 2, skipped 0" in err
    assert "1 of 2 examples were cut at max_seq_length 5" in err
    text = tmp_path / "in.txt"
    text.write_text('sentence,label\n"good, good film",pos\n')
    code, _, err = run_cli(
        ["predict", "--model", output, "--input", text, "--format", "csv", "--output", tmp_path / "p.jsonl"], capsys
    )
    assert code == 0, err
    assert json.loads((tmp_path / "p.jsonl").read_text())["text"] == "good, good film"
    assert f"{text} (csv): read 2 rows, used 1, skipped 1 (1 header line)" in err


@pytest.mark.parametrize(
    "extra, where",
    [
        (["--format", "xls"], "unknown table format 'xls'"),
        (["--format", "csv", "--task", "ner"], "--format csv: the ner task reads conll files only"),
        (["--train", "hf:only-a-name"], "hf:NAME:SPLIT"),
        (["--train", "{dir}"], "a directory without .arrow files"),
        (["--task", "ner", "--train", "{cls}"], "cls.tsv:2: a field with spaces"),
    ],
)
def test_reading_errors_exit_2_with_one_line(base, data, tmp_path, capsys, extra, where):
    (tmp_path / "empty").mkdir()
    args = ["finetune", "--task", "classification", "--model", base, "--train", data["cls"]]
    extra = [x.format(dir=tmp_path / "empty", cls=data["cls"]) for x in extra]
    code, _, err = run_cli([*args, *extra, "--output", tmp_path / "out", "--no-progress"], capsys)
    lines = [line for line in err.splitlines() if line.startswith("bertkit: error:")]
    assert code == 2 and len(lines) == 1, err
    assert where in lines[0]
    assert not (tmp_path / "out").exists()


def test_label_names_name_the_0_1_labels(base, tmp_path, capsys):
    from bertkit.inference import classify

    rows = [(t, "1") for t in POSITIVE] + [(t, "0") for t in NEGATIVE]
    table = tmp_path / "binary.tsv"
    table.write_text("sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows), encoding="utf-8")
    output = tmp_path / "named"
    common = ["finetune", "-t", "classification", "-m", base, "--train", table, "--dev", table]
    common += ["--epochs", "1", "--micro-batch-size", "8", "--no-progress", "--report-to", "none", "--no-plot"]
    code, _, err = run_cli([*common, "-o", output, "--label-names", "negative,positive"], capsys)
    assert code == 0, err
    config = json.loads((output / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert {p.label for p in classify(["good movie", "bad film"], str(output))} <= {"negative", "positive"}
    assert set(classify("good movie", str(output)).probabilities) == {"negative", "positive"}
    # A saved model with names still evaluates against data labelled by id.
    assert 0.0 <= evaluate_model(output, table)["accuracy"] <= 1.0
    code, _, err = run_cli([*common, "-o", tmp_path / "bad", "--label-names", "a,b,c"], capsys)
    assert code == 2 and "--label-names gives 3 names for 2 labels (0, 1)" in err
    assert not (tmp_path / "bad").exists()


def test_long_text_and_max_query_length_are_flags_that_reach_the_task(base, data, tmp_path, capsys):
    def finetune_args(output: Path) -> list:
        return [
            "finetune", "--task", "classification", "--model", base, "--train", data["cls"], "--output", output,
            "--no-progress", "--max-steps", "2", "--micro-batch-size", "4", "--max-seq-length", "6",
        ]  # fmt: skip

    code, _, err = run_cli([*finetune_args(tmp_path / "windows"), "--long-text", "windows"], capsys)
    assert code == 0, err
    saved = json.loads((tmp_path / "windows" / "config.json").read_text(encoding="utf-8"))["bertkit_finetune"]
    assert saved["task_options"]["long_text"] == "windows"
    assert "were cut at max_seq_length" not in err  # windows cut nothing
    code, _, err = run_cli(finetune_args(tmp_path / "cut"), capsys)
    assert code == 0 and "(raise --max-seq-length, or pass --long-text windows)" in err, err
    code, _, err = run_cli([*finetune_args(tmp_path / "bad"), "--long-text", "sideways"], capsys)
    assert code == 2 and "--long-text must be truncate or windows" in err


def test_a_bad_output_path_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """``predict --output somedir`` names the path the user gave, at once, not a temporary file after the run."""
    import bertkit.inference.files as files

    monkeypatch.setattr(files, "load_finetuned", lambda *a, **k: pytest.fail("the model was loaded"))
    somedir = tmp_path / "somedir"
    somedir.mkdir()
    args = ["predict", "--model", tmp_path / "model", "--input", tmp_path / "in.tsv", "--output"]
    code, _, err = run_cli([*args, somedir], capsys)
    assert code == 2 and f"--output {somedir} is a directory; give a file in it" in err, err
    assert ".tmp" not in err and list(somedir.iterdir()) == []
    (tmp_path / "afile").write_text("x")
    code, _, err = run_cli([*args, tmp_path / "afile" / "p.jsonl"], capsys)
    assert code == 2 and f"{tmp_path / 'afile'} is a file, not a directory" in err, err
    (tmp_path / "in.txt").write_text("one text\n")
    embed_args = ["embed", "--model", tmp_path / "model", "--input", tmp_path / "in.txt"]
    code, _, err = run_cli([*embed_args, "--output", tmp_path / "afile" / "v.npy"], capsys)
    assert code == 2 and "is a file, not a directory" in err, err


def test_errors_point_at_what_the_user_gave(base, data, tmp_path, capsys):
    """A data file given as the model is named as such (not its folder as "no model directory"); a QA run on a
    table says that QA reads SQuAD JSON."""
    (tmp_path / "in.txt").write_text("one text\n")
    code, _, err = run_cli(
        ["embed", "--model", data["cls"], "--input", tmp_path / "in.txt", "--output", tmp_path / "v.npy"], capsys
    )
    assert code == 2 and f"{data['cls']} is a file, not a model: give a model directory" in err, err
    table = tmp_path / "train.csv"
    table.write_text("question,context\nwho?,john\n")
    code, _, err = run_cli(
        ["finetune", "--task", "qa", "--model", base, "--train", table, "--output", tmp_path / "qa"], capsys
    )
    assert code == 2 and "not valid JSON" in err and "--task qa reads SQuAD JSON" in err, err
