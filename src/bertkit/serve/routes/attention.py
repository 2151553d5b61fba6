"""``/attention``: the attention probabilities of every layer and head over one text's tokens (any BERT
model)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from bertkit import inference
from bertkit.serve.routes.handling import ServiceDep, token_lengths
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import AttentionRequest, AttentionResponse

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


async def attention(request: AttentionRequest, service: ServiceDep) -> dict:
    service.checks.chars([request.text])
    lengths = await token_lengths(service, [request.text], limit=service.limits.attention_max_tokens)
    job = partial(_attention_job, service.loaded)
    return (await service.run(("attention",), job, [request.text], lengths))[0]


def _attention_job(loaded: Loaded, texts: list[str]) -> list[dict[str, Any]]:
    out = []
    for text in texts:
        maps = inference.attentions(text, loaded)
        out.append({"tokens": maps.tokens, "offsets": maps.offsets, "attentions": maps.attentions.round(4).tolist()})
    return out


ROUTES: dict[str, tuple[Route, ...]] = {
    "attention": (
        Route(
            "POST",
            "/attention",
            attention,
            "Attention probabilities of every layer and head over the tokens of one text.",
            AttentionResponse,
        ),
    ),
}
"""The attention endpoint."""
