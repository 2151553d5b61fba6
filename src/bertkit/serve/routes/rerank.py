"""A cross-encoder's endpoint (a classifier with one output or two labels): text-embeddings-inference's
``/rerank``, the texts by relevance to a query."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from bertkit import inference
from bertkit.serve.routes.handling import ServiceDep, token_lengths
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import RankOut, RerankRequest
from bertkit.tasks.classification.pipeline import rank_scores

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


async def rerank(request: RerankRequest, service: ServiceDep) -> list[dict[str, Any]]:
    """TEI's rerank on a cross-encoder: the texts by relevance to the query, best first."""
    pairs = [(request.query, text) for text in request.texts]
    service.checks.count(pairs, "texts")
    service.checks.chars([request.query], "query")
    service.checks.chars(request.texts)
    limit = 1 << 30 if request.truncate else None  # truncated: any length
    hint = "shorten it, or send truncate: true"
    lengths = await token_lengths(service, pairs, "pair of the query and text", limit, hint=hint)
    job = partial(_rerank_job, service.loaded, service.limits.batch_size, request.raw_scores)
    scores = await service.run(("rerank", request.raw_scores), job, pairs, lengths)
    return [
        {"index": r.index, "score": r.score, "text": request.texts[r.index] if request.return_text else None}
        for r in rank_scores(scores, request.top_n)
    ]


def _rerank_job(loaded: Loaded, batch: int, raw_scores: bool, pairs: list[tuple[str, str]]) -> list[float]:
    return inference.pair_scores(pairs, loaded, raw_scores=raw_scores, batch_size=batch)


ROUTES: dict[str, tuple[Route, ...]] = {
    "rerank": (
        Route(
            "POST",
            "/rerank",
            rerank,
            "Texts ordered by a cross-encoder's relevance to a query (text-embeddings-inference's API).",
            list[RankOut],
            exclude_none=True,
        ),
    ),
}
"""The cross-encoder's endpoint."""
