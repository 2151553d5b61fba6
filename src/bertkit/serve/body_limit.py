"""The request-body cap (``ServeLimits.max_body_bytes``) and the one JSON parser (``json_body``), applied to
every route before the app parses anything.

A body over the cap is read and thrown away (up to ``DRAIN_FACTOR`` times the cap, at least ``DRAIN_MIN``
bytes) before the 413 is sent: a client that writes its whole body before reading the answer, as Python's
``urllib`` does, would otherwise find the connection closed under it (a broken pipe) instead of the 413. A
body past that bound is answered at once and its connection closed. A JSON body (a POST without a
content type, or with a JSON one) that is not JSON or nests too deep is answered here, in the same words on
every route, so that no route's own parsing meets it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bertkit.serve.errors import Problem, error_body
from bertkit.serve.json_body import parse_json_body

DRAIN_FACTOR = 16
DRAIN_MIN = 16 << 20
"""How much of an over-limit body is read and discarded before the 413: the larger of 16 x the cap and 16 MiB."""


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
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                int(declared)
            except ValueError:
                await _send_json(send, 400, error_body(path, 400, "the Content-Length header is not a number"))
                return
        read = await self._read(receive)
        if read is None:  # the client went away
            return
        body, size = read
        if size > self.max_bytes:
            too_big = (
                f"the request body is over {self.max_bytes} bytes, this server's limit; send fewer or shorter texts"
            )
            await _send_json(send, 413, error_body(path, 413, too_big))
            return
        if body and _is_json(scope):
            try:
                parse_json_body(body)
            except Problem as refused:
                await _send_json(send, refused.status, error_body(path, refused.status, refused.message))
                return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Callable) -> tuple[bytes, int] | None:
        """The body and its size in bytes, None on disconnect. Past the cap the rest is read and dropped, up to
        the drain bound (module docstring), so that the client has sent it all before the 413."""
        chunks, size = [], 0
        bound = max(DRAIN_FACTOR * self.max_bytes, DRAIN_MIN)
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= self.max_bytes:
                chunks.append(chunk)
            if size > bound or not message.get("more_body", False):
                return b"".join(chunks), size


def _is_json(scope: dict) -> bool:
    """Whether the request's body is read as JSON: a POST, PUT or PATCH without a content type or with a
    JSON one (as FastAPI decides)."""
    if scope.get("method") not in ("POST", "PUT", "PATCH"):
        return False
    kind = dict(scope.get("headers") or []).get(b"content-type", b"").split(b";")[0].strip().lower()
    return not kind or kind == b"application/json" or kind.endswith(b"+json")


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
