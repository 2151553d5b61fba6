"""The request-body cap (``ServeLimits.max_body_bytes``), applied before the app parses anything."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bertkit.serve.errors import error_body


class BodyLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` with 413, whether announced by Content-Length or
    streamed in chunks, before the app parses anything."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        too_big = f"the request body is over {self.max_bytes} bytes, this server's limit; send fewer or shorter texts"
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _send_json(send, 400, error_body(path, 400, "the Content-Length header is not a number"))
                return
            if size > self.max_bytes:
                await _send_json(send, 413, error_body(path, 413, too_big))
                return
        body = await self._read(receive)
        if body is None:  # the client went away
            return
        if len(body) > self.max_bytes:
            await _send_json(send, 413, error_body(path, 413, too_big))
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Callable) -> bytes | None:
        """The whole body, or as much as one byte past the cap (enough to refuse it); None on disconnect."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if size > self.max_bytes or not message.get("more_body", False):
                return b"".join(chunks)


async def _send_json(send: Callable, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
