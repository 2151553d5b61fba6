"""The sequence classifier's endpoint: ``/classify``, label probabilities of texts or pairs."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from bertkit import inference
from bertkit.serve.routes.handling import ServiceDep, token_lengths
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import ClassifyRequest, ClassifyResponse

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


async def classify(request: ClassifyRequest, service: ServiceDep) -> dict:
    texts = [t if isinstance(t, str) else (t[0], t[1]) for t in request.texts]
    service.checks.count(texts)
    service.checks.chars([s for t in texts for s in ((t,) if isinstance(t, str) else t)])
    lengths = await token_lengths(service, texts)
    job = partial(_classify_job, service.loaded, service.limits.batch_size)
    return {"results": await service.run(("classify",), job, texts, lengths)}


def _classify_job(loaded: Loaded, batch: int, items: list) -> list:
    return [vars(p) for p in inference.classify(items, loaded, batch_size=batch)]


ROUTES: dict[str, tuple[Route, ...]] = {
    "classify": (Route("POST", "/classify", classify, "Label probabilities of texts or pairs.", ClassifyResponse),),
}
"""The classifier's endpoint."""
