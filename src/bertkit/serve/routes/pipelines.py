"""The model's endpoints by pipeline; an app has those its model supports (``PIPELINE_ROUTES``, ``available``).

Each route group is a module: ``pretraining`` (``/fill-mask``, ``/next-sentence``), ``embeddings`` (``/embed``
with bertkit's or text-embeddings-inference's body, OpenAI's ``/v1/embeddings``), ``classify``, ``rerank`` (TEI's,
for a cross-encoder: a classifier with one output or two labels), ``tag``, ``answer`` and ``attention``; what
they share is in ``handling``.

Each endpoint checks its request (:class:`RequestChecks`) before any model work, then hands the inputs to the
batcher with a job function (``_*_job``) that runs the library's pipeline on a whole batch; the batch key
holds every option that changes the result, so only requests asking the same thing share a batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bertkit.serve.routes import answer, attention, classify, embeddings, pretraining, rerank, tag
from bertkit.serve.routes.route import Route
from bertkit.tasks.classification.pipeline import can_rerank

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


def available(loaded: Loaded, pipeline: str) -> bool:
    """Whether the app of ``loaded`` has the endpoints of ``pipeline`` (``rerank``: a cross-encoder's)."""
    return can_rerank(loaded) if pipeline == "rerank" else loaded.supports(pipeline)


PIPELINE_ROUTES: dict[str, tuple[Route, ...]] = {
    **pretraining.ROUTES,
    **embeddings.ROUTES,
    **classify.ROUTES,
    **rerank.ROUTES,
    **tag.ROUTES,
    **answer.ROUTES,
    **attention.ROUTES,
}
"""Pipeline -> its endpoints, in the order they are listed (the OpenAPI page, a 404's list of routes)."""
