"""The service's batcher: batches by a token budget grouped by length, the same vectors as unbatched,
overload answered 503 with Retry-After at once, and tokenization off the event loop."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx is needed to call the app")

import httpx

from bertkit import inference
from bertkit.serve import ServeLimits, create_app
from bertkit.serve.dynamic_batching import Batcher, Overloaded, _Input, _Job, token_batches


def _entries(lengths):
    loop = asyncio.new_event_loop()
    try:
        job = _Job("k", lambda items: items, list(range(len(lengths))), list(lengths), loop.create_future())
    finally:
        loop.close()
    return [_Input(job, i, n) for i, n in enumerate(lengths)]


def test_token_batches_keep_the_budget_and_group_by_length():
    lengths = [5, 250, 7, 6, 240, 8, 900, 5, 6, 255]
    runs = token_batches(_entries(lengths), max_batch=4, max_tokens=512)
    assert sorted(e.length for run in runs for e in run) == sorted(lengths)  # every input once
    for run in runs:
        longest = max(e.length for e in run)
        assert len(run) <= 4
        assert len(run) * longest <= 512 or len(run) == 1  # only a lone input may be over the budget
    lone = [run for run in runs if max(e.length for e in run) == 900]
    assert len(lone) == 1 and len(lone[0]) == 1
    # the short ones are not padded to a long one
    assert all(max(e.length for e in run) <= 8 for run in runs if min(e.length for e in run) <= 8)


def test_concurrent_embeddings_batch_within_the_budget_and_equal_unbatched(encoder_dir, monkeypatch):
    budget = 64
    app = create_app(encoder_dir, ServeLimits(batch_window_ms=50, max_batch_tokens=budget, batch_size=8))
    service = app.state.service
    calls: list[list[int]] = []
    real = inference.embed_token_ids

    def spy(rows, *args, **kwargs):
        calls.append([len(row) for row in rows])
        return real(rows, *args, **kwargs)

    short = [f"word {i} here" for i in range(12)]
    long = [" ".join(["several words of a longer text"] * 4) + f" {i}" for i in range(3)]
    texts = short[:5] + long[:1] + short[5:] + long[1:]
    monkeypatch.setattr(inference, "embed_token_ids", spy)

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await asyncio.gather(*(client.post("/embed", json={"texts": [t]}) for t in texts))

    responses = asyncio.run(go())
    monkeypatch.undo()
    assert all(r.status_code == 200 for r in responses)
    max_length = service.loaded.max_length
    for lengths in calls:
        padded = len(lengths) * min(max(lengths), max_length)
        assert len(lengths) <= 8
        assert padded <= budget or len(lengths) == 1
    assert len(calls) < len(texts)  # batched at all
    got = np.array([r.json()["embeddings"][0] for r in responses])
    np.testing.assert_allclose(got, inference.embed(texts, encoder_dir), atol=1e-5)


def test_a_full_queue_answers_503_with_retry_after_at_once(encoder_dir, monkeypatch):
    app = create_app(encoder_dir, ServeLimits(max_queue=1, batch_window_ms=1))
    service = app.state.service
    release = threading.Event()
    real = inference.embed_token_ids

    def slow(*args, **kwargs):
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(inference, "embed_token_ids", slow)

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            first = asyncio.create_task(client.post("/embed", json={"texts": ["one"]}))
            while service.batcher.depth() < 1:
                await asyncio.sleep(0.005)
            try:
                refused = await client.post("/v1/embeddings", json={"input": "two"})
                plain = await client.post("/embed", json={"texts": ["three"]})
            finally:
                release.set()
            return await first, refused, plain

    first, refused, plain = asyncio.run(go())
    assert first.status_code == 200
    for answer in (refused, plain):
        assert answer.status_code == 503
        assert int(answer.headers["retry-after"]) >= 1
    assert refused.json()["error"]["code"] == "overloaded"
    assert "overloaded" in plain.json()["error"]
    assert service.batcher.depth() == 0  # the refused ones never queued, the answered one left


def test_the_expected_wait_bounds_the_queue():
    async def go():
        batcher = Batcher(window_s=0.001, max_wait_s=1.0)
        batcher._seconds_per_token = 0.01  # 100 tokens a second, as measured
        gate = asyncio.Event()

        def run(items):
            return items

        async def held():
            await gate.wait()
            return await batcher.submit("k", run, ["a"], [90])

        batcher._ensure_worker()
        batcher._waiting_jobs, batcher._waiting_tokens = 1, 90  # 0.9 s of work already waiting
        with pytest.raises(Overloaded) as refused:
            await batcher.submit("k", run, ["b"], [20])
        assert refused.value.retry_after >= 1
        batcher._waiting_jobs, batcher._waiting_tokens = 0, 0
        gate.set()
        assert await held() == ["a"]
        batcher.close()

    asyncio.run(go())


def test_tokenization_runs_off_the_event_loop(encoder_dir, monkeypatch):
    app = create_app(encoder_dir, ServeLimits(batch_window_ms=1))
    tokenizer = app.state.service.loaded.tokenizer
    threads: list[str] = []
    loop_threads: list[str] = []
    real = type(tokenizer).ids_batch
    real_encode = type(tokenizer).encode

    def spy(self, texts):
        threads.append(threading.current_thread().name)
        return real(self, texts)

    def spy_encode(self, *args, **kwargs):
        threads.append(threading.current_thread().name)
        return real_encode(self, *args, **kwargs)

    async def go():
        loop_threads.append(threading.current_thread().name)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [
                await client.post("/embed", json={"texts": ["a text"]}),
                await client.post("/v1/embeddings", json={"input": ["a text", "another"]}),
                await client.post("/embed", json={"inputs": "a text"}),
                await client.post("/embed", json={"inputs": "a text", "truncate": True}),
                await client.post("/tokenize", json={"inputs": ["a text", "another"]}),
            ]

    monkeypatch.setattr(type(tokenizer), "ids_batch", spy)
    monkeypatch.setattr(type(tokenizer), "encode", spy_encode)
    responses = asyncio.run(go())
    monkeypatch.undo()
    assert all(r.status_code == 200 for r in responses)
    assert threads and all(name.startswith("bertkit-tokenize") for name in threads)
    assert loop_threads[0] not in threads
