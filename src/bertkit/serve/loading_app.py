"""The service while its model loads: the port is open at once, and the app answers for the model until it is built.

``Starting`` is the ASGI app uvicorn runs. Until :meth:`Starting.start`'s thread has built the real app,
``/health`` and ``/health/ready`` answer 503 ``{"status": "loading"}``, ``/health/live`` answers 200, and every
other path 503 with a one-line JSON error and ``Retry-After``; from then on every request goes to the real app.
A load that fails stops the server, and :meth:`Starting.raise_failure` raises its error in the caller's thread,
so the command ends with its usual one-line error instead of answering 503 for ever.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from bertkit.serve.errors import error_body
from bertkit.serve.keys import KeyRing

logger = logging.getLogger("bertkit.serve")

RETRY_AFTER_S = 5
"""What ``Retry-After`` tells a caller that comes while the model loads."""
READINESS = frozenset({"/health", "/health/ready"})


class Starting:
    """The ASGI app that answers while ``build`` runs, then hands every request to the app it returned.

    ``keys`` is the key ring the built app checks (so that SIGHUP reloads it before and after the load)."""

    def __init__(self, build: Callable[[], Any], keys: KeyRing):
        self.build = build
        self.keys = keys
        self.app: Any = None
        """The real app (FastAPI) once built; ``None`` while loading."""
        self.state = "loading"
        """``loading``, ``ready``, ``failed`` or ``draining``."""
        self.failure: BaseException | None = None

    def start(self, stop: Callable[[], None]) -> threading.Thread:
        """Build the app in a daemon thread; on failure keep the error and call ``stop`` (the server's exit)."""

        def run() -> None:
            try:
                app = self.build()
            except BaseException as exc:  # any failure must end the server, not leave it answering 503
                self.failure, self.state = exc, "failed"
                stop()
                return
            if self.state == "draining":  # SIGTERM came during the load: stay out of service
                app.state.service.state = "draining"
            else:
                self.state = "ready"
            self.app = app

        thread = threading.Thread(target=run, name="bertkit-load", daemon=True)
        thread.start()
        return thread

    def drain(self) -> None:
        """SIGTERM: readiness answers 503 from now on, loaded or not."""
        self.state = "draining"
        if self.app is not None:
            self.app.state.service.state = "draining"

    def raise_failure(self) -> None:
        """The load's error, if it failed."""
        if self.failure is not None:
            raise self.failure

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if self.app is not None:
            await self.app(scope, receive, send)
        elif scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] == "http":
            await self._answer(scope, send)

    async def _answer(self, scope: dict, send: Callable) -> None:
        path: str = scope["path"]
        headers = [(b"content-type", b"application/json")]
        if path == "/health/live":
            status, body = 200, {"status": "alive"}
        elif path in READINESS:
            status, body = 503, {"status": self.state}
        else:
            status = 503
            body = error_body(path, 503, f"the model is still loading; retry in {RETRY_AFTER_S} s")
            headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})


async def _lifespan(receive: Callable, send: Callable) -> None:
    """uvicorn's start-up and shutdown messages (the real app has no start-up work of its own)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
