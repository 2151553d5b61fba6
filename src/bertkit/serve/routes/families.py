"""The endpoint of a task family's own pipeline (``Family.run``), for a family registered with a pipeline name
bertkit has no endpoint of: ``POST /<pipeline>`` with ``{"texts": [...]}``, answered as ``{"results": [...]}``
(one result per text, as the family's pipeline gives it), batched with other requests to the same pipeline."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from bertkit.serve.routes.handling import ServiceDep, token_lengths
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import TextsRequest

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


def family_routes(loaded: Loaded, served: set[str]) -> list[Route]:
    """The endpoint of the pipeline of ``loaded`` 's task family when the family brings its own (``Family.run``)
    and ``served`` (the pipelines with bertkit's endpoints) does not hold it."""
    own = loaded.own_family()
    if own is None or own.run is None or not own.pipeline or own.pipeline in served:
        return []
    return [family_route(own.pipeline, own.run)]


def family_route(pipeline: str, run: Callable[[list[str], Any, int], list[Any]]) -> Route:
    """``POST /<pipeline>``: the texts checked as every endpoint checks them, then ``run`` on a whole batch."""

    async def endpoint(request: TextsRequest, service: ServiceDep) -> dict:
        service.checks.count(request.texts)
        service.checks.chars(request.texts)
        lengths = await token_lengths(service, request.texts)
        job = partial(_family_job, run, service.loaded, service.limits.batch_size)
        return {"results": await service.run((pipeline,), job, request.texts, lengths)}

    path = "/" + pipeline.replace("_", "-")
    return Route("POST", path, endpoint, f"The {pipeline} pipeline of the model's task family, one result per text.")


def _family_job(run: Callable[[list[str], Any, int], list[Any]], loaded: Loaded, batch: int, texts: list[str]) -> list:
    return list(run(texts, loaded, batch))
