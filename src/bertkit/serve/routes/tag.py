"""The token classifier's endpoint: ``/tag``, word tags and entities with character offsets."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from bertkit import inference
from bertkit.serve.routes.handling import ServiceDep, token_lengths
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import TagRequest, TagResponse

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


async def tag(request: TagRequest, service: ServiceDep) -> dict:
    limits = service.limits
    service.checks.count(request.texts)
    service.checks.chars(request.texts, limit=limits.max_long_chars)
    lengths = await token_lengths(service, request.texts, limit=limits.max_long_tokens, special=0)
    job = partial(_tag_job, service.loaded, limits.batch_size)
    return {"results": await service.run(("tag",), job, request.texts, lengths)}


def _tag_job(loaded: Loaded, batch: int, texts: list[str]) -> list:
    return [r.to_dict() for r in inference.tag(texts, loaded, batch_size=batch)]


ROUTES: dict[str, tuple[Route, ...]] = {
    "tag": (Route("POST", "/tag", tag, "Word tags and entities with character offsets.", TagResponse),),
}
"""The token classifier's endpoint."""
