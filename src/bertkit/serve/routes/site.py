"""The endpoints every app has whatever its model: the health probes, the model's description, the tokenizer
(TEI's ``/tokenize``), Prometheus metrics, the web page and its icon.

``/health`` and ``/health/ready`` (readiness) answer 503 while the model loads and while the server drains
after SIGTERM, so a load balancer stops sending work; ``/health/live`` (liveness) answers 200 as long as the
process serves HTTP at all."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends
from fastapi.responses import FileResponse, JSONResponse, Response

from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import SimpleToken, TokenizeRequest
from bertkit.serve.service import Service, get_service
from bertkit.tokenizer import Tokenizer

STATIC = Path(__file__).resolve().parents[1] / "static"

# A 16x16 "B" tab icon: browsers ask for /favicon.ico on every page, and a 404 there is noise in their console.
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
    'fill="#2b59c3"/><text x="8" y="12.5" font-size="12" font-family="sans-serif" font-weight="bold" '
    'text-anchor="middle" fill="#fff">B</text></svg>'
)


async def health(service: Annotated[Service, Depends(get_service)]) -> JSONResponse:
    if service.state != "ready":
        return JSONResponse({"status": service.state}, status_code=503)
    return JSONResponse({"status": "ok"})


async def live() -> dict[str, str]:
    return {"status": "alive"}


async def metrics(service: Annotated[Service, Depends(get_service)]) -> Response:
    from bertkit.serve.prometheus import MISSING

    if not service.metrics.enabled:
        return JSONResponse({"error": MISSING}, status_code=501)
    body, content_type = service.metrics.exposition()
    return Response(body, media_type=content_type)


async def info(service: Annotated[Service, Depends(get_service)]) -> dict[str, Any]:
    return service.info()


async def tokenize(
    request: TokenizeRequest, service: Annotated[Service, Depends(get_service)]
) -> list[list[dict[str, Any]]]:
    """TEI's tokenize: per text, its tokens with their ids, the text they cover and character offsets."""
    service.checks.no_prompt(request.prompt_name)
    texts = [request.inputs] if isinstance(request.inputs, str) else request.inputs
    service.checks.count(texts)
    service.checks.chars(texts, limit=service.limits.max_long_chars)
    return await service.off_loop(_token_lists, service.loaded.tokenizer, texts, request.add_special_tokens)


def _token_lists(tokenizer: Tokenizer, texts: list[str], add_special_tokens: bool) -> list[list[dict[str, Any]]]:
    """``/tokenize``'s answer, built off the event loop (a request may carry 64 texts of 100,000 characters)."""
    out = []
    for text in texts:
        encoding = tokenizer.encode(text, add_special_tokens=add_special_tokens)
        out.append(
            [
                {"id": i, "text": token, "special": True, "start": None, "stop": None}
                if special
                else {"id": i, "text": text[start:stop], "special": False, "start": start, "stop": stop}
                for i, token, special, (start, stop) in zip(
                    encoding.ids, encoding.tokens, encoding.special_tokens_mask, encoding.offsets
                )
            ]
        )
    return out


async def favicon() -> Response:
    return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


async def page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


STATUS_ROUTES = [
    Route("GET", "/health", health, "Ready: 200 when the model is loaded and the server is not shutting down."),
    Route("GET", "/health/ready", health, "Readiness probe (the same as /health)."),
    Route("GET", "/health/live", live, "Liveness probe: the process answers HTTP."),
    Route("GET", "/metrics", metrics, "Prometheus metrics (text exposition format).", in_schema=False),
    Route("GET", "/info", info, "The model, its pipelines and the server's limits (and TEI's info fields)."),
    Route(
        "POST",
        "/tokenize",
        tokenize,
        "Tokens of each text with their offsets (text-embeddings-inference's API).",
        list[list[SimpleToken]],
    ),
    Route("GET", "/favicon.ico", favicon, in_schema=False),
]
PAGE_ROUTE = Route("GET", "/", page, in_schema=False)  # added after the API, with the static files it loads
