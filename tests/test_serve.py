"""The HTTP service: endpoints per model, the same numbers as the library, limits and bad input (4xx, never
5xx), batching across concurrent callers, timeouts, and one real uvicorn server on loopback."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest
import torch

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx is needed to call the app")

import httpx

from bertkit import inference
from bertkit.models.bert import (
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertkit.serve import ServeLimits, create_app
from inference_helpers import save_model
from liveness import LIVENESS_S, wait_until


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, tokenizer):
    root = tmp_path_factory.mktemp("models")
    return {
        "pretraining": save_model(root / "pt", BertForPreTraining, tokenizer),
        "classifier": save_model(
            root / "cls", BertForSequenceClassification, tokenizer, id2label={0: "negative", 1: "positive"}
        ),
        "tagger": save_model(
            root / "ner", BertForTokenClassification, tokenizer, id2label={0: "O", 1: "B-PER", 2: "I-PER"}
        ),
        "qa": save_model(root / "qa", BertForQuestionAnswering, tokenizer),
    }


@pytest.fixture(scope="module")
def pretraining(dirs, device):
    return inference.load(dirs["pretraining"], device=device)


def call(app, method: str, path: str, **kwargs) -> httpx.Response:
    """One request through the ASGI app, in-process."""

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(go())


LIMITS = ServeLimits(max_items=4, max_chars=300, max_body_bytes=4000, max_top_k=10, attention_max_tokens=32)


@pytest.fixture(scope="module")
def app(pretraining):
    return create_app(pretraining, LIMITS)


# ---------------------------------------------------------------------------------------------- endpoints


def test_health_info_and_only_supported_endpoints(app):
    assert call(app, "GET", "/health").json() == {"status": "ok"}
    info = call(app, "GET", "/info").json()
    assert info["model"]["architecture"] == "BertForPreTraining"
    assert info["pipelines"] == ["fill-mask", "next-sentence", "embed", "attention"]
    assert info["limits"]["max_items"] == 4 and info["limits"]["max_tokens"] == 128
    paths = set(call(app, "GET", "/openapi.json").json()["paths"])
    assert paths == {
        "/health",
        "/health/ready",
        "/health/live",
        "/info",
        "/tokenize",
        "/fill-mask",
        "/next-sentence",
        "/embed",
        "/v1/embeddings",
        "/similarity",
        "/embed_all",
        "/attention",
        "/",
    }
    response = call(app, "POST", "/classify", json={"texts": ["a"]})
    assert response.status_code == 404 and response.json()["error"]


def test_pipeline_endpoints_return_the_library_results(app, pretraining):
    text = "Paris is the [MASK] of France."
    body = call(app, "POST", "/fill-mask", json={"texts": [text], "top_k": 3}).json()
    expected = inference.fill_mask(text, pretraining, top_k=3)
    got = body["results"][0][0]
    assert [c["token"] for c in got] == [c.token for c in expected[0]]
    assert [c["score"] for c in got] == pytest.approx([c.score for c in expected[0]], abs=1e-6)

    body = call(app, "POST", "/next-sentence", json={"pairs": [["I went home.", "Then I slept."]]}).json()
    assert body["results"][0]["probability"] == pytest.approx(
        inference.next_sentence("I went home.", "Then I slept.", pretraining), abs=1e-6
    )

    body = call(app, "POST", "/embed", json={"texts": ["hello world", "the cat"], "pooling": "mean"}).json()
    expected = inference.embed(["hello world", "the cat"], pretraining, pooling="mean")
    assert body["dimension"] == 128
    assert torch.allclose(torch.tensor(body["embeddings"]), torch.from_numpy(expected), atol=1e-5)

    body = call(app, "POST", "/attention", json={"text": "hello world"}).json()
    assert body["tokens"] == ["[CLS]", "hello", "world", "[SEP]"]
    assert len(body["attentions"]) == 2 and len(body["attentions"][0]) == 2
    assert sum(body["attentions"][1][0][2]) == pytest.approx(1.0, abs=1e-3)


def test_task_endpoints(dirs):
    classifier = create_app(dirs["classifier"], LIMITS)
    body = call(classifier, "POST", "/classify", json={"texts": ["good movie", ["a cat", "a dog"]]}).json()
    assert [set(r["probabilities"]) for r in body["results"]] == [{"negative", "positive"}] * 2
    tagger = create_app(dirs["tagger"], LIMITS)
    body = call(tagger, "POST", "/tag", json={"texts": ["John lives in Paris."]}).json()
    words = body["results"][0]["words"]
    assert [(w["word"], w["start"], w["end"]) for w in words][-2:] == [("Paris", 14, 19), (".", 19, 20)]
    qa = create_app(dirs["qa"], LIMITS)
    context = "Paris is the capital of France."
    body = call(qa, "POST", "/answer", json={"inputs": [{"question": "What?", "context": context}], "top_k": 2}).json()
    (answers,) = body["results"]
    assert len(answers) == 2 and all(context[a["start"] : a["end"]] == a["text"] for a in answers)


# ---------------------------------------------------------------------------------------------- bad input

BAD_REQUESTS = [
    # (path, raw body, status, words in the error)
    ("/fill-mask", b'{"texts": ', 422, "not valid JSON"),
    ("/fill-mask", b"", 422, "JSON"),
    ("/fill-mask", b"[]", 422, "valid dictionary"),
    ("/fill-mask", b'{"texts": []}', 422, "at least 1"),
    ("/fill-mask", b'{"texts": [""]}', 422, "at least 1 character"),
    ("/fill-mask", b'{"texts": ["   "]}', 422, "blank"),
    ("/fill-mask", b'{"texts": [1]}', 422, "valid string"),
    ("/fill-mask", b'{"texts": "a [MASK]"}', 422, "valid list"),
    ("/fill-mask", b'{"texts": ["no mask"]}', 422, "no [MASK]"),
    ("/fill-mask", b'{"texts": ["a [MASK]"], "top_k": "many"}', 422, "top_k"),
    ("/fill-mask", b'{"texts": ["a [MASK]"], "top_k": 0}', 422, "top_k"),
    ("/fill-mask", b'{"texts": ["a [MASK]"], "top_k": 11}', 422, "at most 10"),
    ("/fill-mask", b'{"texts": ["a [MASK]"], "colour": 1}', 422, "colour"),
    ("/fill-mask", b'{"texts": ["a [MASK]", "b", "c", "d", "e"]}', 413, "at most 4"),
    ("/fill-mask", b'{"texts": ["' + b"x" * 301 + b' [MASK]"]}', 413, "308 characters"),
    ("/fill-mask", b'{"texts": ["' + b", " * 140 + b'[MASK]"]}', 413, "143 tokens"),
    ("/next-sentence", b'{"pairs": [["only one"]]}', 422, "pairs.0"),
    ("/next-sentence", b'{"pairs": [["a", "b", "c"]]}', 422, "pairs.0"),
    ("/embed", b'{"texts": ["a"], "pooling": "sum"}', 422, "pooling"),
    ("/attention", b'{"text": "' + b"cat " * 40 + b'"}', 413, "at most 32"),
    ("/attention", b'{"text": null}', 422, "text"),
]


@pytest.mark.parametrize("path, body, status, words", BAD_REQUESTS)
def test_bad_requests_get_a_4xx_that_says_what_is_wrong(app, path, body, status, words):
    response = call(app, "POST", path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    assert words in response.json()["error"]


def test_bodies_over_the_limit_get_413_before_parsing(app):
    big = b'{"texts": ["a [MASK]"], "pad": "' + b"x" * 5000 + b'"}'
    response = call(app, "POST", "/fill-mask", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413 and "4000 bytes" in response.json()["error"]

    async def chunks():  # no Content-Length: the body arrives in pieces and is counted
        for _ in range(10):
            yield b"x" * 1000

    response = call(app, "POST", "/fill-mask", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert call(app, "GET", "/health").status_code == 200


def test_wrong_method_and_unknown_path_are_4xx(app):
    assert call(app, "GET", "/fill-mask").status_code == 405
    assert call(app, "POST", "/nothing", json={}).status_code == 404


# ---------------------------------------------------------------------------------------------- batching, timeouts


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer(pretraining):
    app = create_app(pretraining, ServeLimits(batch_window_ms=50))
    texts = [f"{word} is the [MASK] ." for word in ["paris", "france", "john", "the cat", "a dog", "the king"] * 4]

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await asyncio.gather(*(client.post("/fill-mask", json={"texts": [t], "top_k": 2}) for t in texts))

    responses = asyncio.run(go())
    assert all(r.status_code == 200 for r in responses)
    stats = app.state.service.batcher.stats
    assert stats.requests == len(texts) and stats.calls < len(texts) / 2
    expected = inference.fill_mask(texts, pretraining, top_k=2)
    for response, want in zip(responses, expected):
        assert [c["token"] for c in response.json()["results"][0][0]] == [c.token for c in want[0]]


def test_a_bad_request_in_a_batch_does_not_fail_the_others(pretraining):
    app = create_app(pretraining, ServeLimits(batch_window_ms=50))
    service = app.state.service
    good = ["a [MASK] .", "the [MASK] ."]

    async def go():
        # Straight to the batcher: a job that fails inside the pipeline (no mask slips past validation)
        def run(texts):
            return [[m[0].token for m in r] for r in inference.fill_mask(texts, pretraining, top_k=1)]

        return await asyncio.gather(
            *(service.batcher.submit("fill", run, [t]) for t in [good[0], "no mask", good[1]]), return_exceptions=True
        )

    first, bad, last = asyncio.run(go())
    assert isinstance(bad, Exception) and "no [MASK]" in str(bad)
    assert len(first) == 1 and len(last) == 1


def test_slow_requests_time_out_without_blocking_the_server(pretraining, monkeypatch):
    app = create_app(pretraining, ServeLimits(request_timeout_s=0.3))
    real = inference.fill_mask
    working, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow(texts, *args, **kwargs):
        if any("slow" in t for t in texts):
            working.set()
            release.wait(timeout=LIVENESS_S)  # held until the test has its answers: the model thread is busy till then
            finished.set()
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(inference, "fill_mask", slow)

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            slow_request = asyncio.create_task(client.post("/fill-mask", json={"texts": ["slow [MASK]"]}))
            while not working.is_set():
                await asyncio.sleep(0.01)
            health = await client.get("/health")  # the event loop is free while the model thread works
            in_flight = not finished.is_set()  # answered while the model thread still holds the slow job
            timed_out = await slow_request
            release.set()
            while not finished.is_set():  # the model thread finishes the abandoned work
                await asyncio.sleep(0.01)
            after = await client.post("/fill-mask", json={"texts": ["a [MASK]"]})
            return health, in_flight, timed_out, after

    health, in_flight, timed_out, after = asyncio.run(go())
    assert health.status_code == 200 and in_flight
    assert timed_out.status_code == 504 and "0.3 s" in timed_out.json()["error"]
    assert after.status_code == 200


# ---------------------------------------------------------------------------------------------- real server


def test_uvicorn_on_loopback(pretraining):
    uvicorn = pytest.importorskip("uvicorn")
    app = create_app(pretraining, LIMITS)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, "the server to start", alive=thread.is_alive)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=LIVENESS_S) as client:
            assert client.get("/health").json() == {"status": "ok"}
            assert "What BERT sees" in client.get("/").text
            assert client.get("/static/app.js").status_code == 200
            response = client.post("/fill-mask", json={"texts": ["a [MASK] ."]})
            assert response.status_code == 200 and len(response.json()["results"][0][0]) == 5
            response = client.post("/fill-mask", content=b"x" * 5000, headers={"content-type": "application/json"})
            assert response.status_code == 413
    finally:
        server.should_exit = True
        thread.join(timeout=LIVENESS_S)
        sock.close()


# ------------------------------------------------------------------------------------- unknown routes, favicon
def test_unknown_route_is_a_json_404_naming_the_routes(app):
    from fastapi.testclient import TestClient

    client = TestClient(app)
    response = client.get("/foo")
    assert response.status_code == 404 and response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["error"].startswith("no route GET /foo; routes: GET /, ")
    assert body["routes"][0] == "GET /"
    for route in ("GET /health", "GET /info", "POST /fill-mask", "POST /embed", "POST /attention", "GET /docs"):
        assert route in body["routes"] and route in body["error"]
    assert "POST /classify" not in body["routes"]  # a pretraining model has no classifier endpoint
    assert "/favicon.ico" not in body["error"]
    assert body["routes"].index("POST /embed") < body["routes"].index("GET /docs")  # the API before the docs

    unsupported = client.post("/classify", json={"texts": ["a"]}).json()
    assert unsupported["error"].startswith("no route POST /classify; routes:")
    assert client.get("/static/missing.js").json()["error"].startswith("no route GET /static/missing.js")


def test_unknown_route_lists_the_models_own_endpoints(dirs):
    from fastapi.testclient import TestClient

    routes = TestClient(create_app(dirs["classifier"], LIMITS)).get("/nope").json()["routes"]
    assert "POST /classify" in routes and "POST /fill-mask" not in routes


def test_favicon_is_served(app):
    from fastapi.testclient import TestClient

    response = TestClient(app).get("/favicon.ico")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/svg+xml") and response.text.startswith("<svg")
    assert "/favicon.ico" not in call(app, "GET", "/openapi.json").json()["paths"]
