"""The HTTP service: a FastAPI app with one endpoint per pipeline the loaded model supports.

Every endpoint validates its JSON (pydantic: wrong types and empty inputs get 422), checks the limits
(too many inputs, too long texts in characters or tokens: 413) before any model work, then hands its
inputs to the shared ``Batcher`` and waits at most ``request_timeout_s`` (504 after that). Errors are JSON
``{"error": "<one line saying what is wrong>"}``; a pipeline's ``BertkitError`` is a 422, never a 500.
The page at ``/`` (static files in ``serve/static``) calls the same endpoints.

Where things live: request and response types in ``schemas``, refusals in ``errors``, the per-request
limits in ``checks`` (the body cap in ``body_limit``), the shared model and batcher in ``service``, and the
endpoints in ``routes``.
"""

from __future__ import annotations

import logging
import os

from bertkit.errors import BertkitError

try:
    from fastapi import FastAPI
except ImportError as exc:  # pragma: no cover - the serve extra is optional
    raise BertkitError("the HTTP service needs FastAPI and uvicorn; pip install 'bertkit[serve]'") from exc

from bertkit.inference import Loaded, load
from bertkit.serve.body_limit import BodyLimit
from bertkit.serve.errors import add_error_handlers
from bertkit.serve.limits import ServeLimits
from bertkit.serve.routes import add_routes
from bertkit.serve.service import Service

logger = logging.getLogger("bertkit.serve")


def create_app(
    model: str | os.PathLike | Loaded, limits: ServeLimits | None = None, model_id: str | os.PathLike | None = None
) -> FastAPI:
    """The FastAPI app serving ``model`` (a directory or a ``Loaded``): an endpoint for each pipeline it
    supports, ``/health``, ``/info``, ``/tokenize``, the OpenAPI schema at ``/openapi.json`` and the web page
    at ``/``. ``model_id`` is the name the answers give (OpenAI's ``model``, ``/info``); by default the path
    or the directory's name."""
    loaded = model if isinstance(model, Loaded) else load(model)
    if model_id is None:
        model_id = model if not isinstance(model, Loaded) else model.directory.name if model.directory else "bertkit"
    limits = limits or ServeLimits()
    app = FastAPI(
        title="bertkit",
        version="0.1.0",
        description=f"BERT inference: {type(loaded.model).__name__}, pipelines {', '.join(loaded.pipelines)}.",
    )
    app.state.service = Service(
        loaded, limits, str(model_id) if isinstance(model_id, (str, os.PathLike)) else "bertkit"
    )
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
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
) -> None:
    """Serve ``model`` with uvicorn until interrupted. Binds to localhost unless ``host`` says otherwise."""
    try:
        import uvicorn
    except ImportError:
        raise BertkitError("the HTTP service needs uvicorn; pip install 'bertkit[serve]'") from None
    if host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning(
            "listening on %s: the service has no authentication; anyone who can reach this address can use the model",
            host,
        )
    app = create_app(model, limits, model_id)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
