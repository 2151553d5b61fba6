"""The service on a real port, called by the clients people use: Python's ``urllib`` with an over-limit body, and
text-embeddings-inference's own client (``huggingface_hub.InferenceClient``) and OpenAI's on TEI's routes."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")

import uvicorn

from bertkit.serve import ServeLimits, create_app
from bertkit.serve.app import server_config

TEXTS = ["the cat sat on the mat .", "hello world", "george washington lived in mount vernon ."]


@contextlib.contextmanager
def live(app) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a thread; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # port 0: any free one, which the tests are told
    server = uvicorn.Server(server_config(app, "127.0.0.1", sock.getsockname()[1], log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
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
            urllib.request.urlopen(request, timeout=60)
        assert error.value.code == 413
        assert "over 100000 bytes" in error.value.read().decode()  # bertkit's error body, or OpenAI's
