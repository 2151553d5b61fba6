"""The gate every request passes first (ASGI middleware): a request id, the API key, the rate limit, then
the metrics and the access log line once it is answered.

A request id is taken from the client's ``X-Request-ID`` (when short and printable) or made up, and echoed
in the answer's ``X-Request-ID``. The health probes, the web page's files and the API docs need no key;
every other route answers 401 (``WWW-Authenticate: Bearer``) without an accepted one, and 429 with
``Retry-After`` when its caller is over the rate limit. The key itself never reaches a log: a caller is
known by its key's index (``key-0``) or, without keys, its address.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bertkit.serve.errors import error_body
from bertkit.serve.keys import KeyRing
from bertkit.serve.prometheus import Metrics
from bertkit.serve.ratelimit import RateLimiter

access_logger = logging.getLogger("bertkit.serve.access")

PUBLIC = frozenset(
    {"/health", "/health/live", "/health/ready", "/", "/favicon.ico", "/docs", "/redoc", "/openapi.json"}
    | {"/docs/oauth2-redirect"}
)
"""Paths open without a key: the probes, the page and the API's description; none runs or describes the model."""
PUBLIC_PREFIXES = ("/static/",)
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def is_public(path: str) -> bool:
    return path in PUBLIC or path.startswith(PUBLIC_PREFIXES)


@dataclass
class GateRules:
    keys: KeyRing
    limiter: RateLimiter | None
    metrics: Metrics
    log_json: bool = False


@dataclass
class _Refusal:
    status: int
    message: str
    headers: list[tuple[bytes, bytes]]


class Gate:
    """ASGI middleware applying ``rules`` to every HTTP request."""

    def __init__(self, app: Any, rules: GateRules):
        self.app = app
        self.rules = rules

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_id = _request_id(scope)
        answered = {"status": 500}

        async def send_with_id(message: dict) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        self.rules.metrics.track(1)
        try:
            refusal = self._refusal(scope)
            if refusal is None:
                await self.app(scope, receive, send_with_id)
            else:
                await _drain_small_body(scope, receive)
                await _send_refusal(send_with_id, scope, refusal)
        finally:
            self.rules.metrics.track(-1)
            self._record(scope, answered["status"], time.perf_counter() - start, request_id)

    def _refusal(self, scope: dict) -> _Refusal | None:
        path = str(scope.get("path", ""))
        if is_public(path) or scope.get("method") == "OPTIONS":
            return None
        caller = None
        if self.rules.keys.enabled:
            caller = self.rules.keys.identify(_header(scope, b"authorization"))
            if caller is None:  # guesses are rate limited too, per address
                over = self._over_limit(f"no key from {_client(scope)}")
                message = "a valid API key is needed: send the header Authorization: Bearer KEY"
                return over or _Refusal(401, message, [(b"www-authenticate", b'Bearer realm="bertkit"')])
        return self._over_limit(caller or _client(scope))

    def _over_limit(self, caller: str) -> _Refusal | None:
        wait = self.rules.limiter.take(caller) if self.rules.limiter is not None else 0.0
        if wait <= 0:
            return None
        seconds = max(1, math.ceil(wait))
        return _Refusal(429, f"rate limit exceeded; retry in {seconds} s", [(b"retry-after", str(seconds).encode())])

    def _record(self, scope: dict, status: int, seconds: float, request_id: str) -> None:
        method = str(scope.get("method", ""))
        self.rules.metrics.request(_route(scope, status), method, status, seconds)
        if not access_logger.isEnabledFor(logging.INFO):
            return
        path, client = str(scope.get("path", "")), _client(scope)
        if self.rules.log_json:
            line = json.dumps(
                {
                    "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                    "method": method,
                    "path": path,
                    "status": status,
                    "duration_ms": round(seconds * 1000, 2),
                    "request_id": request_id,
                    "client": client,
                }
            )
        else:
            line = f'{client} "{method} {path}" {status} {seconds * 1000:.1f} ms id={request_id}'
        access_logger.info(line)


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _request_id(scope: dict) -> str:
    given = _header(scope, b"x-request-id")
    return given if given is not None and _REQUEST_ID.match(given) else uuid.uuid4().hex


def _client(scope: dict) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _route(scope: dict, status: int) -> str:
    """The route's template (``/embed``, ``/static``), never the raw path: scans of random paths must not
    make a metric series each."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    if is_public(str(scope.get("path", ""))) and status != 404:
        return str(scope.get("path"))
    return "unmatched"


DRAIN_BYTES = 1 << 16
"""A refused request's body up to this size is read before the answer: a server that closes on unread bytes
makes the kernel reset the connection, and the client may lose the 401 or 429 it was sent."""


async def _drain_small_body(scope: dict, receive: Callable) -> None:
    """Read (and drop) the request's body when it declares at most ``DRAIN_BYTES``."""
    length = _header(scope, b"content-length")
    if length is None or not length.isdigit() or int(length) > DRAIN_BYTES:
        return
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return
        more = bool(message.get("more_body", False))


async def _send_refusal(send: Callable, scope: dict, refusal: _Refusal) -> None:
    body = json.dumps(error_body(str(scope.get("path", "")), refusal.status, refusal.message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers + refusal.headers})
    await send({"type": "http.response.body", "body": body})
