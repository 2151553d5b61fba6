"""The endpoints every app has whatever its model: liveness, the model's description, the web page and its icon."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends
from fastapi.responses import FileResponse, Response

from bertkit.serve.routes.route import Route
from bertkit.serve.service import Service, get_service

STATIC = Path(__file__).resolve().parents[1] / "static"

# A 16x16 "B" tab icon: browsers ask for /favicon.ico on every page, and a 404 there is noise in their console.
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
    'fill="#2b59c3"/><text x="8" y="12.5" font-size="12" font-family="sans-serif" font-weight="bold" '
    'text-anchor="middle" fill="#fff">B</text></svg>'
)


async def health() -> dict[str, str]:
    return {"status": "ok"}


async def info(service: Annotated[Service, Depends(get_service)]) -> dict[str, Any]:
    return service.info()


async def favicon() -> Response:
    return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


async def page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


STATUS_ROUTES = [
    Route("GET", "/health", health, "Liveness: the model is loaded."),
    Route("GET", "/info", info, "The model, its pipelines and the server's limits."),
    Route("GET", "/favicon.ico", favicon, in_schema=False),
]
PAGE_ROUTE = Route("GET", "/", page, in_schema=False)  # added after the API, with the static files it loads
