"""Distillation (``bertkit.training.distill``, ``students``, ``bertkit distill``): the loss against a hand computation,
the layers a student takes, resume after a kill, the student in ``transformers``, and a CLI run per task family.

Teachers are tiny 4-layer models fine-tuned for a few steps on the tiny data below: what is checked is how the
student is built, trained and saved, not its quality (that is benchmarks/bench_distill.py).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import bertkit
from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.models.bert import BertModel
from bertkit.training.distill import DistillConfig, distillation_loss, soft_target_loss
from bertkit.training.finetune import FinetuneConfig, finetune
from bertkit.training.students import build_student, take_layers
from bertkit.weights import load_model
from inference_helpers import save_model, write_squad

QUIET = {"tensorboard": False, "plot": False, "progress": False}
POSITIVE = ["good movie", "great film", "a good story", "very good", "great great movie", "good film"]
NEGATIVE = ["bad movie", "bad film", "a bad story", "very bad", "bad bad movie", "the lazy film was bad"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("distill-data")
    rows = [(t, "pos") for t in POSITIVE] + [(t, "neg") for t in NEGATIVE]
    (root / "cls.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows * 2), encoding="utf-8")
    (root / "more.tsv").write_text("sentence\n" + "".join(f"{t} story\n" for t, _ in rows), encoding="utf-8")
    sentences = [
        [("george", "B-PER"), ("washington", "I-PER"), ("lived", "O"), ("in", "O"), ("virginia", "B-LOC")],
        [("john", "B-PER"), ("smith", "I-PER"), ("went", "O"), ("to", "O"), ("paris", "B-LOC")],
    ]
    conll = "".join("".join(f"{w} NN O {t}\n" for w, t in s) + "\n" for s in sentences * 3)
    (root / "ner.txt").write_text(conll, encoding="utf-8")
    contexts = [
        ("john smith lived in paris . he was the king of france .", [("who lived in paris ?", "john smith")]),
        ("george washington led the army . he lived in virginia .", [("where did he live ?", "virginia")]),
    ]
    write_squad(root / "qa.json", contexts)
    pairs = [{"anchor": a, "positive": p} for a, p in zip(POSITIVE + NEGATIVE, NEGATIVE + POSITIVE)]
    (root / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs), encoding="utf-8")
    return {
        "cls": root / "cls.tsv",
        "more": root / "more.tsv",
        "ner": root / "ner.txt",
        "qa": root / "qa.json",
        "pairs": root / "pairs.jsonl",
    }


@pytest.fixture(scope="module")
def encoder4(tmp_path_factory, tokenizer) -> Path:
    """A tiny random-init 4-layer encoder: the teachers start from it."""
    return save_model(tmp_path_factory.mktemp("enc4") / "model", BertModel, tokenizer, num_hidden_layers=4)


def _teacher(encoder: Path, train: Path, output: Path, task: str, **more) -> Path:
    config = FinetuneConfig.from_options(
        task=task,
        model=str(encoder),
        train_file=str(train),
        output=str(output),
        epochs=2,
        lr=1e-3,
        micro_batch_size=4,
        train_options=QUIET,
        **more,
    )
    finetune(config)
    return output


@pytest.fixture(scope="module")
def teachers(encoder4, data, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("teachers")
    qa = {"max_seq_length": 32, "task_options": {"doc_stride": 8, "max_query_length": 12}}
    return {
        "cls": _teacher(encoder4, data["cls"], root / "cls", "classification"),
        "ner": _teacher(encoder4, data["ner"], root / "ner", "ner"),
        "qa": _teacher(encoder4, data["qa"], root / "qa", "qa", **qa),
        "embedding": encoder4,  # an encoder with no task is an embedding model
    }


def run_cli(args: list, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _distill_args(teacher: Path, train: Path, output: Path, *more) -> list:
    return [
        "distill",
        "--teacher",
        teacher,
        "--train",
        train,
        "--dev",
        train,
        "--output",
        output,
        "--epochs",
        "1",
        "--micro-batch-size",
        "4",
        "--lr",
        "1e-3",
        "--no-progress",
        "--report-to",
        "none",
        "--no-plot",
        *more,
    ]


# ------------------------------------------------------------------------------------------ the loss
def test_soft_target_loss_matches_a_hand_computation():
    student, teacher, t = [1.0, 2.0, 0.0], [0.0, 1.0, 3.0], 2.0

    def softmax(xs: list[float]) -> list[float]:
        exps = [math.exp(x / t) for x in xs]
        return [e / sum(exps) for e in exps]

    p, q = softmax(teacher), softmax(student)
    expected = t * t * sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))
    got = soft_target_loss(torch.tensor([student]), torch.tensor([teacher]), t)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    # masked rows (NER's padding) do not count; the mean is over the rows that do
    two = soft_target_loss(
        torch.tensor([[student, [9.0, 0.0, 0.0]]]),
        torch.tensor([[teacher, [0.0, 0.0, 9.0]]]),
        t,
        torch.tensor([[1, 0]]),
    )
    assert two.item() == pytest.approx(expected, rel=1e-6)
    same = soft_target_loss(torch.tensor([teacher]), torch.tensor([teacher]), t)
    assert same.item() == pytest.approx(0.0, abs=1e-7)
    total = distillation_loss(torch.tensor(2.0), got, 0.25, [(0.5, torch.tensor(4.0))])
    assert total.item() == pytest.approx(0.25 * 2.0 + 0.75 * expected + 0.5 * 4.0, rel=1e-6)
    assert distillation_loss(None, got, 0.25).item() == pytest.approx(0.75 * expected, rel=1e-6)


def test_options_are_checked():
    with pytest.raises(ConfigError, match="temperature"):
        DistillConfig("t", temperature=0)
    with pytest.raises(ConfigError, match="alpha"):
        DistillConfig("t", alpha=1.5)


# ------------------------------------------------------------------------------------------ students
def test_the_layers_a_student_takes():
    assert take_layers(12, 6) == [0, 2, 4, 7, 9, 11]  # DistilBERT's
    assert take_layers(6, 3) == [0, 3, 5]
    assert take_layers(6, 2) == [0, 5]
    assert take_layers(6, 1) == [5]
    assert take_layers(4, 4) == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match="between 1 and"):
        take_layers(6, 7)


def test_a_student_keeps_the_teachers_embeddings_head_and_chosen_layers(teachers, tmp_path):
    student = build_student("2", teachers["cls"], tmp_path / "s")
    assert student.layer_map == [0, 3] and student.config.num_hidden_layers == 2
    big = load_model(teachers["cls"]).state_dict()
    small = load_model(tmp_path / "s").state_dict()
    for name, tensor in small.items():
        source = name.replace("layers.0.", "layers.0.").replace("layers.1.", "layers.3.")
        torch.testing.assert_close(tensor, big[source], rtol=0, atol=0)
    assert (tmp_path / "s" / "vocab.txt").is_file()
    preset = build_student("tiny", teachers["cls"], tmp_path / "p")
    assert preset.kind == "preset" and preset.config.num_labels == 2 and preset.layer_map == [0, 3]
    with pytest.raises(ConfigError, match="preset"):
        build_student("huge", teachers["cls"], tmp_path / "x")


# ------------------------------------------------------------------------------------------ CLI, per task
def _transformers_logits(directory: Path, cls_name: str, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    transformers = pytest.importorskip("transformers")
    from bertkit.tokenizer import Tokenizer

    encoded = Tokenizer.from_pretrained(directory)(texts, padding=True, return_tensors="pt")
    batch = {k: encoded[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    theirs = getattr(transformers, cls_name).from_pretrained(directory).eval()
    ours = load_model(directory)
    with torch.no_grad():
        return theirs(**batch).logits, ours(**batch).logits


def test_classification_student_with_unlabeled_text_loads_in_transformers(teachers, data, tmp_path, capsys):
    output = tmp_path / "student"
    args = _distill_args(teachers["cls"], data["cls"], output, "--student", "2", "--unlabeled", data["more"])
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "accuracy" in json.loads(out.strip().splitlines()[-1])
    assert "12 unlabelled examples" in err and "teacher layers [0, 3]" in err
    record = json.loads((output / "distillation.json").read_text())
    assert record["teacher_layers"] == [0, 3] and record["kind"] == "layers"
    assert json.loads((output / "config.json").read_text())["num_hidden_layers"] == 2
    assert (output / "metrics.jsonl").is_file() and not (tmp_path / "student.partial").exists()
    assert not (tmp_path / "student.partial-student").exists()
    code, out, err = run_cli([*args, "--overwrite"], capsys)  # again over the finished run
    assert code == 0, err
    theirs, ours = _transformers_logits(output, "BertForSequenceClassification", ["good movie", "a bad story"])
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=1e-4)
    code, out, err = run_cli(["evaluate", "--model", output, "--input", data["cls"]], capsys)
    assert code == 0 and "accuracy" in json.loads(out), err


def test_ner_student_narrower_with_layer_transfer(teachers, data, tokenizer, tmp_path, capsys):
    narrow = save_model(
        tmp_path / "narrow", BertModel, tokenizer, num_hidden_layers=1, hidden_size=64, intermediate_size=128
    )
    output = tmp_path / "ner"
    more = ("--student", narrow, "--hidden-weight", "1", "--attention-weight", "1")
    code, out, err = run_cli(_distill_args(teachers["ner"], data["ner"], output, *more), capsys)
    assert code == 0, err
    assert "f1" in json.loads(out.strip().splitlines()[-1])
    saved = json.loads((output / "config.json").read_text())
    assert saved["hidden_size"] == 64 and set(saved["id2label"].values()) == {"B-LOC", "B-PER", "I-PER", "O"}
    theirs, ours = _transformers_logits(output, "BertForTokenClassification", ["john smith lived in paris"])
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=1e-4)


def test_qa_student_of_one_layer(teachers, data, tmp_path, capsys):
    output = tmp_path / "qa"
    code, out, err = run_cli(_distill_args(teachers["qa"], data["qa"], output, "--student", "1"), capsys)
    assert code == 0, err
    assert {"exact_match", "f1"} <= set(json.loads(out.strip().splitlines()[-1]))
    saved = json.loads((output / "config.json").read_text())
    assert saved["num_hidden_layers"] == 1 and saved["bertkit_finetune"]["max_seq_length"] == 32
    assert json.loads((output / "distillation.json").read_text())["teacher_layers"] == [3]


def test_embedding_student_is_a_sentence_transformers_folder(teachers, data, tmp_path, capsys):
    output = tmp_path / "emb"
    code, out, err = run_cli(_distill_args(teachers["embedding"], data["pairs"], output, "--student", "2"), capsys)
    assert code == 0, err
    assert "ndcg@10" in json.loads(out.strip().splitlines()[-1])
    assert (output / "modules.json").is_file() and (output / "1_Pooling" / "config.json").is_file()
    assert "bertkit_finetune" not in json.loads((output / "config.json").read_text())
    assert json.loads((output / "config.json").read_text())["num_hidden_layers"] == 2
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers (dev extra) is not installed")
    texts = POSITIVE + NEGATIVE
    ours = bertkit.embed(texts, str(output))
    theirs = st.SentenceTransformer(str(output), device="cpu").encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_a_missing_teacher_is_one_line(data, tmp_path, capsys):
    code, _, err = run_cli(["distill", "--train", data["cls"], "--output", tmp_path / "o"], capsys)
    assert code == 2 and "--teacher" in err and "Traceback" not in err


def test_a_teacher_that_is_no_bert_model_folder_is_named_as_such(data, tmp_path, capsys):
    modern = tmp_path / "modern"
    modern.mkdir()
    (modern / "config.json").write_text(json.dumps({"model_type": "modernbert"}), encoding="utf-8")
    for teacher, said in (
        (data["cls"], "is a file, not a model folder"),
        (tmp_path, "holds no config.json, so it is not a model folder"),
        (modern, "is a ModernBERT model; bertkit distils BERT teachers only"),
    ):
        code, _, err = run_cli(
            ["distill", "--teacher", teacher, "--train", data["cls"], "--output", tmp_path / "o"], capsys
        )
        assert code == 2 and len(err.strip().splitlines()) == 1 and said in err, err


def test_distill_is_a_python_function_with_the_commands_options(teachers, data, tmp_path):
    result = bertkit.distill(
        teachers["qa"], data["qa"], tmp_path / "qa", dev=data["qa"], student="1", epochs=1, micro_batch_size=4, lr=1e-3,
        temperature=3.0, threads=1, **QUIET,
    )  # fmt: skip
    assert result.output == tmp_path / "qa" and {"exact_match", "f1"} <= set(result.metrics)
    record = json.loads((tmp_path / "qa" / "distillation.json").read_text())
    assert record["temperature"] == 3.0 and record["teacher_layers"] == [3]
    saved = json.loads((tmp_path / "qa" / "config.json").read_text())["bertkit_finetune"]
    assert saved["task"] == "qa" and saved["max_seq_length"] == 32  # the teacher's task and length


# ------------------------------------------------------------------------------------------ resume
def test_a_killed_distillation_resumes_to_the_same_student(teachers, data, tmp_path, capsys):
    """SIGKILL after the first checkpoint, then ``--resume``: the student is the one an uninterrupted run makes;
    a resume with another temperature or student is refused in one line."""
    more = ["--student", "2", "--epochs", "4", "--save-every", "2", "--seed", "3"]

    def args(output: Path, *extra: str) -> list[str]:
        return [str(a) for a in _distill_args(teachers["cls"], data["cls"], output, *more, *extra)]

    assert main(args(tmp_path / "straight")) == 0
    output = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "bertkit", *args(output)], env=env, stderr=subprocess.DEVNULL)
    partial = tmp_path / "killed.partial"
    try:
        while process.poll() is None and not [p for p in partial.glob("checkpoint-[1-9]*") if p.suffix != ".tmp"]:
            time.sleep(0.05)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    if output.exists():
        pytest.skip("the run finished before it could be killed")
    capsys.readouterr()
    for changed, said in ((["--temperature", "5"], "--temperature 2.0 -> 5.0"), (["--student", "mini"], "2 -> mini")):
        assert main([*args(output, "--resume"), *changed]) == 2  # a resume that would change the run
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err, err
    assert main(args(output, "--resume")) == 0
    assert (output / "model.safetensors").read_bytes() == (tmp_path / "straight" / "model.safetensors").read_bytes()
    assert not partial.exists()
