"""ModernBERT deployed: `export onnx` of each head equals transformers on padded batches longer than the local
window, ONNX Runtime and OpenVINO (float32 and int8) give PyTorch's answers in every pipeline, the service's
/embed, /v1/embeddings, /rerank and /classify equal transformers, and tag, answer, predict, evaluate and
convert run on checkpoints that transformers wrote."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime", reason="the export extra (onnxruntime) is not installed")
pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("transformers", reason="transformers is the reference for ModernBERT")

import httpx
import transformers

from bertkit import inference
from bertkit.backends import backend_of
from bertkit.cli import main
from bertkit.export import onnx_session
from bertkit.models import ModernBertModel
from bertkit.serve import create_app
from bertkit.tasks.ner import NerExample
from bertkit.tokenizer import Tokenizer
from bertkit.weights import save_pretrained
from inference_helpers import write_squad
from test_backends import ENGINES, assert_close, cosines
from test_modernbert_toolkit import tiny_config
from test_modernbert_toolkit import tokenizer as tokenizer  # the BPE tokenizer fixture

TEXTS = ["the film is a delight from start to finish , and the cast is wonderful", "a dull script", "hello world"]
HEADS: dict[str, tuple[str, dict[str, Any]]] = {
    "encoder": ("AutoModel", {}),
    "classifier": ("AutoModelForSequenceClassification", {"id2label": {0: "neg", 1: "pos"}}),
    "tagger": ("AutoModelForTokenClassification", {"id2label": {0: "O", 1: "B-PER", 2: "I-PER"}}),
    "qa": ("AutoModelForQuestionAnswering", {}),
    "reranker": ("AutoModelForSequenceClassification", {"num_labels": 1, "problem_type": "regression"}),
}
"""Each test model: the transformers auto class that writes it (random weights) and its config fields."""


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BERTKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> dict[str, Path]:
    """Model directories written by transformers (config, weights) with the BPE tokenizer's files."""
    root = tmp_path_factory.mktemp("modernbert")
    out = {}
    for seed, (name, (auto, fields)) in enumerate(HEADS.items()):
        torch.manual_seed(seed)
        directory = save_pretrained(ModernBertModel(tiny_config(tokenizer, **fields)), root / name, tokenizer)
        config = transformers.AutoConfig.from_pretrained(directory)
        getattr(transformers, auto).from_config(config).save_pretrained(directory)
        out[name] = directory
    return out


def reference(directory: Path, texts: list[str] | list[tuple[str, str]]) -> tuple[Any, dict[str, torch.Tensor]]:
    """transformers' outputs on ``texts`` (padded batch) and the inputs it was given."""
    model = (
        getattr(transformers, HEADS[directory.name][0]).from_pretrained(directory, attn_implementation="sdpa").eval()
    )
    ref_tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    pairs = [list(t) for t in zip(*texts)] if isinstance(texts[0], tuple) else [texts]
    inputs = ref_tokenizer(*pairs, padding=True, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        return model(**inputs), dict(inputs)


def call(app: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(go())


# ------------------------------------------------------------------------------------------ export onnx
@pytest.mark.parametrize("head", ["encoder", "classifier", "tagger", "qa"])
def test_exported_graph_equals_transformers(dirs: dict[str, Path], head: str, tmp_path: Path) -> None:
    """The CLI's graph of each head on a padded batch whose longest text is beyond the local window (8)."""
    path = tmp_path / "model.onnx"
    assert main(["export", "onnx", "-m", str(dirs[head]), "-o", str(path)]) in (0, None)
    expected, inputs = reference(dirs[head], TEXTS)
    assert inputs["input_ids"].shape[1] > 8 and not bool(inputs["attention_mask"].all())
    session = onnx_session(path)
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask"]
    got = session.run(None, {name: tensor.numpy() for name, tensor in inputs.items()})
    names = [o.name for o in session.get_outputs()]
    mask = inputs["attention_mask"].bool()
    for name, array in zip(names, got):
        want = getattr(expected, name)
        if want.dim() > 2 or name != "logits" or head != "classifier":  # per token: compare the real tokens
            want, array = want[mask], array[mask.numpy()]
        np.testing.assert_allclose(array, want.numpy(), atol=1e-4, rtol=1e-4)


def test_exported_int8_graph_stays_close(dirs: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "int8.onnx"
    assert main(["export", "onnx", "-m", str(dirs["encoder"]), "-o", str(path), "--quantize", "int8"]) in (0, None)
    expected, inputs = reference(dirs["encoder"], TEXTS)
    (hidden,) = onnx_session(path).run(None, {name: tensor.numpy() for name, tensor in inputs.items()})
    mask = inputs["attention_mask"].bool()
    assert cosines(hidden[mask.numpy()], expected.last_hidden_state[mask].numpy()).min() > 0.98


# ------------------------------------------------------------------------------------------ backends
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("quantize", [None, "int8"])
def test_engines_run_every_pipeline_as_torch(dirs: dict[str, Path], engine: str, quantize: str | None) -> None:
    """float32: PyTorch's vectors, labels, tags and spans, numbers to 1e-4; int8: vectors within cosine 0.98,
    the rest within 0.05 (the BERT engines' bounds)."""
    torch_vectors = inference.embed(TEXTS, inference.load(dirs["encoder"], backend="torch"))
    graph = inference.load(dirs["encoder"], backend=engine, quantize=quantize)
    assert backend_of(graph.model) == (engine, quantize)
    vectors = inference.embed(TEXTS, graph)
    if quantize:
        assert cosines(vectors, torch_vectors).min() > 0.98
    else:
        np.testing.assert_allclose(vectors, torch_vectors, atol=1e-4)
    for name, run in (
        ("classifier", lambda m: inference.classify(TEXTS, m)),
        ("tagger", lambda m: inference.tag(TEXTS, m)),
        ("qa", lambda m: inference.answer(["who is there ?"], [TEXTS[0]], m, top_k=5)),
    ):
        expected = run(inference.load(dirs[name], backend="torch"))
        got = run(inference.load(dirs[name], backend=engine, quantize=quantize))
        if quantize and name == "qa":  # a random head's spans nearly tie: int8's best is among float32's best 5
            ((best, *_),), (candidates,) = got, expected  # one question, five answers each
            same = [c for c in candidates if (c.start, c.end) == (best.start, best.end)]
            assert same and best.score == pytest.approx(same[0].score, abs=5e-2)
            continue
        if quantize:  # the raw logits move by up to 0.05 on these random tiny models: probabilities compared
            got, expected = without_logits(got), without_logits(expected)
        assert_close(got, expected, 5e-2 if quantize else 1e-4)


def without_logits(results: list[Any]) -> list[Any]:
    """Pipeline results as dicts without their raw ``logits``."""
    rows = [dataclasses.asdict(r) if dataclasses.is_dataclass(r) and not isinstance(r, type) else r for r in results]
    return [{k: v for k, v in r.items() if k != "logits"} if isinstance(r, dict) else r for r in rows]


# ------------------------------------------------------------------------------------------ serve
def test_serve_embeds_as_transformers(dirs: dict[str, Path]) -> None:
    app = create_app(dirs["encoder"])
    expected, inputs = reference(dirs["encoder"], TEXTS)
    mask = inputs["attention_mask"][..., None].float()
    means = ((expected.last_hidden_state * mask).sum(1) / mask.sum(1)).numpy()
    bertkit_body = call(app, "POST", "/embed", json={"texts": TEXTS, "pooling": "mean"}).json()
    openai_body = call(app, "POST", "/v1/embeddings", json={"input": TEXTS, "model": "m"}).json()
    tei = call(app, "POST", "/embed", json={"inputs": TEXTS, "normalize": False}).json()
    for vectors in (bertkit_body["embeddings"], [d["embedding"] for d in openai_body["data"]], tei):
        np.testing.assert_allclose(np.array(vectors), means, atol=1e-5)


def test_serve_reranks_and_classifies_as_transformers(dirs: dict[str, Path]) -> None:
    query, texts = "a delight", TEXTS
    expected, _ = reference(dirs["reranker"], [(query, t) for t in texts])
    scores = [1 / (1 + math.exp(-float(x))) for x in expected.logits[:, 0]]
    body = call(create_app(dirs["reranker"]), "POST", "/rerank", json={"query": query, "texts": texts}).json()
    assert [r["index"] for r in body] == sorted(range(len(texts)), key=lambda i: -scores[i])
    assert [r["score"] for r in body] == pytest.approx(sorted(scores, reverse=True), abs=1e-5)
    expected, _ = reference(dirs["classifier"], TEXTS)
    body = call(create_app(dirs["classifier"]), "POST", "/classify", json={"texts": TEXTS}).json()
    got = [[r["probabilities"]["neg"], r["probabilities"]["pos"]] for r in body["results"]]
    np.testing.assert_allclose(got, expected.logits.softmax(-1).numpy(), atol=1e-5)


# ------------------------------------------------------------------------------------------ the task commands
def run_cli(args: list[Any], capsys: pytest.CaptureFixture[str]) -> str:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code in (0, None), err
    return out


def test_tag_predict_and_evaluate_a_transformers_token_classifier(
    dirs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each word's tag is transformers' best label at the word's first token."""
    text = "john smith went to paris"
    (result,) = inference.tag([text], dirs["tagger"])
    words = result.words
    ref_tokenizer = transformers.AutoTokenizer.from_pretrained(dirs["tagger"])
    encoded = ref_tokenizer(text, return_tensors="pt")
    model = transformers.AutoModelForTokenClassification.from_pretrained(dirs["tagger"]).eval()
    with torch.no_grad():
        best = model(**encoded).logits[0].argmax(-1).tolist()
    assert [w.word for w in words] == text.split()
    for index, word in enumerate(words):  # the word's first token (a byte-level word's is its space, Ġ)
        first = encoded.word_ids().index(index)
        assert word.tag == model.config.id2label[best[first]]
    conll = tmp_path / "ner.txt"
    conll.write_text("".join(f"{w} NN O {t}\n" for w, t in zip(text.split(), ["B-PER", "I-PER", "O", "O", "O"])))
    metrics = json.loads(run_cli(["evaluate", "--model", dirs["tagger"], "--input", conll], capsys))
    assert {"precision", "recall", "f1"} <= set(metrics)
    run_cli(["predict", "--model", dirs["tagger"], "--input", conll, "--output", tmp_path / "p.jsonl"], capsys)
    (row,) = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(row["tags"]) == len(words) and set(row["tags"]) <= set(model.config.id2label.values())


def test_ner_reads_pre_split_words_as_the_sentence_tokens(dirs: dict[str, Path]) -> None:
    """With a byte-level BPE tokenizer, words after the first carry their space (``Ġsmith``), so a CoNLL
    sentence is the same tokens as its text; ``tag``'s words are the words, without that space."""
    loaded = inference.load(dirs["tagger"])
    assert loaded.tokenizer.spaces_are_tokens
    text = "john smith went to paris"
    example = NerExample(text.split(), None, "input", 0)
    (feature,) = loaded.task.featurize([example], loaded.tokenizer, 64).features
    assert feature["input_ids"][1:-1] == loaded.tokenizer.encode(text, add_special_tokens=False).ids
    (result,) = inference.tag([text], loaded)
    assert [w.word for w in result.words] == text.split()
    assert all(text[w.start : w.end] == w.word for w in result.words)


def test_predict_on_conll_words_tags_as_tag_on_the_sentence(
    dirs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "john smith went to paris"
    conll = tmp_path / "ner.txt"
    conll.write_text("".join(f"{w} NN O O\n" for w in text.split()))
    run_cli(["predict", "--model", dirs["tagger"], "--input", conll, "--output", tmp_path / "p.jsonl"], capsys)
    (row,) = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    (result,) = inference.tag([text], dirs["tagger"])
    assert row["tags"] == [w.tag for w in result.words]


def test_answer_predict_evaluate_and_convert_a_transformers_qa_model(
    dirs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    context = "john smith lived in paris . he was the king of france ."
    (answers,) = inference.answer(["who lived in paris ?"], [context], dirs["qa"], top_k=3)
    assert len(answers) == 3 and all(context[a.start : a.end] == a.text for a in answers)
    squad = write_squad(tmp_path / "qa.json", [(context, [("who lived in paris ?", "john smith")])])
    assert {"exact_match", "f1"} <= set(json.loads(run_cli(["evaluate", "-m", dirs["qa"], "--input", squad], capsys)))
    run_cli(["predict", "--model", dirs["qa"], "--input", squad, "--output", tmp_path / "q.jsonl"], capsys)
    (row,) = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert row["answer"] == answers[0].text
    run_cli(["convert", "--model", dirs["qa"], "--output", tmp_path / "converted"], capsys)
    source = transformers.AutoModelForQuestionAnswering.from_pretrained(dirs["qa"]).eval()
    converted = transformers.AutoModelForQuestionAnswering.from_pretrained(tmp_path / "converted").eval()
    ids = torch.tensor([[1, 5, 9, 12, 7, 2]])
    with torch.no_grad():
        torch.testing.assert_close(converted(input_ids=ids).start_logits, source(input_ids=ids).start_logits)


def test_tagged_words_of_a_byte_level_tokenizer_have_no_leading_space(dirs: dict[str, Path]) -> None:
    (result,) = inference.tag(["john smith went to paris"], dirs["tagger"])
    assert [w.word for w in result.words] == ["john", "smith", "went", "to", "paris"]
