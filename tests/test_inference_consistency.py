"""One text, one prediction: a fine-tuned model gives the same answer through ``bertkit predict``, the Python
pipelines and the HTTP service, on inputs longer than the length it was fine-tuned with (which every path
must cut or window the same way)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx is needed to call the app")

import httpx

import bertkit
from bertkit.cli import main
from bertkit.serve import create_app
from bertkit.training.finetune import FinetuneConfig, finetune
from inference_helpers import write_squad

MAX_SEQ_LENGTH = 16
QUIET = {"tensorboard": False, "plot": False}

LONG_TEXTS = [
    "a good story about the king and the queen in the castle , a great film , very good , i lived it",
    "the lazy film was bad , a bad story , very bad , bad bad movie and the dog slept there once upon a time",
    "good movie",
]
LONG_SENTENCE = (
    "george washington lived in virginia and john smith went to paris then the cat sat in france "
    "and the king lived in new york"
)
LONG_CONTEXT = (
    "once upon a time there was a king . the king lived in a castle in france . john smith led the "
    "continental army . george washington lived in mount vernon in virginia . the cat sat on the mat "
    "and the dog slept in the river city ."
)
QUESTIONS = ["who led the army ?", "where did george washington live ?"]


def _finetune(base: Path, task: str, train: Path, output: Path, **more) -> Path:
    finetune(
        FinetuneConfig.from_options(
            task=task,
            model=str(base),
            train_file=str(train),
            output=str(output),
            max_seq_length=MAX_SEQ_LENGTH,
            epochs=2,
            lr=5e-3,
            micro_batch_size=4,
            seed=3,
            progress=False,
            train_options=QUIET,
            **more,
        )
    )
    return output


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("consistency")


@pytest.fixture(scope="module")
def base(encoder_dir: Path) -> Path:
    return encoder_dir


def _predict(model: Path, input: Path, output: Path, *task: str) -> list[dict]:
    assert main(["predict", "--model", str(model), "--input", str(input), "--output", str(output), *task]) == 0
    return [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def _post(model: Path, path: str, body: dict) -> dict:
    """POST ``body`` to the service of ``model``, in-process."""

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(model))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.post(path, json=body)

    response = asyncio.run(go())
    assert response.status_code == 200, response.text
    return response.json()


def _longer_than_saved(model: Path, texts: list[str]) -> None:
    tokenizer = bertkit.Tokenizer.from_pretrained(model)
    assert max(len(ids) for ids in tokenizer.ids_batch(texts)) > MAX_SEQ_LENGTH


def test_classification_predict_classify_and_service_agree_on_long_texts(root, base):
    rows = [
        ("good movie", "pos"),
        ("great film", "pos"),
        ("a good story", "pos"),
        ("very good", "pos"),
        ("bad movie", "neg"),
        ("bad film", "neg"),
        ("a bad story", "neg"),
        ("the lazy film was bad", "neg"),
    ]
    train = root / "cls.tsv"
    train.write_text("sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows * 2), encoding="utf-8")
    model = _finetune(base, "classification", train, root / "cls")
    _longer_than_saved(model, LONG_TEXTS)
    inputs = root / "long.tsv"
    inputs.write_text("sentence\n" + "".join(f"{t}\n" for t in LONG_TEXTS), encoding="utf-8")

    predicted = _predict(model, inputs, root / "cls.jsonl")
    pipeline = bertkit.classify(LONG_TEXTS, model)
    served = _post(model, "/classify", {"texts": LONG_TEXTS})["results"]
    for row, p, s in zip(predicted, pipeline, served, strict=True):
        assert row["label"] == p.label == s["label"]
        assert p.probabilities == pytest.approx(row["probabilities"], abs=1e-5)
        assert s["probabilities"] == pytest.approx(row["probabilities"], abs=1e-5)
        assert p.score == pytest.approx(row["score"], abs=1e-5)


def test_ner_predict_tag_and_service_agree_on_a_long_sentence(root, base):
    sentences = [
        [("george", "B-PER"), ("washington", "I-PER"), ("lived", "O"), ("in", "O"), ("virginia", "B-LOC")],
        [("john", "B-PER"), ("smith", "I-PER"), ("went", "O"), ("to", "O"), ("paris", "B-LOC")],
        [("the", "O"), ("cat", "O"), ("sat", "O"), ("in", "O"), ("france", "B-LOC")],
    ]
    train = root / "ner.txt"
    train.write_text("".join("".join(f"{w} {t}\n" for w, t in s) + "\n" for s in sentences * 3), encoding="utf-8")
    model = _finetune(base, "ner", train, root / "ner", task_options={"window_stride": 6})
    text, words = LONG_SENTENCE, LONG_SENTENCE.split()
    _longer_than_saved(model, [text])
    inputs = root / "long.conll"
    inputs.write_text("".join(f"{w}\n" for w in words), encoding="utf-8")

    (row,) = _predict(model, inputs, root / "ner.jsonl", "--task", "ner")
    tagged = bertkit.tag(text, model)
    (served,) = _post(model, "/tag", {"texts": [text]})["results"]
    assert row["words"] == [w.word for w in tagged.words] == [w["word"] for w in served["words"]]
    assert row["tags"] == [w.tag for w in tagged.words] == [w["tag"] for w in served["words"]]
    assert [w.score for w in tagged.words] == pytest.approx(row["scores"], abs=1e-5)
    assert [w["score"] for w in served["words"]] == pytest.approx(row["scores"], abs=1e-5)
    assert [(e["type"], e["text"]) for e in row["entities"]] == [(e.type, e.text) for e in tagged.entities]


def test_qa_predict_answer_and_service_agree_on_a_long_context(root, base):
    contexts = [
        (
            "john smith lived in paris . he was the king of france .",
            [("who lived in paris ?", "john smith"), ("where did john smith live ?", "paris")],
        ),
        (
            "george washington led the continental army . he lived in virginia .",
            [("who led the army ?", "george washington"), ("where did he live ?", "virginia")],
        ),
    ]
    train = write_squad(root / "squad.json", contexts)
    model = _finetune(base, "qa", train, root / "qa", task_options={"doc_stride": 4, "max_query_length": 6})
    _longer_than_saved(model, [LONG_CONTEXT])
    inputs = write_squad(root / "long.json", [(LONG_CONTEXT, [(q, None) for q in QUESTIONS])])

    predicted = _predict(model, inputs, root / "qa.jsonl", "--task", "qa")
    answers = bertkit.answer(QUESTIONS, [LONG_CONTEXT] * len(QUESTIONS), model)
    served = _post(model, "/answer", {"inputs": [{"question": q, "context": LONG_CONTEXT} for q in QUESTIONS]})
    for row, found, (top,) in zip(predicted, answers, served["results"], strict=True):
        assert row["answer"] == found.text == top["text"]
        assert found.score == pytest.approx(row["score"], abs=1e-5)
        assert top["score"] == pytest.approx(row["score"], abs=1e-5)
