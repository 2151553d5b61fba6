"""What every pipeline endpoint shares: the service it runs on (``ServiceDep``), its texts' token counts checked off
the event loop (``token_lengths``: the lengths the batcher budgets by), and a JSON answer encoded at once
(``json_response``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, Response

from bertkit.serve.service import Service, get_service

ServiceDep = Annotated[Service, Depends(get_service)]

try:  # orjson encodes the floats of a vector several times faster than json; the same numbers either way
    import orjson

    def _dumps(content: Any) -> bytes:
        return orjson.dumps(content)

except ImportError:  # pragma: no cover - an optional speed-up

    def _dumps(content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


async def token_lengths(
    service: Service,
    texts: Sequence[str | tuple[str, str]],
    what: str = "text",
    limit: int | None = None,
    special: int | None = None,
    hint: str = "shorten it",
) -> list[int]:
    """``checks.tokens`` off the event loop; the lengths the model runs them at (for the batch budget)."""
    counts = await service.off_loop(service.checks.tokens, texts, what, limit, special, hint)
    return [min(count, service.loaded.max_length) for count in counts]


def json_response(content: Any) -> Response:
    """An answer of plain lists, dicts, strings and numbers, encoded at once (the route's response model
    documents it; validating thousands of floats against it again only costs time)."""
    return Response(_dumps(content), media_type="application/json")
