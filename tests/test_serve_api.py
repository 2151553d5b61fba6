"""The APIs retrieval stacks call, on `bertkit serve`: OpenAI's /v1/embeddings (driven by the official client
against a live server), text-embeddings-inference's /embed, /rerank, /tokenize and /info; and the one rule for
embedding defaults, held equal across the CLI, the Python API and every HTTP route."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx is needed to call the app")

import httpx

import bertkit
from bertkit import inference
from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.models.bert import BertForSequenceClassification, BertModel
from bertkit.sentence_config import SentenceConfig, write_sentence_config
from bertkit.serve import ServeLimits, create_app
from inference_helpers import save_model, tiny_config
from liveness import LIVENESS_S, wait_until

TEXTS = ["the cat sat on the mat", "hello world", " ".join(["a very long story about the king"] * 6)]


def call(app, method: str, path: str, **kwargs) -> httpx.Response:
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def models(tmp_path_factory, tokenizer, encoder_dir):
    """A classifier fine-tuned at 16 tokens without sentence-transformers files, and an encoder with them
    (cls pooling, normalised, 24 tokens), each as a directory."""
    root = tmp_path_factory.mktemp("api")
    classifier = save_model(
        root / "classifier", BertForSequenceClassification, tokenizer, id2label={0: "neg", 1: "pos"}
    )
    config = json.loads((classifier / "config.json").read_text())
    config["bertkit_finetune"] = {"task": "classification", "task_options": {}, "max_seq_length": 16}
    (classifier / "config.json").write_text(json.dumps(config))
    sentence = root / "sentence"
    shutil.copytree(encoder_dir, sentence)
    write_sentence_config(sentence, SentenceConfig("cls", True, 24), hidden_size=128)
    return {"classifier": classifier, "sentence": sentence}


# ------------------------------------------------------------------------------------------ one default rule
def test_the_rule_sentence_files_then_the_record_then_the_default(models, encoder_dir):
    settings = inference.embed_settings(inference.load(models["classifier"]))
    assert (settings.pooling, settings.normalize, settings.max_length) == ("mean", False, 16)
    assert "sentence-transformers" not in settings.notice() and "fine-tuned at" in settings.notice()
    settings = inference.embed_settings(inference.load(models["sentence"]))
    assert (settings.pooling, settings.normalize, settings.max_length) == ("cls", True, 24)
    assert settings.notice().endswith("(from the checkpoint's sentence-transformers files)")
    settings = inference.embed_settings(inference.load(encoder_dir))
    assert (settings.pooling, settings.normalize, settings.max_length) == ("mean", False, 128)
    mixed = inference.embed_settings(inference.load(models["sentence"]), pooling="max")
    assert mixed.notice().startswith("pooling max (given), normalized (from the checkpoint's")


@pytest.mark.parametrize("name", ["classifier", "sentence"])
def test_cli_python_and_every_http_route_embed_alike(models, name, tmp_path, capsys):
    model = models[name]
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    assert main(["embed", "--model", str(model), "--input", str(lines), "--output", str(out)]) == 0
    notice = capsys.readouterr().err
    assert ("sentence-transformers" in notice) == (name == "sentence")
    cli = np.load(out)
    python = bertkit.embed(TEXTS, str(model))
    app = create_app(model)
    bertkit_body = np.array(call(app, "POST", "/embed", json={"texts": TEXTS}).json()["embeddings"])
    openai_body = call(app, "POST", "/v1/embeddings", json={"input": TEXTS, "model": "m"}).json()
    openai = np.array([d["embedding"] for d in openai_body["data"]])
    tei = np.array(
        call(app, "POST", "/embed", json={"inputs": TEXTS, "normalize": name == "sentence", "truncate": True}).json()
    )
    for vectors in (python, bertkit_body, openai, tei):
        np.testing.assert_allclose(vectors, cli, atol=1e-5)
    assert openai_body["usage"]["prompt_tokens"] == 8 + 4 + (16 if name == "classifier" else 24)


def test_cli_notice_does_not_credit_the_sentence_files_with_what_flags_chose(models, tmp_path, capsys):
    lines = tmp_path / "in.txt"
    lines.write_text("hello world\n", encoding="utf-8")
    argv = ["embed", "--model", str(models["sentence"]), "--input", str(lines), "--output", str(tmp_path / "v.npy")]
    assert main([*argv, "--pooling", "mean", "--no-normalize", "--max-length", "20"]) == 0
    notice = capsys.readouterr().err.splitlines()[0]
    assert "sentence-transformers" not in notice and notice.endswith("max length 20 (given)")


# ------------------------------------------------------------------------------------------ dimensions
@pytest.mark.parametrize("name", ["classifier", "sentence"])
def test_dimensions_cut_alike_in_cli_python_and_http(models, name, tmp_path):
    model = models[name]
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    argv = ["embed", "--model", str(model), "--input", str(lines), "--output", str(out), "--dimensions", "8"]
    assert main(argv) == 0
    cli = np.load(out)
    full = bertkit.embed(TEXTS, str(model))
    python = bertkit.embed(TEXTS, str(model), dimensions=8)
    app = create_app(model)
    body = call(app, "POST", "/v1/embeddings", json={"input": TEXTS, "dimensions": 8}).json()
    http = np.array([d["embedding"] for d in body["data"]])
    assert cli.shape == (3, 8)
    for vectors in (python, http):
        np.testing.assert_allclose(vectors, cli, atol=1e-5)
    if name == "sentence":  # normalised vectors are normalised again after the cut
        np.testing.assert_allclose(np.linalg.norm(cli, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(cli, full[:, :8] / np.linalg.norm(full[:, :8], axis=1, keepdims=True), atol=1e-5)
    else:  # vectors that are not normalised are only cut
        np.testing.assert_allclose(cli, full[:, :8], atol=1e-5)


def test_dimensions_above_the_width_are_refused_everywhere(models, tmp_path, capsys):
    model = models["sentence"]
    lines = tmp_path / "in.txt"
    lines.write_text("hello\n", encoding="utf-8")
    argv = ["embed", "--model", str(model), "--input", str(lines), "--output", str(tmp_path / "v.npy")]
    assert main([*argv, "--dimensions", "129"]) == 2
    assert "--dimensions" in capsys.readouterr().err
    with pytest.raises(BertkitError, match="width 128"):
        bertkit.embed(["hello"], str(model), dimensions=129)
    response = call(create_app(model), "POST", "/v1/embeddings", json={"input": "hello", "dimensions": 129})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["param"] == "dimensions" and error["type"] == "invalid_request_error" and "128" in error["message"]


# ------------------------------------------------------------------------------------------ the openai client
@pytest.fixture(scope="module")
def live(models):
    """A real uvicorn server of the normalised encoder on a free loopback port; yields its base URL."""
    uvicorn = pytest.importorskip("uvicorn")
    app = create_app(models["sentence"], ServeLimits(max_items=8), model_id="tiny-st")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "the server to start", alive=thread.is_alive)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=LIVENESS_S)
    sock.close()


def test_the_openai_client_round_trip(live, models):
    openai = pytest.importorskip("openai", reason="the openai client (dev extra) is not installed")
    client = openai.OpenAI(base_url=f"{live}/v1", api_key="not-checked", max_retries=0)
    expected = bertkit.embed(TEXTS, str(models["sentence"]))

    floats = client.embeddings.create(model="anything", input=TEXTS, encoding_format="float")
    assert floats.model == "tiny-st" and [d.index for d in floats.data] == [0, 1, 2]
    np.testing.assert_allclose([d.embedding for d in floats.data], expected, atol=1e-5)
    assert floats.usage.prompt_tokens == floats.usage.total_tokens == 8 + 4 + 24

    decoded = client.embeddings.create(model="anything", input=TEXTS)  # the client asks for base64 and decodes it
    np.testing.assert_array_equal([d.embedding for d in decoded.data], [d.embedding for d in floats.data])
    raw = httpx.post(f"{live}/v1/embeddings", json={"input": "hello world", "encoding_format": "base64"}).json()
    vector = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(vector, expected[1], atol=1e-6)

    cut = client.embeddings.create(model="m", input="hello world", dimensions=8, encoding_format="float")
    np.testing.assert_allclose(
        cut.data[0].embedding, bertkit.embed(["hello world"], str(models["sentence"]), dimensions=8)[0], atol=1e-5
    )

    ids = [t["id"] for t in httpx.post(f"{live}/tokenize", json={"inputs": "hello world"}).json()[0]]
    one = client.embeddings.create(model="m", input=ids, encoding_format="float")
    many = client.embeddings.create(model="m", input=[ids, ids[:-1]], encoding_format="float")
    np.testing.assert_allclose(one.data[0].embedding, expected[1], atol=1e-5)
    assert len(many.data) == 2 and one.usage.prompt_tokens == 4

    with pytest.raises(openai.UnprocessableEntityError) as error:
        client.embeddings.create(model="m", input="hello", dimensions=1000)
    assert error.value.body["param"] == "dimensions" and "1000" in error.value.body["message"]
    with pytest.raises(openai.APIStatusError) as error:
        client.embeddings.create(model="m", input=["hello"] * 9)
    assert error.value.status_code == 413 and "at most 8" in error.value.body["message"]


# ------------------------------------------------------------------------------------------ TEI routes
def test_tei_embed_shape_normalize_truncate_and_prompt(models):
    model = models["classifier"]  # fine-tuned at 16 tokens, not normalised by default
    app = create_app(model)
    loaded = inference.load(model)
    vectors = call(app, "POST", "/embed", json={"inputs": "hello world"}).json()
    assert len(vectors) == 1 and len(vectors[0]) == 128
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0, abs=1e-5)  # TEI normalises by default
    plain = call(app, "POST", "/embed", json={"inputs": ["hello world"], "normalize": False}).json()
    np.testing.assert_allclose(plain, inference.embed(["hello world"], loaded), atol=1e-5)

    long = "hello world, the cat sat on the mat. " + TEXTS[2]
    refused = call(app, "POST", "/embed", json={"inputs": [long]})
    assert refused.status_code == 413 and "truncate: true" in refused.json()["error"]
    right = call(app, "POST", "/embed", json={"inputs": [long], "truncate": True, "normalize": False}).json()
    np.testing.assert_allclose(right, inference.embed([long], loaded), atol=1e-5)
    left = call(
        app,
        "POST",
        "/embed",
        json={"inputs": [long], "truncate": True, "truncation_direction": "left", "normalize": False},
    ).json()
    tok = loaded.tokenizer
    end = [tok.cls_id, *tok.ids_batch([long])[0][-14:], tok.sep_id]
    np.testing.assert_allclose(left, inference.embed_token_ids([end], loaded), atol=1e-5)
    assert not np.allclose(left, right, atol=1e-3)

    prompt = call(app, "POST", "/embed", json={"inputs": "hi", "prompt_name": "query"})
    assert prompt.status_code == 422 and "prompt_name" in prompt.json()["error"]
    old = call(app, "POST", "/embed", json={"texts": ["hello world"]}).json()  # bertkit's own body still works
    assert old["dimension"] == 128 and np.allclose(old["embeddings"], plain, atol=1e-6)


class CountingClassifier(BertForSequenceClassification):
    """A cross-encoder whose logit we set: (occurrences of the word "good") - 1, as 1 output or as the
    difference of 2."""

    good_id = 0

    def forward(self, input_ids, *args, **kwargs):
        margin = (input_ids == self.good_id).sum(1, keepdim=True).float() - 1
        logits = margin if self.config.num_labels == 1 else torch.cat([torch.zeros_like(margin), margin], 1)
        return {"logits": logits}


@pytest.mark.parametrize("labels", [1, 2])
def test_rerank_orders_by_the_cross_encoders_score(tokenizer, labels):
    head = {"problem_type": "regression", "num_labels": 1} if labels == 1 else {"id2label": {0: "no", 1: "yes"}}
    config = tiny_config(tokenizer, **head)
    model = CountingClassifier(config).eval()
    model.good_id = tokenizer.vocab["good"]
    app = create_app(inference.Loaded(model, tokenizer))
    texts = ["a bad film", "good good good", "a good film", "good good"]
    body = call(app, "POST", "/rerank", json={"query": "film", "texts": texts}).json()
    assert [r["index"] for r in body] == [1, 3, 2, 0]
    expected = [1 / (1 + np.exp(-m)) for m in (2, 1, 0, -1)]
    assert [r["score"] for r in body] == pytest.approx(expected, abs=1e-6)
    assert all("text" not in r for r in body)
    raw = call(
        app, "POST", "/rerank", json={"query": "x", "texts": texts, "raw_scores": True, "return_text": True, "top_n": 2}
    ).json()
    assert raw == [{"index": 1, "text": texts[1], "score": 2.0}, {"index": 3, "text": texts[3], "score": 1.0}]
    assert [r.index for r in inference.rerank("film", texts, inference.Loaded(model, tokenizer))] == [1, 3, 2, 0]


def test_rerank_exists_only_for_a_cross_encoder(tmp_path, tokenizer, encoder_dir):
    three = save_model(tmp_path / "three", BertForSequenceClassification, tokenizer, id2label={0: "a", 1: "b", 2: "c"})
    for model in (three, encoder_dir):
        response = call(create_app(model), "POST", "/rerank", json={"query": "q", "texts": ["t"]})
        assert response.status_code == 404
    two = save_model(tmp_path / "two", BertForSequenceClassification, tokenizer)
    info = call(create_app(two), "GET", "/info").json()
    assert set(info["model_type"]) == {"reranker"} and info["max_input_length"] == 128


def test_tokenize_gives_ids_texts_and_offsets(encoder_dir):
    app = create_app(encoder_dir)
    text = "Hello, world!"
    (tokens,) = call(app, "POST", "/tokenize", json={"inputs": text}).json()
    assert [t["text"] for t in tokens] == ["[CLS]", "Hello", ",", "world", "!", "[SEP]"]
    assert [t["special"] for t in tokens] == [True, False, False, False, False, True]
    assert tokens[0]["start"] is None and tokens[-1]["stop"] is None
    assert all(text[t["start"] : t["stop"]] == t["text"] for t in tokens[1:-1])
    bare = call(app, "POST", "/tokenize", json={"inputs": ["hello", "cats"], "add_special_tokens": False}).json()
    assert [[t["text"] for t in row] for row in bare] == [["hello"], ["cat", "s"]]
    assert bare[1][1] == {"id": bare[1][1]["id"], "text": "s", "special": False, "start": 3, "stop": 4}


def test_info_has_the_tei_fields(encoder_dir):
    info = call(create_app(encoder_dir, model_id="org/tiny"), "GET", "/info").json()
    assert info["model_id"] == "org/tiny" and info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert info["embedding"]["dimensions"] == 128 and info["max_client_batch_size"] == 2048


def test_the_openai_client_sends_a_batch_over_64_with_the_default_limits(models):
    """OpenAI's API takes 2,048 inputs a request, and so does bertkit's default: a client's batch of 300
    texts gets 300 vectors, each the one ``bertkit.embed`` gives (the token budget splits the forward passes)."""
    openai = pytest.importorskip("openai", reason="the openai client (dev extra) is not installed")
    from fastapi.testclient import TestClient

    texts = [f"text number {i} hello world" for i in range(300)]
    with TestClient(create_app(models["sentence"])) as http:  # an httpx.Client that calls the app in-process
        client = openai.OpenAI(base_url="http://testserver/v1", api_key="not-checked", max_retries=0, http_client=http)
        got = client.embeddings.create(model="m", input=texts, encoding_format="float")
        assert [d.index for d in got.data] == list(range(300))
        np.testing.assert_allclose(
            [d.embedding for d in got.data], bertkit.embed(texts, str(models["sentence"])), atol=1e-5
        )
        with pytest.raises(openai.APIStatusError) as error:
            client.embeddings.create(model="m", input=["hi"] * 2049)
        assert error.value.status_code == 413 and "at most 2048" in error.value.body["message"]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_every_route_parses_a_body_alike(models):
    """One parser for every POST route, ``POST /`` included: too deep a nesting is 400 (never a 500
    RecursionError), a body that is not JSON is 422, in the same words on each route."""
    from bertkit.serve.json_body import MAX_DEPTH, TOO_DEEP

    app = create_app(models["sentence"])
    routes = sorted({r.path for r in app.routes if "POST" in getattr(r, "methods", ())})
    assert "/" in routes and "/embed" in routes and "/v1/embeddings" in routes
    headers = {"content-type": "application/json"}
    for path in routes:
        for body in (nested(100_000), nested(MAX_DEPTH + 1), b'{"inputs": ' + nested(MAX_DEPTH) + b"}"):
            answer = call(app, "POST", path, content=body, headers=headers)
            assert answer.status_code == 400, (path, answer.text)
            error = answer.json()["error"]
            assert (error["message"] if isinstance(error, dict) else error) == TOO_DEEP
        answer = call(app, "POST", path, content=b'{"inputs": ', headers=headers)
        error = answer.json()["error"]
        assert answer.status_code == 422 and "not valid JSON" in (
            error["message"] if isinstance(error, dict) else error
        )
    assert call(app, "POST", "/", json={"inputs": [[["a"]]]}).status_code == 422  # shallow enough: the schema says no


# ------------------------------------------------------------------------------------------ clean errors
BAD = [
    ("/v1/embeddings", {"input": []}),
    ("/v1/embeddings", {"input": ""}),
    ("/v1/embeddings", {"input": ["a", 3]}),
    ("/v1/embeddings", {"input": [[1, 2], []]}),
    ("/v1/embeddings", {"input": [10**9]}),
    ("/v1/embeddings", {"input": "a", "encoding_format": "int8"}),
    ("/v1/embeddings", {"input": "a", "dimensions": 0}),
    ("/v1/embeddings", {"input": "a", "extra": 1}),
    ("/v1/embeddings", {"input": ["a " * 400]}),
    ("/v1/embeddings", "not json"),
    ("/embed", {"inputs": []}),
    ("/embed", {"inputs": "a", "truncation_direction": "up"}),
    ("/embed", {"inputs": "a", "dimensions": 999}),
    ("/embed", {"texts": "a", "inputs": "b"}),
    ("/embed", {}),
    ("/tokenize", {"inputs": []}),
    ("/tokenize", {"inputs": ""}),
    ("/tokenize", {"inputs": "a", "prompt_name": "q"}),
]


@pytest.mark.parametrize(("path", "body"), BAD)
def test_bad_bodies_are_clean_json_4xx(encoder_dir, path, body):
    app = create_app(encoder_dir)
    response = call(app, "POST", path, content=body if isinstance(body, str) else json.dumps(body))
    assert 400 <= response.status_code < 500, response.text
    error = response.json()["error"]
    if path.startswith("/v1/"):
        assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
        assert error["message"] and "\n" not in error["message"]
    else:
        assert isinstance(error, str) and error


def test_openai_shape_also_for_an_oversized_body_and_an_unknown_v1_path(encoder_dir):
    app = create_app(encoder_dir, ServeLimits(max_body_bytes=100))
    too_big = call(app, "POST", "/v1/embeddings", json={"input": "x" * 200})
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "request_too_large"
    unknown = call(app, "POST", "/v1/chat/completions", json={})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "invalid_request_error"


def test_a_model_without_weights_for_a_head_has_no_rerank(tmp_path, tokenizer):
    model = save_model(tmp_path / "m", BertModel, tokenizer)
    assert "/rerank" not in call(create_app(model), "GET", "/openapi.json").json()["paths"]


def test_token_ids_run_as_given(encoder_dir):
    loaded = inference.load(encoder_dir)
    encoding = loaded.tokenizer.encode("the cat sat")
    np.testing.assert_allclose(
        inference.embed_token_ids([encoding.ids], loaded), inference.embed(["the cat sat"], loaded), atol=1e-6
    )
    with pytest.raises(BertkitError, match="token ids 0"):
        inference.embed_token_ids([[10**6]], loaded)
    assert Path(encoder_dir).is_dir()


def test_every_route_says_how_many_inputs_it_cut(models):
    """bertkit's own bodies carry ``truncated``; OpenAI's and TEI's keep their shape and say it in a header."""
    classifier, sentence = create_app(models["classifier"]), create_app(models["sentence"])  # 16 and 24 tokens
    answer = call(classifier, "POST", "/classify", json={"texts": TEXTS})
    assert answer.status_code == 200 and answer.json()["truncated"] == 1
    assert call(classifier, "POST", "/classify", json={"texts": TEXTS[:2]}).json()["truncated"] == 0
    assert call(sentence, "POST", "/embed", json={"texts": TEXTS}).json()["truncated"] == 1
    openai = call(sentence, "POST", "/v1/embeddings", json={"input": TEXTS})
    assert openai.headers["X-Bertkit-Truncated"] == "1" and set(openai.json()) == {"object", "data", "model", "usage"}
    assert call(sentence, "POST", "/v1/embeddings", json={"input": TEXTS[:2]}).headers["X-Bertkit-Truncated"] == "0"
    tei = call(sentence, "POST", "/embed", json={"inputs": TEXTS, "truncate": True, "truncation_direction": "left"})
    assert tei.headers["X-Bertkit-Truncated"] == "1" and len(tei.json()) == 3
