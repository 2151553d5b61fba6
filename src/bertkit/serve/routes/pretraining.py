"""The endpoints of the pre-training heads: ``/fill-mask`` (the masked-LM head) and ``/next-sentence``
(the NSP head)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from bertkit import inference
from bertkit.serve.routes.handling import ServiceDep, token_lengths
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import FillMaskRequest, FillMaskResponse, NextSentenceRequest, NextSentenceResponse

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


# ------------------------------------------------------------------------------------------ fill-mask
async def fill_mask(request: FillMaskRequest, service: ServiceDep) -> dict:
    service.checks.count(request.texts)
    service.checks.chars(request.texts)
    service.checks.masks(request.texts, request.top_k)
    lengths = await token_lengths(service, request.texts)
    job = partial(_fill_mask_job, service.loaded, service.limits.batch_size, request.top_k)
    return {"results": await service.run(("fill_mask", request.top_k), job, request.texts, lengths)}


def _fill_mask_job(loaded: Loaded, batch: int, top_k: int, texts: list[str]) -> list:
    out = inference.fill_mask(texts, loaded, top_k=top_k, batch_size=batch)
    return [[[c.to_dict() for c in mask] for mask in text] for text in out]


# ------------------------------------------------------------------------------------------ next-sentence
async def next_sentence(request: NextSentenceRequest, service: ServiceDep) -> dict:
    service.checks.count(request.pairs, "pairs")
    service.checks.chars([s for pair in request.pairs for s in pair], "sentence")
    lengths = await token_lengths(service, request.pairs, "pair")
    job = partial(_next_sentence_job, service.loaded, service.limits.batch_size)
    return {"results": await service.run(("next_sentence",), job, request.pairs, lengths)}


def _next_sentence_job(loaded: Loaded, batch: int, pairs: list[tuple[str, str]]) -> list:
    probs = inference.next_sentence([a for a, _ in pairs], [b for _, b in pairs], loaded, batch_size=batch)
    return [{"probability": p} for p in (probs if isinstance(probs, list) else [probs])]


ROUTES: dict[str, tuple[Route, ...]] = {
    "fill_mask": (Route("POST", "/fill-mask", fill_mask, "Top predictions for every [MASK].", FillMaskResponse),),
    "next_sentence": (
        Route(
            "POST",
            "/next-sentence",
            next_sentence,
            "Probability that sentence B follows sentence A.",
            NextSentenceResponse,
        ),
    ),
}
"""The pre-training heads' endpoints by pipeline."""
