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


TRUNCATED_HEADER = "X-Bertkit-Truncated"
"""How many inputs were cut to the model's length, on routes whose body keeps another API's shape (OpenAI, TEI)."""


def json_response(content: Any, truncated: int | None = None) -> Response:
    """An answer of plain lists, dicts, strings and numbers, encoded at once (the route's response model
    documents it; validating thousands of floats against it again only costs time); ``truncated``: the count
    of cut inputs, in the ``X-Bertkit-Truncated`` header."""
    headers = {TRUNCATED_HEADER: str(truncated)} if truncated is not None else None
    return Response(_dumps(content), media_type="application/json", headers=headers)


def cut_count(lengths: Sequence[int], max_length: int) -> int:
    """How many inputs of ``lengths`` tokens (special tokens included) the model cuts at ``max_length``."""
    return sum(length > max_length for length in lengths)
