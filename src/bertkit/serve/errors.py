"""How the service says no: every error is JSON ``{"error": "<one line saying what is wrong>"}``, and on the
OpenAI-compatible routes (``/v1/...``) OpenAI's ``{"error": {"message", "type", "param", "code"}}``.

A refused request raises :class:`Problem` (its status and message); a pipeline's ``BertkitError`` is a 422,
never a 500; a schema violation names the first offending field; an unknown path lists the routes there are.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from bertkit.errors import BertkitError

logger = logging.getLogger("bertkit.serve")

UNLISTED = {"/favicon.ico", "/docs/oauth2-redirect"}  # routes a 404 does not offer


OPENAI_PREFIX = "/v1/"
"""Routes under this path answer errors in OpenAI's shape."""


class Problem(Exception):
    """A request the service refuses: HTTP ``status``, a one-line ``message`` and the request field at fault
    (``param``, when one is)."""

    def __init__(self, status: int, message: str, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.headers = headers
        """Headers of the answer (``Retry-After`` of a 503)."""


def error_body(path: str, status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """The JSON of an error on ``path``: bertkit's ``{"error": message}``, or OpenAI's shape under ``/v1/``
    (``type`` is ``invalid_request_error`` for the client's mistakes, ``server_error`` for 5xx)."""
    if not path.startswith(OPENAI_PREFIX):
        return {"error": message}
    kind = "server_error" if status >= 500 else "invalid_request_error"
    codes = {
        401: "invalid_api_key",
        404: "not_found",
        413: "request_too_large",
        429: "rate_limit_exceeded",
        503: "overloaded",
        504: "timeout",
    }
    return {"error": {"message": message, "type": kind, "param": param, "code": codes.get(status)}}


def _answer(
    request: Request,
    status: int,
    message: str,
    param: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = error_body(request.url.path, status, message, param)
    if isinstance(body["error"], str):
        body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers)


async def _problem(request: Request, exc: Problem) -> JSONResponse:
    return _answer(request, exc.status, exc.message, exc.param, exc.headers)


async def _bertkit_error(request: Request, exc: BertkitError) -> JSONResponse:
    return _answer(request, 422, str(exc))


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [{k: v for k, v in e.items() if k in ("type", "loc", "msg")} for e in exc.errors()]
    first = exc.errors()[0] if exc.errors() else {}
    param = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "bertkit", "tei")) or None
    return _answer(request, 422, describe_validation(exc.errors()), param, detail=errors)


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 404 and exc.detail == "Not Found":  # the router's (or a static file's) own 404
        routes = listed_routes(request.app)
        message = f"no route {request.method} {request.url.path}; routes: {', '.join(routes)}"
        body = error_body(request.url.path, 404, message)
        if isinstance(body["error"], str):
            body["routes"] = routes
        return JSONResponse(body, status_code=404, headers=exc.headers)
    body = error_body(request.url.path, exc.status_code, str(exc.detail))
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unexpected error on %s", request.url.path)
    return _answer(request, 500, f"internal error ({type(exc).__name__}); see the server log")


HANDLERS: list[tuple[type[Exception], Callable[..., Awaitable[JSONResponse]]]] = [
    (Problem, _problem),
    (BertkitError, _bertkit_error),
    (RequestValidationError, _invalid),
    (StarletteHTTPException, _http),
    (Exception, _unexpected),
]


def add_error_handlers(app: FastAPI) -> None:
    """Answer every failure of ``app`` as one JSON line."""
    for kind, handler in HANDLERS:
        app.add_exception_handler(kind, handler)


def describe_validation(errors: Sequence[dict]) -> str:
    """The first schema violation in one line, with the count of the others."""
    first = errors[0]
    if first.get("type") == "json_invalid":
        return f"the request body is not valid JSON ({first.get('ctx', {}).get('error', first.get('msg'))})"
    where = ".".join(str(part) for part in first.get("loc", ()) if part not in ("body", "bertkit", "tei")) or "body"
    if where == "body" and first.get("type") == "missing":
        return "the request body is empty: send a JSON object"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid value')}{more}"


def listed_routes(app: FastAPI) -> list[str]:
    """``METHOD /path`` of every route a caller may use: the page, the API, then the docs and page files."""
    routes: list[str] = []
    for route in app.routes:
        path = getattr(route, "path", "")
        if path in UNLISTED:
            continue
        methods = sorted(getattr(route, "methods", None) or ())
        if not methods:  # a mounted app: the web page's static files
            routes.append(f"GET {path}/...")
        for method in methods:
            if method != "HEAD":
                routes.append(f"{method} {path}")
    aside = ("/openapi.json", "/docs", "/redoc", "/static/...")
    return sorted(routes, key=lambda r: (r != "GET /", r.split(" ", 1)[1] in aside))  # stable: API order kept
