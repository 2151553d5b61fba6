"""The HTTP service: a FastAPI app with one endpoint per pipeline the loaded model supports.

Every endpoint validates its JSON (pydantic: wrong types and empty inputs get 422), checks the limits
(too many inputs, too long texts in characters or tokens: 413) before any model work, then hands its
inputs to the shared ``Batcher`` and waits at most ``request_timeout_s`` (504 after that). Errors are JSON
``{"error": "<one line saying what is wrong>"}``; a pipeline's ``BertkitError`` is a 422, never a 500.
The page at ``/`` (static files in ``serve/static``) calls the same endpoints.

Every request first passes the gate (``gate``): an ``X-Request-ID``, the API key (``keys``), the rate
limit (``ratelimit``), then metrics (``metrics``) and an access log line; ``ServeAccess`` (``access``) holds
those settings and TLS, CORS and the shutdown grace period. :func:`serve_loading` (what ``bertkit serve``
runs) opens the port before the model loads: until it is loaded, the readiness probes and every route answer
503 (``starting``), the liveness probe 200. :func:`run_server` runs an app with uvicorn:
SIGTERM makes ``/health`` answer 503, closes the listening socket, lets requests in flight finish within
``graceful_timeout`` and exits 0; SIGHUP re-reads the key file.

Where things live: request and response types in ``schemas``, refusals in ``errors``, the per-request
limits in ``checks`` (the body cap in ``body_limit``), the shared model and batcher in ``service``, and the
endpoints in ``routes``.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from bertkit.errors import BertkitError

try:
    from fastapi import FastAPI
except ImportError as exc:  # pragma: no cover - the serve extra is optional
    raise BertkitError("the HTTP service needs FastAPI and uvicorn; pip install 'bertkit[serve]'") from exc

from bertkit.inference import load
from bertkit.serve.access import LOOPBACK, ServeAccess
from bertkit.serve.address import listening_socket
from bertkit.serve.body_limit import BodyLimit
from bertkit.serve.errors import add_error_handlers
from bertkit.serve.keys import KeyRing
from bertkit.serve.limits import ServeLimits
from bertkit.serve.loading_app import Starting
from bertkit.serve.middleware import Gate, GateRules
from bertkit.serve.prometheus import tell_if_missing
from bertkit.serve.ratelimit import RateLimiter
from bertkit.serve.routes import add_routes
from bertkit.serve.service import Service

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded

logger = logging.getLogger("bertkit.serve")


def create_app(
    model: str | os.PathLike | Loaded,
    limits: ServeLimits | None = None,
    model_id: str | os.PathLike | None = None,
    access: ServeAccess | None = None,
    *,
    load_seconds: float | None = None,
    keys: KeyRing | None = None,
) -> FastAPI:
    """The FastAPI app serving ``model`` (a directory or a ``Loaded``): an endpoint for each pipeline it
    supports, the health probes, ``/info``, ``/tokenize``, ``/metrics``, the OpenAPI schema at
    ``/openapi.json`` and the web page at ``/``. ``model_id`` is the name the answers give (OpenAI's
    ``model``, ``/info``); by default the path or the directory's name. ``access``: keys, rate limit, CORS
    and log format (default: open, unlimited); ``load_seconds``: the model's load time for the metrics; ``keys``:
    the key ring to check (default: made from ``access``)."""
    started = time.perf_counter()
    if isinstance(model, (str, os.PathLike)):  # a checkpoint or an export folder (``bertkit.inference.load``)
        loaded: Loaded = load(model)
        load_seconds = time.perf_counter() - started
        model_id = model if model_id is None else model_id
    else:
        loaded = model
        if model_id is None:
            model_id = loaded.directory.name if loaded.directory else "bertkit"
    limits = limits or ServeLimits()
    access = access or ServeAccess()
    app = FastAPI(
        title="bertkit",
        version="0.1.0",
        description=f"BERT inference: {type(loaded.model).__name__}, pipelines {', '.join(loaded.pipelines)}.",
    )
    service = Service(loaded, limits, str(model_id), load_seconds)
    app.state.service = service
    app.state.keys = keys or KeyRing(access.static_keys(), access.api_key_file)
    rate = access.rate()
    limiter = RateLimiter(*rate) if rate is not None else None
    app.state.limiter = limiter
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    app.add_middleware(Gate, rules=GateRules(app.state.keys, limiter, service.metrics, access.log_format == "json"))
    if access.cors_origin:  # outermost, so that a browser's preflight is answered before the key check
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=access.cors_origin,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
            expose_headers=["X-Request-ID", "Retry-After"],
        )
    add_error_handlers(app)
    add_routes(app, loaded)
    return app


def serve(
    model: str | os.PathLike | Loaded,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: ServeLimits | None = None,
    log_level: str = "info",
    model_id: str | os.PathLike | None = None,
    access: ServeAccess | None = None,
    load_seconds: float | None = None,
) -> None:
    """Serve ``model`` with uvicorn until SIGTERM or Ctrl-C. Binds to localhost unless ``host`` says otherwise."""
    app = create_app(model, limits, model_id, access, load_seconds=load_seconds)
    run_server(app, host, port, access, log_level)


def serve_loading(
    load_model: Callable[[], Loaded],
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: ServeLimits | None = None,
    log_level: str = "info",
    model_id: str | os.PathLike | None = None,
    access: ServeAccess | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Open the port first (``sock``: already bound to ``host``:``port``) and serve the loading answers (``starting``) while ``load_model()`` runs in a thread,
    then serve the model: the service is ready once the model is loaded and has run once (``warm_up``). A failed
    load stops the server and raises its error here."""
    access = access or ServeAccess()
    keys = KeyRing(access.static_keys(), access.api_key_file)

    def build() -> FastAPI:
        started = time.perf_counter()
        loaded = load_model()
        warm_up(loaded)
        app = create_app(loaded, limits, model_id, access, load_seconds=time.perf_counter() - started, keys=keys)
        logger.info("model loaded in %.1f s; ready", time.perf_counter() - started)
        return app

    run_server(Starting(build, keys), host, port, access, log_level, sock)


def warm_up(loaded: Loaded) -> None:
    """One forward pass of the model and of its encoder, so that what a backend does on first use (ONNX Runtime
    exports and quantizes the graph into the cache, ``torch.compile`` compiles) is done before the service says
    it is ready, not in the first request's time."""
    tokenizer = loaded.tokenizer
    if getattr(loaded, "engine", None) == "onnxruntime":  # an export folder: its graph, without torch
        arrays = np.array([[tokenizer.cls_id, tokenizer.sep_id]], dtype=np.int64)
        loaded.model(input_ids=arrays, token_type_ids=np.zeros_like(arrays), attention_mask=np.ones_like(arrays))
        return
    import torch

    ids = torch.tensor([[tokenizer.cls_id, tokenizer.sep_id]], device=loaded.device)
    encoder = getattr(loaded.model, "bert", None)
    with torch.inference_mode():
        for module in (loaded.model, encoder) if encoder is not None else (loaded.model,):
            module(input_ids=ids, token_type_ids=torch.zeros_like(ids), attention_mask=torch.ones_like(ids))


def server_config(app: Any, host: str, port: int, access: ServeAccess | None = None, log_level: str = "info") -> Any:
    """The ``uvicorn.Config`` of ``app``: TLS when ``access`` has a certificate, the grace period, and
    uvicorn's own access log off (the gate writes one line per request instead)."""
    try:
        import uvicorn
    except ImportError:
        raise BertkitError("the HTTP service needs uvicorn; pip install 'bertkit[serve]'") from None
    access = access or ServeAccess()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=math.ceil(access.graceful_timeout),
        ssl_certfile=access.ssl_certfile,
        ssl_keyfile=access.ssl_keyfile,
    )


def run_server(
    app: FastAPI | Starting,
    host: str = "127.0.0.1",
    port: int = 8000,
    access: ServeAccess | None = None,
    log_level: str = "info",
    sock: socket.socket | None = None,
) -> None:
    """Run ``app`` until SIGTERM or Ctrl-C, from the main thread; see the module's docstring for shutdown.
    A ``Starting`` app builds the real one in a thread meanwhile; if that fails, its error is raised here.
    The port is bound first, unless ``sock`` is (``address``): a bad port or address is a ``ConfigError`` before
    anything starts."""
    import uvicorn

    sock = sock or listening_socket(host, port)
    access = access or ServeAccess()
    keys: KeyRing = app.keys if isinstance(app, Starting) else app.state.keys
    if host not in LOOPBACK and not keys.enabled:
        logger.warning(
            "listening on %s without an API key: anyone who can reach this address can use the model "
            "(give --api-key, --api-key-file or BERTKIT_API_KEY)",
            host,
        )
    tell_if_missing()
    _log_access_lines(log_level)
    drain = app.drain if isinstance(app, Starting) else _drainer(app.state.service)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            drain()
            super().handle_exit(sig, frame)

    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, lambda sig, frame: keys.ask_reload())
    # uvicorn raises the signal again once it has drained; ignoring it then makes a SIGTERM stop exit 0.
    signal.signal(signal.SIGTERM, lambda sig, frame: None)
    server = Server(server_config(app, host, port, access, log_level))
    if isinstance(app, Starting):
        app.start(lambda: setattr(server, "should_exit", True))
    with sock:
        server.run(sockets=[sock])
    if isinstance(app, Starting):
        app.raise_failure()


def _drainer(service: Service) -> Callable[[], None]:
    def drain() -> None:
        service.state = "draining"

    return drain


def _log_access_lines(log_level: str) -> None:
    """The access log's lines go to stderr as they are (a JSON line must stay one clean JSON object)."""
    access_log = logging.getLogger("bertkit.serve.access")
    if access_log.handlers or log_level.lower() in ("warning", "error", "critical"):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    access_log.addHandler(handler)
    access_log.setLevel(logging.INFO)
    access_log.propagate = False
