"""The sequence classifier's endpoint: ``/classify``, label probabilities of texts or pairs."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from bertkit import inference
from bertkit.serve.routes.handling import ServiceDep, cut_count
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import ClassifyRequest, ClassifyResponse
from bertkit.serve.service import Service

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


async def classify(request: ClassifyRequest, service: ServiceDep) -> dict:
    texts = [t if isinstance(t, str) else (t[0], t[1]) for t in request.texts]
    service.checks.count(texts)
    service.checks.chars([s for t in texts for s in ((t,) if isinstance(t, str) else t)])
    counts = await service.off_loop(service.checks.tokens, texts)
    lengths = [min(count, service.loaded.max_length) for count in counts]
    job = partial(_classify_job, service.loaded, service.limits.batch_size)
    return {"results": await service.run(("classify",), job, texts, lengths), "truncated": _cut(service, texts, counts)}


def _cut(service: Service, texts: list, counts: list[int]) -> int:
    """How many inputs the classifier cuts: all over its length, but a single text it reads in windows."""
    windowed = getattr(service.loaded.task, "long_text", "truncate") == "windows"
    return cut_count(
        [c for t, c in zip(texts, counts) if not (windowed and isinstance(t, str))], service.loaded.max_length
    )


def _classify_job(loaded: Loaded, batch: int, items: list) -> list:
    return [vars(p) for p in inference.classify(items, loaded, batch_size=batch)]


ROUTES: dict[str, tuple[Route, ...]] = {
    "classify": (Route("POST", "/classify", classify, "Label probabilities of texts or pairs.", ClassifyResponse),),
}
"""The classifier's endpoint."""
