"""The HTTP service (FastAPI + uvicorn, the ``serve`` extra) and the web page it serves at ``/``.

``create_app(model, limits, access=...)`` builds the ASGI app; ``serve(model, host, port, access=...)`` runs it.
FastAPI is imported only when one of them is used, so the limits and access dataclasses work without the extra.
"""

from __future__ import annotations

from typing import Any

from bertkit.serve.access import ServeAccess
from bertkit.serve.limits import ServeLimits

__all__ = ["ServeAccess", "ServeLimits", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name in ("create_app", "serve"):
        from bertkit.serve import app

        return getattr(app, name)
    raise AttributeError(f"module 'bertkit.serve' has no attribute {name!r}")
