"""One endpoint as data: its method, path, function and documentation, added to an app on demand.

The endpoints are registered with FastAPI's ``add_api_route`` rather than by including routers: recent
FastAPI keeps an included router nested in ``app.routes``, where the 404 answer (which lists every route)
would not see its paths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from fastapi import FastAPI


class Route(NamedTuple):
    method: str
    path: str
    endpoint: Callable[..., Any]
    summary: str | None = None
    response_model: type | None = None
    """None: FastAPI reads the response's schema from the function's return annotation."""
    in_schema: bool = True
    """Whether the OpenAPI page lists it."""
    exclude_none: bool = False
    """Leave fields that are None out of the answer (TEI's rerank omits ``text`` unless asked)."""

    def add_to(self, app: FastAPI) -> None:
        options: dict[str, Any] = {"summary": self.summary, "include_in_schema": self.in_schema}
        if self.exclude_none:
            options["response_model_exclude_none"] = True
        if self.response_model is not None:
            options["response_model"] = self.response_model
        app.add_api_route(self.path, self.endpoint, methods=[self.method], **options)
